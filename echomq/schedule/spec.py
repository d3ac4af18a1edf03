"""Repeat options: the one validator of what a schedule repeats by (docs/protocol.md §4).

``JobScheduler.upsert``, ``calculate_next_millis`` and the worker step all read their options
here, so they accept the same options, in the same forms, with the same errors:

* ``every`` (ms, a whole number in 1 .. 8.64e15) or a cron ``pattern`` (BullMQ 6.7's dialect),
  not both;
* ``tz``: resolved the way BullMQ reads it (``cron.zones``), for ``every`` schedules too;
* ``start_date`` / ``end_date`` (or BullMQ's ``startDate`` / ``endDate``, one spelling each):
  epoch milliseconds (int), an aware ``datetime``, or an ISO 8601 string with an offset;
* ``immediately`` (bool, not with ``start_date``), ``limit`` (1 .. 2**53 - 1), ``offset``
  (``every`` only, below ``every``).

Every number is range-checked (``dates``): an id, a score or a count that reached a script
must be exact there. That is *writing* (``upsert``): nothing ambiguous is stored.

*Reading* (``reading=True``: ``calculate_next_millis`` and the worker step, which meet options
another runtime stored) also takes everything BullMQ 6.7 accepts, as BullMQ reads it, so such a
schedule is always advanced: ``tz`` ``local``/``system``/``default`` (this process's zone), ISO
8601 strings as JavaScript's Date reads them, BullMQ's bookkeeping keys of an iteration's
``opts.repeat`` (``count``, ``prevMillis``, ``key``, ``jobId``: checked, not used), an
``offset`` on a pattern or not below ``every`` (only a scheduler's phase: not used here), and an
end before the start, which leaves no next run instead of being an error.

Everything here is checked without a clock. The one check that needs "now", an ``end_date``
already past, is the caller's: ``upsert`` refuses to create a schedule that has ended
(:meth:`RepeatSpec.refuse_ended`), ``calculate_next_millis`` answers that there is no next run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import InvalidScheduleError
from .cron import CronSchedule, compile_schedule, resolve_zone
from .dates import MAX_DATE_MS, MAX_SAFE_INTEGER, fail, to_millis, whole

KNOWN_OPTIONS: tuple[str, ...] = ("every", "pattern", "immediately", "tz", "start_date", "end_date", "limit",
                                  "offset")
#: BullMQ's bookkeeping keys in an iteration's ``opts.repeat``: read (and checked), never used.
READ_ONLY_OPTIONS: tuple[str, ...] = ("count", "prevMillis", "key", "jobId")
_KNOWN = frozenset(KNOWN_OPTIONS)
_READ_ONLY = frozenset(READ_ONLY_OPTIONS)
#: BullMQ's spellings of the dates, accepted as aliases (one spelling per option).
ALIASES: dict[str, str] = {"startDate": "start_date", "endDate": "end_date"}


def _named_options(repeat_opts: Mapping[str, Any], reading: bool) -> dict[str, Any]:
    """The given options under their Python names, None values dropped; unknown names refused."""
    opts: dict[str, Any] = {}
    for key, value in repeat_opts.items():
        name = ALIASES.get(key, key)
        if name not in _KNOWN and not (reading and name in _READ_ONLY):
            raise fail(str(key), value, f"unknown repeat option (known: {', '.join(KNOWN_OPTIONS)})")
        if value is None:
            continue
        if name in opts:
            camel = next(alias for alias, target in ALIASES.items() if target == name)
            raise InvalidScheduleError(f"repeat option {name}/{camel}: given both ways ({opts[name]!r} and "
                                       f"{value!r}); pass one")
        opts[name] = value
    return opts


def _check_read_only(opts: Mapping[str, Any]) -> None:
    """BullMQ's bookkeeping keys, when reading: unused, but never a value no runtime could hold."""
    if "count" in opts:
        whole("count", opts["count"], 0, MAX_SAFE_INTEGER)
    if "prevMillis" in opts:
        to_millis("prevMillis", opts["prevMillis"], reading=True)
    for name in ("key", "jobId"):
        if name in opts and not isinstance(opts[name], str):
            raise fail(name, opts[name], "must be a string")


