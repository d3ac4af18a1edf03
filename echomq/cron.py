"""When does a cron pattern run next, in a time zone, the way BullMQ 6.7 would run it?

``compile_schedule(pattern, tz)`` parses once (cached) and returns a ``CronSchedule`` whose
``next_after(ms)`` is the first run strictly after an instant, in epoch milliseconds.

The search walks wall-clock time (year, month, day, hour, minute, second) with precomputed
"next allowed value" tables, then maps the wall time to an instant. Daylight saving time
follows what BullMQ does in whole-hour zones, generalised so it also holds in the 30- and
45-minute zones where cron-parser 5.10.3 is erratic:

* Gap (spring forward): wall times inside the gap do not exist. If the first match after the
  reference lies in the gap, it runs once, shifted forward by the gap (``30 2 * * *`` in
  Europe/Berlin on 2024-03-31 runs at 03:30+02:00); further matches in the same gap are
  dropped, and nothing is shifted when the reference is already past the transition.
* Overlap (fall back): a wall time that occurs twice runs in the first pass. Its second pass
  runs only when the hour field allows all 24 hours, or when the reference itself is already
  inside the second pass.

Where a transition touches midnight, cron-parser steps the calendar rather than the clock and
so sees a different day; that is reproduced, as is one fall-back quirk, so the two runtimes
agree. Near a transition that is not a whole-hour shift at a whole hour (Lord_Howe, Chatham)
the rules above are only the fallback: ``cron_walk`` models cron-parser's path-dependent
search and its answer is given whenever it is a real run that skips no existing one
(docs/cron.md lists each rule and the cases where we keep the right answer instead).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from bisect import bisect_right
from collections.abc import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from .cron_parse import CronFields, parse_pattern
from .cron_walk import accepted, near_odd_transition, walk_next
from .errors import InvalidScheduleError

Wall = tuple[int, int, int, int, int, int]  # year, month, day, hour, minute, second
Zone = int | ZoneInfo  # a fixed offset in seconds, or an IANA zone

_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_HORIZON_MONTHS = 12 * 400
_FIRST_MS = (_dt.date(1, 1, 2).toordinal() - _EPOCH_ORDINAL) * 86_400_000  # a day of margin for offsets
_LAST_MS = (_dt.date(9999, 12, 30).toordinal() - _EPOCH_ORDINAL) * 86_400_000  # the Gregorian calendar repeats every 400 years
_MONTH_LENGTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MAX_DAY_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_FIXED_OFFSET = re.compile(r"utc([+-][0-9]{1,2})(?::([0-9]{2}))?", re.IGNORECASE)
_LOCAL_NAMES = ("default", "local", "system")
_NOT_ZONES = frozenset({"factory", "localtime", "posixrules"})  # files in zoneinfo that Node refuses


def _month_length(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _MONTH_LENGTH[month - 1]


def _wall_seconds(w: Wall) -> int:
    """Seconds since 1970-01-01T00:00 of a wall-clock time read as if it were UTC."""
    days = _dt.date(w[0], w[1], w[2]).toordinal() - _EPOCH_ORDINAL
    return days * 86400 + w[3] * 3600 + w[4] * 60 + w[5]


def _wall_of(seconds: int) -> Wall:
    days, rest = divmod(seconds, 86400)
    day = _dt.date.fromordinal(days + _EPOCH_ORDINAL)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return (day.year, day.month, day.day, hour, minute, second)


@functools.lru_cache(maxsize=256)
def resolve_zone(tz: str | None) -> Zone:
    """Map a tz option to a zone the way BullMQ's luxon reads it (UTC when absent).

    Names are matched case-insensitively (luxon does), ``UTC``/``GMT`` and ``UTC+h[:mm]`` are
    fixed offsets. The process-local names luxon knows (``local``, ``system``, ``default``)
    are refused: they would mean a different zone on every machine.
    """
    if tz is None:
        return 0
    if not isinstance(tz, str):
        raise InvalidScheduleError(f"tz {tz!r}: must be an IANA zone name string")
    lowered = tz.lower()
    if lowered in ("utc", "gmt"):
        return 0
    if lowered in _LOCAL_NAMES:
        raise InvalidScheduleError(f"tz {tz!r}: the process-local zone is not supported; name the zone")
    fixed = _FIXED_OFFSET.fullmatch(tz)
    if fixed:
        hours = int(fixed.group(1))
        minutes = int(fixed.group(2) or 0)
        total = hours * 60 + (-minutes if fixed.group(1).startswith("-") else minutes)
        if abs(total) >= 24 * 60 or minutes >= 60:
            raise InvalidScheduleError(f"tz {tz!r}: offset out of range")
        return total * 60
    if lowered in _NOT_ZONES or lowered.startswith(("posix/", "right/")):
        raise InvalidScheduleError(f"tz {tz!r}: not a time zone BullMQ accepts")
    try:
        return ZoneInfo(tz)  # the exact name: no need to list every zone on disk
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    key = _zone_keys().get(lowered)
    if key is None:
        raise InvalidScheduleError(f"tz {tz!r}: unknown time zone (expected an IANA name such as 'Europe/Berlin')")
    return ZoneInfo(key)


@functools.lru_cache(maxsize=1)
def _zone_keys() -> dict[str, str]:
    return {key.lower(): key for key in available_timezones()}


def _next_table(values: frozenset[int], size: int) -> list[int]:
    """table[x + 1] = the smallest allowed value > x, or -1 (x from -1 to size - 1)."""
    table = [-1] * (size + 1)
    following = -1
    for x in range(size - 1, -2, -1):
        table[x + 1] = following
        if x in values:
            following = x
    return table


class CronSchedule:
    """A compiled pattern in a zone: cheap to ask for the next run again and again."""

    def __init__(self, pattern: str, tz: str | None, fields: CronFields, zone: Zone) -> None:
        self.pattern = pattern
        self.tz = tz
        self.fields = fields
        self.zone = zone
        self._hour_ok = [h in fields.hours for h in range(24)]
        self._minute_ok = [m in fields.minutes for m in range(60)]
        self._second_ok = [s in fields.seconds for s in range(60)]
        self._next_hour = _next_table(fields.hours, 24)
        self._next_minute = _next_table(fields.minutes, 60)
        self._next_second = _next_table(fields.seconds, 60)
        self._first = (min(fields.hours), min(fields.minutes), min(fields.seconds))
        self._month_ok = [False] + [m in fields.months for m in range(1, 13)]
        self._all_hours = len(fields.hours) == 24
        self._days_cache: dict[int, tuple[int, ...]] = {}
        self.satisfiable = self._can_ever_run()

    def __repr__(self) -> str:
        return f"CronSchedule({self.pattern!r}, tz={self.tz!r})"

    # -- calendar ---------------------------------------------------------------------------

    def _can_ever_run(self) -> bool:
        f = self.fields
        if not f.dow_wildcard or f.dom_last:
            return True  # a weekday rule (alone or OR-ed) and "L" always find a day
        return any(d <= _MAX_DAY_IN_MONTH[m - 1] for m in f.months for d in f.dom_days)

    def _day_matches(self, day: int, weekday: int, length: int) -> bool:
        f = self.fields
        dom = day in f.dom_days or (f.dom_last and day == length)
        if f.dow_wildcard:
            return dom
        dow = (weekday in f.dow_days and (f.dow_nth == 0 or (day - 1) // 7 + 1 == f.dow_nth)) or (
            weekday in f.dow_last and day > length - 7)
        return dow if f.dom_wildcard else (dom or dow)

    def _days(self, year: int, month: int) -> tuple[int, ...]:
        key = year * 12 + month
        days = self._days_cache.get(key)
        if days is None:
            length = _month_length(year, month)
            first = (_dt.date(year, month, 1).weekday() + 1) % 7  # Sunday = 0
            days = tuple(d for d in range(1, length + 1) if self._day_matches(d, (first + d - 1) % 7, length))
            if len(self._days_cache) > 2048:
                self._days_cache.clear()
            self._days_cache[key] = days
        return days

    def next_wall(self, w: Wall) -> Wall | None:
        """The first matching wall-clock time strictly after ``w``."""
        year, month, day, hour, minute, second = w
        if self._month_ok[month]:
            days = self._days(year, month)
            if day in days:
                if self._hour_ok[hour]:
                    if self._minute_ok[minute]:
                        s = self._next_second[second + 1]
                        if s >= 0:
                            return (year, month, day, hour, minute, s)
                    m = self._next_minute[minute + 1]
                    if m >= 0:
                        return (year, month, day, hour, m, self._first[2])
                h = self._next_hour[hour + 1]
                if h >= 0:
                    return (year, month, day, h, self._first[1], self._first[2])
            index = bisect_right(days, day)
            if index < len(days):
                return (year, month, days[index]) + self._first
        if not self.satisfiable:
            return None
        for _ in range(_HORIZON_MONTHS):
            month += 1
            if month > 12:
                month, year = 1, year + 1
                if year > 9999:
                    return None
            if self._month_ok[month]:
                days = self._days(year, month)
                if days:
                    return (year, month, days[0]) + self._first
        return None

    def matches_wall(self, w: Wall) -> bool:
        """Does this wall-clock time match every field? (Used by tests and the CLI.)"""
        year, month, day, hour, minute, second = w
        return (self._month_ok[month] and day in self._days(year, month) and self._hour_ok[hour]
                and self._minute_ok[minute] and self._second_ok[second])

    # -- instants ---------------------------------------------------------------------------

    def next_after(self, reference_ms: int) -> int | None:
        """The first run strictly after ``reference_ms`` (epoch ms), or None if there is none."""
        if not _FIRST_MS <= reference_ms < _LAST_MS:
            raise InvalidScheduleError(f"reference {reference_ms!r}: outside the years 1-9999 that dates can hold")
        after = reference_ms // 1000
        zone = self.zone
        if isinstance(zone, int):
            found = self.next_wall(_wall_of(after + zone))
            return None if found is None else (_wall_seconds(found) - zone) * 1000
        result = self._next_zoned(after, zone, reference_ms % 1000 != 0)
        if result is not None and near_odd_transition(zone, after, result):
            walked = walk_next(self, zone, reference_ms)
            if walked != result and accepted(self, zone, reference_ms, walked):
                result = walked  # BullMQ's own answer where it is a real run (cron_walk)
        return None if result is None else result * 1000

    def runs_after(self, reference_ms: int) -> Iterator[int]:
        """Successive runs after ``reference_ms``, each computed from the one before."""
        current = self.next_after(reference_ms)
        while current is not None:
            yield current
            current = self.next_after(current)

    def _next_zoned(self, after: int, zone: ZoneInfo, rounded: bool) -> int | None:
        local = _dt.datetime.fromtimestamp(after, zone)
        wall: Wall = (local.year, local.month, local.day, local.hour, local.minute, local.second)
        found = self.next_wall(wall)
        if rounded and found is not None and local.second == 59 and not self._all_hours:
            found = self._skip_stale_hour(after, found, zone)
        second_pass = local.fold == 1
        if self._all_hours and not second_pass:
            here = _offset(local)
            later = _offset(local.replace(fold=1))
            if later < here:  # the reference is in the first pass of an overlap
                return self._next_in_overlap(after, found, zone, here, later, rounded)
        if found is None:
            return None
        return self._instant(found, after, second_pass, zone, rounded)

    def _skip_stale_hour(self, after: int, found: Wall, zone: ZoneInfo) -> Wall | None:
        """Replicate a cron-parser 5.10.3 quirk so both runtimes agree.

        A reference in the last second before a fall-back transition, with a fractional
        second, makes cron-parser step one second across the transition and remember "skip
        the repeated hour". When the transition day itself does not match, that memory is
        spent on the next matching day instead: its run in the repeated hour is skipped.
        Only whole-hour transitions: in the 30/45-minute zones we keep the correct answer.
        """
        local = _dt.datetime.fromtimestamp(after, zone)
        crossed = _dt.datetime.fromtimestamp(after + 1, zone)
        if local.fold or not crossed.fold or crossed.minute != 0 or _offset(local) - _offset(crossed) != 3600:
            return found  # not the last second before a whole-hour fall-back
        if self._month_ok[crossed.month] and crossed.day in self._days(crossed.year, crossed.month):
            return found
        if found[3] != crossed.hour:
            return found
        return self.next_wall((found[0], found[1], found[2], found[3], 59, 59))

    def _instant(self, w: Wall, after: int, second_pass: bool, zone: ZoneInfo, rounded: bool) -> int | None:
        naive = _wall_seconds(w)
        moment = _dt.datetime(*w, tzinfo=zone)
        first, second = _offset(moment), _offset(moment.replace(fold=1))
        if first == second:
            return naive - first
        if first > second:  # overlap: which pass?
            if second_pass and naive - second - after < 86400:
                return naive - second
            if self._enters_day_in_second_pass(naive, after, zone, first, second, rounded):
                return naive - second
            return naive - first
        # Gap: run shifted forward by the gap, unless a natural run after the gap comes first.
        shifted = naive - first
        change = _transition(naive - second, naive - first, zone)
        following = self.next_wall(_wall_of(change + second - 1))
        natural = None if following is None else self._instant(following, after, second_pass, zone, rounded)
        if ((change + first) % 86400 == 0 or (change + second) % 86400 == 0) and not self._clock_crosses_gap(
                after, change, first, second, rounded):
            return natural  # a gap at midnight: BullMQ steps the calendar over it and never shifts
        return shifted if natural is None else min(shifted, natural)

    def _enters_day_in_second_pass(self, naive: int, after: int, zone: ZoneInfo, first: int, second: int,
                                   rounded: bool) -> bool:
        """A day that starts with a repeated stretch (America/Havana): which pass does BullMQ see?

        cron-parser reaches a new day by a calendar step that keeps the offset of the time it
        stepped from; from a wall time past the repeated stretch that offset is the later one,
        so the day begins in the second pass and the first pass never runs. Stepping from
        before 01:00, or by the clock across midnight, it begins in the first pass.
        """
        day_start = _transition(naive - first, naive - second, zone) + second
        if day_start % 86400:
            return False  # the repeated stretch does not open the day
        ref_naive = after + _offset(_dt.datetime.fromtimestamp(after, zone))
        if ref_naive >= day_start:
            return False  # the reference is on that day already, in its first pass
        if rounded and ref_naive == day_start - 1:
            return False  # one clock second across midnight
        year, month, day = _wall_of(day_start - 86400)[:3]
        if not self._month_ok[month]:  # a month step: from the reference itself, or from a 1st at 00:00
            ref_wall = _wall_of(ref_naive)
            return ref_wall[:2] == (year, month) and not (ref_wall[2] == 1 and ref_naive % 86400 < first - second)
        matches = day in self._days(year, month)
        if ref_naive < day_start - 86400:
            return matches
        if matches:  # the day before runs to its end; only its 23:xx crosses by the clock
            return not (self._hour_ok[23] and (ref_naive - day_start) // 3600 == -1)
        return ref_naive - (day_start - 86400) >= first - second

    def _clock_crosses_gap(self, after: int, change: int, before: int, later: int, rounded: bool) -> bool:
        """Does cron-parser step the clock (not the calendar) into a gap that touches midnight?

        Only then does it shift a skipped time: when the reference is in the last second before
        the gap with a fractional second, or in the hour before the gap, that hour allowed on a
        matching day. When the gap ends at midnight the shifted run lands on the next day, which
        must match too (BullMQ otherwise carries the shift to a later day, a time the pattern
        does not name; we do not copy that and run the next natural time instead).
        """
        if (change + later) % 86400 == 0:
            year, month, day = _wall_of(change + later)[:3]
            if not (self._month_ok[month] and day in self._days(year, month)):
                return False
        if rounded and after == change - 1:
            return True
        local = _wall_of(after + before)
        hour_before = (_wall_of(change + before)[3] - 1) % 24
        if local[3] != hour_before or not self._hour_ok[hour_before] or not self._month_ok[local[1]]:
            return False
        return local[2] in self._days(local[0], local[1]) and change - after <= 3600

    def _next_in_overlap(self, after: int, found: Wall | None, zone: ZoneInfo, before: int,
                         later: int, rounded: bool) -> int | None:
        """Reference in the first pass and all 24 hours allowed: the second pass runs too."""
        change = _transition(after, after + before - later, zone)
        end_of_overlap = change + before  # wall seconds where the repeated stretch ends
        if found is not None and _wall_seconds(found) < end_of_overlap:
            return _wall_seconds(found) - before
        again = self.next_wall(_wall_of(change + later - 1))
        if again is not None and _wall_seconds(again) < end_of_overlap:
            return _wall_seconds(again) - later
        return None if found is None else self._instant(found, after, False, zone, rounded)


def _offset(moment: _dt.datetime) -> int:
    delta = moment.utcoffset()
    return 0 if delta is None else int(delta.total_seconds())


def _transition(low: int, high: int, zone: ZoneInfo) -> int:
    """First epoch second in (low, high] whose offset is the offset at ``high``."""
    target = _offset(_dt.datetime.fromtimestamp(high, zone))
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(_dt.datetime.fromtimestamp(middle, zone)) == target:
            high = middle
        else:
            low = middle
    return high


def compile_schedule(pattern: str, tz: str | None = None) -> CronSchedule:
    """Parse and compile once per (pattern, tz); raises InvalidScheduleError."""
    if not isinstance(pattern, str):
        raise InvalidScheduleError(f"pattern {pattern!r}: must be a string")
    if tz is not None and not isinstance(tz, str):
        raise InvalidScheduleError(f"tz {tz!r}: must be an IANA zone name string")
    return _compile(pattern, tz)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, tz: str | None) -> CronSchedule:
    zone = resolve_zone(tz)
    return CronSchedule(pattern, tz, parse_pattern(pattern), zone)
