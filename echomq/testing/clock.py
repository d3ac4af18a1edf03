"""A clock the test moves: hand it to every component as ``clock=`` and time only passes when you say.

Every timestamp EchoMQ writes comes from its components' ``clock`` (``echomq.clock``): job
timestamps, due times, ``processedOn``/``finishedOn``, scheduler slots, backoff due times, the
clean cutoff. No script reads the server's TIME, so with a ``FakeClock`` the whole queue lives on
the test's time. What still runs on real time (key TTLs, blocking timeouts) is listed in
docs/testing.md; the runners of this package never wait on it.
"""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any

from ..errors import InvalidInputError
from ..schedule.cron import tzinfo_for
from ..schedule.dates import MAX_DATE_MS

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

#: What a clock can be set to: epoch milliseconds, an aware datetime, or an ISO 8601 string
#: with an offset (``"2027-03-28T01:00:00+01:00"``, ``"...Z"``).
Instant = int | _dt.datetime | str


def to_epoch_ms(when: Any, what: str = "time") -> int:
    """Epoch ms of an :data:`Instant`; InvalidInputError naming ``what`` for anything else (a
    naive datetime is refused: it means a different instant on every machine)."""
    value = when
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidInputError(f"{what}={when!r}: not an ISO 8601 date-time") from None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidInputError(f"{what}={when!r}: give a timezone-aware datetime (or an offset in the "
                                    "string): a naive one is a different instant on every machine")
        value = (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{what}={when!r}: must be epoch milliseconds (int), an aware datetime or an "
                                "ISO 8601 string with an offset")
    if not 0 <= value <= MAX_DATE_MS:
        raise InvalidInputError(f"{what}={when!r}: must lie between 1970 and the last date a timestamp holds")
    return value


def duration_ms(ms: int | _dt.timedelta = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0,
                days: float = 0, what: str = "advance") -> int:
    """A span in whole milliseconds from any mix of units; InvalidInputError when negative or not
    a whole number of ms."""
    parts: list[tuple[str, Any, int]] = [("ms", ms, 1), ("seconds", seconds, 1000), ("minutes", minutes, 60_000),
                                         ("hours", hours, 3_600_000), ("days", days, 86_400_000)]
    total = 0.0
    for name, value, unit in parts:
        if isinstance(value, _dt.timedelta) and name == "ms":
            total += value / _dt.timedelta(milliseconds=1)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInputError(f"{what}: {name}={value!r} must be a number")
        total += value * unit
    if total < 0:
        raise InvalidInputError(f"{what}: the span is negative ({total} ms); time only moves forward")
    if total != int(total):
        raise InvalidInputError(f"{what}: the span is {total} ms, not a whole number of milliseconds")
    return int(total)


def wall_clock(epoch_ms: int, tz: str | _dt.tzinfo | None = None) -> _dt.datetime:
    """The aware datetime of ``epoch_ms`` in ``tz`` (a zone name as a ``tz`` repeat option takes it,
    a tzinfo, or None for UTC)."""
    zone = tz if isinstance(tz, _dt.tzinfo) else tzinfo_for(tz)
    return (_EPOCH + _dt.timedelta(milliseconds=epoch_ms)).astimezone(zone)


class FakeClock:
    """A clock that stands still until the test moves it: ``clock()`` is now in epoch ms.

    ``FakeClock("2027-03-27T12:00:00+01:00")`` (or epoch ms, or an aware datetime); then
    ``clock.advance(ms)`` / ``clock.advance(hours=2)`` and ``clock.set(when)``. Pass the same
    instance as ``clock=`` to every Queue, JobScheduler and Worker of the test. Safe to read and
    move from any thread.
    """

    def __init__(self, start: Instant) -> None:
        self._now = to_epoch_ms(start, "FakeClock start")
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self._now

    @property
    def now(self) -> int:
        """Now, in epoch ms (what ``clock()`` returns)."""
        return self._now

    def advance(self, ms: int | _dt.timedelta = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0,
                days: float = 0) -> int:
        """Move forward by the sum of the spans given; return the new now. Nothing runs by itself:
        call ``run_until_idle`` next, or use ``advance_time`` to run everything due on the way."""
        step = duration_ms(ms, seconds=seconds, minutes=minutes, hours=hours, days=days, what="FakeClock.advance")
        with self._lock:
            self._now = to_epoch_ms(self._now + step, "FakeClock.advance")
            return self._now

    def set(self, when: Instant) -> int:
        """Jump to ``when``; return it. Going back is allowed (a test of a clock set back), and
        EchoMQ behaves as it would after such a jump: schedulers never run a slot twice."""
        value = to_epoch_ms(when, "FakeClock.set")
        with self._lock:
            self._now = value
        return value

    def datetime(self, tz: str | _dt.tzinfo | None = None) -> _dt.datetime:
        """Now as an aware datetime in ``tz`` (UTC by default)."""
        return wall_clock(self._now, tz)

    def __repr__(self) -> str:
        return f"FakeClock({self.datetime().isoformat(timespec='milliseconds')!r})"
