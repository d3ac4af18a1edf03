"""Handing a read's entries to QueueEvents' handler and subscribers: the reader's hot path.

Kept apart from the reader's lifecycle (``queue_events``) because it is the one loop that runs
per event: during a replay it decides the reader's speed (docs/events.md, Performance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.events import DECODING_BY_WIRE, decode_entry
from .cursor import StreamCursor
from .subscribers import Subscribers


def deliver(entries: list[Any], registry: Subscribers, position: StreamCursor, queue_name: str,
            stopping: Callable[[], bool], remember: bool = True) -> int:
    """Hand each entry to the handler and the subscribers, advancing ``position`` entry by
    entry; returns how many were delivered. Stops after the current entry once ``stopping()``
    says so, which is only asked when the registry's version changed (close() bumps it).
    The delivered entries join the position's history (``remember``: one append per call).

    It inlines ``protocol.events.decode_entry`` for the reply the reader's own connection gives
    (flat lists of str: the parser decodes UTF-8), and checks for subscription changes and stop
    requests with one identity test per event.
    """
    version = registry.version
    callbacks = registry.callbacks
    by_wire = DECODING_BY_WIRE
    delivered = 0
    cursor = position.id
    try:
        for entry_id, fields in entries:
            if fields.__class__ is list and fields and fields[0].__class__ is str:
                it = iter(fields)
                data = dict(zip(it, it))
                wire = data.pop("event", "")
                spec = by_wire.get(wire)
                if spec is None:
                    event_type = wire  # custom or unknown: passed through as the plain str
                else:
                    event_type, name, decode = spec
                    if name is not None:
                        raw = data.get(name)
                        if raw is not None:
                            data[name] = decode(raw)  # type: ignore[misc]
                data["event_id"] = cursor = entry_id
            else:
                event_type, data = decode_entry(entry_id, fields)
                cursor = data["event_id"]
            delivered += 1
            for callback in callbacks:
                try:
                    callback(event_type, data)
                except Exception:  # noqa: BLE001 - logged with its traceback by log_failure
                    registry.log_failure(callback, queue_name, event_type, cursor)
            if version is not registry.version:
                if stopping():
                    break
                version, callbacks = registry.version, registry.callbacks
    finally:
        if delivered:
            position.advance(cursor, delivered, entries if remember else None)  # type: ignore[arg-type]
    return delivered
