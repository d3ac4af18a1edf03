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
thread or from a signal handler the host installed while ``run()`` blocks in the main thread.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..clock import system_clock
from ..errors import EchoMQError, InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys
from ..schedule.scheduler import JobScheduler
from ..transport.connection import CONNECTION_ERRORS, Backoff, Connection, Connections, PidGuard
from ..types import BackoffStrategy, Clock, KeepRule, Processor
from .fetcher import Fetcher, Handoff, MarkerWait, Slots
from .maintenance import LockRegistry, Maintenance
from .options import WorkerOptions
from .processing import AttemptRunner
from .transitions import Transitions

log = logging.getLogger(__name__)


class Worker:
    """Processes one queue's jobs with ``processor(job)``; its return value is the job's result.

    An exception fails the attempt (message and stack trace are stored); with attempts left the
    job retries after its backoff; ``UnrecoverableError`` fails it at once. Nothing starts until
    ``run()`` (blocking) or ``start()`` (in a thread of its own). ``clock`` (epoch ms) stamps
    everything the Worker writes and is handed on to the scheduler step and to every job.
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
        limiter: Mapping[str, int] | None = None,
        skip_stalled_check: bool = False,
        remove_on_complete: KeepRule | None = None,
        remove_on_fail: KeepRule | None = None,
        clock: Clock = system_clock,
    ) -> None:
        if not callable(processor):
            raise InvalidInputError(f"Worker processor={processor!r}: must be callable")
        self.options = options = WorkerOptions(
            concurrency=concurrency, lock_duration=lock_duration, lock_renew_time=lock_renew_time,
            stalled_interval=stalled_interval, max_stalled_count=max_stalled_count, name=name,
            drain_delay=drain_delay, limiter=limiter, skip_stalled_check=skip_stalled_check,
            remove_on_complete=remove_on_complete, remove_on_fail=remove_on_fail,
        )
        self.keys = QueueKeys(queue_name, prefix)
        self._connections = Connections(connection)
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
        self.maintenance = Maintenance(
            self.transitions, self.locks, lock_duration=options.lock_duration,
            lock_renew_time=options.lock_renew_time, stalled_interval=options.stalled_interval,
            max_stalled_count=options.max_stalled_count, skip_stalled_check=options.skip_stalled_check,
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
        )
        self._runner = AttemptRunner(
            client=self.client, keys=self.keys, transitions=self.transitions, locks=self.locks,
            processor=processor, options=options, backoff_strategy=backoff_strategy, clock=clock,
            scheduler=JobScheduler(self.client, queue_name, prefix=prefix, clock=clock),
            slots=slots, handoff=handoff, stop=self._stop, abandoned=self._abandoned,
        )
        self._started = False
        self._close_timeout: float | None = None
        self._run_ident: int | None = None
        self._thread: threading.Thread | None = None
        self._pid = PidGuard()
        self._state_lock = threading.Lock()

    # -- public surface ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
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
    def processed(self) -> int:
        """Jobs this worker finished (completed or failed for good)."""
        return self._runner.processed

    def run(self) -> None:
        """Process jobs in the calling thread until ``close()``; then return, all threads joined."""
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
            maintenance = threading.Thread(target=self._maintenance_loop, name=f"echomq-maint-{self.queue_name}",
                                           daemon=True)
            maintenance.start()
            threads.append(maintenance)
            processors = [
                threading.Thread(target=self._runner.loop, name=f"echomq-proc-{self.queue_name}-{i}", daemon=True)
                for i in range(self.concurrency)
            ]
            for thread in processors:
                thread.start()
            try:
                self._fetcher.run()
            finally:
                self.transitions.release_thread_connection()
        finally:
            self._fetcher_done.set()
            self._shutdown(processors, threads)

    def start(self) -> Worker:
        """Run the worker in a background thread of its own (``close()`` joins it)."""
        if self._thread is not None:
            raise EchoMQError("this Worker was already started")
        self._thread = threading.Thread(target=self.run, name=f"echomq-worker-{self.queue_name}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs, wait up to ``timeout`` s (None: as long as it takes) for running
        ones, and return once every thread is joined and every connection the Worker opened is
        closed. Jobs still running at the deadline keep their place in ``active`` and are
        recovered by the stalled check after their lock expires. Safe to call twice, before
        ``run()``, or from a signal handler."""
        self._pid.check("Worker")  # a forked child has none of our threads to wait for
        self._close_timeout = timeout
        self._stop.set()
        grace = None if timeout is None else timeout + self.drain_delay + 5
        if self._started:
            # Waking the fetcher touches locks and sockets; from a signal handler that
            # interrupted the run() thread we must not block on them, so a helper thread does it.
            waker = threading.Thread(target=self._fetcher.wake, args=(self._fetcher_done,),
                                     name="echomq-worker-wake", daemon=True)
            waker.start()
            if threading.get_ident() == self._run_ident:
                return  # run() itself completes the shutdown once the handler returns
            self._stopped.wait(grace)
            waker.join(grace)
        else:
            self._connections.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(grace)  # start() was called: that thread may not have begun run() yet

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
            except CONNECTION_ERRORS as exc:
                delay_ms = int(backoff.next_delay() * 1000)
                log.warning("worker %s maintenance lost Redis (%s); retrying in %d ms", self.queue_name, exc, delay_ms)
            except Exception:
                delay_ms = int(backoff.next_delay() * 1000)
                log.exception("worker %s maintenance step failed", self.queue_name)

    def _shutdown(self, processors: list[threading.Thread], others: list[threading.Thread]) -> None:
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
        for thread in others:
            thread.join()
        self._fetcher.marker.close()
        if not any(t.is_alive() for t in processors):
            self._connections.close()  # an abandoned thread may still finish: its client stays open
        self._stopped.set()

    def __repr__(self) -> str:
        return f"Worker({self.queue_name!r}, concurrency={self.concurrency}, name={self.name!r})"
