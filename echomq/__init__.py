"""EchoMQ: recurring jobs, a job lifecycle and live job events on Redis, for synchronous Python.

The data is BullMQ 6's layout with prefix ``emq`` and the queue name in braces, so a BullMQ
Node app and an EchoMQ process share a queue. Nothing here starts a thread or touches the
network at import; each name below is imported from its module on first use.

The package is layered, each layer using only those before it: ``errors``, ``types`` and
``clock``; ``protocol`` (the data layout, no sockets); ``transport`` (connections, scripts,
blocking reads); ``queue``, ``schedule``, ``events`` and ``worker``; ``registry``, composing them; then the hosts,
``cli``, ``contrib`` and ``testing``.
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
    "PermissionDeniedError": "errors",
    "ConnectionClosedError": "errors",
    "ForkedProcessError": "errors",
    "UnrecoverableError": "errors",
    "WaitingChildrenError": "errors",
    "JobCancelledError": "errors",
    "JobCancelRequestedError": "errors",
    "JobSoftTimeLimitError": "errors",
    "JobHardTimeLimitError": "errors",
    "JobFailedError": "errors",
    "JobWaitTimeoutError": "errors",
    "ReplicationError": "errors",
    "AddOutcomeUnknownError": "errors",
    "BulkWriteError": "errors",
    "BulkInterruptedError": "errors",
    "WrongClusterNodeError": "errors",
    # what users plug in, and the time source
    "Processor": "types",
    "Subscriber": "types",
    "Clock": "types",
    "BackoffStrategy": "types",
    "JobOptions": "types",
    "RepeatOptions": "types",
    "KeepRule": "types",
    "system_clock": "clock",
    # keys
    "QueueKeys": "protocol.keys",
    # events
    "EventType": "protocol.events",
    "GapNotice": "protocol.events",
    "GapReason": "protocol.events",
    "parse_event_type": "protocol.events",
    "QueueEvents": "events.queue_events",
    "Handler": "events.subscribers",
    "EVENT_TAG": "events.subscribers",
    "GAP_TAG": "events.subscribers",
    # schedules
    "calculate_next_millis": "schedule.next_run",
    "JobScheduler": "schedule.scheduler",
    "SchedulerRecord": "schedule.records",
    "ScheduleRun": "schedule.records",
    "Iteration": "schedule.records",
    # lifecycle
    "Queue": "queue.queue",
    "Job": "queue.job",
    "list_queues": "queue.discovery",
    "find_queues": "queue.discovery",
    "QueueSummary": "queue.discovery",
    "Worker": "worker.worker",
    "ActiveJob": "worker.active_job",
    "WorkerListener": "worker.listeners",
    # declared jobs, routed by name
    "JobRegistry": "registry",
    "RegisteredJob": "registry",
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


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only; tests keep it in step with _EXPORTS
    from .clock import system_clock
    from .errors import (
        AddOutcomeUnknownError,
        BulkInterruptedError,
        BulkWriteError,
        ConnectionClosedError,
        EchoMQError,
        ForkedProcessError,
        InvalidInputError,
        InvalidJobOptionsError,
        InvalidQueueNameError,
        InvalidScheduleError,
        InvalidStateError,
        JobCancelledError,
        JobCancelRequestedError,
        JobFailedError,
        JobHardTimeLimitError,
        JobNotFoundError,
        JobSoftTimeLimitError,
        JobWaitTimeoutError,
        LockError,
        NotFoundError,
        PermissionDeniedError,
        ReplicationError,
        SchedulerConflictError,
        SchedulerNotFoundError,
        ScriptError,
        UnrecoverableError,
        WaitingChildrenError,
        WrongClusterNodeError,
    )
    from .events.queue_events import QueueEvents
    from .events.subscribers import EVENT_TAG, GAP_TAG, Handler
    from .protocol.events import EventType, GapNotice, GapReason, parse_event_type
    from .protocol.keys import QueueKeys
    from .queue.discovery import QueueSummary, find_queues, list_queues
    from .queue.job import Job
    from .queue.queue import Queue
    from .registry import JobRegistry, RegisteredJob
    from .schedule.next_run import calculate_next_millis
    from .schedule.records import Iteration, SchedulerRecord, ScheduleRun
    from .schedule.scheduler import JobScheduler
    from .types import BackoffStrategy, Clock, JobOptions, KeepRule, Processor, RepeatOptions, Subscriber
    from .worker.active_job import ActiveJob
    from .worker.listeners import WorkerListener
    from .worker.worker import Worker
