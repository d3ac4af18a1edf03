"""Repeat options, checked before anything is written: what a scheduler repeats by.

``repeat_opts`` is a mapping with ``every`` (ms) or ``pattern`` (cron), plus ``immediately``,
``tz``, ``start_date``, ``end_date``, ``limit`` and ``offset`` (BullMQ's camelCase
``startDate``/``endDate`` are accepted too). Dates may be epoch millis, aware datetimes or
ISO 8601 strings with an offset; they are stored as millis, as BullMQ stores them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidScheduleError

_KNOWN = ("every", "pattern", "immediately", "tz", "start_date", "end_date", "limit", "offset")
_ALIASES = {"startDate": "start_date", "endDate": "end_date"}


def _fail(name: str, value: Any, reason: str) -> InvalidScheduleError:
    return InvalidScheduleError(f"repeat option {name}={value!r}: {reason}")


def _positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, value, "must be an integer")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise _fail(name, value, "must be a whole number")
    if value < minimum:
        raise _fail(name, value, f"must be >= {minimum}")
    return int(value)


def to_millis(name: str, value: Any) -> int:
    """Epoch millis from millis, an aware datetime or an ISO 8601 string with an offset."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))  # noqa: FURB162 (3.10 rejects Z)
        except ValueError:
            raise _fail(name, value, "is not an ISO 8601 date") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise _fail(name, value, "must be timezone-aware (a naive datetime is ambiguous)")
        return round(value.timestamp() * 1000)
    return _positive_int(name, value, 0)


def validate_tz(tz: Any) -> str:
    if not isinstance(tz, str) or not tz:
        raise _fail("tz", tz, "must be an IANA zone name such as 'Europe/Berlin'")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise _fail("tz", tz, "is not a known IANA time zone") from None
    return tz


@dataclass(frozen=True)
class RepeatSpec:
    """Validated repeat options. ``start_date``/``end_date`` are millis."""

    every: int | None = None
    pattern: str | None = None
    immediately: bool = False
    tz: str | None = None
    start_date: int | None = None
    end_date: int | None = None
    limit: int | None = None
    offset: int | None = None

    @classmethod
    def parse(cls, repeat_opts: Mapping[str, Any], now_ms: int) -> RepeatSpec:
        if not isinstance(repeat_opts, Mapping):
            raise InvalidScheduleError(f"repeat_opts must be a mapping, got {type(repeat_opts).__name__}")
        opts: dict[str, Any] = {}
        for key, value in repeat_opts.items():
            name = _ALIASES.get(key, key)
            if name not in _KNOWN:
                raise _fail(str(key), value, f"unknown repeat option (known: {', '.join(_KNOWN)})")
            if value is not None:
                opts[name] = value
        every, pattern = opts.get("every"), opts.get("pattern")
        if every is not None and pattern is not None:
            raise InvalidScheduleError("repeat_opts: give either every or pattern, not both")
        if every is None and pattern is None:
            raise InvalidScheduleError("repeat_opts: give every (ms) or pattern (cron)")
        if every is not None:
            every = _positive_int("every", every, 1)
        if pattern is not None and (not isinstance(pattern, str) or not pattern.strip()):
            raise _fail("pattern", pattern, "must be a non-empty cron expression")
        immediately = opts.get("immediately", False)
        if not isinstance(immediately, bool):
            raise _fail("immediately", immediately, "must be True or False")
        tz = validate_tz(opts["tz"]) if "tz" in opts else None
        start = to_millis("start_date", opts["start_date"]) if "start_date" in opts else None
        end = to_millis("end_date", opts["end_date"]) if "end_date" in opts else None
        if immediately and start is not None:
            raise InvalidScheduleError("repeat_opts: immediately and start_date cannot be used together")
        if end is not None and end < now_ms:
            raise _fail("end_date", opts["end_date"], "is already in the past")
        if end is not None and start is not None and start > end:
            raise _fail("start_date", opts["start_date"], "is after end_date: the schedule would never run")
        limit = _positive_int("limit", opts["limit"], 1) if "limit" in opts else None
        offset = None
        if "offset" in opts:
            if every is None:
                raise _fail("offset", opts["offset"], "applies to every schedules only")
            offset = _positive_int("offset", opts["offset"], 0)
            if offset >= every:
                raise _fail("offset", offset, f"must be smaller than every ({every})")
            offset = offset or None  # 0 means "no phase given", as in BullMQ
        return cls(every=every, pattern=pattern, immediately=immediately, tz=tz,
                   start_date=start, end_date=end, limit=limit, offset=offset)

    def scheduler_fields(self, name: str) -> dict[str, Any]:
        """ARGV[2] of addJobScheduler: what the scheduler hash stores (None values left out)."""
        fields = {"name": name, "tz": self.tz, "pattern": self.pattern, "every": self.every,
                  "limit": self.limit, "startDate": self.start_date, "endDate": self.end_date,
                  "offset": self.offset}
        return {k: v for k, v in fields.items() if v is not None}

    def iteration_repeat(self, count: int) -> dict[str, Any]:
        """The ``repeat`` object an iteration's opts carry (BullMQ 6.7: never ``immediately``)."""
        fields = {"every": self.every, "pattern": self.pattern, "tz": self.tz, "limit": self.limit,
                  "startDate": self.start_date, "endDate": self.end_date, "offset": self.offset,
                  "count": count}
        return {k: v for k, v in fields.items() if v is not None}

    def cron_opts(self) -> dict[str, Any]:
        """The subset calculate_next_millis needs for a pattern."""
        fields = {"pattern": self.pattern, "tz": self.tz, "start_date": self.start_date, "end_date": self.end_date}
        return {k: v for k, v in fields.items() if v is not None}
