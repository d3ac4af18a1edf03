"""echomq.testing: test your schedules and jobs in milliseconds, deterministically (docs/testing.md).

- :class:`FakeClock`: time under the test's control; pass it as ``clock=`` to every component.
- :func:`run_until_idle`: run every due job in the calling thread, as a Worker would; a
  :class:`RunReport` of :class:`JobRun` says what ran.
- :func:`advance_time`: step the clock from due time to due time, running everything due.
- :func:`eager`: jobs run as they are added (view tests).
- :func:`record_events`: the events a queue's stream received, without a thread.
- the pytest plugin (``echomq.testing.pytest_plugin``, registered automatically): fixtures
  ``echomq_connection``, ``echomq_queue_name``, ``echomq_queue``, ``echomq_clock``, and each
  test on a Redis of its own (``isolation``: a fresh fakeredis for a Django or Flask project
  under test, every queue a test wrote deleted on a real one).

Like ``echomq`` itself, nothing is imported until a name is first used: the pytest plugin loads
this package in every test session, and must cost nothing where it is not used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> module of this package that defines it.
_EXPORTS: dict[str, str] = {
    "FakeClock": "clock",
    "Instant": "clock",
    "wall_clock": "clock",
    "Outcome": "report",
    "JobRun": "report",
    "RunReport": "report",
    "TooManyJobsError": "report",
    "Runner": "runner",
    "Processors": "runner",
    "run_until_idle": "runner",
    "advance_time": "time_travel",
    "eager": "eager",
    "EagerSession": "eager",
    "record_events": "events",
    "EventRecorder": "events",
    "RecordedEvent": "events",
    "TrimmedEventsError": "events",
}

__all__ = [  # the names of _EXPORTS, spelled out for linters (a test keeps the two in step)
    "EagerSession", "EventRecorder", "FakeClock", "Instant", "JobRun", "Outcome", "Processors", "RecordedEvent",
    "RunReport", "Runner", "TooManyJobsError", "TrimmedEventsError", "advance_time", "eager", "record_events",
    "run_until_idle", "wall_clock",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'echomq.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs; a test keeps it in step with _EXPORTS
    from .clock import FakeClock, Instant, wall_clock
    from .eager import EagerSession, eager
    from .events import EventRecorder, RecordedEvent, TrimmedEventsError, record_events
    from .report import JobRun, Outcome, RunReport, TooManyJobsError
    from .runner import Processors, Runner, run_until_idle
    from .time_travel import advance_time
