"""``echomq queue stats|pause|resume|clean|drain|obliterate`` and ``echomq workers``: one queue as
a whole, for an operator.

Each command prints a readable table by default and a JSON object with ``--json`` (its keys
are listed in docs/operating.md and stay stable). The commands that delete jobs (``clean``,
``drain``, ``obliterate``) refuse to run without ``--yes``, before anything connects. A queue
none of whose keys exist is reported as not found (status 1) rather than shown as empty: a
mistyped name must not look like a quiet queue, nor be created by ``pause``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInputError, InvalidStateError, NotFoundError, PermissionDeniedError
from ..processes.arguments import duration_ms
from ..protocol.keys import SUFFIXES
from ..protocol.states import CLEANABLE, COUNTED, canonical_state
from ..queue import Queue
from .options import add_queue_options, non_negative_int, open_client
from .output import cell, write_fields, write_json, write_table


def cleanable_state(text: str) -> str:
    """``--state`` of ``clean``: a state the clean script can empty, by any of its spellings."""
    try:
        state = canonical_state(text)
    except InvalidInputError:
        state = ""
    if state not in CLEANABLE:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(CLEANABLE)}")
    return state


@contextmanager
def opened_queue(args: argparse.Namespace) -> Iterator[Queue]:
    """A Queue on ``--redis``/``--prefix``/``--queue``; its client is closed when the block ends."""
    client = open_client(args)
    try:
        yield Queue(client, args.queue, prefix=args.prefix)
    finally:
        client.close()


def queue_exists(queue: Queue) -> bool:
    """Whether any per-queue key of the queue exists (one EXISTS, all keys in the queue's slot)."""
    return bool(queue.client.exists(*(queue.keys.key(suffix) for suffix in SUFFIXES)))


def require_queue(queue: Queue) -> None:
    if not queue_exists(queue):
        raise NotFoundError(f"no queue {queue.name!r} with prefix {queue.prefix!r} on this server "
                            f"(no key {queue.keys.base}:* exists)")


def require_yes(args: argparse.Namespace, consequence: str) -> None:
    """Refuse a destructive command that lacks ``--yes``, saying what it would have done."""
    if not args.yes:
        raise InvalidInputError(f"refusing without --yes: this {consequence}")


def _worker_count(queue: Queue) -> int | None:
    """How many workers are connected; None when the server's ACL refuses CLIENT LIST."""
    try:
        return len(queue.get_workers())
    except PermissionDeniedError:
        return None


def stats_record(queue: Queue) -> dict[str, Any]:
    counts = queue.get_job_counts(*COUNTED)
    return {"queue": queue.name, "prefix": queue.prefix, "paused": queue.is_paused(),
            "workers": _worker_count(queue), "events": int(queue.client.xlen(queue.keys.events)),
            "events_max_len": queue.get_events_max_len(), "counts": counts}


def cmd_stats(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        require_queue(queue)
        record = stats_record(queue)
    if args.json:
        write_json(record)
        return 0
    workers = record["workers"]
    write_fields([("queue", cell(record["queue"])), ("prefix", cell(record["prefix"])),
                  ("paused", "yes" if record["paused"] else "no"),
                  ("workers", "unknown (CLIENT LIST refused)" if workers is None else str(workers)),
                  ("events", f"{record['events']} (kept to about {record['events_max_len']})")])
    write_table(("STATE", "JOBS"), ((state, str(count)) for state, count in record["counts"].items()))
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        require_queue(queue)
        queue.pause()
    if args.json:
        write_json({"queue": args.queue, "paused": True})
    else:
        print(f"paused queue {args.queue!r}: workers take no new job until it is resumed")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        require_queue(queue)
        queue.resume()
    if args.json:
        write_json({"queue": args.queue, "paused": False})
    else:
        print(f"resumed queue {args.queue!r}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    scope = f"{args.state} jobs finished or added more than {args.grace} ms ago"
    require_yes(args, f"deletes {'all' if args.limit == 0 else f'up to {args.limit}'} {scope} "
                      f"from queue {args.queue!r}")
    with opened_queue(args) as queue:
        require_queue(queue)
        removed = queue.clean(args.grace, args.limit, args.state)
    if args.json:
        write_json({"queue": args.queue, "state": args.state, "grace_ms": args.grace, "limit": args.limit,
                    "count": len(removed), "removed": removed})
    else:
        print(f"removed {len(removed)} {args.state} job{'' if len(removed) == 1 else 's'} from queue {args.queue!r}")
    return 0


def cmd_drain(args: argparse.Namespace) -> int:
    which = "waiting and delayed" if args.delayed else "waiting"
    require_yes(args, f"deletes every {which} job of queue {args.queue!r}")
    with opened_queue(args) as queue:
        require_queue(queue)
        removed = queue.drain(include_delayed=args.delayed)
    if args.json:
        write_json({"queue": args.queue, "include_delayed": args.delayed, "removed": removed})
    else:
        print(f"removed {removed} {which} job{'' if removed == 1 else 's'} from queue {args.queue!r}")
    return 0


def cmd_obliterate(args: argparse.Namespace) -> int:
    require_yes(args, f"deletes queue {args.queue!r} and every job, schedule and event in it")
    with opened_queue(args) as queue:
        require_queue(queue)
        try:
            queue.obliterate(force=args.force)
        except InvalidStateError:
            raise InvalidStateError(f"queue {args.queue!r} has active jobs: nothing was deleted, the queue is "
                                    "left paused; add --force to delete the active jobs too, or resume it") from None
    if args.json:
        write_json({"queue": args.queue, "obliterated": True})
    else:
        print(f"obliterated queue {args.queue!r}")
    return 0


#: ``echomq workers --json``: the CLIENT LIST fields kept for each worker (the others vary by server).
WORKER_FIELDS = ("name", "addr", "age", "idle", "rawname")


def cmd_workers(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        workers = queue.get_workers()
        if not workers:
            require_queue(queue)
    records = [{"name": w.get("name", ""), "addr": w.get("addr", ""), "age": _seconds(w.get("age")),
                "idle": _seconds(w.get("idle")), "rawname": w.get("rawname", "")} for w in workers]
    if args.json:
        write_json(records)
    else:
        write_table(("NAME", "ADDR", "AGE (s)", "IDLE (s)"),
                    ((cell(r["name"] or "(unnamed)"), cell(r["addr"]), cell(r["age"]), cell(r["idle"]))
                     for r in records))
    return 0


def _seconds(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="really delete (without it the command refuses)")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("queue", help="look at a queue, pause, resume, clean, drain or obliterate it")
    commands = parser.add_subparsers(dest="queue_command", metavar="SUBCOMMAND", required=True)

    p = commands.add_parser("stats", help="job counts per state, paused, workers, events stream length")
    add_queue_options(p, json_output=True)
    p.set_defaults(handler=cmd_stats)

    p = commands.add_parser("pause", help="stop workers taking new jobs (jobs stay where they are)")
    add_queue_options(p, json_output=True)
    p.set_defaults(handler=cmd_pause)

    p = commands.add_parser("resume", help="let workers take jobs again")
    add_queue_options(p, json_output=True)
    p.set_defaults(handler=cmd_resume)

    p = commands.add_parser("clean", help="delete the jobs of one state older than a grace period")
    add_queue_options(p, json_output=True)
    p.add_argument("--grace", type=duration_ms, required=True,
                   help="keep jobs younger than this: ms, or 30s, 5m, 1h, 2d (age from when a job "
                        "finished, else started, else was added)")
    p.add_argument("--state", type=cleanable_state, default="completed",
                   help=f"one of {', '.join(CLEANABLE)} (default completed)")
    p.add_argument("--limit", type=non_negative_int, default=0, help="delete at most this many (default 0: all)")
    _yes(p)
    p.set_defaults(handler=cmd_clean)

    p = commands.add_parser("drain", help="delete every waiting job (and delayed ones with --delayed)")
    add_queue_options(p, json_output=True)
    p.add_argument("--delayed", action="store_true", help="delete delayed jobs too")
    _yes(p)
    p.set_defaults(handler=cmd_drain)

    p = commands.add_parser("obliterate", help="delete the queue and everything in it")
    add_queue_options(p, json_output=True)
    p.add_argument("--force", action="store_true", help="delete active jobs too (else refuse when there are any)")
    _yes(p)
    p.set_defaults(handler=cmd_obliterate)

    p = subparsers.add_parser("workers", help="the workers connected to a queue (EchoMQ's and BullMQ's)")
    add_queue_options(p, json_output=True)
    p.set_defaults(handler=cmd_workers)
