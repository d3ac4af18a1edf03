"""BullMQ's clock walk, for the days whose DST transition is not on a whole hour.

In Australia/Lord_Howe (30-minute shift), Pacific/Chatham (transitions at 02:45) and
America/St_Johns before 2011 (transitions at 00:01), cron-parser 5.10.3 gives answers that no
simple rule predicts, because its search is a walk whose result depends on the path taken.
This module models that walk from its observed behaviour, so both runtimes agree there, and
``accepted`` decides whether the walk's answer is one we may give: only a real matching wall
time after the reference that skips no existing run (a second pass of a repeated stretch and
a time inside a gap are the only runs it may leave out). Anything else (a run skipped, no run,
a run at or before the reference) is a cron-parser error, and the caller keeps its own rule.

The walk, as measured (luxon semantics underneath):

* The reference is rounded up to the next whole second (one second added if it had
  milliseconds), then the fields are checked coarse to fine: month, day, hour, minute, second.
* Moving on by a month or a day is calendar arithmetic: the same wall time on the next day or
  month, then its first second (00:00:00 of that day, or of the 1st).
* Moving on by an hour, a minute or a second adds that much real time and truncates to the
  start of the unit on the wall clock. Across a transition that is not on a whole hour the
  truncation lands somewhere odd: from 01:40+10:30 in Lord_Howe one hour later is
  03:10+11:00, truncated to 03:00 (the hour 02 was never visited).
* Setting a field (the next allowed minute, say) keeps the other wall fields. A wall time is
  read back with the current offset when that offset is valid there; a time inside a gap
  moves forward by the gap (02:10 -> 02:40+11:00).
* When a real-time step moves the wall clock forward by two hours or more while the offset
  grew (a gap was crossed), the landing hour stands in for the skipped hours: it is accepted
  when any of them is allowed. When a step lands on the same wall hour at :00:00 (the clock
  went back), that hour is passed over once, by one more hour step. Neither applies when the
  hour field allows all 24 hours.
* An hour that is not allowed is left for the next allowed one directly, except on a day
  whose offset changes, where the walk steps one hour at a time and stops once the wall hour
  reaches or passes the target; then minute and second restart at their first allowed value.
* A result equal to the reference moves on by one second; after 10,000 checks it gives up.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import functools
from zoneinfo import ZoneInfo

from .tables import EPOCH_ORDINAL, CalendarTables

_STEP_LIMIT = 10_000
_SCAN = 6 * 3600  # transitions are months apart: sampling every 6 hours finds each one


def _offset_at(t: int, zone: ZoneInfo) -> int:
    delta = _dt.datetime.fromtimestamp(t, zone).utcoffset()
    return 0 if delta is None else int(delta.total_seconds())


@functools.lru_cache(maxsize=512)
def odd_transitions(zone: ZoneInfo, year: int) -> tuple[int, ...]:
    """Epoch seconds of the zone's transitions in a year that are not whole-hour shifts at a
    whole hour of the clock (where the walk and our rules part ways)."""
    if not 1 < year < 9999:
        return ()  # no room for a day of margin; cron-parser's luxon stops at year 9999 too
    start = (_dt.date(year, 1, 1).toordinal() - EPOCH_ORDINAL) * 86400 - 86400
    stop = start + 368 * 86400
    found = []
    before = _offset_at(start, zone)
    t = start
    while t < stop:
        after = _offset_at(t + _SCAN, zone)
        if after != before:
            low, high = t, t + _SCAN
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _offset_at(middle, zone) == before else (low, middle)
            if abs(after - before) != 3600 or (high + before) % 3600:
                found.append(high)
            before = after
        t += _SCAN
    return tuple(found)


def near_odd_transition(zone: ZoneInfo, reference: int, result: int) -> bool:
    """Can the walk's path from ``reference`` to ``result`` (epoch seconds) touch an odd transition?

    Its steps truncate to the wall hour and may read a wall time back with the earlier offset,
    so a transition up to three hours before the reference counts; one after our result does
    not (the walk could then only skip that result, which ``accepted`` refuses).
    """
    low, high = reference - 3 * 3600, result
    first = _dt.date.fromordinal(low // 86400 + EPOCH_ORDINAL).year
    last = _dt.date.fromordinal(high // 86400 + EPOCH_ORDINAL).year
    return any(low <= t <= high for year in range(first, last + 1) for t in odd_transitions(zone, year))


class _Walk:
    """One search from a reference: an instant (epoch seconds) and what the walk remembers."""

    def __init__(self, schedule: CalendarTables, zone: ZoneInfo, second: int) -> None:
        self.schedule = schedule
        self.zone = zone
        self.t = second
        self.partial = not schedule.all_hours
        self.landing: tuple[int, int] | None = None  # (first skipped hour, landing hour)
        self.passed_over: int | None = None  # a wall hour the clock went back into

    # -- reading and writing the wall clock ----------------------------------------------

    def local(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self.t, self.zone)

    def read_back(self, wall: _dt.datetime, prefer: int) -> int:
        """The instant of a naive wall time, keeping offset ``prefer`` where it is valid."""
        naive = (wall.toordinal() - EPOCH_ORDINAL) * 86400 + wall.hour * 3600 + wall.minute * 60 + wall.second
        guess = _offset_at(naive - prefer, self.zone)
        if guess == prefer:
            return naive - prefer
        other = _offset_at(naive - guess, self.zone)
        if other == guess:
            return naive - guess
        return naive - min(guess, other)  # inside a gap: forward by the gap

    def set_wall(self, **fields: int) -> None:
        local = self.local()
        self.t = self.read_back(local.replace(tzinfo=None, **fields), _offset_at(self.t, self.zone))

    def step(self, seconds: int) -> None:
        """Real time forward, truncated to the unit on the wall clock; note a crossed gap or
        a clock that went back onto the same hour."""
        before = self.local()
        self.t += seconds
        if seconds > 1:
            moved = self.local()
            cut = moved.replace(tzinfo=None, second=0)
            if seconds == 3600:
                cut = cut.replace(minute=0)
            self.t = self.read_back(cut, _offset_at(self.t, self.zone))
        after = self.local()
        advance = (after.hour - before.hour) % 24
        grew = after.utcoffset() > before.utcoffset()  # type: ignore[operator]
        if grew and advance >= 2:
            if self.partial:
                self.landing = ((before.hour + 1) % 24, after.hour)
        elif advance == 0 and after.minute == 0 and after.second == 0 and self.partial:
            self.passed_over = after.hour

    def calendar_step(self, months: int) -> None:
        """The same wall time a day (months=0) or a month later, then the start of that day/month."""
        local = self.local()
        wall = local.replace(tzinfo=None)
        if months:
            year, month = (wall.year + 1, 1) if wall.month == 12 else (wall.year, wall.month + 1)
            length = calendar.monthrange(year, month)[1]
            wall = wall.replace(year=year, month=month, day=min(wall.day, length))
        else:
            wall = wall + _dt.timedelta(days=1)
        self.t = self.read_back(wall, _offset_at(self.t, self.zone))
        moved = self.local().replace(tzinfo=None, hour=0, minute=0, second=0)
        if months:
            moved = moved.replace(day=1)
        self.t = self.read_back(moved, _offset_at(self.t, self.zone))

    def offset_changes_today(self) -> bool:
        """Does the offset at the day's first instant differ from the one just before the next
        day's first instant? (A gap at midnight can make that "no" on the day of the gap.)"""
        midnight = self.local().replace(tzinfo=None, hour=0, minute=0, second=0)
        first = self.read_back(midnight, _offset_at(self.t, self.zone))
        first_offset = _offset_at(first, self.zone)
        following = self.read_back(midnight + _dt.timedelta(days=1), first_offset)
        following = self.read_back(_dt.datetime.fromtimestamp(following, self.zone).replace(
            tzinfo=None, hour=0, minute=0, second=0), _offset_at(following, self.zone))
        return first_offset != _offset_at(following - 1, self.zone)

    # -- the search ----------------------------------------------------------------------

    def hour_accepted(self) -> bool:
        s = self.schedule
        hour = self.local().hour
        if self.landing is not None and self.landing[1] == hour:
            skipped = self.landing[0]
            while skipped != hour:
                if s.hour_ok[skipped]:
                    return True
                skipped = (skipped + 1) % 24
        if self.passed_over == hour:
            self.passed_over = None
            self.step(3600)
            return False
        if s.hour_ok[hour]:
            return True
        self.landing = None
        target = s.next_hour[hour + 1]
        if target < 0:
            self.calendar_step(0)
            return False
        if self.offset_changes_today():
            for _ in range(target - hour):
                self.step(3600)
                if self.local().hour >= target:
                    break
        else:
            self.set_wall(hour=target)
        self.set_wall(minute=s.first[1])
        self.set_wall(second=s.first[2])
        return False

    def run(self, reference_ms: int) -> int | None:
        s = self.schedule
        if reference_ms % 1000:
            self.step(1)
        for _ in range(_STEP_LIMIT - 1):
            local = self.local()
            if not s.month_ok[local.month]:
                self.calendar_step(1)
            elif local.day not in s.days(local.year, local.month):
                self.calendar_step(0)
            elif not self.hour_accepted():
                continue
            elif not s.minute_ok[local.minute]:
                minute = s.next_minute[local.minute + 1]
                if minute < 0:
                    self.step(3600)
                    minute = s.first[1]
                self.set_wall(minute=minute)
                self.set_wall(second=s.first[2])
            elif not s.second_ok[local.second]:
                second = s.next_second[local.second + 1]
                if second < 0:
                    self.step(60)
                    second = s.first[2]
                self.set_wall(second=second)
            elif self.t * 1000 == reference_ms:
                self.step(1)
            else:
                return self.t
        return None


