"""One QueueEvents reader per queue and per process, started on first use.

A reader is a thread, and a thread started before a fork does not exist in the child
(docs/hosting.md): so nothing here starts at import or at ``init_app``, and a process that finds
readers a parent made (``PidGuard.foreign()``) forgets them without touching their sockets and
starts its own. A failed start leaves nothing behind: the next call tries again. The readers of
a process are closed when it exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable

from ...events.queue_events import QueueEvents
from ...transport.connection import PidGuard

log = logging.getLogger(__name__)

#: How long closing the readers may take when the process exits, in seconds.
EXIT_CLOSE_TIMEOUT_S = 2.0


class ProcessReaders:
    """The running readers of this process, by queue name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guard = PidGuard()
        self._readers: dict[str, QueueEvents] = {}
        self._exit_hook_pid: int | None = None

    def get(self, queue: str, make: Callable[[], QueueEvents]) -> QueueEvents:
        """This process's running reader of ``queue``; ``make()`` builds one (subscribed, not
        started) when there is none yet, or the one there stopped. Raises what ``start()`` raises
        (Redis unreachable ...), leaving nothing running."""
        with self._lock:
            self._forget_the_parents()
            reader = self._readers.get(queue)
            if reader is not None and reader.running:
                return reader
            reader = make()
            reader.start()
            self._readers[queue] = reader
            if self._exit_hook_pid != os.getpid():
                atexit.register(self.close, EXIT_CLOSE_TIMEOUT_S)
                self._exit_hook_pid = os.getpid()
            log.info("started the QueueEvents reader of queue %s in process %d", queue, os.getpid())
            return reader

    def running(self) -> dict[str, QueueEvents]:
        """This process's readers that run, by queue (none in a child until it starts its own)."""
        with self._lock:
            self._forget_the_parents()
            return {queue: reader for queue, reader in self._readers.items() if reader.running}

    def close(self, timeout: float | None = None) -> None:
        """Close this process's readers (a parent's, inherited through a fork, are left alone)."""
        with self._lock:
            self._forget_the_parents()
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close(timeout)

    def _forget_the_parents(self) -> None:
        if self._guard.foreign() or not self._readers:
            self._readers = {}
            self._guard.claim()
