"""``echomq jobs list|retry|promote`` and ``echomq job show|retry|remove|promote|cancel``: the jobs of a
queue, one page, all of one state or one job at a time, for an operator.

A job may have been written by any runtime, so everything it carries is untrusted: tables escape
it (``output.cell``), ``--json`` prints it as JSON. ``--json`` records have the keys of
``job_record`` (docs/operating.md lists them); times are epoch ms with an ISO 8601 UTC twin.
A job that does not exist is "not found" (status 1); one not in the state an operation needs is
refused by the library with the reason (status 2). ``job remove`` deletes, so it wants ``--yes``.
``jobs retry`` and ``jobs promote`` move every job of a state (or ``--limit`` of them) in calls of
``--batch`` jobs, each a short script, so a worker's calls and other clients' run between them.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInputError, InvalidStateError, JobNotFoundError
from ..protocol.keys import names_queue_key
from ..protocol.options import lookup_job_id
from ..protocol.states import STATES, canonical_state
from ..queue import Job, Queue
from ..queue.cancel import CancelOutcome, cancel_job
from ..queue.operations import RETRYABLE_STATES
from .options import add_queue_options, non_negative_int, positive_int, printable
from .output import cell, iso_utc, json_text, write_fields, write_json, write_table
from .queue_ops import opened_queue, require_queue, require_yes

LIST_COLUMNS = ("ID", "NAME", "ATTEMPTS", "CREATED (UTC)", "FINISHED (UTC)", "DATA", "DETAIL")


def job_state(text: str) -> str:
    """``--state`` of ``jobs list``: any spelling of a state (``wait`` is ``waiting``)."""
    try:
        return canonical_state(text)
    except InvalidInputError:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(STATES)}") from None


def job_record(job: Job, state: str) -> dict[str, Any]:
    """A job as ``--json`` prints it: the hash's fields under the Job's attribute names."""
    return {
        "id": job.id, "name": job.name, "state": state, "data": job.data, "opts": job.raw_opts,
        "progress": job.progress, "attempts_made": job.attempts_made, "attempts_started": job.attempts_started,
        "stalled_counter": job.stalled_counter, "delay": job.delay, "priority": job.priority,
        "timestamp": job.timestamp, "timestamp_iso": iso_utc(job.timestamp or None),
        "processed_on": job.processed_on, "processed_on_iso": iso_utc(job.processed_on),
        "finished_on": job.finished_on, "finished_on_iso": iso_utc(job.finished_on),
        "processed_by": job.processed_by, "return_value": job.return_value,
        "failed_reason": job.failed_reason, "stacktrace": job.stacktrace,
        "scheduler_id": job.scheduler_id, "parent_key": job.parent_key,
    }


def _short_time(ms: int | None) -> str:
    iso = iso_utc(ms) if ms else None
    return "-" if iso is None else iso[:19] + "Z"


def _detail(job: Job, state: str) -> str:
    """What an operator looks for first in each state: why it failed, what it returned, when it runs."""
    if job.failed_reason:
        return cell(job.failed_reason)
    if state == "completed":
        return cell(job.return_value)
    if state == "delayed" and job.delay:
        return f"due {_short_time(job.timestamp + job.delay)}"
    if job.priority:
        return f"priority {job.priority}"
    return "-"


def list_rows(jobs: Iterable[Job], state: str) -> Iterable[tuple[str, ...]]:
    for job in jobs:
        yield (cell(job.id), cell(job.name), str(job.attempts_made), _short_time(job.timestamp),
               _short_time(job.finished_on), cell(job.data, 30), _detail(job, state))


def cmd_list(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        jobs = queue.get_jobs(args.state, args.offset, args.offset + args.limit - 1, asc=args.asc)
        if not jobs:
            require_queue(queue)
    if args.json:
        write_json([job_record(job, args.state) for job in jobs])
    else:
        write_table(LIST_COLUMNS, list_rows(jobs, args.state))
    return 0


def _fetch(queue: Queue, job_id: str) -> Job:
    """The job, or JobNotFoundError; an id naming one of the queue's own keys is refused, since
    no job can have it (``job show meta`` would read the meta hash as a job)."""
    taken = names_queue_key(job_id)
    if taken is not None:
        raise InvalidInputError(f"{job_id!r} cannot be a job id: {queue.keys.base}:{taken} is a key of the queue")
    job = queue.get_job(job_id)
    if job is None:
        raise JobNotFoundError(f"no job {job_id!r} in queue {queue.name!r}")
    return job


def _when(ms: int | None) -> str:
    iso = iso_utc(ms) if ms else None
    return "-" if iso is None else f"{iso}  ({ms})"


def show_fields(job: Job, state: str, logs: int) -> list[tuple[str, str]]:
    fields = [
        ("id", cell(job.id, None)), ("name", cell(job.name, None)), ("state", state),
        ("attempts", f"{job.attempts_made} made, {job.attempts_started} started, {job.stalled_counter} stalled"),
        ("created", _when(job.timestamp)), ("processed", _when(job.processed_on)),
        ("finished", _when(job.finished_on)),
        ("delay", f"{job.delay} ms" + (f", due {iso_utc(job.timestamp + job.delay) or '?'}" if job.delay else "")),
        ("priority", str(job.priority)), ("progress", json_text(job.progress)),
        ("processed by", cell(job.processed_by, None)), ("scheduler", cell(job.scheduler_id, None)),
        ("parent", cell(job.parent_key, None)), ("data", json_text(job.data)),
        ("return value", json_text(job.return_value) if state == "completed" else "-"),
        ("failed reason", cell(job.failed_reason, None)), ("logs", f"{logs} line{'' if logs == 1 else 's'}"),
        ("stack trace", f"{len(job.stacktrace)} entr{'y' if len(job.stacktrace) == 1 else 'ies'}"),
    ]
    # A stored trace is multi-line text: each of its lines is shown, escaped, under the count.
    fields += [("", "  " + printable(line)) for trace in job.stacktrace for line in trace.splitlines()]
    return fields


def cmd_show(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        job = _fetch(queue, args.id)
        state = job.get_state()
        logs = int(queue.client.llen(queue.keys.job_logs(job.id)))
    if args.json:
        write_json({**job_record(job, state), "logs_count": logs})
    else:
        write_fields(show_fields(job, state, logs))
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        job = _fetch(queue, args.id)
        job.retry(args.state)
    if args.json:
        write_json({"id": args.id, "retried": True, "from": args.state})
    else:
        print(f"job {args.id!r} ({args.state}) moved back to wait for a worker to run it again")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    require_yes(args, f"deletes job {args.id!r} of queue {args.queue!r} (and its unprocessed children)")
    with opened_queue(args) as queue:
        job = _fetch(queue, args.id)
        if not job.remove():
            raise InvalidStateError(f"job {args.id!r} is active and locked by a worker: not removed")
    if args.json:
        write_json({"id": args.id, "removed": True})
    else:
        print(f"removed job {args.id!r} from queue {args.queue!r}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        outcome = cancel_job(queue.client, queue.keys, lookup_job_id(args.id, "cancel"), args.reason, queue.clock())
    if outcome is CancelOutcome.MISSING:
        raise JobNotFoundError(f"job {args.id!r} not found in queue {args.queue!r}")
    if not outcome.done:
        raise InvalidStateError(f"job {args.id!r} not cancelled: {outcome.explained}")
    if args.json:
        write_json({"id": args.id, "cancelled": True, "outcome": outcome.value})
    else:
        print(f"cancelled job {args.id!r} of queue {args.queue!r}: {outcome.explained}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        _fetch(queue, args.id).promote()
    if args.json:
        write_json({"id": args.id, "promoted": True})
    else:
        print(f"promoted job {args.id!r}: it waits for a worker now")
    return 0


#: Jobs per script call of ``jobs retry`` and ``jobs promote``: about a millisecond of the
#: server's time per call (docs/operating.md), where the library's default of 1000 is about ten.
BULK_BATCH = 100


def _jobs(count: int) -> str:
    return f"{count:,} job{'' if count == 1 else 's'}"


def cmd_retry_all(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        require_queue(queue)
        retried = queue.retry_jobs(args.state, args.batch, limit=args.limit)
        left = queue.get_job_counts(args.state)[args.state]
    if args.json:
        write_json({"queue": args.queue, "state": args.state, "limit": args.limit, "retried": retried,
                    "left": left})
    else:
        print(f"retried {_jobs(retried)} ({args.state}) of queue {args.queue!r}: they wait for a worker now; "
              f"{left:,} still {args.state}")
    return 0


def cmd_promote_all(args: argparse.Namespace) -> int:
    with opened_queue(args) as queue:
        require_queue(queue)
        promoted = queue.promote_jobs(args.batch, limit=args.limit)
        left = queue.get_job_counts("delayed")["delayed"]
    if args.json:
        write_json({"queue": args.queue, "limit": args.limit, "promoted": promoted, "left": left})
    else:
        print(f"promoted {_jobs(promoted)} of queue {args.queue!r}: they wait for a worker now; "
              f"{left:,} still delayed")
    return 0


def _bulk_options(parser: argparse.ArgumentParser, moved: str) -> None:
    parser.add_argument("--limit", type=positive_int, default=None,
                        help=f"{moved} at most this many (default: all)")
    parser.add_argument("--batch", type=positive_int, default=BULK_BATCH,
                        help=f"jobs per script call (default {BULK_BATCH}, about 1 ms of Redis's time each); "
                             "each call holds Redis while it runs")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("jobs", help="list a queue's jobs in one state, retry or promote all of them")
    commands = parser.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", required=True)
    p = commands.add_parser("list", help="one page of the jobs in a state, newest first")
    add_queue_options(p, json_output=True)
    p.add_argument("--state", type=job_state, default="waiting", help=f"one of {', '.join(STATES)} (default waiting)")
    p.add_argument("--limit", type=positive_int, default=20, help="jobs per page (default 20)")
    p.add_argument("--offset", type=non_negative_int, default=0, help="jobs to skip first (default 0)")
    p.add_argument("--asc", action="store_true", help="oldest first")
    p.set_defaults(handler=cmd_list)

    p = commands.add_parser("retry", help="move every failed (or completed) job back to wait, oldest first",
                            description="Move the jobs of --state back to wait, oldest first, --batch per call; "
                                        "prints how many were retried and how many are left in the state.")
    add_queue_options(p, json_output=True)
    p.add_argument("--state", choices=RETRYABLE_STATES, default="failed",
                   help="the state to retry from (default failed)")
    _bulk_options(p, "retry")
    p.set_defaults(handler=cmd_retry_all)

    p = commands.add_parser("promote", help="run every delayed job now, the earliest due first",
                            description="Move the delayed jobs to wait (or prioritized), the earliest due first, "
                                        "--batch per call; prints how many were promoted and how many are "
                                        "still delayed.")
    add_queue_options(p, json_output=True)
    _bulk_options(p, "promote")
    p.set_defaults(handler=cmd_promote_all)

    parser = subparsers.add_parser("job", help="show, retry, remove, promote or cancel one job")
    commands = parser.add_subparsers(dest="job_command", metavar="SUBCOMMAND", required=True)
    p = commands.add_parser("show", help="every field of a job, its state and how many log lines it has")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="job id")
    p.set_defaults(handler=cmd_show)

    p = commands.add_parser("retry", help="move a failed (or completed) job back to wait")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="job id")
    p.add_argument("--state", choices=("failed", "completed"), default="failed",
                   help="the state the job is in (default failed)")
    p.set_defaults(handler=cmd_retry)

    p = commands.add_parser("remove", help="delete a job (not while a worker holds it)")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="job id")
    p.add_argument("--yes", action="store_true", help="really delete (without it the command refuses)")
    p.set_defaults(handler=cmd_remove)

    p = commands.add_parser("promote", help="run a delayed job now")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="job id")
    p.set_defaults(handler=cmd_promote)

    p = commands.add_parser("cancel", help="stop a job: fail it now if it has not started, else tell its worker")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="job id")
    p.add_argument("--reason", default=None, help="why (its failedReason is 'cancelled: <reason>')")
    p.set_defaults(handler=cmd_cancel)
