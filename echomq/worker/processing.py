"""Running attempts: what a Worker's processor threads do with each job the fetcher hands over.

For each job: produce the next iteration if it belongs to a job scheduler (before the
processor runs, as BullMQ's worker does, docs/protocol.md §4.4), run the processor, then
finish the attempt with one script that also takes the next job when the worker is not
stopping (fetch-next, §3.3): completed, failed for good, or retried now or after its backoff
(§3.4). A processor's exception is the job's failure, never the thread's, even a
``SystemExit``, a ``KeyboardInterrupt`` or any other ``BaseException`` (the thread is ours, and a
dead one would take its slot with it). A bug of ours is logged and the job left to the stalled check.

Each attempt's log lines (docs/worker.md): its start at DEBUG, its success at INFO with how long
the processor ran, a failure at WARNING when a retry is ahead or ERROR when it failed for good,
with the traceback. Never the job's data; its name (any runtime's, so untrusted) quoted and
shortened, the reason bounded. Levels are checked before anything is formatted or timed: with
logging left at WARNING a job that succeeds costs two cached level checks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import redis

from ..errors import (
    CancelPendingError,
    EchoMQError,
    JobCancelRequestedError,
    JobHardTimeLimitError,
    LockError,
    UnrecoverableError,
    WaitingChildrenError,
)
from ..protocol import job_hash
from ..protocol.codec import encode_json_like_js, sendable_text, text
from ..protocol.keys import QueueKeys
from ..queue.cancel import failed_reason
from ..schedule.records import SKIPPED_RETURNVALUE_KEY
from ..schedule.repair import STEP_RETRIES, is_transient_step_error
from ..schedule.runs import IterationRuns
from ..schedule.scheduler import JobScheduler
from ..transport.connection import CONNECTION_ERRORS, Backoff
from ..types import BackoffStrategy, Clock, Processor
from .active_job import Attempt
from .fetcher import Handoff, Slots
from .limits import AttemptControl, Watchdog, attempt_limits
from .listeners import ListenerSet
from .maintenance import LockRegistry
from .options import WorkerOptions
from .retry import retry_delay, stacktrace_with
from .routing import UnroutedJobError, shown_name
from .transitions import Fetched, Transitions

log = logging.getLogger(__name__)


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _bounded(reason: str) -> str:
    """A failure's reason for a log line: at most 1000 characters (the job keeps all of it)."""
    return reason if len(reason) <= 1000 else reason[:1000] + "..."


class _Failure(NamedTuple):
    """A failed attempt, decided once: its ``failedReason``, the fields to store, and the retry
    delay in ms (0: at once, None: it fails for good)."""

    reason: str
    fields: list[str]
    delay: int | None
    cancelling: bool = False  #: the job's cancellation (docs/protocol.md §3.8)


class _Abandoned(BaseException):
    """The attempt of this thread was failed at its hard limit: the thread records nothing and ends."""


