"""The Worker: takes jobs from a queue, runs a plain function on each, records the outcome.

Threads (all started by ``run()``, all joined before it returns):

* the caller's thread, the **fetcher**: while a processor slot is free it calls moveToActive;
  when nothing is ready it blocks on the queue's ``marker`` with BZPOPMIN on a dedicated
  connection (never polling), for at most ``drain_delay`` or until the next delayed job is due;
* ``concurrency`` **processor** threads: each runs ``processor(job)`` and finishes the attempt
  with one script that also fetches the next job (protocol §3 "fetch next");
* one **maintenance** thread: lock renewal and the stalled check (``maintenance.py``).

Shutdown (style anchor 9, dramatiq's order): ``close(timeout)`` stops fetching, lets running
jobs finish while their locks are still renewed, and only then stops the renewer. Jobs still
running at the deadline are abandoned to the stalled check: their locks expire and another
worker takes them again, so nothing is lost. ``close()`` may be called from another thread or
from a signal handler the host installed while ``run()`` blocks in the main thread.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

from .backoff import BackoffStrategy
from .connection import Backoff, Connection, PidGuard, resolve_connection
from .errors import (
    EchoMQError,
    InvalidInputError,
    UnrecoverableError,
    WaitingChildrenError,
)
from .keys import DEFAULT_PREFIX, QueueKeys
from .maintenance import LockRegistry, Maintenance
from .marker import MarkerWaiter
from .transitions import Fetched, Transitions, WorkerIdentity
from .worker_job import WorkerJob, job_for_processor

log = logging.getLogger(__name__)

Processor = Callable[[Any], Any]

#: Errors that mean "the server went away": retried with backoff, never fatal.
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError)

#: How close to a delayed job's due time the fetcher stops blocking on Redis and sleeps locally.
_LOCAL_WAIT_S = 0.15


def _now_ms() -> int:
    return int(time.time() * 1000)


def _to_json(value: Any) -> str:
    """JSON as JSON.stringify writes it (compact, non-ASCII kept), so a return value or a stack
    trace stored by EchoMQ is byte for byte what a BullMQ worker would have stored. Like
    JSON.stringify, NaN and the infinities become ``null``: the bare tokens are not JSON and
    would break every reader of the hash and of the ``completed`` event."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _keep_option(field: str, value: Any) -> Any:
    """True (delete at once), False/None (keep all), a count, or {"age": s, "count": n, "limit": n}."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, dict) and value and set(value) <= {"age", "count", "limit"} and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()):
        return value
    raise InvalidInputError(f"Worker {field}={value!r}: must be a bool, a count >= 0, or "
                            "{'age': seconds, 'count': n, 'limit': n}")


def _positive_int(field: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"Worker {field}={value!r}: must be an integer >= {minimum}")
    return value


class Worker:
    """Processes one queue's jobs with ``processor(job)``; its return value is the job's result.

    An exception fails the attempt (message and stack trace are stored); with attempts left the
    job retries after its backoff; ``UnrecoverableError`` fails it at once. Nothing starts until
    ``run()`` (blocking) or ``start()`` (in a thread of its own).
    """

    def __init__(
        self,
        connection: Connection,
        queue_name: str,
        processor: Processor,
        *,
        concurrency: int = 1,
        lock_duration: int = 30000,
        lock_renew_time: int | None = None,
        stalled_interval: int = 30000,
        max_stalled_count: int = 1,
        prefix: str = DEFAULT_PREFIX,
        name: str | None = None,
        drain_delay: float = 5.0,
        backoff_strategy: BackoffStrategy | None = None,
        limiter: dict[str, int] | None = None,
        skip_stalled_check: bool = False,
        remove_on_complete: Any = None,
        remove_on_fail: Any = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        if not callable(processor):
            raise InvalidInputError(f"Worker processor={processor!r}: must be callable")
        self.concurrency = _positive_int("concurrency", concurrency)
        self.lock_duration = _positive_int("lock_duration", lock_duration)
        self.stalled_interval = _positive_int("stalled_interval", stalled_interval)
        self.max_stalled_count = _positive_int("max_stalled_count", max_stalled_count, minimum=0)
        if lock_renew_time is not None:
            _positive_int("lock_renew_time", lock_renew_time)
        if not isinstance(drain_delay, (int, float)) or drain_delay <= 0:
            raise InvalidInputError(f"Worker drain_delay={drain_delay!r}: must be a number of seconds > 0")
        if limiter is not None and not (isinstance(limiter, dict) and {"max", "duration"} <= set(limiter)):
            raise InvalidInputError(f"Worker limiter={limiter!r}: must be {{'max': n, 'duration': ms}}")
        self.client = resolve_connection(connection)
        self.keys = QueueKeys(queue_name, prefix)
        self.queue_name = queue_name
        self.prefix = prefix
        self.processor = processor
        self.name = name
        self.drain_delay = float(drain_delay)
        self.backoff_strategy = backoff_strategy
        # BullMQ's worker-level keep rules: used for jobs whose own opts do not say.
        self.remove_on_complete = _keep_option("remove_on_complete", remove_on_complete)
        self.remove_on_fail = _keep_option("remove_on_fail", remove_on_fail)
        self.clock = clock
        self.id = uuid.uuid4().hex
        self.transitions = Transitions(
            self.client, self.keys,
            WorkerIdentity(self.lock_duration, name,
                           limiter["max"] if limiter else None, limiter["duration"] if limiter else None),
        )
        self.locks = LockRegistry()
        self.maintenance = Maintenance(
            self.transitions, self.locks, lock_duration=self.lock_duration, lock_renew_time=lock_renew_time,
            stalled_interval=self.stalled_interval, max_stalled_count=self.max_stalled_count,
            skip_stalled_check=skip_stalled_check,
        )
        self._tokens = itertools.count(1)
        self._handoff: queue.SimpleQueue[tuple[Fetched, str] | None] = queue.SimpleQueue()
        self._slots = threading.Condition()
        self._free_slots = self.concurrency
        self._stop = threading.Event()
        self._stop_maintenance = threading.Event()
        self._abandoned = threading.Event()
        self._stopped = threading.Event()
        self._fetcher_done = threading.Event()
        self._started = False
        self._close_timeout: float | None = None
        self._run_ident: int | None = None
        self._thread: threading.Thread | None = None
        self._marker = MarkerWaiter(self.client, self.keys.marker, max_block_s=self.drain_delay,
                                    client_name=self._client_name())
        self._pid = PidGuard()
        self._scheduler: Any = None
        self._state_lock = threading.Lock()
        #: Jobs this worker finished (completed or failed for good), for logs and tests.
        self.processed = 0
        self._processed_lock = threading.Lock()

    # -- public surface ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._started and not self._stopped.is_set()

    def run(self) -> None:
        """Process jobs in the calling thread until ``close()``; then return, all threads joined."""
        with self._state_lock:
            if self._started:
                raise EchoMQError("a Worker runs once: create a new Worker instead of calling run() again")
            self._started = True
        self._pid.claim()
        self._run_ident = threading.get_ident()
        threads: list[threading.Thread] = []
        try:
            self._marker.open()
            maintenance = threading.Thread(target=self._maintenance_loop, name=f"echomq-maint-{self.queue_name}",
                                           daemon=True)
            maintenance.start()
            processors = [
                threading.Thread(target=self._processor_loop, name=f"echomq-proc-{self.queue_name}-{i}", daemon=True)
                for i in range(self.concurrency)
            ]
            for thread in processors:
                thread.start()
            threads = [maintenance, *processors]
            try:
                self._fetch_loop()
            finally:
                self.transitions.release_thread_connection()
        finally:
            self._fetcher_done.set()
            self._shutdown(threads)

    def start(self) -> Worker:
        """Run the worker in a background thread of its own (``close()`` joins it)."""
        if self._thread is not None:
            raise EchoMQError("this Worker was already started")
        self._thread = threading.Thread(target=self.run, name=f"echomq-worker-{self.queue_name}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs, wait up to ``timeout`` s (None: as long as it takes) for running
        ones, and return once every thread is joined. Jobs still running at the deadline keep
        their place in ``active`` and are recovered by the stalled check after their lock
        expires. Safe to call twice, before ``run()``, or from a signal handler."""
        self._pid.check("Worker")  # a forked child has none of our threads to wait for
        self._close_timeout = timeout
        self._stop.set()
        grace = None if timeout is None else timeout + self.drain_delay + 5
        if self._started:
            # Waking the fetcher touches locks and sockets; from a signal handler that
            # interrupted the run() thread we must not block on them, so a helper thread does it.
            waker = threading.Thread(target=self._wake_fetcher, name="echomq-worker-wake", daemon=True)
            waker.start()
            if threading.get_ident() == self._run_ident:
                return  # run() itself completes the shutdown once the handler returns
            self._stopped.wait(grace)
            waker.join(grace)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(grace)  # start() was called: that thread may not have begun run() yet

    def __enter__(self) -> Worker:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- fetching ---------------------------------------------------------------------------
    def _client_name(self) -> str:
        encoded = base64.b64encode(self.queue_name.encode()).decode()
        return f"{self.prefix}:{encoded}" + (f":w:{self.name}" if self.name else "")

    def _take_slot(self) -> bool:
        with self._slots:
            while self._free_slots == 0 and not self._stop.is_set():
                self._slots.wait(0.5)
            if self._stop.is_set():
                return False
            self._free_slots -= 1
            return True

    def _release_slot(self) -> None:
        with self._slots:
            self._free_slots += 1
            self._slots.notify()

    def _next_token(self) -> str:
        return f"{self.id}:{next(self._tokens)}"

    def _fetch_loop(self) -> None:
        backoff = Backoff(base=0.1, cap=10.0)
        while not self._stop.is_set():
            if not self._take_slot():
                return
            token = self._next_token()
            try:
                fetched = self.transitions.move_to_active(token, self.clock())
            except (*CONNECTION_ERRORS, redis.ResponseError) as exc:
                # ResponseError: READONLY after a failover, OOM, a busy script ... all transient
                self._release_slot()
                self._pause_after_error("fetching a job", exc, backoff)
                continue
            if fetched.job_id is not None:
                backoff.reset()
                self._handoff.put((fetched, token))
                continue
            self._release_slot()
            if fetched.rate_limit_ms > 0:
                self._stop.wait(fetched.rate_limit_ms / 1000)
                continue
            timeout = self.drain_delay
            if fetched.next_due_ms:
                remaining = (fetched.next_due_ms - self.clock()) / 1000
                if remaining <= _LOCAL_WAIT_S:
                    # Redis checks blocking timeouts about every 100 ms (hz 10), too coarse
                    # for a due time; the last stretch is a local, interruptible sleep.
                    self._stop.wait(max(0.0, remaining))
                    continue
                timeout = min(timeout, remaining - _LOCAL_WAIT_S + 0.01)
            try:
                self._marker.wait(timeout, self._stop)
                backoff.reset()
            except (*CONNECTION_ERRORS, redis.ResponseError) as exc:
                self._marker.connection_lost()
                self._pause_after_error("waiting for jobs", exc, backoff)

    def _pause_after_error(self, what: str, exc: BaseException, backoff: Backoff) -> None:
        delay = backoff.next_delay()
        log.warning("worker %s: Redis failed while %s (%s); retrying in %.2f s", self.queue_name, what, exc, delay)
        self._stop.wait(delay)

    def _wake_fetcher(self) -> None:
        with self._slots:
            self._slots.notify_all()
        self._marker.interrupt(self._fetcher_done, self.drain_delay + 1)

    # -- processing -------------------------------------------------------------------------
    def _processor_loop(self) -> None:
        try:
            while True:
                item = self._handoff.get()
                if item is None:
                    return
                fetched, token = item
                current: Fetched | None = fetched
                while current is not None and current.job_id is not None:
                    if self._abandoned.is_set():
                        break
                    job_id = current.job_id
                    try:
                        current = self._process(current, token)
                    except Exception:  # a bug of ours must not kill the thread: the lock
                        # expires and the stalled check hands the job to someone else
                        log.exception("worker %s: job %s could not be finished", self.queue_name, job_id)
                        current = None
                self._release_slot()
        finally:
            self.transitions.release_thread_connection()

    def _process(self, fetched: Fetched, token: str) -> Fetched | None:
        """Run one attempt and record its outcome; return the next job if fetch-next took one."""
        assert fetched.job_id is not None
        job_id = fetched.job_id
        state = WorkerJob(job_id, token, fetched.hash)
        self.locks.track(job_id, token)
        try:
            if state.scheduler_id:
                self._produce_next_iteration(state)
            try:
                if state.deferred_failure:
                    raise UnrecoverableError(state.deferred_failure)
                result = self.processor(job_for_processor(self, state))
                value = _to_json(result)
            except WaitingChildrenError:
                return None  # the job moved to waiting-children and runs again after them
            except Exception as exc:  # noqa: BLE001 - the processor's failure is the job's, not ours
                error: BaseException = exc
                return self._finish(state, lambda fetch: self._fail(state, error, fetch))
            return self._finish(state, lambda fetch: self._complete(state, value, fetch))
        finally:
            self.locks.untrack(job_id)

    def _finish(self, state: WorkerJob, move: Callable[[bool], Fetched | None]) -> Fetched | None:
        """Run the final move, retrying through connection losses; a refused move (lock lost,
        no longer active) is logged: another worker owns the job now."""
        backoff: Backoff | None = None  # built on the first error only: the hot path stays lean
        while not self._abandoned.is_set():
            try:
                return move(not self._stop.is_set())
            except CONNECTION_ERRORS as exc:
                backoff = backoff or Backoff(base=0.1, cap=10.0)
                self._pause_after_error(f"finishing job {state.job_id}", exc, backoff)
                if self._stop.is_set():
                    time.sleep(backoff.next_delay())
            except (EchoMQError, redis.ResponseError) as exc:
                # Refused (lock lost, no longer active) or a server error: the job is either
                # another worker's now or stays active until the stalled check returns it.
                log.warning("worker %s: could not finish job %s: %s", self.queue_name, state.job_id, exc)
                return None
        return None

    def _complete(self, state: WorkerJob, value: str, fetch_next: bool) -> Fetched | None:
        fetched = self.transitions.move_to_finished(
            state.job_id, state.token, self.clock(), completed=True, value=value,
            keep=state.opts.get("removeOnComplete", self.remove_on_complete), attempts=state.attempts,
            fetch_next=fetch_next,
        )
        with self._processed_lock:
            self.processed += 1
        return fetched

    def _fail(self, state: WorkerJob, exc: BaseException, fetch_next: bool) -> Fetched | None:
        reason = str(exc) or type(exc).__name__
        fields = ["failedReason", reason, "stacktrace", _to_json(state.stacktrace_with(exc))]
        delay = state.retry_delay(exc, self.backoff_strategy)
        if delay is not None and delay > 0:
            return self.transitions.move_to_delayed(state.job_id, state.token, self.clock(), delay,
                                                    fields=fields, fetch_next=fetch_next)
        if delay == 0:
            self.transitions.retry(state.job_id, state.token, self.clock(),
                                   lifo=bool(state.opts.get("lifo")), fields=fields)
            return None
        fetched = self.transitions.move_to_finished(
            state.job_id, state.token, self.clock(), completed=False, value=reason,
            keep=state.opts.get("removeOnFail", self.remove_on_fail), attempts=state.attempts,
            fetch_next=fetch_next, fields=fields,
        )
        with self._processed_lock:
            self.processed += 1
        return fetched

    def _produce_next_iteration(self, state: WorkerJob) -> None:
        """Protocol 2.4: a scheduler's iteration produces the next one as it becomes active,
        before the processor runs. Failures are logged; the job itself still runs."""
        scheduler_id = state.scheduler_id
        assert scheduler_id is not None
        try:
            if len(scheduler_id.split(":")) >= 5 and not self.client.hexists(self.keys.scheduler(scheduler_id), "ic"):
                return  # a legacy repeatable key, not a job scheduler
            if self._scheduler is None:
                from .scheduler import JobScheduler

                self._scheduler = JobScheduler(self.client, self.queue_name, prefix=self.prefix)
            self._scheduler.produce_next(state.job_id)
        except Exception:  # logged, and the job still runs (see docs/worker.md)
            log.exception("worker %s: failed to add the next iteration of scheduler %s after job %s",
                          self.queue_name, scheduler_id, state.job_id)

    # -- maintenance and shutdown -----------------------------------------------------------
    def _maintenance_loop(self) -> None:
        backoff = Backoff(base=0.1, cap=5.0)
        delay_ms = 0
        while not self._stop_maintenance.wait(delay_ms / 1000):
            try:
                delay_ms = self.maintenance.run_once(self.clock())
                backoff.reset()
            except CONNECTION_ERRORS as exc:
                delay_ms = int(backoff.next_delay() * 1000)
                log.warning("worker %s maintenance lost Redis (%s); retrying in %d ms", self.queue_name, exc, delay_ms)
            except Exception:
                delay_ms = int(backoff.next_delay() * 1000)
                log.exception("worker %s maintenance step failed", self.queue_name)

    def _shutdown(self, threads: list[threading.Thread]) -> None:
        processors = [t for t in threads if t.name.startswith("echomq-proc")]
        maintenance = [t for t in threads if t.name.startswith("echomq-maint")]
        for _ in processors:
            self._handoff.put(None)
        timeout = self._close_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in processors:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in processors):
            # Past the deadline: stop renewing their locks so the stalled check (ours or another
            # worker's) takes these jobs back; their threads are daemons and finish nothing.
            self._abandoned.set()
            log.warning("worker %s closed with %d job(s) still running; left to the stalled check",
                        self.queue_name, len(self.locks))
            self.locks.clear()
        self._stop_maintenance.set()
        for thread in maintenance:
            thread.join()
        self._marker.close()
        self._stopped.set()

