"""The shapes users plug in: processors, subscribers, clocks, backoff strategies, and the
option dictionaries, typed for editors and type checkers.

This module sits at the bottom of the package with ``errors`` and ``clock``: it imports nothing
of EchoMQ's, so every layer may use it. That is why a processor's job and a subscriber's event
are typed ``Any`` here; the docstrings say what they really receive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypedDict


class Clock(Protocol):
    """Returns now in epoch milliseconds (``echomq.clock.system_clock`` by default)."""

    def __call__(self) -> int: ...


class Processor(Protocol):
    """A Worker's job function: called with the ``ActiveJob``; its return value (JSON) is the
    job's result, an exception fails the attempt."""

    def __call__(self, job: Any, /) -> Any: ...


class BackoffStrategy(Protocol):
    """A custom backoff type's delay: ``(attempts_made, backoff_type, error, job) -> ms``;
    -1 means "do not retry". ``attempts_made`` counts the attempt that just failed."""

    def __call__(self, attempts_made: int, backoff_type: str, error: BaseException, job: Any, /) -> int: ...


class SupportsPut(Protocol):
    """A ``queue.Queue``-like subscriber: receives tagged tuples (see ``QueueEvents.subscribe``)."""

    def put(self, item: Any, /) -> Any: ...


#: What ``QueueEvents.subscribe`` takes: ``fn(event_type, event_data)`` or an object with ``put()``.
#: ``event_type`` is an ``EventType``, a custom event's name, or a ``GapNotice``.
Subscriber = Callable[[Any, dict[str, Any]], Any] | SupportsPut


class EventReader(Protocol):
    """What ``Job.wait_until_finished`` uses of a ``QueueEvents`` (the queue layer does not
    import the events layer, so it takes one by its shape)."""

    #: The stream it reads, ``<prefix>:{<queue>}:events``.
    events_key: str
    #: How long one ``run_once`` blocks, in ms.
    block_ms: int

    @property
    def running(self) -> bool: ...

    def subscribe(self, subscriber: Subscriber, /) -> None: ...

    def unsubscribe(self, subscriber: Subscriber, /) -> bool: ...

    def run_once(self) -> int: ...


# -- job options (Queue.add, default_job_options, scheduler templates) -------------------------

class BackoffOptions(TypedDict, total=False):
    """``fixed`` waits ``delay`` ms; ``exponential`` ``2**(n-1) * delay``; jitter in [0, 1]."""

    type: str
    delay: int
    jitter: float


class KeepOptions(TypedDict, total=False):
    """Keep finished jobs up to ``age`` seconds and/or the newest ``count``; ``limit`` caps how
    many one finish removes by age."""

    age: int
    count: int
    limit: int


#: ``True`` removes at once, ``False`` keeps all, a number keeps that many of the newest.
KeepRule = bool | int | KeepOptions


class DeduplicationOptions(TypedDict, total=False):
    id: str
    ttl: int
    extend: bool
    replace: bool


class ParentOptions(TypedDict):
    id: str
    queue: str


class TelemetryOptions(TypedDict, total=False):
    metadata: str
    omit_context: bool


class JobOptions(TypedDict, total=False):
    """Options of one job, snake_case; stored under BullMQ's names (docs/protocol.md §2.2)."""

    job_id: str
    delay: int
    priority: int
    lifo: bool
    attempts: int
    backoff: int | BackoffOptions
    remove_on_complete: KeepRule
    remove_on_fail: KeepRule
    stack_trace_limit: int
    keep_logs: int
    size_limit: int
    timestamp: int
    deduplication: DeduplicationOptions
    parent: ParentOptions
    fail_parent_on_failure: bool
    continue_parent_on_failure: bool
    ignore_dependency_on_failure: bool
    remove_dependency_on_failure: bool
    telemetry: TelemetryOptions
    time_limit_ms: int
    soft_time_limit_ms: int


class RepeatOptions(TypedDict, total=False):
    """How a job scheduler repeats: ``every`` (ms) or a cron ``pattern`` in ``tz``.

    Dates are epoch ms, aware ``datetime``s or ISO 8601 strings with an offset; BullMQ's
    ``startDate``/``endDate`` spellings are accepted too (one of the two, not both).
    """

    every: int
    pattern: str
    immediately: bool
    tz: str
    start_date: Any
    end_date: Any
    limit: int
    offset: int


#: The job states ``Job.get_state`` reports (BullMQ's names).
JobState = Literal["completed", "failed", "delayed", "active", "waiting", "waiting-children",
                   "prioritized", "paused", "unknown"]