class AttemptRunner:
    """The body of every processor thread of one Worker (``loop``), and its count of finished jobs."""

    def __init__(self, *, client: redis.Redis, keys: QueueKeys, transitions: Transitions, locks: LockRegistry,
                 processor: Processor, options: WorkerOptions, backoff_strategy: BackoffStrategy | None,
                 clock: Clock, scheduler: JobScheduler, slots: Slots, handoff: Handoff,
                 stop: threading.Event, abandoned: threading.Event, listeners: ListenerSet,
                 on_leak: Callable[[AttemptControl], None] | None = None) -> None:
        self.client = client
        self.keys = keys
        self.transitions = transitions
        self.locks = locks
        self.processor = processor
        self.options = options
        self.backoff_strategy = backoff_strategy
        self.clock = clock
        self.scheduler = scheduler
        self.slots = slots
        self.handoff = handoff
        self.stop = stop
        self.abandoned = abandoned
        self.listeners = listeners
        self.queue_name = keys.queue_name
        #: Jobs this worker finished (completed or failed for good), for logs and tests.
        self.processed = 0
        self._processed_lock = threading.Lock()
        self.iteration_runs = IterationRuns()
        #: Watches the running attempts' limits and cancel requests (limits.py).
        self.watchdog = Watchdog(client, keys, self.hard_limit)
        #: Told when an attempt's thread is lost to it at the hard limit (the Worker refills the slot).
        self.on_leak: Callable[[AttemptControl], None] = on_leak or (lambda control: None)

    def loop(self) -> None:
        try:
            while True:
                item = self.handoff.get()
                if item is None:
                    return
                fetched, token = item
                current: Fetched | None = fetched
                while current is not None and current.job_id is not None:
                    if self.abandoned.is_set():
                        break
                    job_id = current.job_id
                    try:
                        current = self.process(current, token)
                    except _Abandoned:
                        return  # failed at its hard limit: the Worker gave the slot to a new thread
                    except BaseException:  # a bug of ours (or a strategy's SystemExit) must not
                        # kill the thread: the lock expires and the stalled check hands the job
                        # to someone else
                        log.exception("worker %s: job %s could not be finished", self.queue_name, job_id)
                        current = None
                self.slots.release()
        finally:
            self.transitions.release_thread_connection()

    def process(self, fetched: Fetched, token: str) -> Fetched | None:
        """Run one attempt and record its outcome; return the next job if fetch-next took one."""
        assert fetched.job_id is not None
        attempt = Attempt(fetched.job_id, token, fetched.hash, self.options.data_limits)
        self.locks.track(attempt.job_id, token, attempt.taken)
        try:
            if attempt.scheduler_id:
                late_ms = self._produce_next_iteration(attempt)
                if late_ms is not None:  # its missed-run policy skips it (docs/scheduler.md)
                    log.info("worker %s: iteration %s is %d ms late, past its scheduler's grace: completed "
                             "without running", self.queue_name, attempt.job_id, late_ms)
                    skipped = encode_json_like_js({SKIPPED_RETURNVALUE_KEY: late_ms})
                    return self._finish(attempt, lambda fetch: self._complete(attempt, skipped, fetch, None))
                ran_before = self.iteration_runs.result_of(attempt.job_id)
                if ran_before is not None:  # a failover lost its completion (schedule/runs.py)
                    log.warning("worker %s: iteration %s ran here already (a failover lost its completion): "
                                "completed with that result, not run again", self.queue_name, attempt.job_id)
                    return self._finish(attempt, lambda fetch: self._complete(attempt, ran_before, fetch, None))
            job = attempt.job(self.client, self.keys, self.clock)
            job.lock_release = lambda releasing: self.locks.releasing(attempt.job_id, releasing)
            telling = self.listeners.times_jobs  # no listener: no call
            if telling:
                self.listeners.active(job)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("worker %s: job %s (%s) started, attempt %d of %d", self.queue_name, attempt.job_id,
                          shown_name(attempt.fields.get("name", "")), attempt.attempts_made + 1,
                          max(attempt.attempts, attempt.attempts_made + 1))
            timing = telling or log.isEnabledFor(logging.INFO)  # else no clock read
            started = time.monotonic() if timing else 0.0
            soft_ms, hard_ms = attempt_limits(attempt.opts, self.options.soft_time_limit_ms,
                                              self.options.time_limit_ms)
            control = job.control = AttemptControl(attempt.job_id, token, soft_ms, hard_ms,
                                                   threading.current_thread(), (attempt, job))
            self.watchdog.watch(control)
            try:
                if attempt.deferred_failure:
                    raise UnrecoverableError(attempt.deferred_failure)
                if attempt.problem is not None:  # a hash no producer writes: never run, never retried
                    raise UnrecoverableError(attempt.problem)
                result = self.processor(job)
                value = encode_json_like_js(result)
            except WaitingChildrenError:
                self._claim(control)
                return None  # the job moved to waiting-children and runs again after them
            except BaseException as exc:  # noqa: BLE001 - the processor's failure is the job's, not ours
                self._claim(control)
                ran_ms = _ms_since(started) if timing else 0.0
                failure = self._failure(attempt, job, exc, control.cancel_reason)  # decided (and logged) once
                told = partial(self.listeners.failed, job, exc, ran_ms, failure.delay) if telling else None
                return self._finish(attempt, lambda fetch: self._fail(attempt, failure, fetch), told)
            finally:
                self.watchdog.forget(control)
            self._claim(control)
            if control.cancel_reason is not None:  # it returned, but was cancelled meanwhile: it fails
                stop = JobCancelRequestedError(control.cancel_reason)
                failure = self._failure(attempt, job, stop, control.cancel_reason)
                told = partial(self.listeners.failed, job, stop, _ms_since(started) if timing else 0.0,
                               None) if telling else None
                return self._finish(attempt, lambda fetch: self._fail(attempt, failure, fetch), told)
            ran = _ms_since(started) if timing else None
            if attempt.scheduler_id:
                self.iteration_runs.ran(attempt.job_id, value)
            told = partial(self.listeners.completed, job, result, ran or 0.0) if telling else None
            return self._finish(attempt, lambda fetch: self._complete(attempt, value, fetch, ran), told)
        finally:
            self.locks.untrack(attempt.job_id, token)

    def _claim(self, control: AttemptControl) -> None:
        """Record this attempt's outcome from its own thread, unless the hard limit took it
        first: then the result is discarded and the thread ends (``_Abandoned``)."""
        if control.claim_finish():
            # job -> control -> (attempt, job): a cycle only the cyclic GC frees, which cost a
            # sixth of the CPU per job at concurrency 10; broken here, where the payload is done with
            control.payload = None
            return
        log.warning("worker %s: job %s returned after it was failed (it %s), in thread %s: the result is "
                    "discarded and the thread ends", self.queue_name, control.job_id, control.why_abandoned(),
                    threading.current_thread().name)
        raise _Abandoned

    def hard_limit(self, control: AttemptControl) -> None:
        """From the watchdog: ``control``'s attempt ran past its hard limit and its thread is
        lost to it. Fail the attempt now as any failure (retries and backoff apply; a pending
        cancel makes it the cancellation), with the attempt's own token, then give its slot to
        a new thread (``on_leak``). The late thread finds the attempt abandoned and records
        nothing (``_claim``)."""
        attempt, job = control.payload
        control.payload = None  # the cycle broken, as _claim does
        stop = control.stop if control.stop is not None else JobHardTimeLimitError("hard time limit exceeded")
        failure = self._failure(attempt, job, stop, control.cancel_reason)
        try:
            self._finish(attempt, lambda _fetch: self._fail(attempt, failure, False))
        finally:
            self.locks.untrack(attempt.job_id, attempt.token)
            self.on_leak(control)

    def _finish(self, attempt: Attempt, move: Callable[[bool], Fetched | None],
                told: Callable[[], None] | None = None) -> Fetched | None:
        """Run the final move, retrying through connection losses, then tell the listeners
        (``told``) what was recorded; a refused move (lock lost, no longer active) is logged:
        another worker owns the job now."""
        backoff: Backoff | None = None  # built on the first error only: the hot path stays lean
        self.locks.releasing(attempt.job_id)  # from here on a vanished lock may be our own doing
        while not self.abandoned.is_set():
            try:
                fetched = move(not self.stop.is_set())
            except CONNECTION_ERRORS as exc:
                backoff = backoff or Backoff(base=0.1, cap=10.0)
                delay = backoff.next_delay()
                log.warning("worker %s: Redis failed while finishing job %s (%s); retrying in %.2f s",
                            self.queue_name, attempt.job_id, exc, delay)
                if not self.abandoned.is_set():  # else the shutdown cut the connection on purpose
                    self.listeners.redis_error(exc, f"finishing job {attempt.job_id}")
                self.stop.wait(delay)
                if self.stop.is_set():
                    time.sleep(backoff.next_delay())
            except CancelPendingError:
                # A cancel request came after the processor's outcome was decided: the job ends
                # as cancelled instead, once (docs/protocol.md §3.8).
                stored = self.client.get(self.keys.job_cancel(attempt.job_id))
                if stored is not None:
                    failure = self._failure(attempt, None, JobCancelRequestedError(""), failed_reason(text(stored)))
                    move = partial(self._fail, attempt, failure)
                    told = None
            except (EchoMQError, redis.ResponseError) as exc:
                # Refused (lock lost, no longer active) or a server error: the job is either
                # another worker's now or stays active until the stalled check returns it.
                log.warning("worker %s: could not finish job %s: %s", self.queue_name, attempt.job_id, exc)
                # After a lost reply the lock may be gone by our own first move; else it was lost,
                # unless the renewer found that first (and told it).
                if backoff is None and isinstance(exc, LockError) and self.locks.take(attempt.job_id, attempt.token):
                    self.listeners.lock_lost(attempt.job_id)
                return None
            else:
                if told is not None:
                    self._tell_finished(fetched, attempt.token, told)
                return fetched
        return None

    def _tell_finished(self, fetched: Fetched | None, token: str, tell: Callable[[], None]) -> None:
        """Tell the listeners an outcome. The job fetch-next just took holds a lock already:
        it is tracked first, so its lock is renewed however long the listeners take."""
        if fetched is not None and fetched.job_id is not None:
            hash_ = fetched.hash
            self.locks.track(fetched.job_id, token, (hash_.get("processedOn", ""), hash_.get("ats", ""),
                                                     hash_.get("timestamp", "")))
        tell()

    def _count_finished(self) -> None:
        with self._processed_lock:
            self.processed += 1

    def _complete(self, attempt: Attempt, value: str, fetch_next: bool, ran_ms: float | None) -> Fetched | None:
        """Record the success; its INFO line says how long the processor ran (``ran_ms``, None
        when nothing measured it: INFO was off as the job started)."""
        fetched = self.transitions.move_to_finished(
            attempt.job_id, attempt.token, self.clock(), completed=True, value=value,
            keep=attempt.opts.get("removeOnComplete", self.options.remove_on_complete),
            attempts=attempt.attempts, fetch_next=fetch_next, taken=attempt.taken,
        )
        self._count_finished()
        if ran_ms is not None and log.isEnabledFor(logging.INFO):
            log.info("worker %s: job %s (%s) completed in %.1f ms", self.queue_name, attempt.job_id,
                     shown_name(attempt.fields.get("name", "")), ran_ms)
        return fetched

    def _failure(self, attempt: Attempt, job: Any, exc: BaseException, cancelled: str | None = None) -> _Failure:
        """What a failed attempt records (reason, traces) and whether it retries, with the one
        log line that says so: the job's id, name and attempt, and what happens next.
        ``cancelled``: the cancel request's ``failedReason``; it replaces the exception's and
        the job fails for good (as does a JobCancelRequestedError raised by the processor)."""
        if cancelled is None and isinstance(exc, JobCancelRequestedError):
            cancelled = exc.reason
        try:
            reason = cancelled or sendable_text(str(exc) or type(exc).__name__)  # the message may hold anything
        except Exception:  # noqa: BLE001 - an exception whose __str__ fails still fails the job
            reason = type(exc).__name__
        traces = stacktrace_with(job_hash.stacktrace(attempt.fields), exc, attempt.opts.get("stackTraceLimit"))
        fields = ["failedReason", reason, "stacktrace", encode_json_like_js(traces), *attempt.repairs]
        delay = None if cancelled is not None else retry_delay(
            job, attempt.attempts, attempt.attempts_made, attempt.opts.get("backoff"), exc, self.backoff_strategy)
        if delay is None:
            ahead, level = "no retry: the job failed", logging.ERROR
        else:
            ahead, level = (f"retrying in {delay} ms" if delay > 0 else "retrying now"), logging.WARNING
        # Not an Exception (SystemExit, KeyboardInterrupt ...): rarely meant as a job failure,
        # so it is an ERROR even with a retry ahead. The traceback goes with the line unless no
        # function of the user's ran (a malformed hash, data over the limits, a name no function
        # handles): then it is our own raise, with nothing to show.
        if not isinstance(exc, Exception):
            level = logging.ERROR
        if cancelled is not None:  # someone asked for it: no error of the job's, no traceback to show
            ahead, level = "cancelled: no retry", logging.WARNING
        if log.isEnabledFor(level):
            ran = not attempt.deferred_failure and attempt.problem is None and cancelled is None \
                and not isinstance(exc, UnroutedJobError)
            log.log(level, "worker %s: job %s (%s) failed on attempt %d of %d: %s: %s; %s", self.queue_name,
                    attempt.job_id, shown_name(attempt.fields.get("name", "")), attempt.attempts_made + 1,
                    max(attempt.attempts, attempt.attempts_made + 1), type(exc).__name__, _bounded(reason), ahead,
                    exc_info=exc if ran else None)
        return _Failure(reason, fields, delay, cancelled is not None)

    def _fail(self, attempt: Attempt, failure: _Failure, fetch_next: bool) -> Fetched | None:
        reason, fields, delay = failure.reason, failure.fields, failure.delay
        if delay is not None and delay > 0:
            return self.transitions.move_to_delayed(attempt.job_id, attempt.token, self.clock(), delay,
                                                    fields=fields, fetch_next=fetch_next, taken=attempt.taken)
        if delay == 0:
            self.transitions.retry(attempt.job_id, attempt.token, self.clock(),
                                   lifo=bool(attempt.opts.get("lifo")), fields=fields, taken=attempt.taken)
            return None
        fetched = self.transitions.move_to_finished(
            attempt.job_id, attempt.token, self.clock(), completed=False, value=reason,
            keep=attempt.opts.get("removeOnFail", self.options.remove_on_fail), attempts=attempt.attempts,
            fetch_next=fetch_next, fields=fields, taken=attempt.taken, cancelling=failure.cancelling,
        )
        self._count_finished()
        return fetched

    def _produce_next_iteration(self, attempt: Attempt) -> int | None:
        """A scheduler's iteration produces the next one as it becomes active, before the
        processor runs. A transient error (OOM, READONLY, a lost connection) is retried a few
        times: the step is idempotent (docs/protocol.md §4.4). What still fails is logged and
        left to the maintenance pass, which repairs the schedule (§4.5); the job itself still
        runs (docs/worker.md). Returns how late the iteration is when its scheduler's missed-run
        policy says it does not run (§4.6), else None."""
        scheduler_id = attempt.scheduler_id
        assert scheduler_id is not None
        backoff: Backoff | None = None
        for retries_left in range(STEP_RETRIES, -1, -1):
            try:
                if len(scheduler_id.split(":")) >= 5 and not self.client.hexists(self.keys.scheduler(scheduler_id),
                                                                                  "ic"):
                    return None  # a legacy repeatable key, not a job scheduler
                result = self.scheduler.step(attempt.job_id, scheduler_id=scheduler_id)
                return None if result.run else result.late_ms
            except Exception as exc:  # the job runs whatever the step did
                if retries_left and is_transient_step_error(exc) and not self.stop.is_set():
                    backoff = backoff or Backoff(base=0.05, cap=0.4)
                    self.stop.wait(backoff.next_delay())
                    continue
                transient = is_transient_step_error(exc)  # else a refusal or a bug: worth a traceback
                log.log(logging.WARNING if transient else logging.ERROR,
                        "worker %s: could not add the next iteration of scheduler %r after job %s (%s: %s); "
                        "left to the maintenance pass", self.queue_name, scheduler_id, attempt.job_id,
                        type(exc).__name__, exc, exc_info=not transient)
                return None
        return None