def walk_next(schedule: CalendarTables, zone: ZoneInfo, reference_ms: int) -> int | None:
    """Where cron-parser's walk from ``reference_ms`` ends (epoch seconds), or None if it gives up."""
    try:
        return _Walk(schedule, zone, reference_ms // 1000).run(reference_ms)
    except (OverflowError, ValueError):
        return None  # walked past the year 9999: no answer of its own, the caller's rules stand


def accepted(schedule: CalendarTables, zone: ZoneInfo, reference_ms: int, answer: int | None) -> bool:
    """Is the walk's answer a real run that leaves out no existing run?

    It must lie after the reference, its wall time must match, and no earlier instant after the
    reference may match on a wall time that exists, other than the second pass of a repeated
    stretch the reference is not already in (BullMQ may skip those, as in whole-hour zones).
    """
    if answer is None or answer <= reference_ms // 1000:
        return False
    local = _dt.datetime.fromtimestamp(answer, zone)
    if not schedule.matches_wall((local.year, local.month, local.day, local.hour, local.minute, local.second)):
        return False
    return not skips_existing_run(schedule, zone, reference_ms, answer)


def skips_existing_run(schedule: CalendarTables, zone: ZoneInfo, reference_ms: int, answer: int) -> bool:
    """Does a matching instant on an existing wall time lie between the reference and ``answer``
    (epoch seconds), not counting a second pass the reference is not already in?"""
    after = reference_ms // 1000
    ref_local = _dt.datetime.fromtimestamp(after, zone)
    in_second_pass = ref_local.fold == 1
    wall = schedule.next_wall((ref_local.year, ref_local.month, ref_local.day, ref_local.hour, ref_local.minute,
                               ref_local.second))
    while wall is not None:
        moment = _dt.datetime(*wall)
        first = _offset_of(moment, 0, zone)
        second = _offset_of(moment, 1, zone)
        naive = (moment.toordinal() - EPOCH_ORDINAL) * 86400 + moment.hour * 3600 + moment.minute * 60 + moment.second
        if naive - max(first, second) >= answer:
            return False
        if first == second:
            instants = [naive - first]
        elif first > second:  # repeated: the first pass, and the second only from inside it
            instants = [naive - first] + ([naive - second] if in_second_pass else [])
        else:
            instants = []  # inside a gap: no such wall time
        if any(after < instant < answer for instant in instants):
            return True
        wall = schedule.next_wall(wall)
    return False


def _offset_of(moment: _dt.datetime, fold: int, zone: ZoneInfo) -> int:
    delta = moment.replace(tzinfo=zone, fold=fold).utcoffset()
    return 0 if delta is None else int(delta.total_seconds())
