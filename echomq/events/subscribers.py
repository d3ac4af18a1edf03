"""Who gets QueueEvents' events: callables, ``put()`` objects, and the Handler base class.

Subscribers are kept in a tuple that is replaced, never mutated, under a lock: the reader walks
whichever tuple it picked up without locking, and ``subscribe``/``unsubscribe`` from any thread
never disturb a delivery in progress. Each call is isolated: one subscriber that raises is
logged and the others still get the event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import InvalidInputError
from ..protocol.events import EventName, GapNotice
from ..types import Subscriber

log = logging.getLogger(__name__)

#: The tag of the tuple a ``put()`` subscriber receives for each event.
EVENT_TAG = "echomq_event"
#: The tag of the tuple a ``put()`` subscriber receives for a trimmed gap.
GAP_TAG = "echomq_gap"




class Handler:
    """Subclass and define ``on_<event_type>(event_data)`` methods (``on_completed``, ...).

    Custom event names are dispatched the same way with ``-`` read as ``_``
    (``custom-thing`` -> ``on_custom_thing``). Override :meth:`handle_event` to take
    everything, and :meth:`handle_gap` to react to trimmed entries.
    """

    def handle_event(self, event_type: EventName, event_data: dict[str, Any]) -> None:
        method = getattr(self, "on_" + str(event_type).replace("-", "_"), None)
        if method is not None:
            method(event_data)

    def handle_gap(self, notice: GapNotice) -> None:
        log.warning("events of queue %r were trimmed before they were read: %s", notice.queue_name, notice)


class Subscription(NamedTuple):
    subscriber: Any
    on_event: Callable[[Any, dict[str, Any]], Any]
    on_gap: Callable[[GapNotice], Any]


def _subscription(subscriber: Subscriber) -> Subscription:
    put = getattr(subscriber, "put", None)
    if callable(put):
        return Subscription(subscriber, lambda t, d: put((EVENT_TAG, t, d)),
                            lambda notice: put((GAP_TAG, notice, notice.as_dict())))
    if callable(subscriber):
        fn = subscriber
        return Subscription(subscriber, fn, lambda notice: fn(notice, notice.as_dict()))
    raise InvalidInputError(
        f"subscriber {subscriber!r} must be callable(event_type, event_data) or have a put() method")


class Subscribers:
    """The copy-on-write registry the reader walks without a lock.

    ``callbacks`` is the handler's ``handle_event`` (if any) then each subscriber's event
    callable, in order; ``version`` is replaced on every change (and by :meth:`bump`), so the
    reader notices a change, or a stop request, with one identity check per event.
    """

    def __init__(self, handler: Any = None) -> None:
        self.handler = handler
        self._handle_event = handler.handle_event if handler is not None else None
        self._entries: tuple[Subscription, ...] = ()
        self.callbacks: tuple[Callable[[Any, dict[str, Any]], Any], ...] = ()
        self.version = object()
        self._lock = threading.Lock()
        self._publish()

    def _publish(self) -> None:
        head = (self._handle_event,) if self._handle_event is not None else ()
        self.callbacks = head + tuple(entry.on_event for entry in self._entries)
        self.version = object()

    def bump(self) -> None:
        """Make the reader look at the registry (and its stop flag) after the current event."""
        self.version = object()

    def add(self, subscriber: Subscriber) -> None:
        subscription = _subscription(subscriber)
        with self._lock:
            self._entries = (*self._entries, subscription)
            self._publish()

    def remove(self, subscriber: Subscriber) -> bool:
        with self._lock:
            for index, entry in enumerate(self._entries):
                if entry.subscriber is subscriber or entry.subscriber == subscriber:
                    self._entries = self._entries[:index] + self._entries[index + 1:]
                    self._publish()
                    return True
        return False

    def log_failure(self, callback: Any, queue_name: str, event_type: Any, event_id: str) -> None:
        """Log (with the traceback being handled) which handler or subscriber raised."""
        if callback is self._handle_event:
            log.exception("QueueEvents %r: handler failed on %s %s", queue_name, event_type, event_id)
            return
        owner = next((e.subscriber for e in self._entries if e.on_event is callback), callback)
        log.exception("QueueEvents %r: subscriber %r failed on %s %s", queue_name, owner, event_type, event_id)

    def deliver_gap(self, notice: GapNotice) -> None:
        """A gap goes to ``handler.handle_gap`` and each subscriber's gap form, each isolated."""
        handle_gap = getattr(self.handler, "handle_gap", None)
        if callable(handle_gap):
            try:
                handle_gap(notice)
            except Exception:
                log.exception("QueueEvents %r: handler failed on %s", notice.queue_name, notice)
        for entry in self._entries:
            try:
                entry.on_gap(notice)
            except Exception:
                log.exception("QueueEvents %r: subscriber %r failed on %s", notice.queue_name, entry.subscriber,
                              notice)
