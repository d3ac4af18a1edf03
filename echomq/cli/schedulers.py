"""``echomq schedulers list|get|upsert|remove|pause|resume|run-now|history``: look at, edit and
operate a queue's job schedulers.

Tables show the next run in UTC and in the scheduler's own zone, which is what an operator
compares with the cron pattern; ``--json`` prints the records for scripts.

``upsert`` on an existing scheduler replaces its schedule (``--every``/``--pattern`` and the
options that go with them) but keeps each part of its job template (name, data, opts) that the
command does not give: changing a period should not wipe what the jobs carry. Giving a part
replaces it; ``--data '{}'`` and ``--opts '{}'`` clear them. The missed-run policy is kept the
same way unless ``--misfire`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, TextIO

import redis

from ..errors import EchoMQError, InvalidJobOptionsError
from ..protocol.codec import json_or_text
from ..protocol.options import decode_job_options
from ..schedule import JobScheduler, SchedulerRecord, ScheduleRun, calculate_next_millis
from .options import add_queue_options, open_client, printable
from .output import write_table

COLUMNS = ("ID", "NAME", "SCHEDULE", "NEXT (UTC)", "NEXT (LOCAL)", "RUNS", "LIMIT", "STATE")
HISTORY_COLUMNS = ("JOB", "SLOT (UTC)", "START (UTC)", "DURATION", "OUTCOME")


def describe_schedule(record: SchedulerRecord) -> str:
    if record.pattern:
        return f"cron {record.pattern!r}" + (f" {record.tz}" if record.tz else "")
    if record.every is not None:
        return f"every {record.every} ms" + (f" +{record.offset}" if record.offset else "")
    return "?"


def _row(record: SchedulerRecord) -> tuple[str, ...]:
    utc = record.next_run.strftime("%Y-%m-%d %H:%M:%S") if record.next_run else "-"
    local = "-"
    if record.next_run_local is not None and record.tz:
        local = record.next_run_local.strftime("%Y-%m-%d %H:%M:%S %Z")
    return (record.id, record.name, describe_schedule(record), utc, local,
            str(record.iteration_count or 0), "-" if record.limit is None else str(record.limit),
            "paused" if record.paused else "-")


def print_table(records: Iterable[SchedulerRecord], out: TextIO) -> None:
    write_table(COLUMNS, (tuple(map(printable, _row(r))) for r in records), out)  # ids and names come from Redis


def _scheduler(args: argparse.Namespace) -> tuple[redis.Redis, JobScheduler]:
    client = open_client(args)
    return client, JobScheduler(client, args.queue, prefix=args.prefix)


def _emit(args: argparse.Namespace, records: list[SchedulerRecord]) -> None:
    if args.json:
        sys.stdout.write(json.dumps([r.to_dict() for r in records], indent=2) + "\n")
    else:
        print_table(records, sys.stdout)


def cmd_list(args: argparse.Namespace) -> int:
    client, sched = _scheduler(args)
    try:
        _emit(args, sched.list(args.start, args.end, asc=args.asc))
    finally:
        client.close()
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    client, sched = _scheduler(args)
    try:
        record = sched.get(args.id)
        if record is None:
            sys.stderr.write(f"no scheduler {args.id!r} in queue {args.queue!r}\n")
            return 1
        if args.json:
            sys.stdout.write(json.dumps(record.to_dict(), indent=2) + "\n")
        else:
            print_table([record], sys.stdout)
            template = record.to_dict().get("template")
            if template:
                sys.stdout.write(f"template: {json.dumps(template)}\n")
    finally:
        client.close()
    return 0


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise EchoMQError(f"--{what} is not JSON: {exc}") from None
    except RecursionError:
        raise EchoMQError(f"--{what} is nested too deeply to decode") from None


def _date_arg(text: str | None) -> int | str | None:
    return int(text) if text is not None and text.isdigit() else text


def _misfire(args: argparse.Namespace, existing: SchedulerRecord | None, kept: list[str]) -> dict[str, Any]:
    """The upsert's policy keywords: the given ones, else the existing scheduler's (kept)."""
    if args.misfire is not None or args.misfire_grace_ms is not None:
        return {"misfire": args.misfire, "misfire_grace_ms": args.misfire_grace_ms}
    if existing is None or existing.misfire.grace_ms is None:
        return {}
    kept.append("missed-run policy")
    return {"misfire": existing.misfire.policy, "misfire_grace_ms": existing.misfire.grace_ms}


def _template(args: argparse.Namespace, existing: SchedulerRecord | None, data: Any,
              opts: Any) -> tuple[Any, Any, Any, list[str]]:
    """Name, data and opts for the upsert, and which of them are kept from ``existing``."""
    name = args.name
    kept: list[str] = []
    if existing is None:
        return name, data, opts, kept
    if name is None:
        name = existing.name
        kept.append("name")
    stored_data = existing.raw.get("data")
    if args.data is None and stored_data:
        try:
            data = json.loads(stored_data)
        except (ValueError, RecursionError):
            raise EchoMQError(f"scheduler {args.id!r}: its stored data is not JSON and cannot be kept; "
                              "give --data to replace it") from None
        kept.append("data")
    if args.opts is None and existing.raw.get("opts"):
        # The stored options as they are (a bare-number backoff stays one), not template_opts'
        # normal form: keeping a template must not rewrite it.
        stored_opts = json_or_text(existing.raw["opts"])
        opts = decode_job_options(stored_opts) if isinstance(stored_opts, dict) else existing.template_opts
        kept.append("opts")
    return name, data, opts, kept


def _kept_line(kept: list[str]) -> str:
    parts = kept[0] if len(kept) == 1 else ", ".join(kept[:-1]) + " and " + kept[-1]
    return f"kept the existing job {parts} (give --name, --data, --opts or --misfire to replace them)\n"


def cmd_upsert(args: argparse.Namespace) -> int:
    repeat: dict[str, Any] = {"every": args.every, "pattern": args.pattern, "tz": args.tz,
                              "start_date": _date_arg(args.start_date), "end_date": _date_arg(args.end_date),
                              "limit": args.limit, "offset": args.offset}
    if args.immediately:
        repeat["immediately"] = True
    repeat = {k: v for k, v in repeat.items() if v is not None}
    client, sched = _scheduler(args)
    kept: list[str] = []
    try:
        # Bad input is refused before anything connects (the template lookup reads Redis).
        data, opts = _json_arg(args.data, "data"), _json_arg(args.opts, "opts")
        calculate_next_millis(repeat)  # the one validator of repeat options; pure
        existing = sched.get(args.id)
        name, data, opts, kept = _template(args, existing, data, opts)
        iteration = sched.upsert(args.id, repeat, name, data, opts, **_misfire(args, existing, kept))
        record = sched.get(args.id)
    except EchoMQError as exc:
        hint = " (the existing template cannot be kept as it is: give --name, --data or --opts)" \
            if kept and isinstance(exc, InvalidJobOptionsError) else ""
        sys.stderr.write(f"error: {exc}{hint}\n")
        return 2
    finally:
        client.close()
    if args.json:
        sys.stdout.write(json.dumps({
            "iteration": None if iteration is None else
            {"job_id": iteration.job_id, "delay": iteration.delay, "due": iteration.due_ms},
            "scheduler": None if record is None else record.to_dict(), "kept_template": kept}, indent=2) + "\n")
    else:
        sys.stdout.write("no iteration scheduled (no run left before end date)\n" if iteration is None
                         else f"scheduled {iteration.job_id} in {iteration.delay} ms\n")
        if kept:
            sys.stdout.write(_kept_line(kept))
        if record is not None:
            print_table([record], sys.stdout)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    client, sched = _scheduler(args)
    try:
        removed = sched.remove_by_key(args.id)
    finally:
        client.close()
    if args.json:
        sys.stdout.write(json.dumps({"removed": removed}) + "\n")
    else:
        sys.stdout.write(f"removed {args.id}\n" if removed else f"no scheduler {args.id!r}\n")
    return 0 if removed else 1


def _operate(args: argparse.Namespace, operation: str) -> Any:
    """One operation on one scheduler; an unknown id is one line on stderr (status 1)."""
    client, sched = _scheduler(args)
    try:
        if operation == "history":
            return sched.history(args.id, args.limit)
        return getattr(sched, operation)(args.id)
    finally:
        client.close()


def cmd_pause(args: argparse.Namespace) -> int:
    changed = _operate(args, "pause")
    _say(args, {"paused": True, "changed": changed},
         f"paused {args.id}" if changed else f"{args.id} was paused already")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    changed = _operate(args, "resume")
    _say(args, {"paused": False, "changed": changed},
         f"resumed {args.id}" if changed else f"{args.id} was not paused")
    return 0


def cmd_run_now(args: argparse.Namespace) -> int:
    job_id = _operate(args, "run_now")
    _say(args, {"job_id": job_id}, f"added {job_id}")
    return 0


def _say(args: argparse.Namespace, as_json: dict[str, Any], line: str) -> None:
    sys.stdout.write(json.dumps(as_json) + "\n" if args.json else printable(line) + "\n")


def _when(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def cmd_history(args: argparse.Namespace) -> int:
    runs: list[ScheduleRun] = _operate(args, "history")
    if args.json:
        sys.stdout.write(json.dumps([run.to_dict() for run in runs], indent=2) + "\n")
        return 0
    rows = ((printable(r.job_id), _when(r.slot), _when(r.start), "-" if r.duration is None else f"{r.duration} ms",
             r.outcome + (f": {printable(r.failed_reason)}" if r.failed_reason else "")) for r in runs)
    write_table(HISTORY_COLUMNS, rows, sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("schedulers", help="list, show, create or remove job schedulers")
    commands = parser.add_subparsers(dest="schedulers_command", metavar="SUBCOMMAND", required=True)

    p = commands.add_parser("list", help="all schedulers, latest next run first")
    add_queue_options(p, json_output=True)
    p.add_argument("--start", type=int, default=0, help="first rank (default 0)")
    p.add_argument("--end", type=int, default=-1, help="last rank, inclusive (default -1: all)")
    p.add_argument("--asc", action="store_true", help="earliest next run first")
    p.set_defaults(handler=cmd_list)

    p = commands.add_parser("get", help="one scheduler")
    add_queue_options(p, json_output=True)
    p.add_argument("id")
    p.set_defaults(handler=cmd_get)

    p = commands.add_parser(
        "upsert", help="create a scheduler, or replace its schedule",
        description="Create a scheduler, or replace the schedule of an existing one. Its job template "
                    "(--name, --data, --opts) is kept for each part not given; '{}' clears data or opts.")
    add_queue_options(p, json_output=True)
    p.add_argument("id")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--every", type=int, help="period in ms")
    kind.add_argument("--pattern", help="cron pattern (5 or 6 fields)")
    p.add_argument("--tz", help="IANA zone for the pattern, e.g. Europe/Berlin")
    p.add_argument("--start-date", help="ISO 8601 date with offset, or epoch ms")
    p.add_argument("--end-date", help="ISO 8601 date with offset, or epoch ms")
    p.add_argument("--limit", type=int, help="stop after this many iterations")
    p.add_argument("--offset", type=int, help="phase within the period (every only), ms")
    p.add_argument("--immediately", action="store_true", help="first run now (pattern)")
    p.add_argument("--name", help="job name (default: the existing scheduler's, else the scheduler id)")
    p.add_argument("--data", help="job data, JSON (default: the existing scheduler's, else none)")
    p.add_argument("--opts", help='job options, JSON with snake_case keys, e.g. \'{"attempts": 3}\' '
                                  "(default: the existing scheduler's, else none)")
    p.add_argument("--misfire", choices=("run_once", "skip", "run_all"),
                   help="missed-run policy (default: the existing scheduler's, else run_once)")
    p.add_argument("--misfire-grace-ms", type=int, help="how late a run may be for skip and run_all (default 60000)")
    p.set_defaults(handler=cmd_upsert)

    p = commands.add_parser("remove", help="remove a scheduler and its pending iteration")
    add_queue_options(p, json_output=True)
    p.add_argument("id", help="scheduler id (the key list/get report)")
    p.set_defaults(handler=cmd_remove)

    for command, handler, what in (
            ("pause", cmd_pause, "pause a scheduler: no worker runs it until resume (BullMQ's included)"),
            ("resume", cmd_resume, "resume a paused scheduler; missed runs follow its missed-run policy"),
            ("run-now", cmd_run_now, "run a scheduler once now (an extra, manual iteration)"),
            ("history", cmd_history, "a scheduler's last runs: slot, start, duration, outcome")):
        p = commands.add_parser(command, help=what)
        add_queue_options(p, json_output=True)
        p.add_argument("id", help="scheduler id")
        if command == "history":
            p.add_argument("--limit", type=int, default=20, help="how many runs, newest first (default 20)")
        p.set_defaults(handler=handler)

