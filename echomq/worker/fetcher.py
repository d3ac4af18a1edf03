"""The Worker's fetcher: taking jobs, in the thread that called ``run()``.

While a processor slot is free it calls moveToActive (which first promotes due delayed jobs)
and hands the job to a processor thread. When nothing is ready it blocks on the queue's
``marker`` key (docs/protocol.md §1.2) with BZPOPMIN on a connection of its own, never polling,
for at most ``drain_delay`` or until the next delayed job is due; whatever it pops, the next
moveToActive finds out what to do. ``close()`` cuts the wait short from another thread.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from ..errors import EchoMQError
from ..transport.blocking import BlockingConnection
from ..transport.connection import CONNECTION_ERRORS, Backoff, Connections, is_certificate_failure, is_fake
from ..types import Clock
from .listeners import ListenerSet
from .transitions import Fetched, Transitions

log = logging.getLogger(__name__)

#: How close to a delayed job's due time the fetcher stops blocking on Redis and sleeps locally:
#: Redis checks blocking timeouts about every 100 ms (hz 10), too coarse for a due time.
LOCAL_WAIT_S = 0.15

#: Longest single block on fakeredis, whose CLIENT UNBLOCK older releases lack.
FAKE_BLOCK_CAP_S = 0.2

#: Longest single marker wait of a burst run while one of its jobs runs: the run ends soon after
#: the last job, not a ``drain_delay`` later.
BURST_RECHECK_S = 0.1

#: What makes a fetch or a marker wait pause and retry: the server went away, or answered with an
#: error that passes (READONLY after a failover, OOM, a busy script).
RETRIED_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.ResponseError)

#: How long the fetcher waits for a free slot before it looks at its marker connection again.
SLOT_WAIT_S = 0.5

#: What keeping the marker connection open shrugs off: the marker wait retries it, or raises it.
KEEP_TRYING: tuple[type[BaseException], ...] = (*RETRIED_ERRORS, EchoMQError)

#: What asking a closed socket whether it has data may raise.
CLOSED_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, ValueError)

#: What a processor thread takes from the fetcher: a job and its lock token, or None to stop.
Handoff = queue.SimpleQueue[tuple[Fetched, str] | None]


class Slots:
    """Free processor slots: the fetcher takes one before each fetch, a processor gives it back."""

    def __init__(self, count: int) -> None:
        self._count = self._free = count
        self._cond = threading.Condition()

    def all_free(self) -> bool:
        """True when no processor holds a job."""
        with self._cond:
            return self._free == self._count

    def take(self, stop: threading.Event, idle: Callable[[], None] | None = None) -> bool:
        """Wait for a free slot; False once ``stop`` is set. ``idle`` runs, outside the lock,
        each time the wait goes on for another ``SLOT_WAIT_S``."""
        while True:
            with self._cond:
                if self._free == 0 and not stop.is_set():
                    self._cond.wait(SLOT_WAIT_S)
                if stop.is_set():
                    return False
                if self._free > 0:
                    self._free -= 1
                    return True
            if idle is not None:
                idle()

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class MarkerWait:
    """The fetcher's blocking read of the marker key, interruptible by ``close()``."""

    def __init__(self, connections: Connections, marker_key: str, *, max_block_s: float, client_name: str) -> None:
        self._connections = connections
        self.marker_key = marker_key
        self.max_block_s = max_block_s
        self.client_name = client_name
        self._fake = is_fake(connections.client)
        self._blocking: BlockingConnection | None = None
        self._refused = False  # keep_connected met an ACL refusal: left to the marker wait

    def open(self) -> None:
        self._blocking = BlockingConnection(self._connections, max_block_s=self.max_block_s,
                                            client_name=self.client_name, queue_key=self.marker_key)

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Block until a marker arrives or ``timeout`` s pass (or ``stop`` is set)."""
        blocking = self._blocking
        if blocking is None or stop.is_set():
            return
        if self._fake:
            timeout = min(timeout, FAKE_BLOCK_CAP_S)
        blocking.connect()
        if stop.is_set():
            return
        blocking.call("BZPOPMIN", self.marker_key, max(0.001, round(min(timeout, self.max_block_s), 3)))

    def connection_lost(self) -> None:
        if self._blocking is not None:
            self._blocking.drop()

    def keep_connected(self) -> None:
        """Have the marker connection open, named: before the first fetch, and while every slot
        is busy (from the fetcher's thread, which owns the socket). It is the connection that
        lists the worker in CLIENT LIST (``Queue.get_workers``, BullMQ's ``getWorkers``,
        bull-board), so a worker busy from its start, or whose connection was killed while its
        jobs ran, shows all the same. A connection that died since its last use is made again;
        what fails is tried again at the next look, and the marker wait decides what it means."""
        blocking = self._blocking
        if blocking is None or self._refused:
            return
        try:
            if blocking.conn is not None and not self._fake and _closed(blocking.conn):
                blocking.drop()
            blocking.connect()
        except KEEP_TRYING as exc:
            # Refused (the ACL): not tried again here; the marker wait raises it when it comes.
            self._refused = isinstance(exc, EchoMQError)
            log.debug("the marker connection of %s could not be opened (%s); the next wait tries again",
                      self.marker_key, exc)
            blocking.drop()

    def interrupt(self, done: threading.Event, patience_s: float) -> None:
        """Unblock the wait until ``done`` is set: a wait may begin just after one unblock, so keep
        trying for ``patience_s``."""
        blocking = self._blocking
        if blocking is None:
            return
        deadline = time.monotonic() + patience_s
        while not done.is_set() and time.monotonic() < deadline:
            blocking.interrupt()
            done.wait(0.05)

    def cut(self) -> None:
        """Cut the wait now, once (bounded: CLIENT UNBLOCK, or the socket shut when Redis does
        not answer)."""
        if self._blocking is not None:
            self._blocking.interrupt()

    def close(self) -> None:
        if self._blocking is not None:
            self._blocking.close()


def _closed(conn: Any) -> bool:
    """True for an idle connection with something to read: the server closed it (killed, restarted)."""
    try:
        return bool(conn.can_read(timeout=0))
    except CLOSED_ERRORS:
        return True


class Fetcher:
    """The fetch loop of one Worker (``run`` blocks until ``stop`` is set)."""

    def __init__(self, transitions: Transitions, slots: Slots, handoff: Handoff, marker: MarkerWait, *,
                 clock: Clock, drain_delay: float, stop: threading.Event, worker_id: str, queue_name: str,
                 listeners: ListenerSet | None = None) -> None:
        self.transitions = transitions
        self.slots = slots
        self.handoff = handoff
        self.marker = marker
        self.clock = clock
        self.drain_delay = drain_delay
        self.stop = stop
        self.worker_id = worker_id
        self.queue_name = queue_name
        self.listeners = listeners or ListenerSet((), queue_name)
        self._tokens = itertools.count(1)
        self._thread_ident: int | None = None
        self._fetched_once = self._waited_once = False  # each connection answered once: not a misconfiguration

    def run(self, *, burst: bool = False) -> None:
        """Fetch until ``stop`` is set; with ``burst``, also return once the queue is idle: a
        fetch made while none of this worker's jobs ran found nothing due (waiting, prioritized,
        or delayed and due by now). Only processors get jobs from this loop (or by fetch-next,
        holding their slot), so nothing of ours could have put a job back between the check of
        the slots and that fetch. Delayed jobs due later and other workers' jobs do not count."""
        self._thread_ident = threading.get_ident()
        backoff = Backoff(base=0.1, cap=10.0)
        # The marker wait failed with an error reply (not a lost connection): a fetch that works
        # says nothing about it, so only a wait that works ends its backoff.
        marker_refused = False
        stop = self.stop
        self.marker.keep_connected()  # named before the first job: listed even if every slot is busy from the start
        while not stop.is_set():
            none_running = burst and self.slots.all_free()
            if not self.slots.take(stop, self.marker.keep_connected):
                return
            token = f"{self.worker_id}:{next(self._tokens)}"
            try:
                fetched = self.transitions.move_to_active(token, self.clock())
                self._fetched_once = True
            except RETRIED_ERRORS as exc:
                self.slots.release()
                self.raise_if_never_verified(exc, self._fetched_once)
                if not stop.is_set():  # close() may have cut the socket on purpose
                    self.pause_after_error("fetching a job", exc, backoff)
                continue
            if fetched.job_id is not None:
                backoff.reset()
                self.handoff.put((fetched, token))
                continue
            self.slots.release()
            if not marker_refused:
                # Redis answered: the losses before (a storm of killed connections, a restart)
                # are over, and the next one waits the shortest pause again, not the longest.
                backoff.reset()
            if fetched.rate_limit_ms > 0:
                stop.wait(fetched.rate_limit_ms / 1000)
                continue
            if none_running:
                log.debug("worker %s: nothing due and no job running; the burst run ends", self.queue_name)
                return
            timeout = BURST_RECHECK_S if burst else self.drain_delay
            if fetched.next_due_ms:
                remaining = (fetched.next_due_ms - self.clock()) / 1000
                if remaining <= LOCAL_WAIT_S:
                    stop.wait(max(0.0, remaining))
                    continue
                timeout = min(timeout, remaining - LOCAL_WAIT_S + 0.01)
            try:
                self.marker.wait(timeout, stop)
                self._waited_once = True
                marker_refused = False
                backoff.reset()
            except RETRIED_ERRORS as exc:
                marker_refused = isinstance(exc, redis.ResponseError)
                self.marker.connection_lost()
                self.raise_if_never_verified(exc, self._waited_once)
                if not stop.is_set():  # close() may have cut the socket on purpose
                    self.pause_after_error("waiting for jobs", exc, backoff)

    def raise_if_never_verified(self, exc: BaseException, worked_before: bool) -> None:
        """A server whose TLS certificate fails verification on a connection that never worked is
        a misconfiguration (or an impostor), not an outage: no retry fixes it, so it ends run().
        A lost or refused connection, or a certificate failing on one that worked before (a
        rotation under way), is retried as before."""
        if not worked_before and is_certificate_failure(exc):
            log.error("worker %s: the server's TLS certificate failed verification (%s); run() stops",
                      self.queue_name, exc)
            raise exc

    def pause_after_error(self, what: str, exc: BaseException, backoff: Backoff) -> None:
        self.transitions.moves.suspect = True  # the server may be another one now: settle before the next take
        delay = backoff.next_delay()
        log.warning("worker %s: Redis failed while %s (%s); retrying in %.2f s", self.queue_name, what, exc, delay)
        self.listeners.redis_error(exc, what)
        self.stop.wait(delay)

    def wake(self, done: threading.Event) -> None:
        """From ``close()``: wake a fetcher waiting for a slot or for the marker, until ``done``."""
        self.slots.wake()
        self.marker.interrupt(done, self.drain_delay + 1)

    def cut_if_stuck(self, done: threading.Event, cut_at: float) -> None:
        """From ``close()``: if the fetcher has not stopped by ``cut_at`` (monotonic s), Redis is
        not answering its marker wait or its moveToActive; cut both connections so ``run()``
        can return. A moveToActive cut that way may have taken a job whose reply is lost: that
        job stays active until the stalled check hands it out again (docs/protocol.md §3.5)."""
        if done.wait(max(0.0, cut_at - time.monotonic())):
            return
        log.warning("worker %s: the fetcher did not stop when asked (Redis not answering?); cutting its "
                    "connections", self.queue_name)
        self.transitions.interrupt_threads([self._thread_ident])
        self.marker.cut()
