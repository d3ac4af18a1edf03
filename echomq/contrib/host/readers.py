"""One QueueEvents reader per queue and per process, started on first use, for both integrations.

A reader is a thread, and a thread started before a fork does not exist in the child
(docs/hosting.md): so nothing here starts at import or when an app is configured, and a process
that finds readers a parent made (``PidGuard.foreign()``) forgets them without touching their
sockets and starts its own. A failed start leaves nothing behind.

Who may start them is the adapter's to say (Django: not under the test runner or in a
management command unless allowed; Flask: not with ``app.testing`` or in a command under
``"auto"``); what happens when they cannot start is the same in both: asked for explicitly
(``queue_events``, ``echomq.events``, ``start_events``), the error is raised; at a request
(:meth:`ProcessReaders.start_on_request`), it is logged once and tried again ``RETRY_AFTER_S``
later, so a Redis that is away costs the requests nothing. The readers of a process are
closed when it exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from ...events.queue_events import QueueEvents
from ...transport.connection import PidGuard

log = logging.getLogger(__name__)

#: How long closing the readers may take when the process exits, in seconds.
EXIT_CLOSE_TIMEOUT_S = 2.0
#: After a start at a request failed (Redis away), how long before a request tries again.
RETRY_AFTER_S = 30.0

#: Builds the (subscribed, unstarted) reader of a queue.
MakeReader = Callable[[str], QueueEvents]


class ProcessReaders:
    """The readers of this process, by queue name (none in a child until it starts its own)."""

    def __init__(self, make: MakeReader) -> None:
        self._make = make
        self._lock = threading.RLock()
        self._guard = PidGuard()
        self._readers: dict[str, QueueEvents] = {}
        self._exit_hook_pid: int | None = None
        self._started: tuple[int, frozenset[str]] = (0, frozenset())  # (pid, queues) a request started
        self._retry_at = (0, 0.0)  # (pid, monotonic time) before which a request does not try

    def get(self, queue: str, *, start: bool = True) -> QueueEvents:
        """This process's reader of ``queue`` (made on first use, and again once it stopped);
        started when ``start``. Raises what ``QueueEvents.start()`` raises (Redis unreachable
        ...), leaving nothing running: the next call tries again."""
        with self._lock:
            self._forget_the_parents()
            reader = self._readers.get(queue)
            if reader is None:
                reader = self._readers[queue] = self._make(queue)
            if start and not reader.running:
                reader.start()  # a failed start leaves the reader as it was: the next call tries again
                self._close_at_exit()
                log.info("started the QueueEvents reader of queue %s in process %d", queue, os.getpid())
            return reader

    def start(self, queues: Iterable[str]) -> list[QueueEvents]:
        """Start the reader of each of ``queues`` (those running stay); return them all."""
        return [self.get(queue) for queue in queues]

    def start_on_request(self, queues: Iterable[str]) -> None:
        """At a request: start the readers of ``queues`` that do not run. Never raises: a start
        that fails is logged and tried again after ``RETRY_AFTER_S``."""
        wanted, me = frozenset(queues), os.getpid()
        (started_in, started), (waiting_in, until) = self._started, self._retry_at
        if not wanted or (started_in == me and wanted <= started) or (waiting_in == me and time.monotonic() < until):
            return
        try:
            self.start(sorted(wanted))
        except Exception:  # a reader that cannot start must not fail the request (logged, retried)
            self._retry_at = (os.getpid(), time.monotonic() + RETRY_AFTER_S)
            log.warning("EchoMQ events readers could not start; trying again in %g s", RETRY_AFTER_S, exc_info=True)
            return
        with self._lock:
            self._started = (os.getpid(), wanted)

    def running(self) -> dict[str, QueueEvents]:
        """This process's readers that run, by queue."""
        with self._lock:
            self._forget_the_parents()
            return {queue: reader for queue, reader in self._readers.items() if reader.running}

    def close(self, timeout: float | None = EXIT_CLOSE_TIMEOUT_S) -> None:
        """Close this process's readers (a parent's, inherited through a fork, are left alone);
        the next use starts afresh."""
        with self._lock:
            self._forget_the_parents()
            readers, self._readers = list(self._readers.values()), {}
            self._started = (0, frozenset())
            self._retry_at = (0, 0.0)
        for reader in readers:
            reader.close(timeout)

    def _forget_the_parents(self) -> None:
        if self._guard.foreign() or not self._readers:
            self._readers = {}
            self._started = (0, frozenset())
            self._retry_at = (0, 0.0)
            self._guard.claim()

    def _close_at_exit(self) -> None:
        """Registered once per process: a forked child inherits its parent's atexit hooks, and
        ``close`` leaves the parent's readers be."""
        if self._exit_hook_pid != os.getpid():
            atexit.register(self.close, EXIT_CLOSE_TIMEOUT_S)
            self._exit_hook_pid = os.getpid()
