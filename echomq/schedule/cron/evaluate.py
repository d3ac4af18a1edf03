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
the rules above are only the fallback: ``walk`` models cron-parser's path-dependent
search and its answer is given whenever it is a real run that skips no existing one
(docs/cron.md lists each rule and the cases where we keep the right answer instead).
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Iterator
from zoneinfo import ZoneInfo

from ...errors import InvalidScheduleError
from .parse import CronFields, parse_pattern
from .tables import EPOCH_ORDINAL, CalendarTables, Wall, wall_of, wall_seconds
from .walk import accepted, near_odd_transition, walk_next
from .zones import Zone, is_local_name, local_zone, resolve_zone

_FIRST_MS = (_dt.date(1, 1, 2).toordinal() - EPOCH_ORDINAL) * 86_400_000  # a day of margin for offsets
# The last day a reference may fall on (the Gregorian calendar repeats every 400 years).
_LAST_MS = (_dt.date(9999, 12, 30).toordinal() - EPOCH_ORDINAL) * 86_400_000
# The last epoch second of the year 9999 in UTC: no run may fall after it.
_LAST_SECOND = (_dt.date(9999, 12, 31).toordinal() - EPOCH_ORDINAL + 1) * 86_400 - 1


class CronSchedule(CalendarTables):
    """A compiled pattern in a zone: cheap to ask for the next run again and again."""

    def __init__(self, pattern: str, tz: str | None, fields: CronFields, zone: Zone) -> None:
        super().__init__(fields)
        self.pattern = pattern
        self.tz = tz
        self.zone = zone

    def __repr__(self) -> str:
        return f"CronSchedule({self.pattern!r}, tz={self.tz!r})"

    # -- calendar ---------------------------------------------------------------------------


    def next_after(self, reference_ms: int) -> int | None:
        """The first run strictly after ``reference_ms`` (epoch ms), or None if there is none."""
        if not _FIRST_MS <= reference_ms < _LAST_MS:
            raise InvalidScheduleError(f"reference {reference_ms!r}: outside the years 1-9999 that dates can hold")
        after = reference_ms // 1000
        zone = self.zone
        try:
            if isinstance(zone, int):
                found = self.next_wall(wall_of(after + zone))
                return None if found is None else self._in_range((wall_seconds(found) - zone), reference_ms)
            result = self._next_zoned(after, zone, reference_ms % 1000 != 0)
        except (OverflowError, ValueError):  # a wall time past the year 9999 (a zone west of UTC)
            raise self._beyond(reference_ms) from None
        if result is not None:
            self._in_range(result, reference_ms)
        if result is not None and near_odd_transition(zone, after, result):
            walked = walk_next(self, zone, reference_ms)
            if walked != result and accepted(self, zone, reference_ms, walked):
                result = walked  # BullMQ's own answer where it is a real run (cron_walk)
        return None if result is None else result * 1000

    @staticmethod
    def _beyond(reference_ms: int) -> InvalidScheduleError:
        return InvalidScheduleError(f"reference {reference_ms!r}: the next run falls after the year 9999, "
                                    "beyond what dates can hold")

    def _in_range(self, seconds: int, reference_ms: int) -> int:
        """``seconds`` in ms, if an instant of the years 1-9999 (UTC); a later run (a zone west of
        UTC near the end of 9999) is InvalidScheduleError, not a time no reader could show."""
        if seconds > _LAST_SECOND:
            raise self._beyond(reference_ms)
        return seconds * 1000

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
        if rounded and found is not None and local.second == 59 and not self.all_hours:
            found = self._skip_stale_hour(after, found, zone)
        second_pass = local.fold == 1
        if self.all_hours and not second_pass:
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
        if self.month_ok[crossed.month] and crossed.day in self.days(crossed.year, crossed.month):
            return found
        if found[3] != crossed.hour:
            return found
        return self.next_wall((found[0], found[1], found[2], found[3], 59, 59))

    def _instant(self, w: Wall, after: int, second_pass: bool, zone: ZoneInfo, rounded: bool) -> int | None:
        naive = wall_seconds(w)
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
        following = self.next_wall(wall_of(change + second - 1))
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
        year, month, day = wall_of(day_start - 86400)[:3]
        if not self.month_ok[month]:  # a month step: from the reference itself, or from a 1st at 00:00
            ref_wall = wall_of(ref_naive)
            return ref_wall[:2] == (year, month) and not (ref_wall[2] == 1 and ref_naive % 86400 < first - second)
        matches = day in self.days(year, month)
        if ref_naive < day_start - 86400:
            return matches
        if matches:  # the day before runs to its end; only its 23:xx crosses by the clock
            return not (self.hour_ok[23] and (ref_naive - day_start) // 3600 == -1)
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
            year, month, day = wall_of(change + later)[:3]
            if not (self.month_ok[month] and day in self.days(year, month)):
                return False
        if rounded and after == change - 1:
            return True
        local = wall_of(after + before)
        hour_before = (wall_of(change + before)[3] - 1) % 24
        if local[3] != hour_before or not self.hour_ok[hour_before] or not self.month_ok[local[1]]:
            return False
        return local[2] in self.days(local[0], local[1]) and change - after <= 3600

    def _next_in_overlap(self, after: int, found: Wall | None, zone: ZoneInfo, before: int,
                         later: int, rounded: bool) -> int | None:
        """Reference in the first pass and all 24 hours allowed: the second pass runs too."""
        change = _transition(after, after + before - later, zone)
        end_of_overlap = change + before  # wall seconds where the repeated stretch ends
        if found is not None and wall_seconds(found) < end_of_overlap:
            return wall_seconds(found) - before
        again = self.next_wall(wall_of(change + later - 1))
        if again is not None and wall_seconds(again) < end_of_overlap:
            return wall_seconds(again) - later
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


def compile_schedule(pattern: str, tz: str | None = None, *, local: bool = False) -> CronSchedule:
    """Parse and compile once per (pattern, tz); raises InvalidScheduleError.

    ``local=True`` reads luxon's process-local zone names (``local``, ``system``, ``default``)
    as this process's zone (``zones.local_zone``), for schedules another runtime stored.
    """
    if not isinstance(pattern, str):
        raise InvalidScheduleError(f"pattern {pattern!r}: must be a string")
    if tz is not None and not isinstance(tz, str):
        raise InvalidScheduleError(f"tz {tz!r}: must be an IANA zone name string")
    if local and tz is not None and is_local_name(tz):
        return _compile_in(pattern, tz, local_zone())  # the zone is looked up anew: TZ may change
    return _compile(pattern, tz)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, tz: str | None) -> CronSchedule:
    zone = resolve_zone(tz)
    return CronSchedule(pattern, tz, parse_pattern(pattern), zone)


@functools.lru_cache(maxsize=64)
def _compile_in(pattern: str, tz: str, zone: Zone) -> CronSchedule:
    return CronSchedule(pattern, tz, parse_pattern(pattern), zone)
