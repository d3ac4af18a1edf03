"""A compiled pattern's calendar: which wall-clock times it names, as lookup tables.

``CalendarTables`` answers "does this wall time match" and "which is the first matching wall
time after this one" with precomputed next-allowed-value tables and no time zone at all. The
evaluator (``evaluate``) maps wall times to instants in a zone; the model of cron-parser's walk
(``walk``) steps through the same tables.
"""

from __future__ import annotations

import datetime as _dt
from bisect import bisect_right

from .parse import CronFields

Wall = tuple[int, int, int, int, int, int]  # year, month, day, hour, minute, second

EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_HORIZON_MONTHS = 12 * 400
_MONTH_LENGTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MAX_DAY_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def month_length(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _MONTH_LENGTH[month - 1]


def wall_seconds(w: Wall) -> int:
    """Seconds since 1970-01-01T00:00 of a wall-clock time read as if it were UTC."""
    days = _dt.date(w[0], w[1], w[2]).toordinal() - EPOCH_ORDINAL
    return days * 86400 + w[3] * 3600 + w[4] * 60 + w[5]


def wall_of(seconds: int) -> Wall:
    days, rest = divmod(seconds, 86400)
    day = _dt.date.fromordinal(days + EPOCH_ORDINAL)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return (day.year, day.month, day.day, hour, minute, second)


def next_table(values: frozenset[int], size: int) -> list[int]:
    """table[x + 1] = the smallest allowed value > x, or -1 (x from -1 to size - 1)."""
    table = [-1] * (size + 1)
    following = -1
    for x in range(size - 1, -2, -1):
        table[x + 1] = following
        if x in values:
            following = x
    return table



class CalendarTables:
    """The value tables of one pattern: ``hour_ok[h]``, ``next_hour[h + 1]`` (the next allowed
    hour after h, -1 if none), the same for minutes and seconds, ``month_ok[m]``, ``first``
    (the first allowed hour, minute, second) and the matching days of any month."""

    def __init__(self, fields: CronFields) -> None:
        self.fields = fields
        self.hour_ok = [h in fields.hours for h in range(24)]
        self.minute_ok = [m in fields.minutes for m in range(60)]
        self.second_ok = [s in fields.seconds for s in range(60)]
        self.next_hour = next_table(fields.hours, 24)
        self.next_minute = next_table(fields.minutes, 60)
        self.next_second = next_table(fields.seconds, 60)
        self.first = (min(fields.hours), min(fields.minutes), min(fields.seconds))
        self.month_ok = [False] + [m in fields.months for m in range(1, 13)]
        self.all_hours = len(fields.hours) == 24
        self._days_cache: dict[int, tuple[int, ...]] = {}
        self.satisfiable = self._can_ever_run()


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

    def days(self, year: int, month: int) -> tuple[int, ...]:
        key = year * 12 + month
        days = self._days_cache.get(key)
        if days is None:
            length = month_length(year, month)
            first = (_dt.date(year, month, 1).weekday() + 1) % 7  # Sunday = 0
            days = tuple(d for d in range(1, length + 1) if self._day_matches(d, (first + d - 1) % 7, length))
            if len(self._days_cache) > 2048:
                self._days_cache.clear()
            self._days_cache[key] = days
        return days

    def next_wall(self, w: Wall) -> Wall | None:
        """The first matching wall-clock time strictly after ``w``."""
        year, month, day, hour, minute, second = w
        if self.month_ok[month]:
            days = self.days(year, month)
            if day in days:
                if self.hour_ok[hour]:
                    if self.minute_ok[minute]:
                        s = self.next_second[second + 1]
                        if s >= 0:
                            return (year, month, day, hour, minute, s)
                    m = self.next_minute[minute + 1]
                    if m >= 0:
                        return (year, month, day, hour, m, self.first[2])
                h = self.next_hour[hour + 1]
                if h >= 0:
                    return (year, month, day, h, self.first[1], self.first[2])
            index = bisect_right(days, day)
            if index < len(days):
                return (year, month, days[index], *self.first)
        if not self.satisfiable:
            return None
        for _ in range(_HORIZON_MONTHS):
            month += 1
            if month > 12:
                month, year = 1, year + 1
                if year > 9999:
                    return None
            if self.month_ok[month]:
                days = self.days(year, month)
                if days:
                    return (year, month, days[0], *self.first)
        return None

    def matches_wall(self, w: Wall) -> bool:
        """Does this wall-clock time match every field? (Used by tests and the CLI.)"""
        year, month, day, hour, minute, second = w
        return (self.month_ok[month] and day in self.days(year, month) and self.hour_ok[hour]
                and self.minute_ok[minute] and self.second_ok[second])

    # -- instants ---------------------------------------------------------------------------
