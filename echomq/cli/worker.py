"""``echomq worker``: process jobs from the command line, in one process or a supervised pool.

The command is ``echomq.processes`` (its options, its start, its processes), shared with the
Django and Flask worker commands; here it only joins the ``echomq`` command line.
"""

from __future__ import annotations

from typing import Any

from ..processes.arguments import add_worker_arguments
from ..processes.command import run_worker


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worker", help="process jobs (a function's, or a job registry's routed by name)",
        description="Process jobs until SIGTERM or SIGINT (or, with --burst, until the queues are idle).")
    add_worker_arguments(parser)
    parser.set_defaults(handler=run_worker)
