"""Dates and counts of repeat options: the ranges every runtime can hold, and dates in the forms
BullMQ 6.7 accepts (docs/protocol.md §4.1).

A time that becomes a job id, a score or a ms field must be an integer a JavaScript ``Date``
holds (``|ms| <= 8.64e15``) and a double represents exactly; a count (``limit``, ``count``)
must stay exact in JSON and Lua (``<= 2**53 - 1``). Anything larger is refused here, by name,
before it reaches a script: ``every=1e300`` would otherwise become a 301-digit job id.

Two ways of reading a date:

* *writing* (``JobScheduler.upsert``): epoch ms >= 0, an aware ``datetime``, or an ISO 8601
  string with an offset; nothing ambiguous is stored;
* *reading* (``calculate_next_millis``, the worker step): also any ISO 8601 string in the forms
  JavaScript's ``Date`` parses, as it parses them (a date alone is UTC, a date-time without an
  offset is the process's local time), and epoch ms down to ``-8.64e15``, because another
  runtime may have stored them and its schedule must still be advanced.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

from ..errors import InvalidScheduleError
from .cron import tzinfo_for

#: The largest epoch ms a JavaScript Date holds (and a double holds exactly: it is below 2**53).
MAX_DATE_MS = 8_640_000_000_000_000
#: The largest integer JSON, JavaScript and Lua all hold exactly (Number.MAX_SAFE_INTEGER).
MAX_SAFE_INTEGER = 2**53 - 1

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_DAY_MS = 86_400_000

# The ECMAScript date-time string format (ISO 8601's subset that Date.parse defines), with the
# variants V8 reads the same way: a space for the T, lower-case t/z, an offset without a colon.
_JS_DATE = re.compile(
    r"(?P<year>[+-]\d{6}|\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?"
    r"(?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?)?"
)


def fail(name: str, value: Any, reason: str) -> InvalidScheduleError:
    """The one shape of a refused repeat option: its name, its value, why."""
    return InvalidScheduleError(f"repeat option {name}={value!r}: {reason}")


def whole(name: str, value: Any, minimum: int, maximum: int) -> int:
    """An integer (or an integral float) within ``minimum..maximum``, else InvalidScheduleError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(name, value, "must be an integer")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise fail(name, value, "must be a whole number")
    if value < minimum:
        raise fail(name, value, f"must be >= {minimum}")
    if value > maximum:
        raise fail(name, value, f"must be <= {maximum}")
    return int(value)


def to_millis(name: str, value: Any, *, reading: bool = False) -> int:
    """Epoch ms of a repeat date: epoch ms, an aware datetime or an ISO 8601 string."""
    if isinstance(value, str):
        value = _read_iso(name, value) if reading else _strict_iso(name, value)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise fail(name, value, "must be timezone-aware (a naive datetime is ambiguous)")
        value = (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    return whole(name, value, -MAX_DATE_MS if reading else 0, MAX_DATE_MS)


def _strict_iso(name: str, value: str) -> _dt.datetime | int:
    """What ``upsert`` takes: an ISO 8601 date-time with an offset (Python reads it; or the
    extended-year form JavaScript reads, for the range check to name)."""
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        extended = _JS_DATE.fullmatch(value)
        if extended is not None and value[:1] in "+-" and extended["zone"] is not None:
            return _read_iso(name, value)  # beyond Python's years: read it so the range check names it
        hint = " (give epoch milliseconds as an int)" if value.strip().lstrip("-").isdigit() else ""
        raise fail(name, value, f"is not an ISO 8601 date{hint}") from None


def _read_iso(name: str, value: str) -> int:
    """Epoch ms of an ISO 8601 string read as JavaScript's ``new Date(value)`` reads it."""
    match = _JS_DATE.fullmatch(value)
    if match is None:
        hint = " (give epoch milliseconds as an int)" if value.strip().lstrip("-").isdigit() else ""
        raise fail(name, value, f"is not an ISO 8601 date{hint}")
    year = int(match["year"])
    month, day = int(match["month"] or 1), int(match["day"] or 1)
    hour, minute = int(match["hour"] or 0), int(match["minute"] or 0)
    second = int(match["second"] or 0)
    millis = int((match["fraction"] or "0")[:3].ljust(3, "0"))
    midnight = hour == 24 and minute == second == millis == 0  # T24:00 is the next midnight
    if (match["year"] == "-000000" or not 1 <= month <= 12 or not 1 <= day <= _days_in(year, month)
            or (hour > 23 and not midnight) or minute > 59 or second > 59):
        raise fail(name, value, "is not an ISO 8601 date")
    wall = (_days_from_civil(year, month, day) * _DAY_MS
            + ((24 if midnight else hour) * 3600 + minute * 60 + second) * 1000 + millis)
    zone = match["zone"]
    if zone is not None and zone not in "Zz":
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60_000
        return wall - offset if zone[0] == "+" else wall + offset
    if zone is not None or match["hour"] is None:
        return wall  # "Z", or a date alone: UTC
    return wall - _local_offset_ms(name, value, wall)


def _local_offset_ms(name: str, value: str, wall: int) -> int:
    """The process zone's offset at a local wall time (the earlier one in a repeated hour)."""
    if not -62_135_596_800_000 <= wall <= 253_402_300_799_999:  # datetime holds years 1-9999 only
        raise fail(name, value, "is a local time outside the years 1-9999")
    naive = _dt.datetime(1970, 1, 1) + _dt.timedelta(milliseconds=wall)
    offset = naive.replace(tzinfo=tzinfo_for("local", local=True)).utcoffset()
    return 0 if offset is None else offset // _dt.timedelta(milliseconds=1)


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, unlike ``datetime``)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468
