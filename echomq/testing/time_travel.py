"""Travelling through time: the clock steps from due time to due time and everything due runs.

``advance_time`` is how a test lives through a night, a week or a daylight-saving change in
milliseconds: at each step the clock is set to the next due time (the earliest delayed job of the
queues: a scheduler's next iteration, a backoff, a delayed job), then everything due runs as a
Worker runs it (``runner``). Each iteration a scheduler step produces is due later and is found
by the next step, so every run of a schedule fires, in order, at the time BullMQ 6.7 would run it.
Setting the clock far ahead and calling ``run_until_idle`` once differs: a scheduler then runs
once, as a worker that was down all that time would, and skips the missed runs.

A rate limiter's window is a Redis TTL, real time: once the clock has passed the window the
traveller ends it, so limited jobs run at the clock times their window allows.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence

from ..errors import InvalidInputError
from ..queue.queue import Queue
from ..types import BackoffStrategy, KeepRule
from .clock import FakeClock, Instant, duration_ms, to_epoch_ms
from .report import JobRun, RunReport, TooManyJobsError
from .runner import Processors, Runner

#: The default bound on the attempts of one ``advance_time`` call (a week of a 1-minute schedule).
DEFAULT_TRAVEL_MAX_JOBS = 100_000


def advance_time(clock: FakeClock, queues: Queue | Sequence[Queue], processors: Processors,
                 ms: int | _dt.timedelta = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0,
                 days: float = 0, until: Instant | None = None, max_jobs: int = DEFAULT_TRAVEL_MAX_JOBS,
                 backoff_strategy: BackoffStrategy | None = None, limiter: Mapping[str, int] | None = None,
                 remove_on_complete: KeepRule | None = None, remove_on_fail: KeepRule | None = None) -> RunReport:
    """Move ``clock`` forward by the span given (or to ``until``), running every job due on the way
    at its due time, in order; return what ran, when (``JobRun.at_ms``, ``JobRun.at`` in the
    schedule's zone). Jobs due now run first. The clock ends exactly at the end of the span.

    Every queue must be built on ``clock`` (``Queue(..., clock=clock)``), so that jobs the
    processors add are stamped with the travelled time; the other arguments are those of
    :func:`run_until_idle`. ``max_jobs`` bounds the attempts of the whole journey.
    """
    if not isinstance(clock, FakeClock):
        raise InvalidInputError(f"clock={clock!r}: advance_time moves a FakeClock (echomq.testing.FakeClock)")
    listed = [queues] if isinstance(queues, Queue) else list(queues) if isinstance(queues, Sequence) else []
    strangers = [q.name for q in listed if isinstance(q, Queue) and q.clock is not clock]
    if strangers:
        raise InvalidInputError(f"queues {strangers} are not built on this clock: build them with clock=clock, or "
                                "the jobs their processors add are stamped with another time")
    span = duration_ms(ms, seconds=seconds, minutes=minutes, hours=hours, days=days, what="advance_time")
    if until is not None:
        if span:
            raise InvalidInputError("advance_time: give a span or until=, not both")
        end = to_epoch_ms(until, "advance_time until")
        if end < clock.now:
            raise InvalidInputError(f"advance_time: until={until!r} is before the clock ({clock!r})")
    else:
        end = to_epoch_ms(clock.now + span, "advance_time")
    runner = Runner(queues, processors, clock=clock, backoff_strategy=backoff_strategy, limiter=limiter,
                    remove_on_complete=remove_on_complete, remove_on_fail=remove_on_fail)
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
        raise InvalidInputError(f"max_jobs={max_jobs!r}: must be an int >= 1")
    runs: list[JobRun] = []
    limited: dict[str, int] = {}
    while True:
        try:
            report = runner.run_until_idle(max_jobs=max_jobs - len(runs)) if len(runs) < max_jobs else RunReport()
        except TooManyJobsError as exc:
            raise TooManyJobsError(f"advance_time: {exc}", RunReport((*runs, *exc.report.runs))) from None
        runs.extend(report.runs)
        limited = dict(report.rate_limited)
        candidates = [t for t in (runner.next_due_ms(), *limited.values()) if t is not None]
        step = min(candidates) if candidates else None
        if step is None or step > end:
            break
        if len(runs) >= max_jobs:
            raise TooManyJobsError(f"advance_time stopped after max_jobs={max_jobs} attempts, at {clock!r}, with "
                                   f"{(end - clock.now) / 3_600_000:.2f} h still to travel and jobs due on the way",
                                   RunReport(tuple(runs), limited))
        clock.set(max(step, clock.now))
        for name, until_ms in limited.items():
            if until_ms <= clock.now:
                runner.lift_rate_limit(name)
    clock.set(end)
    return RunReport(tuple(runs), limited)
