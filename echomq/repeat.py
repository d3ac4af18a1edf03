"""The next run of a repeating job: by a fixed interval or by a cron pattern.

Pure (no Redis): a job scheduler calls it to place the next iteration, and a BullMQ 6.7 Node
worker computes the same millisecond for the same options, so a schedule advanced by either
runtime stays on one timeline. The cron dialect and its DST rules are in ``echomq.cron``.

Without ``tz`` a pattern is read in UTC. (BullMQ Node reads it in the process's local zone,
which is UTC on most servers; pass ``tz`` to be explicit.)
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Mapping
from typing import Any

from .cron import CronSchedule, compile_schedule
from .errors import InvalidScheduleError

_KNOWN = frozenset({"every", "pattern", "immediately", "tz", "start_date", "end_date", "limit",
                    "offset", "startDate", "endDate", "count", "prevMillis", "prev_millis",
                    "utc", "key", "jobId", "job_id",
                    # fields of a scheduler hash, so a record read back from Redis can be passed as is
                    "name", "opts", "data", "ic", "next", "iterationCount", "iteration_count"})
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone(_dt.timedelta(0)))


def _epoch_ms(field: str, value: Any) -> int | None:
    """Epoch ms from an int (or an integral string, as read back from a Redis hash) or an aware datetime."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidScheduleError(f"{field} {value!r}: must be epoch milliseconds or an aware datetime")
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidScheduleError(
                f"{field} {value!r}: naive datetime is ambiguous; attach a tzinfo (e.g. timezone.utc)")
        return (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    if isinstance(value, (bytes, str)):
        text = value.decode() if isinstance(value, bytes) else value
        try:
            return int(text)
        except ValueError:
            raise InvalidScheduleError(f"{field} {value!r}: must be epoch milliseconds") from None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidScheduleError(f"{field} {value!r}: must be epoch milliseconds or an aware datetime")


def _option(opts: Mapping[str, Any], name: str, camel: str) -> Any:
    value, other = opts.get(name), opts.get(camel)
    if value is not None and other is not None:
        raise InvalidScheduleError(f"{name}/{camel}: given both ways ({value!r} and {other!r}); pass one")
    return other if value is None else value


def _every_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, bytes)):
        raise InvalidScheduleError(f"every {value!r}: must be a positive number of milliseconds")
    try:
        number = float(value.decode() if isinstance(value, bytes) else value)
    except ValueError:
        raise InvalidScheduleError(f"every {value!r}: must be a positive number of milliseconds") from None
    if not number > 0 or not number.is_integer():
        raise InvalidScheduleError(f"every {value!r}: must be a positive whole number of milliseconds")
    return int(number)


def schedule_for(repeat_opts: Mapping[str, Any]) -> CronSchedule:
    """The compiled (cached) schedule of a pattern option, for listing many runs (CLI)."""
    pattern = repeat_opts.get("pattern")
    if not pattern:
        raise InvalidScheduleError(f"pattern {pattern!r}: a non-empty cron pattern is required")
    return compile_schedule(pattern, repeat_opts.get("tz"))


def calculate_next_millis(repeat_opts: Mapping[str, Any], reference_time: int | None = None) -> int | None:
    """The next run in epoch ms, strictly after the reference for patterns; None when none is left.

    ``every``: reference (or start_date, if later) + every. ``pattern``: the first matching
    whole second after max(reference, start_date). ``immediately``: the reference itself.
    ``end_date`` is inclusive. ``limit`` and ``offset`` belong to the scheduler and are
    accepted unread.
    """
    if not isinstance(repeat_opts, Mapping):
        raise InvalidScheduleError(f"repeat_opts {repeat_opts!r}: must be a mapping")
    unknown = repeat_opts.keys() - _KNOWN
    if unknown:
        raise InvalidScheduleError(f"repeat_opts: unknown option(s) {sorted(unknown)!r}")
    if reference_time is None:
        reference_time = int(time.time() * 1000)
    elif isinstance(reference_time, bool) or not isinstance(reference_time, int):
        raise InvalidScheduleError(f"reference_time {reference_time!r}: must be epoch milliseconds (int)")
    start = _epoch_ms("start_date", _option(repeat_opts, "start_date", "startDate"))
    end = _epoch_ms("end_date", _option(repeat_opts, "end_date", "endDate"))
    if start is not None and end is not None and end < start:
        raise InvalidScheduleError(f"end_date {end!r}: is before start_date {start!r}")
    pattern = repeat_opts.get("pattern")
    every = repeat_opts.get("every")
    if pattern is not None and every is not None:
        raise InvalidScheduleError(f"every {every!r} and pattern {pattern!r}: give one of them, not both")
    if pattern is None and every is None:
        raise InvalidScheduleError("repeat_opts: either pattern or every is required")
    if repeat_opts.get("immediately") and start is not None:
        raise InvalidScheduleError(f"immediately: cannot be combined with start_date {start!r}")
    base = reference_time if start is None else max(reference_time, start)
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise InvalidScheduleError(f"pattern {pattern!r}: must be a non-empty cron pattern string")
        schedule = compile_schedule(pattern, repeat_opts.get("tz"))
        if repeat_opts.get("immediately"):
            result: int | None = reference_time
        else:
            result = schedule.next_after(base)
    else:
        interval = _every_ms(every)
        if repeat_opts.get("tz") is not None:
            compile_schedule("* * * * *", repeat_opts.get("tz"))  # validate the zone all the same
        result = reference_time if repeat_opts.get("immediately") else base + interval
    if result is not None and end is not None and result > end:
        return None
    return result
