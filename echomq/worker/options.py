"""A Worker's settings, validated once, before anything connects.

The names and units are BullMQ's (docs/protocol.md, the units rule): ``lock_duration``,
``lock_renew_time`` and ``stalled_interval`` in milliseconds, ``drain_delay`` in seconds as
BullMQ has it, ``limiter`` as ``{"max": jobs, "duration": ms}``. The worker-level keep rules
apply to jobs whose own options set none, and follow the same rule as the job options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..protocol.options import validate_keep


def _at_least(field: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"Worker {field}={value!r}: must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int = 1
    lock_duration: int = 30000
    lock_renew_time: int | None = None
    stalled_interval: int = 30000
    max_stalled_count: int = 1
    name: str | None = None
    drain_delay: float = 5.0
    limiter: Mapping[str, int] | None = None
    skip_stalled_check: bool = False
    remove_on_complete: Any = None
    remove_on_fail: Any = None

    def __post_init__(self) -> None:
        _at_least("concurrency", self.concurrency, 1)
        _at_least("lock_duration", self.lock_duration, 1)
        _at_least("stalled_interval", self.stalled_interval, 1)
        _at_least("max_stalled_count", self.max_stalled_count, 0)
        if self.lock_renew_time is not None:
            _at_least("lock_renew_time", self.lock_renew_time, 1)
        if isinstance(self.drain_delay, bool) or not isinstance(self.drain_delay, (int, float)) \
                or self.drain_delay <= 0:
            raise InvalidInputError(f"Worker drain_delay={self.drain_delay!r}: must be a number of seconds > 0")
        if self.limiter is not None and not (isinstance(self.limiter, Mapping)
                                             and {"max", "duration"} <= set(self.limiter)):
            raise InvalidInputError(f"Worker limiter={self.limiter!r}: must be {{'max': n, 'duration': ms}}")
        if self.name is not None and not isinstance(self.name, str):
            raise InvalidInputError(f"Worker name={self.name!r}: must be a str")
        for field in ("remove_on_complete", "remove_on_fail"):
            value = getattr(self, field)
            if value is not None:
                object.__setattr__(self, field, validate_keep(f"Worker {field}", value))
        object.__setattr__(self, "drain_delay", float(self.drain_delay))

    def fetch_args(self) -> list[str]:
        """The worker's part of every fetch's ARGV: lock duration, name (pb), limiter max, duration."""
        limiter = self.limiter or {}
        return [
            str(self.lock_duration),
            self.name or "",
            "" if limiter.get("max") is None else str(limiter["max"]),
            "" if limiter.get("duration") is None else str(limiter["duration"]),
        ]
