"""``echomq next``: when would a schedule run? Lists the next runs in its zone and in UTC.

    echomq next '0 9 * * 1-5' --tz Europe/Berlin -n 5 --from 2024-03-29T00:00:00Z
    echomq next --every 60000

An invalid pattern is explained (which field, what is wrong) and exits with status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from ..clock import system_clock
from ..errors import InvalidScheduleError
from ..schedule.cron import FIELD_NAMES, NICKNAMES, compile_schedule, resolve_zone, tzinfo_for

UTC = dt.timezone.utc


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "next", help="list the next runs of a cron pattern or an interval",
        description="List the next runs of a cron pattern (BullMQ 6.7 dialect) or of --every.")
    parser.add_argument("pattern", nargs="?", help="cron pattern, 5 fields or 6 with seconds first, or @daily ...")
    parser.add_argument("--every", type=int, metavar="MS", help="interval in milliseconds instead of a pattern")
    parser.add_argument("--tz", metavar="ZONE", help="IANA zone the pattern is read in (default UTC)")
    parser.add_argument("-n", type=int, default=5, metavar="N", help="how many runs (default 5)")
    parser.add_argument("--from", dest="start", metavar="ISO",
                        help="reference time, ISO 8601 (default now; without an offset it is read in --tz)")
    parser.set_defaults(handler=run)


def _reference(text: str | None, tz: str | None) -> int:
    if text is None:
        return system_clock()
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidScheduleError(f"--from {text!r}: not an ISO 8601 date-time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tzinfo_for(tz))
    return (when - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)


def _show(ms: int, tz: str | None) -> str:
    local = dt.datetime.fromtimestamp(ms / 1000, tzinfo_for(tz))
    utc = dt.datetime.fromtimestamp(ms / 1000, UTC)
    name = local.tzname() or ""
    return f"{local:%a %Y-%m-%d %H:%M:%S} {name:<6} ({local:%z})   {utc:%Y-%m-%dT%H:%M:%SZ}   {ms}"


def _dst_note(schedule: Any, ms: int) -> str:
    zone = schedule.zone
    if isinstance(zone, int):
        return ""
    local = dt.datetime.fromtimestamp(ms / 1000, zone)
    if not schedule.matches_wall((local.year, local.month, local.day, local.hour, local.minute, local.second)):
        return "   <- shifted out of a DST gap"
    if local.fold:
        return "   <- repeated hour, second pass"
    return ""


def _explain_fields(pattern: str) -> list[str]:
    schedule = compile_schedule(pattern, None)
    fields = schedule.fields.expanded
    lines = [f"  {name:<13} {raw}" for name, raw in zip(FIELD_NAMES, fields)]
    if pattern in NICKNAMES:
        lines.insert(0, f"  {pattern} = {NICKNAMES[pattern]}")
    return lines


def _crontab_note(pattern: str) -> str:
    """A second opinion from python-crontab: would system cron take this line too?"""
    try:
        from crontab import CronSlices  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - python-crontab is an install requirement
        return ""
    valid = False
    if len(pattern.split()) == 5 or pattern in NICKNAMES:
        try:
            valid = CronSlices.is_valid(pattern)
            per_day = CronSlices(pattern).frequency_per_day() if valid else 0
        except Exception:  # noqa: BLE001 - python-crontab raises assorted types on odd input
            valid = False
    if valid:
        return f"  also a valid system crontab line ({per_day} runs on a matching day)"
    return "  not a system crontab line (BullMQ-only syntax: seconds, L, #, names or steps it does not read)"


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    if args.n < 1:
        print("echomq next: -n must be at least 1", file=sys.stderr)
        return 2
    try:
        reference = _reference(args.start, args.tz)
        if args.every is not None:
            if args.pattern:
                raise InvalidScheduleError("give a pattern or --every, not both")
            if args.every <= 0:
                raise InvalidScheduleError(f"every {args.every}: must be a positive number of milliseconds")
            resolve_zone(args.tz)
            print(f"every {args.every} ms from {_show(reference, args.tz)}", file=out)
            for index in range(1, args.n + 1):
                print(f"{index:>4}  {_show(reference + index * args.every, args.tz)}", file=out)
            return 0
        if not args.pattern:
            raise InvalidScheduleError("a pattern or --every is required")
        schedule = compile_schedule(args.pattern, args.tz)
    except InvalidScheduleError as exc:
        print(f"echomq next: {exc}", file=sys.stderr)
        if args.pattern and "pattern" in str(exc):
            print("  fields: [seconds] minutes hours day-of-month month day-of-week; "
                  "see docs/cron.md for the dialect", file=sys.stderr)
        return 2
    print(f"pattern {args.pattern!r} in {args.tz or 'UTC'}:", file=out)
    for line in _explain_fields(args.pattern):
        print(line, file=out)
    note = _crontab_note(args.pattern)
    if note:
        print(note, file=out)
    print(f"next runs after {_show(reference, args.tz)}:", file=out)
    count = 0
    for count, run_ms in enumerate(schedule.runs_after(reference), start=1):
        print(f"{count:>4}  {_show(run_ms, args.tz)}{_dst_note(schedule, run_ms)}", file=out)
        if count >= args.n:
            break
    if count == 0:
        print("  (no run: the pattern never matches)", file=out)
    return 0
