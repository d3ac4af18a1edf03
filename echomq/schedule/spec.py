"""Repeat options: the one validator of what a schedule repeats by (docs/protocol.md §4).

``JobScheduler.upsert`` and ``calculate_next_millis`` both read their options here, so they
accept exactly the same options, in the same forms, with the same errors:

* ``every`` (ms, a whole number >= 1) or a cron ``pattern`` (BullMQ 6.7's dialect), not both;
* ``tz``: resolved the way BullMQ reads it (``cron.zones``), for ``every`` schedules too;
* ``start_date`` / ``end_date`` (or BullMQ's ``startDate`` / ``endDate``, one spelling each):
  epoch milliseconds (int), an aware ``datetime``, or an ISO 8601 string with an offset;
* ``immediately`` (bool, not with ``start_date``), ``limit`` (>= 1), ``offset`` (``every``
  only, below ``every``).

Everything here is checked without a clock. The one check that needs "now", an ``end_date``
already past, is the caller's: ``upsert`` refuses to create a schedule that has ended
(:meth:`RepeatSpec.refuse_ended`), ``calculate_next_millis`` answers that there is no next run.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import InvalidScheduleError
from .cron import CronSchedule, compile_schedule, resolve_zone

KNOWN_OPTIONS: tuple[str, ...] = ("every", "pattern", "immediately", "tz", "start_date", "end_date", "limit",
                                  "offset")
_KNOWN = frozenset(KNOWN_OPTIONS)
#: BullMQ's spellings of the dates, accepted as aliases (one spelling per option).
ALIASES: dict[str, str] = {"startDate": "start_date", "endDate": "end_date"}

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _fail(name: str, value: Any, reason: str) -> InvalidScheduleError:
    return InvalidScheduleError(f"repeat option {name}={value!r}: {reason}")


def _whole(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, value, "must be an integer")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise _fail(name, value, "must be a whole number")
    if value < minimum:
        raise _fail(name, value, f"must be >= {minimum}")
    return int(value)


def to_millis(name: str, value: Any) -> int:
    """Epoch ms from epoch ms, an aware datetime or an ISO 8601 string with an offset."""
    if isinstance(value, str):
        try:
            parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            hint = " (give epoch milliseconds as an int)" if value.strip().lstrip("-").isdigit() else ""
            raise _fail(name, value, f"is not an ISO 8601 date{hint}") from None
        value = parsed
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise _fail(name, value, "must be timezone-aware (a naive datetime is ambiguous)")
        return (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    return _whole(name, value, 0)


def _named_options(repeat_opts: Mapping[str, Any]) -> dict[str, Any]:
    """The given options under their Python names, None values dropped; unknown names refused."""
    opts: dict[str, Any] = {}
    for key, value in repeat_opts.items():
        name = ALIASES.get(key, key)
        if name not in _KNOWN:
            raise _fail(str(key), value, f"unknown repeat option (known: {', '.join(KNOWN_OPTIONS)})")
        if value is None:
            continue
        if name in opts:
            camel = next(alias for alias, target in ALIASES.items() if target == name)
            raise InvalidScheduleError(f"repeat option {name}/{camel}: given both ways ({opts[name]!r} and "
                                       f"{value!r}); pass one")
        opts[name] = value
    return opts


class RepeatSpec(NamedTuple):
    """Validated repeat options; ``start_date``/``end_date`` in epoch ms, ``schedule`` compiled.

    A NamedTuple, not a dataclass: the worker's scheduler step parses one per iteration, and a
    tuple is built several times faster.
    """

    every: int | None = None
    pattern: str | None = None
    immediately: bool = False
    tz: str | None = None
    start_date: int | None = None
    end_date: int | None = None
    limit: int | None = None
    offset: int | None = None
    schedule: CronSchedule | None = None

    @classmethod
    def parse(cls, repeat_opts: Mapping[str, Any]) -> RepeatSpec:
        """Validate ``repeat_opts`` (InvalidScheduleError names what is wrong).

        Parsing is pure, so a spec is remembered for options seen before, keyed by their items
        and the type of each value (``1`` and ``True`` are equal as keys, not as options): the
        worker's scheduler step and ``calculate_next_millis`` see the same options again and again.
        """
        if repeat_opts.__class__ is not dict and not isinstance(repeat_opts, Mapping):
            raise InvalidScheduleError(f"repeat_opts must be a mapping, got {type(repeat_opts).__name__}")
        try:
            key: Any = (tuple(repeat_opts.items()), tuple(map(type, repeat_opts.values())))
            known = _PARSED.get(key)
        except TypeError:  # an unhashable value: parse it every time
            key = known = None
        if known is not None:
            return known
        spec = cls._parse(repeat_opts)
        if key is not None:
            if len(_PARSED) >= _PARSED_LIMIT:
                _PARSED.clear()
            _PARSED[key] = spec
        return spec

    @classmethod
    def _parse(cls, repeat_opts: Mapping[str, Any]) -> RepeatSpec:
        opts = _named_options(repeat_opts)
        every, pattern = opts.get("every"), opts.get("pattern")
        if every is not None and pattern is not None:
            raise InvalidScheduleError("repeat_opts: give either every or pattern, not both")
        if every is None and pattern is None:
            raise InvalidScheduleError("repeat_opts: give every (ms) or pattern (cron)")
        immediately = opts.get("immediately", False)
        if not isinstance(immediately, bool):
            raise _fail("immediately", immediately, "must be True or False")
        tz = opts.get("tz")
        schedule = None
        if pattern is not None:
            if not isinstance(pattern, str) or not pattern or pattern.isspace():
                raise _fail("pattern", pattern, "must be a non-empty cron expression")
            schedule = compile_schedule(pattern, tz)  # resolves the zone first: a bad zone is named first
        else:
            resolve_zone(tz)  # an every schedule's zone must be one BullMQ reads too
            every = _whole("every", every, 1)
        start = to_millis("start_date", opts["start_date"]) if "start_date" in opts else None
        end = to_millis("end_date", opts["end_date"]) if "end_date" in opts else None
        if immediately and start is not None:
            raise InvalidScheduleError("repeat_opts: immediately and start_date cannot be used together")
        if end is not None and start is not None and start > end:
            raise _fail("start_date", opts["start_date"], "is after end_date: the schedule would never run")
        limit = _whole("limit", opts["limit"], 1) if "limit" in opts else None
        offset = None
        if "offset" in opts:
            if every is None:
                raise _fail("offset", opts["offset"], "applies to every schedules only")
            offset = _whole("offset", opts["offset"], 0)
            if offset >= every:
                raise _fail("offset", offset, f"must be smaller than every ({every})")
            offset = offset or None  # 0 means "no phase given", as in BullMQ
        return cls(every, pattern, immediately, tz, start, end, limit, offset, schedule)

    def refuse_ended(self, now_ms: int) -> None:
        """InvalidScheduleError when ``end_date`` is already past: a schedule that would never run."""
        if self.end_date is not None and self.end_date < now_ms:
            raise _fail("end_date", self.end_date, "is already in the past")

    def next_millis(self, reference_ms: int) -> int | None:
        """The next run after ``reference_ms``: ``every`` later (from ``start_date`` when that is
        later), the first matching second strictly after it for a pattern, the reference itself
        with ``immediately``; None when it would fall after ``end_date`` (inclusive)."""
        base = reference_ms if self.start_date is None else max(reference_ms, self.start_date)
        result: int | None
        if self.immediately:
            result = reference_ms
        elif self.schedule is not None:
            result = self.schedule.next_after(base)
        else:
            assert self.every is not None
            result = base + self.every
        if result is not None and self.end_date is not None and result > self.end_date:
            return None
        return result

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


#: Specs of options parsed before (see RepeatSpec.parse), cleared when it reaches the limit.
_PARSED: dict[Any, RepeatSpec] = {}
_PARSED_LIMIT = 4096
