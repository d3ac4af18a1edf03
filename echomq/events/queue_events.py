"""QueueEvents: a thread that reads ``<prefix>:{<queue>}:events`` and hands each event on.

The reader blocks on ``XREAD COUNT <n> BLOCK <ms> STREAMS <events> <cursor>`` over its own
dedicated connection, so the host's client is never held by a long block. It differs from
BullMQ's consumer where BullMQ loses or hides events (docs/protocol.md §5.3):

- ``"$"`` is resolved to a concrete id (XINFO STREAM ``last-generated-id``) before ``start()``
  returns, so an event written between two reads is never missed;
- reads are batched with a bounded COUNT; the cursor advances entry by entry, and after a lost
  connection the reader reconnects (capped exponential backoff with jitter) and resumes from it;
- each read is pipelined behind an XINFO STREAM: when producers trimmed entries past our
  cursor before we read them, subscribers get a :class:`GapNotice` (see ``cursor``).
  Where the ACL refuses XINFO, the reader warns once and reads without it: no gap notices;
- when the stream is replaced under the reader (a failover, a restart that lost data, a
  stream deleted and written again), told by the server's identity at each connect (INFO:
  run id, replication ids, role, address) and by the stream's counters at each read, the
  reader settles with the new stream (``divergence``): one GapNotice naming the reason and
  the events it delivered that the new stream does not hold, then every entry of the new
  stream it never delivered, whatever its id, then on from there: no silent skip, no repeat;
- ``close()`` unblocks the read (``transport.blocking``: CLIENT UNBLOCK from a second
  connection, else shutting the socket), so it returns in milliseconds instead of after the
  block, and disconnects every connection the reader opened. ``close(timeout)`` is a bound even
  when Redis hangs: a reader it could not stop in time is logged and left to end on its own;
- ``start()`` either leaves a reader running from a resolved cursor or raises (Redis
  unreachable or refusing) and leaves nothing running, so it can simply be called again.

The host owns the thread: nothing starts at import or construction.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis

from ..errors import ConnectionClosedError, ForkedProcessError, InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys
from ..transport.blocking import BlockingConnection
from ..transport.connection import CONNECTION_ERRORS, Backoff, Connection, Connections, PidGuard
from ..types import Subscriber
from .cursor import StreamCursor
from .delivery import deliver
from .reads import StreamReads
from .settings import check_block_ms, check_count, check_handler, check_history
from .subscribers import Handler, Subscribers
from .switches import StreamSwitches

log = logging.getLogger(__name__)

DEFAULT_COUNT = 1000
#: How many delivered entries a reader remembers to compare with a stream that replaced the
#: one it read: the stream's own default cap (``maxLenEvents``), so a divergence anywhere in
#: a default stream is settled exactly.
DEFAULT_HISTORY = 10_000

#: Replies that mean the node we read stopped being the one to read (demoted, failing over,
#: loading): the reader drops the socket and reconnects, as for a lost connection.
_MOVED_ON = ("UNBLOCKED", "READONLY", "MASTERDOWN", "LOADING", "MOVED", "CLUSTERDOWN", "TRYAGAIN")


class QueueEvents:
    """Consume a queue's events stream and deliver each event to subscribers and a Handler.

    ``last_event_id``: ``"$"`` (only events written after ``start()``/``run()``), ``"0"`` (the
    whole stream as it is now, without a gap notice for what was trimmed before), or an entry
    id to resume after (e.g. :attr:`last_event_id` saved from a previous run).
    ``history``: how many delivered entries it remembers to settle with a stream that replaced
    the one it read (a failover, a restart; docs/events.md).
    Delivery order per event: the ``handler``, then subscribers in subscription order. Treat
    ``event_data`` as read-only: the same dict goes to every subscriber.
    """

    def __init__(
        self,
        connection: Connection,
        queue_name: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        last_event_id: str = "$",
        block_ms: int = 5000,
        handler: Handler | None = None,
        count: int = DEFAULT_COUNT,
        history: int = DEFAULT_HISTORY,
    ) -> None:
        self._keys = QueueKeys(queue_name, prefix)
        self._position = StreamCursor(last_event_id, check_history(history))
        self.block_ms = check_block_ms(block_ms)
        self.count = check_count(count)
        check_handler(handler)
        self._connections = Connections(connection, route_key=self._keys.meta)
        self.queue_name = queue_name
        self.events_key = self._keys.events

        self._subscribers = Subscribers(handler)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopping = False  # read by the delivery loop when the registry version changes
        self._done = threading.Event()
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._loop_thread: threading.Thread | None = None
        self._release_on_exit = False  # close() was called from the loop's own thread
        self._guard = PidGuard()
        # Capped at 2 s, not the default 5: a reader that lost its server during a failover
        # (2-3 s on a cluster) would otherwise sleep up to 5 s more after the new master is up.
        self._backoff = Backoff(cap=2.0)

        self._blocking: BlockingConnection | None = None
        self._reads = StreamReads(queue_name, self.events_key)
        self._switches = StreamSwitches(self.queue_name, self.events_key, self._position, self._subscribers,
                                        page=self.count)

    # -- subscribers ------------------------------------------------------------------------
    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a callable ``fn(event_type, event_data)`` or an object with ``put()``.

        A ``put()`` subscriber (a ``queue.Queue``) receives ``("echomq_event", event_type,
        event_data)``, and ``("echomq_gap", notice, notice.as_dict())`` for a trimmed gap. A
        callable gets ``fn(notice, notice.as_dict())`` for a gap: ``notice`` is a
        :class:`GapNotice`, never a ``str``. Safe from any thread, also while running.
        """
        self._guard.check("QueueEvents")
        self._subscribers.add(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> bool:
        """Remove ``subscriber`` (its first subscription); False if it was not subscribed."""
        return self._subscribers.remove(subscriber)

    @property
    def last_event_id(self) -> str | None:
        """The id of the last entry delivered (or the resolved start): save it to resume later."""
        return self._position.id

    @property
    def running(self) -> bool:
        """True while a reader started by start()/run() reads, in this process (a forked child's
        copy is not running: the reader thread exists only in the parent)."""
        return self._running and not self._done.is_set() and not self._guard.foreign()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> QueueEvents:
        """Start the reader thread once its connection works and ``"$"`` is resolved.

        When Redis cannot be reached or refuses the reader (``redis.ConnectionError``,
        ``redis.ResponseError`` ...), that error is raised and nothing is left running: call
        ``start()`` again later. Once started, lost connections are retried in the background.
        """
        self._begin()
        thread = threading.Thread(target=self._loop, name=f"echomq-events-{self.queue_name}", daemon=True)
        try:
            thread.start()
        except BaseException:
            self._abandon_start()
            raise
        self._thread = thread
        return self

    def run(self) -> None:
        """Read in the caller's thread until :meth:`close` is called from another thread."""
        self._begin()
        self._loop()

    def _begin(self) -> None:
        self._guard.check("QueueEvents")
        with self._lock:
            if self._closed:
                raise ConnectionClosedError(f"QueueEvents for queue {self.queue_name!r} was closed")
            if self._running:
                raise InvalidInputError(f"QueueEvents for queue {self.queue_name!r} is already running")
            self._running = True
        try:
            self._connect()
        except BaseException:
            # Not started: raising (rather than retrying in the background) keeps the promise
            # that "$" is resolved when start() returns, and leaves nothing for close() to wait for.
            self._abandon_start()
            raise
        self._guard.claim()

    def _abandon_start(self) -> None:
        """Undo a start that failed, so that ``running`` is False and ``start()`` may be retried."""
        self._drop_connection()
        with self._lock:
            self._running = False

    def _blocking_connection(self) -> BlockingConnection:
        """The dedicated reading connection (socket timeout = block + margin, named like BullMQ's
        ``<prefix>:<base64(queue)>:qe``), opened on first use."""
        if self._blocking is None:
            self._blocking = BlockingConnection(
                self._connections,
                max_block_s=self.block_ms / 1000,
                client_name=self._keys.client_name(":qe"),
                queue_key=self.events_key,
                # The parser (hiredis, in C) decodes UTF-8; a bad byte becomes U+FFFD instead
                # of an exception that would make the same reply fail forever.
                decode_responses=True,
                encoding_errors="replace",
            )
        return self._blocking

    def close(self, timeout: float | None = None) -> None:
        """Stop reading and join the reader; interrupts a BLOCK in progress. Idempotent."""
        try:
            self._guard.check("QueueEvents")
        except ForkedProcessError:
            # The reader and its sockets belong to the parent: touching them would unblock or
            # corrupt the parent's connection. Forget them here.
            self._closed = True
            self._stopping = True
            self._stop.set()
            return
        self._stopping = True
        self._subscribers.bump()
        self._stop.set()
        with self._lock:
            self._closed = True
            was_running = self._running
        if was_running and threading.current_thread() is self._loop_thread:
            # From a subscriber, or a signal handler interrupting run(): the loop is below us
            # on this very thread, so waiting for it would deadlock. Unblock and let it end;
            # the loop releases the connections on its way out.
            self._release_on_exit = True
            self._interrupt()
            return
        if was_running:
            self._wait_stopped(timeout)
        if self._done.is_set() or not was_running:
            self._release()

    def __enter__(self) -> QueueEvents:  # noqa: PYI034 (typing.Self needs 3.11)
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:  # the queue, never the connection (a URL may carry a password)
        return f"QueueEvents({self.queue_name!r}, prefix={self._keys.prefix!r})"

    def _wait_stopped(self, timeout: float | None) -> None:
        """Unblock the reader until it notices the stop flag, within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done.is_set():
            unblocked = self._interrupt()
            wait = 0.05 if unblocked else 0.005
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            if self._done.wait(wait):
                break
            if deadline is not None and time.monotonic() >= deadline:
                # A subscriber still running, or a (re)connect to a Redis that does not answer:
                # neither can be cut short from here. The thread releases the connections itself.
                self._release_on_exit = True
                thread = self._loop_thread
                log.warning("QueueEvents %r: reader did not stop within %.3fs; left behind: thread %r "
                            "(in a subscriber or waiting on Redis) and its connections, closed when it ends",
                            self.queue_name, timeout, thread.name if thread is not None else None)
                return
        if self._thread is not None:
            self._thread.join(0 if deadline is None else max(0.0, deadline - time.monotonic()))

    def _interrupt(self) -> bool:
        """Unblock the reader's XREAD; True if it was blocked."""
        return self._blocking is not None and self._blocking.interrupt()

    def _release(self) -> None:
        if self._blocking is not None:
            self._blocking.close()
        self._connections.close()

    # -- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        self._loop_thread = threading.current_thread()
        try:
            while not self._stop.is_set():
                try:
                    self.run_once()
                except CONNECTION_ERRORS as exc:
                    if self._stop.is_set():
                        break
                    self._reconnect_later("connection lost", exc)
                except redis.ResponseError as exc:
                    if self._stop.is_set():
                        break
                    if not _moved_on(exc):
                        delay = self._backoff.next_delay()
                        log.exception("QueueEvents %r: read failed; retrying in %.2fs", self.queue_name, delay)
                        self._stop.wait(delay)
                        continue
                    # The node was demoted or is failing over: its socket may keep reading a
                    # replica, or a node that no longer serves the slot. Connect again.
                    self._reconnect_later("the server stopped serving the stream", exc)
                except Exception:
                    if self._stop.is_set():
                        break
                    delay = self._backoff.next_delay()
                    log.exception("QueueEvents %r: read failed; retrying in %.2fs", self.queue_name, delay)
                    self._stop.wait(delay)
        finally:
            self._drop_connection()
            self._done.set()
            if self._release_on_exit:
                self._release()

    def _reconnect_later(self, what: str, exc: BaseException) -> None:
        self._drop_connection()
        delay = self._backoff.next_delay()
        log.warning("QueueEvents %r: %s (%s); reconnecting in %.2fs", self.queue_name, what, exc, delay)
        self._stop.wait(delay)

    def run_once(self) -> int:
        """One read (blocking up to ``block_ms``) and the delivery of its entries; returns how many.

        Tests and hosts with their own loop step the reader with this (without ``start()``, the
        first call resolves ``"$"``); connection errors propagate to the caller (the loop turns
        them into a reconnect with backoff). When the stream was found replaced, the step
        delivers the notice and the entries of the new stream the reader never had instead.
        """
        if self._closed:
            raise ConnectionClosedError(f"QueueEvents for queue {self.queue_name!r} was closed")
        if self._running and threading.current_thread() is not self._loop_thread:
            raise InvalidInputError("run_once() cannot step a QueueEvents whose start()/run() loop is reading")
        if self._blocking is None or self._blocking.conn is None:
            self._guard.check("QueueEvents")
            self._guard.claim()
            self._connect()
        if self._position.pending:
            return self._deliver_pending()
        if self._stopping:
            return 0
        assert self._blocking is not None and self._position.id is not None
        info, missing, entries = self._reads.read(self._blocking.conn, self._position.id, self.count, self.block_ms)
        if self._position.replaced(info, missing=missing):
            self._switches.replaced_in_place(self._blocking.conn)
            return self._deliver_pending()
        if info is not None:
            notice = self._position.check_gap(info, entries[0][0] if entries else None, self.queue_name)
            if notice is not None:
                log.warning("QueueEvents %r: entries trimmed before they were read: %s", self.queue_name, notice)
                self._subscribers.deliver_gap(notice)
        delivered = self._deliver(entries)
        self._backoff.reset()
        return delivered

    def _connect(self) -> None:
        blocking = self._blocking_connection()
        conn = blocking.connect()
        try:
            if self._position.id is None:
                self._reads.resolve_tail(blocking, self._position)
            self._switches.identify(conn)
            if self._position.explicit_start:
                self._switches.check_start(conn, *self._reads.info(conn))
        except BaseException:
            blocking.drop()
            raise

    def _drop_connection(self) -> None:
        if self._blocking is not None:
            self._blocking.drop()

    def _deliver_pending(self) -> int:
        delivered = self._switches.deliver_pending(lambda entries: self._deliver(entries, remember=False))
        self._backoff.reset()
        return delivered

    def _deliver(self, entries: list[Any], *, remember: bool = True) -> int:
        """Deliver a read's entries (``delivery.deliver``); stops after the current entry once
        close() was called."""
        return deliver(entries, self._subscribers, self._position, self.queue_name, self._is_stopping, remember)

    def _is_stopping(self) -> bool:
        return self._stopping


def _moved_on(exc: BaseException) -> bool:
    """True for a reply that means the node stopped serving the stream (see ``_MOVED_ON``)."""
    message = str(exc)
    return any(message.startswith(code) for code in _MOVED_ON) or type(exc).__name__ in ("ReadOnlyError", "MovedError")

