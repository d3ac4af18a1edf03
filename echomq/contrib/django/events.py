"""One QueueEvents reader per process per queue, started where it belongs and nowhere else.

``queue_events(queue)`` is this process's reader of the queue's events, with the subscribers
``ECHOMQ["EVENTS"]["QUEUES"]`` names. It is made on first use and started then, in a process
that serves (a WSGI worker, runserver's serving child); under the test runner and inside
management commands it is handed back unstarted (``run_once()`` delivers in the caller's
thread), unless ``IN_TESTS`` / ``IN_COMMANDS`` allow it (``runtime.start_refusal`` says how each
case is recognised). The readers themselves are the host layer's (``echomq.contrib.host.readers``,
shared with Flask): after a fork the parent's are forgotten, not closed, and the child starts its
own on first use; a start that fails at a request is logged and tried again ``RETRY_AFTER_S``
later. Under pytest, readers a test started are closed when it ends.

Who calls it: with ``EVENTS["START"] = "request"`` (the default), the first request each
process serves (``request_started``, connected by the app config); the gunicorn hooks
(``echomq.contrib.gunicorn``) at worker boot; or your code. The app config itself starts
nothing, so importing or setting up Django never starts a thread.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from ...events.queue_events import QueueEvents
from ..host.readers import RETRY_AFTER_S, ProcessReaders
from . import conf, runtime
from .registration import get_project

log = logging.getLogger(__name__)

__all__ = ["RETRY_AFTER_S", "close_events", "queue_events", "start_events", "start_on_request"]


def _make(queue: str) -> QueueEvents:
    """A reader of ``queue`` with the subscribers the setting names, not started."""
    settings = conf.current()
    project = get_project()
    if close_events not in project.on_test_end:
        project.on_test_end.append(close_events)
    registry = project.registry
    reader = QueueEvents(registry.connection(), queue, prefix=registry.prefix,
                         last_event_id=settings.events.last_event_id, block_ms=settings.events.block_ms)
    for path in settings.events.queues.get(queue, ()):
        reader.subscribe(import_string(path))
    return reader


_readers = ProcessReaders(_make)


def queue_events(queue: str) -> QueueEvents:
    """This process's reader of ``queue``'s events, started unless this process may not start
    one (it is then returned unstarted). Raises what ``QueueEvents.start`` raises when Redis
    cannot be reached; nothing is left running and the next call tries again."""
    return _readers.get(queue, start=_refusal() is None)


def start_events() -> list[QueueEvents]:
    """Start the reader of every queue of ``ECHOMQ["EVENTS"]["QUEUES"]`` that may start here;
    return the ones running. Safe to call from every request: a no-op once they run."""
    refusal = _refusal()
    if refusal is not None:
        log.debug("EchoMQ events readers not started %s", refusal)
        return []
    return _readers.start(conf.current().events.queues)


def start_on_request(**_: Any) -> None:
    """``request_started`` receiver: with ``START = "request"``, the first request of each
    process starts its readers. A Redis that cannot be reached is logged, not raised into the
    request, and tried again after ``RETRY_AFTER_S``."""
    try:
        events = conf.current().events
        if events.start != "request" or not events.queues or _refusal() is not None:
            return
    except Exception:  # a bad setting must not fail the request: manage.py check reports it
        log.warning("EchoMQ events readers not started: the ECHOMQ setting is refused", exc_info=True)
        return
    _readers.start_on_request(events.queues)


def close_events(timeout: float | None = 2.0) -> None:
    """Close the readers this process started (those a parent started are left alone); the next
    use starts afresh."""
    _readers.close(timeout)


def _refusal() -> str | None:
    events = conf.current().events
    return runtime.start_refusal(in_commands=events.in_commands, in_tests=events.in_tests)
