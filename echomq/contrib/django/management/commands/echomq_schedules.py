"""``manage.py echomq_schedules``: make Redis hold the schedules ``ECHOMQ["SCHEDULES"]`` declares.

One line per change: a declared scheduler that is missing is created, one whose stored record
differs is upserted (the fields that differ are named), one that matches is left untouched, so
its pending iteration keeps its slot and a second run changes nothing. ``--prune`` also removes
the schedulers nothing declares in the declared queues (every queue the setting or a registered
job names); ``--dry-run`` prints the same lines and writes nothing. The comparison and the
writes are ``echomq.contrib.schedules_sync``'s.
"""

from __future__ import annotations

import argparse
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError  # type: ignore[import-untyped]

from .....errors import EchoMQError
from ....schedules_sync import Change, sync_schedules
from ... import conf
from ...registration import get_registry

_DONE = {"create": "created", "update": "updated", "remove": "removed"}
_PLANNED = {"create": "would create", "update": "would update", "remove": "would remove"}


class Command(BaseCommand):  # type: ignore[misc]
    help = "Create, update (and with --prune remove) job schedulers to match ECHOMQ['SCHEDULES']."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--prune", action="store_true",
                            help="also remove the schedulers of the declared queues that are not declared")
        parser.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        settings = conf.current()
        registry = get_registry()
        dry_run = options["dry_run"]
        try:
            changes = sync_schedules(registry.connection(), registry.prefix, settings.declared_schedules(),
                                     prune=options["prune"], dry_run=dry_run,
                                     queues=[*settings.known_queues(), *registry.queues])
        except (EchoMQError, redis.RedisError) as exc:
            raise CommandError(f"echomq_schedules: {exc}") from exc
        for change in changes:
            self.stdout.write(describe(change, dry_run=dry_run))
        unchanged = len(settings.schedules) - sum(change.action != "remove" for change in changes)
        if options["verbosity"] >= 1:
            self.stdout.write(f"{len(changes)} change(s){' planned' if dry_run else ''}, "
                              f"{unchanged} schedule(s) unchanged")


def describe(change: Change, *, dry_run: bool) -> str:
    """``updated reports/nightly-report: pattern, tz`` (``would update ...`` in a dry run)."""
    verb = (_PLANNED if dry_run else _DONE)[change.action]
    line = f"{verb} {change.queue}/{change.scheduler_id}"
    return f"{line}: {', '.join(change.fields)}" if change.fields else line
