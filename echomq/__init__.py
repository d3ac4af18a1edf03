"""EchoMQ: recurring jobs, a job lifecycle and live job events on Redis, for synchronous Python.

The data is BullMQ 6's layout with prefix ``emq`` and the queue name in braces, so a BullMQ
Node app and an EchoMQ process share a queue. Nothing here starts a thread or touches the
network at import; each name below is imported from its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

# name -> module that defines it. The one list of the public surface.
_EXPORTS: dict[str, str] = {
    # errors
    "EchoMQError": "errors",
    "InvalidInputError": "errors",
    "InvalidQueueNameError": "errors",
    "InvalidJobOptionsError": "errors",
    "InvalidScheduleError": "errors",
    "NotFoundError": "errors",
    "JobNotFoundError": "errors",
    "SchedulerNotFoundError": "errors",
    "InvalidStateError": "errors",
    "LockError": "errors",
    "SchedulerConflictError": "errors",
    "ScriptError": "errors",
    "ForkedProcessError": "errors",
    "UnrecoverableError": "errors",
    "WaitingChildrenError": "errors",
    # keys
    "QueueKeys": "keys",
    # events
    "EventType": "events",
    "GapNotice": "events",
    "parse_event_type": "events",
    "QueueEvents": "queue_events",
    "Handler": "queue_events",
    # schedules
    "calculate_next_millis": "repeat",
    "JobScheduler": "scheduler",
    "SchedulerRecord": "scheduler",
    "Iteration": "scheduler",
    # lifecycle
    "Queue": "queue",
    "Job": "job",
    "Worker": "worker",
}

__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 - the one list is _EXPORTS


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'echomq' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .errors import (  # noqa: F401
        EchoMQError,
        ForkedProcessError,
        InvalidInputError,
        InvalidJobOptionsError,
        InvalidQueueNameError,
        InvalidScheduleError,
        InvalidStateError,
        JobNotFoundError,
        LockError,
        NotFoundError,
        SchedulerConflictError,
        SchedulerNotFoundError,
        ScriptError,
        UnrecoverableError,
        WaitingChildrenError,
    )
    from .events import EventType, GapNotice, parse_event_type  # noqa: F401
    from .job import Job  # noqa: F401
    from .keys import QueueKeys  # noqa: F401
    from .queue import Queue  # noqa: F401
    from .queue_events import Handler, QueueEvents  # noqa: F401
    from .repeat import calculate_next_millis  # noqa: F401
    from .scheduler import Iteration, JobScheduler, SchedulerRecord  # noqa: F401
    from .worker import Worker  # noqa: F401
