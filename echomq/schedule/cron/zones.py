"""Time zones as BullMQ 6.7 reads a ``tz`` option: the one zone resolution of EchoMQ.

Every place that takes a ``tz`` (a job scheduler's repeat options, ``calculate_next_millis``,
the CLI, a scheduler record's local next run) resolves it here, so they all accept and refuse
the same names: IANA names case-insensitively, ``UTC``/``GMT``, and the ``UTC+h[:mm]`` offsets
luxon understands.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from ...errors import InvalidScheduleError

Zone = int | ZoneInfo  # a fixed offset in seconds, or an IANA zone

_FIXED_OFFSET = re.compile(r"utc([+-][0-9]{1,2})(?::([0-9]{2}))?", re.IGNORECASE)
_LOCAL_NAMES = ("default", "local", "system")
_NOT_ZONES = frozenset({"factory", "localtime", "posixrules"})  # files in zoneinfo that Node refuses


def resolve_zone(tz: Any) -> Zone:
    """Map a tz option to a zone the way BullMQ's luxon reads it (UTC when absent).

    Names are matched case-insensitively (luxon does), ``UTC``/``GMT`` and ``UTC+h[:mm]`` are
    fixed offsets. The process-local names luxon knows (``local``, ``system``, ``default``)
    are refused: they would mean a different zone on every machine.
    """
    if tz is None:
        return 0
    if not isinstance(tz, str):
        raise InvalidScheduleError(f"tz {tz!r}: must be an IANA zone name string")
    return _resolve(tz)


@functools.lru_cache(maxsize=256)
def _resolve(tz: str) -> Zone:
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



def tzinfo_for(tz: str | None) -> _dt.tzinfo:
    """The ``tzinfo`` of a tz option (UTC when absent), for showing instants in its zone."""
    zone = resolve_zone(tz)
    return _dt.timezone(_dt.timedelta(seconds=zone)) if isinstance(zone, int) else zone
