"""Time zones as BullMQ 6.7 reads a ``tz`` option: the one zone resolution of EchoMQ.

Every place that takes a ``tz`` (a job scheduler's repeat options, ``calculate_next_millis``,
the CLI, a scheduler record's local next run) resolves it here, so they all accept and refuse
the same names: IANA names case-insensitively, ``UTC``/``GMT``, and the ``UTC+h[:mm]`` offsets
luxon understands.

The process-local names luxon knows (``local``, ``system``, ``default``, any case) are read only
where schedules another runtime stored are read (``local=True``): there they mean this process's
zone, found as Node finds its own: ``TZ`` naming a zone (``:Europe/Berlin``, a zone file's path),
a POSIX rule without daylight saving (``XYZ3``: 3 hours west), anything else UTC; without ``TZ``,
``/etc/localtime``. Writing one is refused: it would be a different zone on every machine.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from ...errors import InvalidScheduleError

Zone = int | ZoneInfo  # a fixed offset in seconds, or an IANA zone

_FIXED_OFFSET = re.compile(r"utc([+-][0-9]{1,2})(?::([0-9]{2}))?", re.IGNORECASE)
_LOCAL_NAMES = ("default", "local", "system")
_NOT_ZONES = frozenset({"factory", "localtime", "posixrules"})  # files in zoneinfo that Node refuses
# A POSIX TZ rule: a standard-time name and its offset west of UTC, then maybe a DST part.
_POSIX_RULE = re.compile(r"(?:[A-Za-z]{3,}|<[A-Za-z0-9+-]+>)([+-]?)(\d{1,2})(?::(\d{1,2})(?::(\d{1,2}))?)?(.*)")
_LOCALTIME = Path("/etc/localtime")


def resolve_zone(tz: Any, *, local: bool = False) -> Zone:
    """Map a tz option to a zone the way BullMQ's luxon reads it (UTC when absent).

    Names are matched case-insensitively (luxon does), ``UTC``/``GMT`` and ``UTC+h[:mm]`` are
    fixed offsets. The process-local names luxon knows (``local``, ``system``, ``default``)
    are this process's zone with ``local=True`` (reading what another runtime stored), else
    refused: they would mean a different zone on every machine.
    """
    if tz is None:
        return 0
    if not isinstance(tz, str):
        raise InvalidScheduleError(f"tz {tz!r}: must be an IANA zone name string")
    if local and is_local_name(tz):
        return local_zone()
    return _resolve(tz)


def is_local_name(tz: str) -> bool:
    """True for luxon's names of the process zone: ``local``, ``system``, ``default`` (any case)."""
    return tz.lower() in _LOCAL_NAMES


def local_zone() -> Zone:
    """This process's zone, as Node reads its own: from ``TZ`` when set, else /etc/localtime."""
    return _local_zone(os.environ.get("TZ"))


@functools.lru_cache(maxsize=16)
def _local_zone(tz_env: str | None) -> Zone:
    if tz_env is None:
        return _system_zone()
    name = tz_env.removeprefix(":")
    if not name:
        return 0  # an empty TZ is UTC, for glibc and for Node alike
    try:
        if name.startswith("/"):
            with open(name, "rb") as file:
                return ZoneInfo.from_file(file, key=name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    rule = _POSIX_RULE.fullmatch(name)
    if rule is None:
        return 0  # not a zone and not a rule: glibc and Node fall back to UTC
    sign, hours, minutes, seconds, daylight = rule.groups()
    if daylight:
        raise InvalidScheduleError(f"tz 'local': TZ={tz_env!r} is a POSIX rule with daylight saving, which "
                                   "EchoMQ cannot read; set TZ to a zone name such as 'Europe/Berlin'")
    west = int(hours) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)
    return west if sign == "-" else -west  # POSIX offsets count hours west of UTC


def _system_zone() -> Zone:
    """/etc/localtime: the zone its link names, else the file itself, else UTC (no file)."""
    try:
        target = _LOCALTIME.resolve(strict=True)
    except OSError:
        return 0
    parts = target.parts
    if "zoneinfo" in parts:
        key = "/".join(parts[len(parts) - parts[::-1].index("zoneinfo"):])
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    try:
        with open(target, "rb") as file:
            return ZoneInfo.from_file(file, key="localtime")
    except (ValueError, OSError):
        return 0


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



def tzinfo_for(tz: str | None, *, local: bool = False) -> _dt.tzinfo:
    """The ``tzinfo`` of a tz option (UTC when absent), for showing instants in its zone."""
    zone = resolve_zone(tz, local=local)
    return _dt.timezone(_dt.timedelta(seconds=zone)) if isinstance(zone, int) else zone
