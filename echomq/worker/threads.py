"""A Worker's processor threads: started together, counted for the shutdown, refilled after a leak.

A processor thread holds a slot while it runs a job. A job past its hard time limit (or past
the grace after a cancel) keeps its thread (Python cannot kill one) but loses its slot: the job
is failed already (limits.py), so :meth:`ProcessorThreads.refill` counts and logs the leak and
starts a new thread for the slot, unless the shutdown already counted the threads it waits for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .fetcher import Slots
from .limits import AttemptControl

log = logging.getLogger(__name__)


class ProcessorThreads:
    """The processor threads of one Worker (``threads``: those that hold a slot)."""

    def __init__(self, loop: Callable[[], None], slots: Slots, queue_name: str, owned: list[threading.Thread]) -> None:
        self._loop = loop
        self._slots = slots
        self._queue_name = queue_name
        self._owned = owned  # the Worker's list of its own threads (close() from one only asks)
        self._lock = threading.Lock()
        self._closing = False
        self._made = 0
        self.threads: list[threading.Thread] = []
        #: Threads lost to a job past its hard time limit, each left running and logged.
        self.leaked = 0

    def _new(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name=f"echomq-proc-{self._queue_name}-{self._made}", daemon=True)
        self._made += 1
        self._owned.append(thread)
        self.threads.append(thread)
        return thread

    def start(self, count: int) -> list[threading.Thread]:
        with self._lock:
            started = [self._new() for _ in range(count)]
        for thread in started:
            thread.start()
        return started

    def closing(self) -> list[threading.Thread]:
        """The threads the shutdown waits for; no new one starts from now on."""
        with self._lock:
            self._closing = True
            return list(self.threads)

    def refill(self, control: AttemptControl) -> None:
        """``control``'s thread is lost to its job (failed at the hard limit): a new one takes the slot."""
        leaked = control.thread
        with self._lock:
            self.leaked += 1
            if leaked in self.threads:
                self.threads.remove(leaked)
            fresh = None if self._closing else self._new()
        log.warning("worker %s: job %s %s and was failed; its thread %s cannot be stopped and is left running "
                    "(%d thread(s) leaked so far)%s", self._queue_name, control.job_id, control.why_abandoned(),
                    getattr(leaked, "name", "?"), self.leaked,
                    "; a new thread takes its slot" if fresh is not None else "")
        if fresh is not None:
            fresh.start()
            self._slots.release()
