"""``manage.py echomq_worker``: ``echomq worker`` for the project's registry (docs/django.md).

The options are the command's own (``add_worker_arguments``) less ``--app``, ``--processor``,
``--redis`` and ``--prefix``: the registry, its connection and prefix come from ``ECHOMQ``, and
its jobs from every installed app's ``jobs.py``, its listeners and name from ``LISTENERS`` and
``WORKER_NAME``. With no QUEUE, every queue with a job. Each worker process forked under
``--processes`` first drops the database connections it inherited, and re-creates the declared
schedules Redis lost (``echomq.contrib.host.keeper``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import BaseCommand  # type: ignore[import-untyped]

from .....processes.arguments import add_worker_arguments
from ... import conf
from ...database import forget_inherited_connections
from ...registration import get_project


class Command(BaseCommand):  # type: ignore[misc]
    help = "Process the jobs of the project's registry (every option of `echomq worker` but --app)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_worker_arguments(parser, app_option=False)

    def handle(self, *args: Any, **options: Any) -> None:
        status = get_project().run_worker(argparse.Namespace(**options), conf.current().host,
                                          child_setup=forget_inherited_connections)
        if status:
            sys.exit(status)
