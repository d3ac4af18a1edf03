"""Who gets QueueEvents' events: callables, ``put()`` objects, and the Handler base class.

Subscribers are kept in a tuple that is replaced, never mutated, under a lock: the reader walks
whichever tuple it picked up without locking, and ``subscribe``/``unsubscribe`` from any thread
never disturb a delivery in progress (APScheduler's per-subscriber isolation, style anchor 10).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from .errors import InvalidInputError
from .events import EventName, GapNotice

logger = logging.getLogger("echomq.queue_events")

#: The tag of the tuple a ``put()`` subscriber receives for each event.
EVENT_TAG = "echomq_event"
#: The tag of the tuple a ``put()`` subscriber receives for a trimmed gap.
GAP_TAG = "echomq_gap"


class _Putter(Protocol):
    def put(self, item: Any) -> Any: ...


Subscriber = Callable[[Any, dict[str, Any]], Any] | _Putter


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
        logger.warning("events of queue %r were trimmed before they were read: %s", notice.queue_name, notice)


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
    raise InvalidInputError(f"subscriber {subscriber!r} must be callable(event_type, event_data) or have a put() method")


class Subscribers:
    """The copy-on-write list; ``current`` is what the reader iterates."""

    def __init__(self) -> None:
        self.current: tuple[Subscription, ...] = ()
        self._lock = threading.Lock()

    def add(self, subscriber: Subscriber) -> None:
        subscription = _subscription(subscriber)
        with self._lock:
            self.current = self.current + (subscription,)

    def remove(self, subscriber: Subscriber) -> bool:
        with self._lock:
            for index, entry in enumerate(self.current):
                if entry.subscriber is subscriber or entry.subscriber == subscriber:
                    self.current = self.current[:index] + self.current[index + 1:]
                    return True
        return False

    def deliver_gap(self, notice: GapNotice, handler: Any) -> None:
        """A gap goes to ``handler.handle_gap`` and each subscriber's gap form, each isolated."""
        handle_gap = getattr(handler, "handle_gap", None)
        if callable(handle_gap):
            try:
                handle_gap(notice)
            except Exception:
                logger.exception("QueueEvents %r: handler failed on %s", notice.queue_name, notice)
        for entry in self.current:
            try:
                entry.on_gap(notice)
            except Exception:
                logger.exception("QueueEvents %r: subscriber %r failed on %s", notice.queue_name, entry.subscriber, notice)
