"""One QueueEvents reader per process per queue, started where it belongs and nowhere else.

``queue_events(queue)`` is this process's reader of the queue's events, with the subscribers
``ECHOMQ["EVENTS"]["QUEUES"]`` names. It is made on first use and started then, in a process
that serves (a WSGI worker, runserver's serving child); under the test runner and inside
management commands it is handed back unstarted (``run_once()`` delivers in the caller's
thread), unless ``IN_TESTS`` / ``IN_COMMANDS`` allow it (``runtime.start_refusal`` says how each
case is recognised). After a fork the parent's readers are forgotten, not closed (their thread
is not in the child, their sockets are the parent's), and the child starts its own on first use.

Who calls it: with ``EVENTS["START"] = "request"`` (the default), the first request each
process serves (``request_started``, connected by the app config); the gunicorn hooks
(``echomq.contrib.gunicorn``) at worker boot; or your code. The app config itself starts
nothing, so importing or setting up Django never starts a thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import Any

from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from ...events.queue_events import QueueEvents
from ...transport.connection import PidGuard
from . import conf, runtime
from .registration import get_registry

log = logging.getLogger(__name__)

#: After an automatic start failed (Redis down), how long before a request tries again.
RETRY_AFTER_S = 30.0


class _ProcessReaders:
    """This process's readers; after a fork, a fresh (empty) set in the child."""

    def __init__(self) -> None:
        self.guard = PidGuard()
        self.readers: dict[str, QueueEvents] = {}
        self.started_pid: int | None = None  # the process whose readers all started (fast path)
        self.request_pid: int | None = None  # the process whose first request was handled
        self.retry_at = 0.0
        self.exit_hook_pid: int | None = None

    def mine(self) -> dict[str, QueueEvents]:
        """The readers of this process (made by this process, not inherited)."""
        if self.guard.foreign():
            self.readers = {}
            self.started_pid = self.request_pid = None
            self.retry_at = 0.0
        self.guard.claim()
        return self.readers


_lock = threading.Lock()
_state = _ProcessReaders()


def queue_events(queue: str) -> QueueEvents:
    """This process's reader of ``queue``'s events, started unless this process may not start
    one (it is then returned unstarted). Raises what ``QueueEvents.start`` raises when Redis
    cannot be reached; nothing is left running and the next call tries again."""
    with _lock:
        reader = _reader(queue)
        if not reader.running and _refusal() is None:
            reader.start()
            _close_at_exit()
        return reader


def start_events() -> list[QueueEvents]:
    """Start the reader of every queue of ``ECHOMQ["EVENTS"]["QUEUES"]`` that may start here;
    return the ones running. Safe to call from every request: a no-op once they run."""
    if _state.started_pid == os.getpid():
        return [reader for reader in _state.readers.values() if reader.running]
    settings = conf.current().events
    with _lock:
        refusal = _refusal()
        if refusal is not None:
            log.debug("EchoMQ events readers not started %s", refusal)
            return []
        running = []
        for queue in settings.queues:
            reader = _reader(queue)
            if not reader.running:
                reader.start()
            running.append(reader)
        _close_at_exit()
        _state.started_pid = os.getpid()
        return running


def start_on_request(**_: Any) -> None:
    """``request_started`` receiver: with ``START = "request"``, the first request of each
    process starts its readers. A Redis that cannot be reached is logged, not raised into the
    request, and tried again after ``RETRY_AFTER_S``."""
    if _state.request_pid == os.getpid() or time.monotonic() < _state.retry_at:
        return
    try:
        if conf.current().events.start == "request":
            start_events()
    except Exception:  # a reader that cannot start must not fail the request (logged, retried)
        _state.retry_at = time.monotonic() + RETRY_AFTER_S
        log.warning("EchoMQ events readers could not start; trying again in %g s", RETRY_AFTER_S, exc_info=True)
        return
    _state.request_pid = os.getpid()  # started, or not to be started here: the next requests skip this


def close_events(timeout: float | None = 2.0) -> None:
    """Close the readers this process started (those a parent started are left alone); the next
    use starts afresh."""
    with _lock:
        if _state.guard.foreign():
            return
        readers, _state.readers = list(_state.readers.values()), {}
        _state.started_pid = _state.request_pid = None
        _state.retry_at = 0.0
    for reader in readers:
        reader.close(timeout)


def _reader(queue: str) -> QueueEvents:
    readers = _state.mine()
    reader = readers.get(queue)
    if reader is None:
        settings = conf.current()
        registry = get_registry()
        reader = QueueEvents(registry.connection(), queue, prefix=registry.prefix,
                             last_event_id=settings.events.last_event_id, block_ms=settings.events.block_ms)
        for path in settings.events.queues.get(queue, ()):
            reader.subscribe(import_string(path))
        readers[queue] = reader
    return reader


def _refusal() -> str | None:
    events = conf.current().events
    return runtime.start_refusal(in_commands=events.in_commands, in_tests=events.in_tests)


def _close_at_exit() -> None:
    """Close this process's readers when it exits (registered once per process: a forked child
    inherits its parent's atexit hooks, and ``close_events`` leaves the parent's readers be)."""
    if _state.exit_hook_pid != os.getpid():
        _state.exit_hook_pid = os.getpid()
        atexit.register(close_events)
