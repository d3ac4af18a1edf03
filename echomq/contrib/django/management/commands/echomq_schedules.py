"""``manage.py echomq_schedules``: make Redis hold the schedules ``ECHOMQ["SCHEDULES"]`` declares.

The host layer's sync (``echomq.contrib.host.project``), with the output both frameworks print:
one line per change (``created reports/nightly-report``, ``updated reports/nightly-report:
pattern, tz``), then the sum (``2 declared: 1 created, 1 updated, 0 unchanged; 0 removed``). A
declared scheduler that is missing is created, one whose stored record differs is upserted, one
that matches is left untouched, so its pending iteration keeps its slot and a second run changes
nothing. ``--prune`` also removes the schedulers nothing declares in the project's queues (every
queue the setting or a registered job names); ``--dry-run`` prints the same lines and writes
nothing. All or nothing: a refused sync writes nothing. ``-v 0`` prints nothing but errors.
"""

from __future__ import annotations

import argparse
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError  # type: ignore[import-untyped]

from .....errors import EchoMQError
from ....host.project import failure_message
from ...registration import sync_schedules


class Command(BaseCommand):  # type: ignore[misc]
    help = "Create, update (and with --prune remove) job schedulers to match ECHOMQ['SCHEDULES']."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--prune", action="store_true",
                            help="also remove the schedulers of the project's queues that are not declared")
        parser.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = sync_schedules(prune=options["prune"], dry_run=options["dry_run"])
        except (EchoMQError, redis.RedisError, OSError) as exc:
            raise CommandError(f"echomq_schedules: {failure_message(exc)}") from exc
        if options["verbosity"] >= 1:
            for warning in report.warnings:
                self.stderr.write(f"warning: {warning}")
            for line in report.lines():
                self.stdout.write(line)
