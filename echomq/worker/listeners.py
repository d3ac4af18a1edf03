"""Hooks for the host: what a Worker tells the listeners it was given (``Worker(listeners=[...])``).

A ``WorkerListener`` is a plain class whose methods do nothing; a host overrides the ones it
needs and reports to Sentry, OpenTelemetry, statsd or Prometheus (``echomq.contrib.prometheus``)
in a few lines of its own. docs/metrics.md has the examples.

Where each event is told, and why there:

* ``on_active``, ``on_completed``, ``on_failed`` run in the processor's thread, with the job
  object the processor received. ``on_active`` comes just before the processor runs;
  ``on_completed`` and ``on_failed`` only once the outcome is recorded in Redis (a final move
  that was refused, because another worker owns the job now, tells neither), so a counter fed by
  them counts what the queue holds. Durations are the processor's own run, measured with
  ``time.monotonic`` (the job clock may be a test's frozen clock).
* ``on_stalled``, ``on_lock_lost`` and ``on_redis_error`` are told from the fetcher and the
  maintenance thread, whose timing keeps every running job's lock alive: they are handed to a
  thread of the listeners' own (started when an event comes, ended when none is left), so a slow
  listener can never delay a lock renewal.

A listener never breaks the worker: whatever a hook raises is logged on this module's logger
(the first time with its traceback, then at most one line per ``REPEAT_LOG_S`` counting the
repeats) and the worker goes on; the job's outcome is already recorded when it is told. With no
listener the worker does no work for them at all: no timing, no call, no thread.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidInputError
from .active_job import ActiveJob

log = logging.getLogger(__name__)

#: After a hook's first error (logged with its traceback), its next errors are summed up in one
#: line at most this often.
REPEAT_LOG_S = 60.0

#: Events from the fetcher and the maintenance thread waiting for a listener that is slower than
#: they come; past this many the newest are dropped (and counted in a log line), never queued
#: without bound.
MAX_PENDING_EVENTS = 1000


class WorkerListener:
    """Hooks a Worker calls as jobs run; override the ones you need (each default does nothing).

    One listener may serve several workers and is called from several threads at once: keep its
    state thread-safe. ``job`` is the ``ActiveJob`` the processor received (``job.id``,
    ``job.name``, ``job.data``, ``job.attempts_made`` ..., ``job.keys.queue_name`` its queue).
    """

    def on_active(self, job: ActiveJob) -> None:
        """The processor is about to run ``job``."""

    def on_completed(self, job: ActiveJob, result: Any, *, duration_ms: float) -> None:
        """``job`` completed with ``result`` (the processor's return value) after running
        ``duration_ms`` milliseconds; its completion is recorded in Redis."""

    def on_failed(self, job: ActiveJob, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        """An attempt of ``job`` failed with ``error`` after ``duration_ms`` milliseconds.
        ``final``: the job failed for good (``retry_delay_ms`` is None); else it retries after
        ``retry_delay_ms`` (0: at once). A job that could not run at all (a malformed hash, data
        over the worker's limits, stalled too often) fails with an ``UnrecoverableError``."""

    def on_stalled(self, queue_name: str, job_id: str) -> None:
        """This worker's stalled check found ``job_id`` running without a live lock (its worker
        died or hung) and moved it back to wait. One worker per queue runs each check, so a
        stalled job is told once across the fleet."""

    def on_lock_lost(self, queue_name: str, job_id: str) -> None:
        """This worker lost the lock of ``job_id`` while running it (renewal found it gone, or
        the final move was refused): another worker may run the job again, and this attempt's
        outcome is not recorded."""

    def on_redis_error(self, queue_name: str, error: BaseException, *, during: str) -> None:
        """A Redis call failed with ``error`` while ``during`` (e.g. "fetching a job"); the
        worker retries it with backoff."""


_JOB_HOOKS = ("on_active", "on_completed", "on_failed")
_WORKER_HOOKS = ("on_stalled", "on_lock_lost", "on_redis_error")


def _overrides(listener: WorkerListener, hook: str) -> bool:
    return getattr(type(listener), hook) is not getattr(WorkerListener, hook)


class _ErrorLog:
    """Logs a listener's errors: the first of each (listener, hook) with its traceback, then at
    most one line per REPEAT_LOG_S saying how many more there were."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[int, str], list[float]] = {}  # -> [last log time, errors since]

    def report(self, listener: WorkerListener, hook: str, queue_name: str, exc: BaseException) -> None:
        now = time.monotonic()
        key = (id(listener), hook)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = [now, 0]
                first, repeats = True, 0
            else:
                seen[1] += 1
                if now - seen[0] < REPEAT_LOG_S:
                    return
                first, repeats = False, int(seen[1])
                seen[0], seen[1] = now, 0
        name = type(listener).__qualname__
        if first:
            log.error("worker %s: listener %s.%s raised; the worker goes on", queue_name, name, hook, exc_info=exc)
        else:
            log.error("worker %s: listener %s.%s raised %d more time(s), the last time %s: %s", queue_name, name,
                      hook, repeats, type(exc).__name__, exc)


class _Courier:
    """Delivers events on a thread of its own, so that the thread telling them never waits for a
    listener. The thread starts when an event comes and ends when none is left."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pending: collections.deque[Callable[[], None]] = collections.deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._dropped = 0

    def post(self, deliver: Callable[[], None]) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING_EVENTS:
                self._dropped += 1
                if self._dropped == 1:
                    log.warning("%s: listeners are too slow, %d events wait; dropping new ones", self._name,
                                MAX_PENDING_EVENTS)
                return
            self._pending.append(deliver)
            if self._thread is None or not self._thread.is_alive():  # not alive: ended, or lost to a fork
                self._thread = threading.Thread(target=self._drain, name=self._name, daemon=True)
                self._thread.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    if self._dropped:
                        log.warning("%s: %d listener event(s) were dropped", self._name, self._dropped)
                        self._dropped = 0
                    return
                deliver = self._pending.popleft()
            deliver()

    def join(self, timeout: float | None) -> None:
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s: a listener is still busy after the worker closed; left behind", self._name)


class ListenerSet:
    """A Worker's listeners, as its threads call them: each hook only on the listeners that
    override it, each call guarded. ``times_jobs`` tells the processor threads whether any job
    hook is overridden at all; when not, they skip timing and telling entirely."""

    def __init__(self, listeners: Sequence[WorkerListener] | None, queue_name: str) -> None:
        given: object = () if listeners is None else listeners  # checked as any object: callers are untyped
        if not isinstance(given, Sequence) or isinstance(given, str):
            raise InvalidInputError(f"Worker listeners={given!r}: must be a list of WorkerListener "
                                    "(listeners=[MyListener()])")
        listeners = list(given)
        for listener in listeners:
            if not isinstance(listener, WorkerListener):
                raise InvalidInputError(f"Worker listeners: {listener!r} is not a WorkerListener (subclass "
                                        "echomq.WorkerListener and override the hooks you need)")
        self.queue_name = queue_name
        self._hooks: dict[str, tuple[tuple[WorkerListener, Callable[..., None]], ...]] = {
            hook: tuple((listener, getattr(listener, hook)) for listener in listeners if _overrides(listener, hook))
            for hook in (*_JOB_HOOKS, *_WORKER_HOOKS)
        }
        self.times_jobs = any(self._hooks[hook] for hook in _JOB_HOOKS)
        self._errors = _ErrorLog()
        self._courier = _Courier(f"echomq-listeners-{queue_name}")

    def _call(self, hook: str, *args: Any, **kwargs: Any) -> None:
        for listener, method in self._hooks[hook]:
            try:
                method(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - a listener's error is logged, never the worker's
                self._errors.report(listener, hook, self.queue_name, exc)

    def _post(self, hook: str, *args: Any, **kwargs: Any) -> None:
        if self._hooks[hook]:
            self._courier.post(lambda: self._call(hook, self.queue_name, *args, **kwargs))

    # -- from the processor threads (only when times_jobs) ---------------------------------
    def active(self, job: ActiveJob) -> None:
        self._call("on_active", job)

    def completed(self, job: ActiveJob, result: Any, duration_ms: float) -> None:
        self._call("on_completed", job, result, duration_ms=duration_ms)

    def failed(self, job: ActiveJob, error: BaseException, duration_ms: float, retry_delay_ms: int | None) -> None:
        self._call("on_failed", job, error, duration_ms=duration_ms, final=retry_delay_ms is None,
                   retry_delay_ms=retry_delay_ms)

    # -- from the fetcher and the maintenance thread: delivered on the courier's thread -----
    def stalled(self, job_id: str) -> None:
        self._post("on_stalled", job_id)

    def lock_lost(self, job_id: str) -> None:
        self._post("on_lock_lost", job_id)

    def redis_error(self, error: BaseException, during: str) -> None:
        self._post("on_redis_error", error, during=during)

    def join(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` s for the events still on their way (the Worker's shutdown)."""
        self._courier.join(timeout)
