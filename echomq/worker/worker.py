"""The Worker: takes jobs from a queue, runs a plain function on each, records the outcome.

Threads (all started by ``run()``, all joined before it returns):

* the caller's thread, the **fetcher** (``fetcher.Fetcher``): while a processor slot is free it
  calls moveToActive; when nothing is ready it blocks on the queue's ``marker`` with BZPOPMIN
  on a dedicated connection (never polling);
* ``concurrency`` **processor** threads (``processing.AttemptRunner``): each runs
  ``processor(job)`` and finishes the attempt with one script that also fetches the next job
  (docs/protocol.md §3.3);
* one **maintenance** thread: lock renewal and the stalled check (``maintenance``).

Shutdown, in dramatiq's order (the thread that proves the worker alive stops last):
``close(timeout)`` stops fetching, lets running jobs finish while their locks are still
renewed, and only then stops the renewer and disconnects every connection the Worker opened.
Jobs still running at the deadline are abandoned to the stalled check: their locks expire and
another worker takes them again, so nothing is lost. ``close()`` may be called from another
thread, from a signal handler the host installed while ``run()`` blocks in the main thread, or
from a processor (a "shutdown" job); from the last two it only asks, since it cannot wait for
itself. The timeout is a bound even when Redis hangs (a stopped server, a partition that resets
nothing): a fetcher stuck on Redis has its connections cut, a processor stuck in its final move
past the deadline too, every join has an end, and what is left behind is logged.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..clock import system_clock
from ..errors import EchoMQError, WrongClusterNodeError
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys
from ..protocol.limits import DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH
from ..schedule.scheduler import JobScheduler
from ..transport.connection import CONNECTION_ERRORS, Backoff, Connection, Connections, PidGuard
from ..types import BackoffStrategy, Clock, KeepRule, Processor
from .fetcher import Fetcher, Handoff, MarkerWait, Slots
from .listeners import ListenerSet, WorkerListener
from .maintenance import LockRegistry, Maintenance
from .options import WorkerOptions, client_name_safe
from .processing import AttemptRunner
from .routing import as_processor
from .threads import ProcessorThreads
from .transitions import Transitions

log = logging.getLogger(__name__)

#: How long the fetcher may take to stop once close() asked (a healthy Redis answers CLIENT
#: UNBLOCK or a moveToActive in milliseconds) before its connections are cut.
FETCHER_STOP_S = 1.0

#: How long the shutdown waits, past the close deadline, for threads to react to the stop (a cut
#: socket, the maintenance loop's stop) before leaving them behind, logged.
SHUTDOWN_GRACE_S = 0.5

#: close()'s own slack on top of that before it gives up waiting for run()'s shutdown.
CLOSE_SLACK_S = 0.5

#: Step of the processor joins, so that a later, shorter close(timeout) is seen in time.
JOIN_STEP_S = 0.25


def _left(end: float | None) -> float | None:
    """Seconds until the monotonic time ``end`` (None: no end)."""
    return None if end is None else max(0.0, end - time.monotonic())


class Worker:
    """Processes one queue's jobs with ``processor(job)``; its return value is the job's result.
    ``processor`` may be a mapping of job name -> function: each job runs the function of its
    name, and a job whose name has none fails for good, saying so (docs/worker.md).

    An exception fails the attempt (message and stack trace are stored); with attempts left the
    job retries after its backoff; ``UnrecoverableError`` fails it at once. A job whose hash is
    malformed (any runtime may have written it) or whose data is over ``max_data_bytes`` /
    ``max_data_depth`` (the Queue's defaults) fails at once without running, its
    ``failedReason`` saying what is wrong. Nothing starts until
    ``run()`` (blocking) or ``start()`` (in a thread of its own). ``clock`` (epoch ms) stamps
    everything the Worker writes and is handed on to the scheduler step and to every job.
    ``listeners`` (``WorkerListener``s) hear of every job's start and outcome, stalls, lost locks
    and Redis errors (docs/metrics.md); whatever they raise is logged, never the worker's.
    """

    def __init__(
        self,
        connection: Connection,
        queue_name: str,
        processor: Processor | Mapping[str, Processor],
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
        limiter: Mapping[str, int] | None = None,
        metrics: Mapping[str, int] | None = None,
        skip_stalled_check: bool = False,
        remove_on_complete: KeepRule | None = None,
        remove_on_fail: KeepRule | None = None,
        clock: Clock = system_clock,
        max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES,
        max_data_depth: int | None = DEFAULT_MAX_DATA_DEPTH,
        listeners: Sequence[WorkerListener] | None = None,
        reply_spin_us: int = 250,
        time_limit_ms: int | None = None,
        soft_time_limit_ms: int | None = None,
    ) -> None:
        processor = as_processor(processor, queue_name)  # a mapping routes by job name (routing.py)
        self.options = options = WorkerOptions(
            concurrency=concurrency, lock_duration=lock_duration, lock_renew_time=lock_renew_time,
            stalled_interval=stalled_interval, max_stalled_count=max_stalled_count, name=name,
            drain_delay=drain_delay, limiter=limiter, skip_stalled_check=skip_stalled_check,
            remove_on_complete=remove_on_complete, remove_on_fail=remove_on_fail,
            backoff_strategy=backoff_strategy, clock=clock, max_data_bytes=max_data_bytes,
            max_data_depth=max_data_depth, metrics=metrics, reply_spin_us=reply_spin_us,
            time_limit_ms=time_limit_ms, soft_time_limit_ms=soft_time_limit_ms,
        )
        self.keys = QueueKeys(queue_name, prefix)
        self._listeners = ListenerSet(listeners, queue_name)
        client_name_safe("prefix", prefix)  # the marker connection's client name starts with it
        self._connections = Connections(connection, route_key=self.keys.meta)
        self.client = self._connections.client
        self.queue_name = queue_name
        self.prefix = prefix
        self.processor = processor
        self.backoff_strategy = backoff_strategy
        self.name = name
        self.concurrency = options.concurrency
        self.drain_delay = options.drain_delay
        self.clock = clock
        self.id = uuid.uuid4().hex
        self.transitions = Transitions(self.client, self.keys, options)
        self.locks = LockRegistry()
        self.transitions.moves.held = self.locks.held  # held again after a failover (master_moves.py)
        self.maintenance = Maintenance(
            self.transitions, self.locks, lock_duration=options.lock_duration,
            lock_renew_time=options.lock_renew_time, stalled_interval=options.stalled_interval,
            max_stalled_count=options.max_stalled_count, skip_stalled_check=options.skip_stalled_check,
            listeners=self._listeners,
        )
        self._stop = threading.Event()
        self._stop_maintenance = threading.Event()
        self._abandoned = threading.Event()
        self._stopped = threading.Event()
        self._fetcher_done = threading.Event()
        slots = Slots(options.concurrency)
        handoff: Handoff = Handoff()
        self._handoff = handoff
        self._fetcher = Fetcher(
            self.transitions, slots, handoff,
            MarkerWait(self._connections, self.keys.marker, max_block_s=options.drain_delay,
                       client_name=self.keys.client_name(f":w:{name}" if name else "")),
            clock=clock, drain_delay=options.drain_delay, stop=self._stop, worker_id=self.id, queue_name=queue_name,
            listeners=self._listeners,
        )
        self._runner = AttemptRunner(
            client=self.client, keys=self.keys, transitions=self.transitions, locks=self.locks,
            processor=processor, options=options, backoff_strategy=backoff_strategy, clock=clock,
            scheduler=JobScheduler(self.client, queue_name, prefix=prefix, clock=clock),
            slots=slots, handoff=handoff, stop=self._stop, abandoned=self._abandoned, listeners=self._listeners,
        )
        self._started = False
        self._close_deadline: float | None = None  # monotonic; None: no bound (or no close yet)
        self._own_threads: list[threading.Thread] = []  # processors and maintenance, once run() started them
        self._processors = ProcessorThreads(self._runner.loop, slots, queue_name, self._own_threads)
        self._runner.on_leak = self._processors.refill
        self._run_ident: int | None = None
        self._thread: threading.Thread | None = None
        #: What ended a ``start()``-ed worker's run() with an error (None while it runs or ended cleanly).
        self.failure: Exception | None = None
        self._pid = PidGuard()
        self._state_lock = threading.Lock()

    # -- public surface ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True from ``run()`` until its shutdown is done; False in a forked child, which
        inherited this object but none of its threads."""
        if self._pid.foreign():
            return False
        return self._started and not self._stopped.is_set()

    @property
    def lock_duration(self) -> int:
        return self.options.lock_duration

    @property
    def stalled_interval(self) -> int:
        return self.options.stalled_interval

    @property
    def max_stalled_count(self) -> int:
        return self.options.max_stalled_count

    @property
    def remove_on_complete(self) -> Any:
        return self.options.remove_on_complete

    @property
    def remove_on_fail(self) -> Any:
        return self.options.remove_on_fail

    @property
    def leaked_threads(self) -> int:
        """Threads lost to jobs past their hard time limit, each left running (docs/worker.md)."""
        return self._processors.leaked

    @property
    def next_hard_limit(self) -> float | None:
        """``time.monotonic()`` of the earliest hard time limit of a running job (None: none has one)."""
        return self._runner.watchdog.next_hard_limit()

    @property
    def processed(self) -> int:
        """Jobs this worker finished (completed or failed for good)."""
        return self._runner.processed

    def run(self, *, burst: bool = False) -> None:
        """Process jobs in the calling thread until ``close()``; then return, all threads joined.
        ``burst=True`` also returns once the queue is idle: nothing due and none of its jobs
        running (``Fetcher.run``), as ``echomq worker --burst`` does for cron and CI.

        A lost or refused connection is retried with backoff, also before the first contact
        (Redis may come up after the worker). A server whose TLS certificate fails verification
        before the worker ever talked to it is not retried: run() shuts down and raises that
        ``redis.ConnectionError`` (``CERTIFICATE_VERIFY_FAILED``). Nor is a node of a Redis Cluster
        that does not serve the queue's slot, given as one server (a ``redis://`` URL, a plain
        client): run() stops with :class:`~echomq.errors.WrongClusterNodeError` naming that node,
        the one that serves the slot, and the fix."""
        with self._state_lock:
            if self._started:
                raise EchoMQError("a Worker runs once: create a new Worker instead of calling run() again")
            self._started = True
        self._pid.claim()
        self._run_ident = threading.get_ident()
        threads: list[threading.Thread] = []
        processors: list[threading.Thread] = []
        try:
            self._fetcher.marker.open()
            for label, target, args in (("maint", self._maintenance_loop, ()),
                                        ("watchdog", self._runner.watchdog.run, (self._stop_maintenance,))):
                thread = threading.Thread(target=target, args=args, name=f"echomq-{label}-{self.queue_name}",
                                          daemon=True)
                self._own_threads.append(thread)
                thread.start()
                threads.append(thread)
            processors = self._processors.start(self.concurrency)
            try:
                self._fetcher.run(burst=burst)
            finally:
                self.transitions.release_thread_connection()
        finally:
            self._fetcher_done.set()
            self._shutdown(processors, threads)

    def start(self) -> Worker:
        """Run the worker in a background thread of its own (``close()`` joins it)."""
        if self._thread is not None:
            raise EchoMQError("this Worker was already started")
        self._thread = threading.Thread(target=self._run_in_background, name=f"echomq-worker-{self.queue_name}",
                                        daemon=True)
        self._thread.start()
        return self

    def _run_in_background(self) -> None:
        """``run()`` for ``start()``: an error that ends it (a certificate that never verified)
        is logged and kept in ``failure``, not left to the thread excepthook, which would print."""
        try:
            self.run()
        except Exception as exc:  # noqa: BLE001 - the thread's top: whatever ends run() is kept and logged
            self.failure = exc
            log.error("worker for queue %r stopped: %s", self.queue_name, exc)

    def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs, wait up to ``timeout`` s (None: as long as it takes) for running
        ones, and return once every thread is joined and every connection the Worker opened is
        closed. Jobs still running at the deadline keep their place in ``active`` and are
        recovered by the stalled check after their lock expires.

        ``timeout`` holds even when Redis hangs: close() returns within ``max(timeout,
        FETCHER_STOP_S) + SHUTDOWN_GRACE_S + CLOSE_SLACK_S`` (at most a second past the
        timeout, or past one second), and logs the jobs and threads it left behind.

        Safe to call twice (the earlier deadline wins), before ``run()``, from a signal handler,
        or from a processor: from run()'s own thread or a processor it only asks for the stop
        and returns at once, and run() finishes the shutdown."""
        self._pid.check("Worker")  # a forked child has none of our threads to wait for
        now = time.monotonic()
        with self._state_lock:
            asked = None if timeout is None else now + max(0.0, timeout)
            if asked is not None and (self._close_deadline is None or asked < self._close_deadline):
                self._close_deadline = asked
            deadline = self._close_deadline
        self._stop.set()
        cut_at = now + FETCHER_STOP_S
        end = None if deadline is None else max(deadline, cut_at) + SHUTDOWN_GRACE_S + CLOSE_SLACK_S
        if self._started:
            # Waking the fetcher touches locks and sockets; from a signal handler that
            # interrupted the run() thread we must not block on them, so helper threads do it:
            # one wakes it, one cuts its connections if Redis keeps it from stopping.
            helpers = [
                threading.Thread(target=self._fetcher.wake, args=(self._fetcher_done,),
                                 name="echomq-worker-wake", daemon=True),
                threading.Thread(target=self._fetcher.cut_if_stuck, args=(self._fetcher_done, cut_at),
                                 name="echomq-worker-cut", daemon=True),
            ]
            for helper in helpers:
                helper.start()
            if threading.get_ident() == self._run_ident or threading.current_thread() in self._own_threads:
                return  # run() completes the shutdown once the handler (or the job) returns
            if not self._stopped.wait(_left(end)):
                log.warning("worker %s: close(timeout=%s) returns before run() finished shutting down",
                            self.queue_name, timeout)
            for helper in helpers:
                helper.join(_left(end))
        else:
            self._connections.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_left(end))  # start() was called: that thread may not have begun run() yet

    def __enter__(self) -> Worker:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


    # -- maintenance and shutdown -----------------------------------------------------------
    def _maintenance_loop(self) -> None:
        backoff = Backoff(base=0.1, cap=5.0)
        delay_ms = 0
        while not self._stop_maintenance.wait(delay_ms / 1000):
            try:
                delay_ms = self.maintenance.run_once(self.clock())
                backoff.reset()
            except WrongClusterNodeError:
                return  # a misconfiguration: the fetcher's run() raises it, once
            except CONNECTION_ERRORS as exc:
                if self._stop_maintenance.is_set():
                    return  # the shutdown cut or closed the connection on purpose
                delay_ms = int(backoff.next_delay() * 1000)
                log.warning("worker %s maintenance lost Redis (%s); retrying in %d ms", self.queue_name, exc, delay_ms)
                self._listeners.redis_error(exc, "renewing locks and checking for stalled jobs")
            except Exception:
                delay_ms = int(backoff.next_delay() * 1000)
                log.exception("worker %s maintenance step failed", self.queue_name)

    def _join_until_deadline(self, threads: list[threading.Thread]) -> list[threading.Thread]:
        """Join ``threads`` until the close deadline, re-read at each step (a second close()
        may bring it forward); return those still alive."""
        while True:
            alive = [t for t in threads if t.is_alive()]
            left = _left(self._close_deadline)
            if not alive or left == 0.0:
                return alive
            alive[0].join(JOIN_STEP_S if left is None else min(left, JOIN_STEP_S))

    def _shutdown(self, processors: list[threading.Thread], others: list[threading.Thread]) -> None:
        processors = self._processors.closing() if processors else []
        for _ in processors:
            self._handoff.put(None)
        running = self._join_until_deadline(processors)
        if running:
            # Past the deadline: stop renewing their locks so the stalled check (ours or another
            # worker's) takes these jobs back; their threads are daemons and finish nothing. A
            # final move stuck on a Redis that does not answer is cut, so the thread can end.
            self._abandoned.set()
            jobs = sorted(self.locks.snapshot())
            self.locks.clear()
            log.warning("worker %s closed with %d job(s) still running (%s); their locks are no longer "
                        "renewed and the stalled check hands them out again", self.queue_name, len(jobs),
                        ", ".join(jobs))
            self.transitions.interrupt_threads(t.ident for t in running)
        self._stop_maintenance.set()
        self._runner.watchdog.wake()
        grace_end = time.monotonic() + SHUTDOWN_GRACE_S
        for thread in (*running, *others):
            thread.join(_left(grace_end))
        self._listeners.join(_left(grace_end))  # the stalls, lost locks and errors still being told
        left = [t.name for t in (*processors, *others) if t.is_alive()]
        if left:
            log.warning("worker %s: thread(s) %s still alive after close (in a processor, or waiting on a Redis "
                        "that does not answer); left behind as daemon threads", self.queue_name, ", ".join(left))
        self._fetcher.marker.close()
        if not any(t.is_alive() for t in processors):
            self._connections.close()  # an abandoned thread may still finish: its client stays open
        self._stopped.set()

    def __repr__(self) -> str:
        return f"Worker({self.queue_name!r}, concurrency={self.concurrency}, name={self.name!r})"
