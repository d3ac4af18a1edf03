"""A Worker's settings, validated once, before anything connects.

The names and units are BullMQ's (docs/protocol.md, the units rule): ``lock_duration``,
``lock_renew_time`` and ``stalled_interval`` in milliseconds, ``drain_delay`` in seconds as
BullMQ has it, ``limiter`` as ``{"max": jobs, "duration": ms}``, ``metrics`` as
``{"maxDataPoints": n}``. The worker-level keep rules apply to jobs whose own options set none,
and follow the same rule as the job options.

A setting that would break at run time is refused here, naming the argument, rather than
later in a thread where nobody sees it: a renewal period not shorter than the lock (the lock
expires before it is renewed and the job runs twice), a name Redis refuses as a client name
(the marker connection never opens), a drain delay that is not a finite positive number, a
clock or backoff strategy that cannot be called. Periods are at most ``MAX_MS`` (2**31 - 1 ms,
about 24.8 days, the longest timer a BullMQ worker in Node can set), which also keeps every
wait within what Python's threading and Redis's Lua number formatting accept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..clock import system_clock
from ..errors import InvalidInputError
from ..protocol.limits import DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH, DataLimits, check_time_limits
from ..protocol.options import validate_keep
from ..types import BackoffStrategy, Clock

#: The longest period (ms) a Worker accepts: lock duration and renewal, stalled interval, the
#: limiter's duration, and the drain delay (in seconds, so MAX_MS / 1000).
MAX_MS = 2**31 - 1

#: The data points ``metrics={}`` keeps: one a minute for a week (BullMQ's MetricsTime.ONE_WEEK).
METRICS_ONE_WEEK = 10080

#: The most data points a Worker keeps: a minute each, about two years. Bounded because a
#: worker back after a long idle spell pushes a 0 for every idle minute up to this many, in one
#: script call that holds Redis meanwhile.
MAX_METRICS_POINTS = 2**20


def _at_least(field: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum \
            or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise InvalidInputError(f"Worker {field}={value!r}: must be an integer {bound}")
    return value


def client_name_safe(field: str, value: str) -> str:
    """``value`` if Redis accepts it inside a client name (CLIENT SETNAME refuses spaces,
    newlines and any character outside printable ASCII 33..126), else InvalidInputError: the
    Worker names its marker connection after its prefix and name, and a refused name would
    keep that connection from ever opening."""
    bad = sorted({c for c in value if not 33 <= ord(c) <= 126})
    if bad:
        raise InvalidInputError(
            f"Worker {field}={value!r}: Redis refuses {bad} in a client name; use printable ASCII "
            "without spaces (characters 33..126)")
    return value


def _limiter(value: Any) -> Mapping[str, int]:
    """BullMQ's rate limit, exactly ``{"max": jobs >= 1, "duration": ms >= 1}``."""
    if not isinstance(value, Mapping) or set(value) != {"max", "duration"}:
        raise InvalidInputError(f"Worker limiter={value!r}: must be {{'max': jobs, 'duration': ms}}, no other keys")
    for key in ("max", "duration"):
        item = value[key]
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise InvalidInputError(f"Worker limiter={value!r}: {key} must be an integer >= 1")
    if value["duration"] > MAX_MS:
        raise InvalidInputError(f"Worker limiter={value!r}: duration must be at most {MAX_MS} ms")
    return value


def _metrics(value: Any) -> Mapping[str, int]:
    """BullMQ's metrics option ``{"maxDataPoints": n}`` (n defaults to a week of minutes)."""
    if not isinstance(value, Mapping) or not set(value) <= {"maxDataPoints"}:
        raise InvalidInputError(f"Worker metrics={value!r}: must be {{'maxDataPoints': n}}, no other keys")
    points = value.get("maxDataPoints", METRICS_ONE_WEEK)
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_METRICS_POINTS:
        raise InvalidInputError(
            f"Worker metrics={value!r}: maxDataPoints must be an integer between 1 and {MAX_METRICS_POINTS}")
    return {"maxDataPoints": points}


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
    backoff_strategy: BackoffStrategy | None = None
    clock: Clock = system_clock
    max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES
    max_data_depth: int | None = DEFAULT_MAX_DATA_DEPTH
    #: ``{"maxDataPoints": n}`` to count finished jobs per minute (docs/protocol.md §1.2); None: none.
    metrics: Mapping[str, int] | None = None
    #: At concurrency 1, how long (µs) the processing thread polls for each hot-path reply before
    #: it sleeps on the socket (transport/reply_wait.py); 0 never spins. Unused above 1.
    reply_spin_us: int = 250
    #: Default time limits (ms) of the jobs whose options set none (docs/worker.md): past the
    #: soft one ``job.cancelled`` turns true, at the hard one the attempt fails without its thread.
    time_limit_ms: int | None = None
    soft_time_limit_ms: int | None = None
    #: The two limits above, checked: a job whose stored data is over them fails unrun.
    data_limits: DataLimits = dataclasses.field(init=False, repr=False, compare=False, default=DataLimits())

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_limits", DataLimits.checked("Worker", self.max_data_bytes,
                                                                   self.max_data_depth))
        _at_least("concurrency", self.concurrency, 1)
        _at_least("lock_duration", self.lock_duration, 1, MAX_MS)
        _at_least("stalled_interval", self.stalled_interval, 1, MAX_MS)
        _at_least("max_stalled_count", self.max_stalled_count, 0)
        _at_least("reply_spin_us", self.reply_spin_us, 0, 10_000)
        for limit in ("time_limit_ms", "soft_time_limit_ms"):
            if getattr(self, limit) is not None:
                _at_least(limit, getattr(self, limit), 1, MAX_MS)
        check_time_limits("Worker ", self.soft_time_limit_ms, self.time_limit_ms, InvalidInputError)
        if self.lock_renew_time is not None:
            _at_least("lock_renew_time", self.lock_renew_time, 1, MAX_MS)
            if self.lock_renew_time >= self.lock_duration:
                raise InvalidInputError(
                    f"Worker lock_renew_time={self.lock_renew_time!r}: must be shorter than lock_duration="
                    f"{self.lock_duration!r}, or the lock expires before it is renewed and the job runs twice")
        delay = self.drain_delay
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay) \
                or not 0 < delay <= MAX_MS / 1000:
            raise InvalidInputError(
                f"Worker drain_delay={delay!r}: must be a finite number of seconds > 0 and <= {MAX_MS / 1000}")
        if self.limiter is not None:
            _limiter(self.limiter)
        if self.metrics is not None:
            object.__setattr__(self, "metrics", _metrics(self.metrics))
        if self.name is not None:
            if not isinstance(self.name, str):
                raise InvalidInputError(f"Worker name={self.name!r}: must be a str")
            client_name_safe("name", self.name)
        if not isinstance(self.skip_stalled_check, bool):
            raise InvalidInputError(f"Worker skip_stalled_check={self.skip_stalled_check!r}: must be True or False")
        if self.backoff_strategy is not None and not callable(self.backoff_strategy):
            raise InvalidInputError(f"Worker backoff_strategy={self.backoff_strategy!r}: must be callable "
                                    "(attempts_made, type, error, job) -> ms, or None")
        if not callable(self.clock):
            raise InvalidInputError(f"Worker clock={self.clock!r}: must be callable () -> epoch ms")
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

    def metrics_arg(self) -> str:
        """moveToFinished's ARGV[18]: the data points kept, "" when no metrics are collected."""
        return "" if self.metrics is None else str(self.metrics["maxDataPoints"])
