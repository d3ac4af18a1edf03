"""``echomq queues``: every queue of a server under a prefix, with its counts, for an operator.

The queues are found as a dashboard finds them (``echomq.queue.discovery.list_queues``: SCAN for
the queues' meta hashes on every master, never KEYS), so a queue BullMQ wrote under the same
prefix is listed beside EchoMQ's. A table by default, a JSON list with ``--json`` whose keys
docs/operating.md lists and which stay stable. An empty server is an empty list, not an error.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..queue.discovery import QueueSummary, list_queues
from .options import add_connection_options, open_client
from .output import cell, write_json, write_table

#: The table's job columns: (header, the states it adds up). The legacy paused list holds
#: waiting jobs (a BullMQ 5 queue's while it was paused), so WAITING counts it; --json keeps
#: every state apart.
COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("WAITING", ("waiting", "paused")), ("ACTIVE", ("active",)), ("DELAYED", ("delayed",)),
    ("PRIORITIZED", ("prioritized",)), ("WAITING-CHILDREN", ("waiting-children",)),
    ("COMPLETED", ("completed",)), ("FAILED", ("failed",)),
)


def queue_record(summary: QueueSummary) -> dict[str, Any]:
    """One queue of ``echomq queues --json``."""
    return {"queue": summary.name, "prefix": summary.prefix, "paused": summary.paused, "counts": summary.counts,
            "schedulers": summary.schedulers, "workers": summary.workers, "version": summary.version}


def queue_row(summary: QueueSummary) -> tuple[str, ...]:
    counts = [str(sum(summary.counts[state] for state in states)) for _header, states in COLUMNS]
    workers = "?" if summary.workers is None else str(summary.workers)
    return (cell(summary.name), "yes" if summary.paused else "no", *counts, str(summary.schedulers), workers)


def cmd_queues(args: argparse.Namespace) -> int:
    client = open_client(args)
    try:
        summaries = list_queues(client, args.prefix)
    finally:
        client.close()
    if args.json:
        write_json([queue_record(summary) for summary in summaries])
        return 0
    write_table(("QUEUE", "PAUSED", *(header for header, _states in COLUMNS), "SCHEDULERS", "WORKERS"),
                (queue_row(summary) for summary in summaries))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "queues", help="every queue under the prefix (EchoMQ's and BullMQ's), with its counts",
        description="Every queue under --prefix, found with SCAN on every master (never KEYS), with its "
                    "job counts per state, whether it is paused, its job schedulers and its connected "
                    "workers. WORKERS is '?' when the ACL refuses CLIENT LIST.")
    add_connection_options(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=cmd_queues)