class RepeatSpec(NamedTuple):
    """Validated repeat options; ``start_date``/``end_date`` in epoch ms, ``schedule`` compiled.

    A NamedTuple, not a dataclass: the worker's scheduler step parses one per iteration, and a
    tuple is built several times faster. ``exhausted`` is True when the dates leave no run at
    all (an end before the start, accepted only when reading).
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
    exhausted: bool = False

    @classmethod
    def parse(cls, repeat_opts: Mapping[str, Any], *, reading: bool = False) -> RepeatSpec:
        """Validate ``repeat_opts`` (InvalidScheduleError names what is wrong); ``reading`` for
        options another runtime may have stored (the module's docstring says what it adds).

        Parsing is pure, so a spec is remembered for options seen before, keyed by their items
        and the type of each value (``1`` and ``True`` are equal as keys, not as options), and
        when reading by the process zone too (``local`` and offsetless dates depend on it): the
        worker's scheduler step and ``calculate_next_millis`` see the same options again and again.
        """
        if repeat_opts.__class__ is not dict and not isinstance(repeat_opts, Mapping):
            raise InvalidScheduleError(f"repeat_opts must be a mapping, got {type(repeat_opts).__name__}")
        try:
            key: Any = (tuple(repeat_opts.items()), tuple(map(type, repeat_opts.values())),
                        os.environ.get("TZ", "") if reading else None)
            known = _PARSED.get(key)
        except TypeError:  # an unhashable value: parse it every time
            key = known = None
        if known is not None:
            return known
        spec = cls._parse(repeat_opts, reading)
        if key is not None:
            if len(_PARSED) >= _PARSED_LIMIT:
                _PARSED.clear()
            _PARSED[key] = spec
        return spec

    @classmethod
    def _parse(cls, repeat_opts: Mapping[str, Any], reading: bool) -> RepeatSpec:
        opts = _named_options(repeat_opts, reading)
        every, pattern = opts.get("every"), opts.get("pattern")
        if every is not None and pattern is not None:
            raise InvalidScheduleError("repeat_opts: give either every or pattern, not both")
        if every is None and pattern is None:
            raise InvalidScheduleError("repeat_opts: give every (ms) or pattern (cron)")
        immediately = opts.get("immediately", False)
        if not isinstance(immediately, bool):
            raise fail("immediately", immediately, "must be True or False")
        tz = opts.get("tz")
        schedule = None
        if pattern is not None:
            if not isinstance(pattern, str) or not pattern or pattern.isspace():
                raise fail("pattern", pattern, "must be a non-empty cron expression")
            # resolves the zone first: a bad zone is named first
            schedule = compile_schedule(pattern, tz, local=reading)
        else:
            resolve_zone(tz, local=reading)  # an every schedule's zone must be one BullMQ reads too
            every = whole("every", every, 1, MAX_DATE_MS)
        start = to_millis("start_date", opts["start_date"], reading=reading) if "start_date" in opts else None
        end = to_millis("end_date", opts["end_date"], reading=reading) if "end_date" in opts else None
        if immediately and start is not None:
            raise InvalidScheduleError("repeat_opts: immediately and start_date cannot be used together")
        exhausted = end is not None and start is not None and start > end
        if exhausted and not reading:
            raise fail("start_date", opts["start_date"], "is after end_date: the schedule would never run")
        limit = whole("limit", opts["limit"], 1, MAX_SAFE_INTEGER) if "limit" in opts else None
        offset = cls._offset(opts, every, reading)
        if reading:
            _check_read_only(opts)
        return cls(every, pattern, immediately, tz, start, end, limit, offset, schedule, exhausted)

    @staticmethod
    def _offset(opts: Mapping[str, Any], every: int | None, reading: bool) -> int | None:
        """The user's phase of an every schedule (None for none: 0 means none, as in BullMQ)."""
        if "offset" not in opts:
            return None
        if reading:  # any runtime's phase: only the scheduler's arithmetic uses it
            offset = whole("offset", opts["offset"], -MAX_DATE_MS, MAX_DATE_MS)
            return (offset or None) if every is not None else None
        if every is None:
            raise fail("offset", opts["offset"], "applies to every schedules only")
        offset = whole("offset", opts["offset"], 0, MAX_DATE_MS)
        if offset >= every:
            raise fail("offset", offset, f"must be smaller than every ({every})")
        return offset or None

    def refuse_ended(self, now_ms: int) -> None:
        """InvalidScheduleError when ``end_date`` is already past: a schedule that would never run."""
        if self.end_date is not None and self.end_date < now_ms:
            raise fail("end_date", self.end_date, "is already in the past")

    def next_millis(self, reference_ms: int) -> int | None:
        """The next run after ``reference_ms``: ``every`` later (from ``start_date`` when that is
        later), the first matching second strictly after it for a pattern, the reference itself
        with ``immediately``; None when it would fall after ``end_date`` (inclusive) or after
        what a date holds, or when the dates leave no run at all."""
        if self.exhausted:
            return None
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
        if result is not None and result > MAX_DATE_MS:
            return None  # no date holds it: the schedule has no run left, as past an end date
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
