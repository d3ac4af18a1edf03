"""Helpers for the Queue/Job tests: read the events back the way a user would, list keys."""

from __future__ import annotations

from typing import Any

import redis

from echomq.events.queue_events import QueueEvents
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys


def read_events(client: redis.Redis, queue_name: str) -> list[tuple[str, dict[str, Any]]]:
    """Every event of the queue so far, decoded by QueueEvents (type as its wire name)."""
    got: list[tuple[str, dict[str, Any]]] = []
    reader = QueueEvents(client, queue_name, last_event_id="0", block_ms=50)
    reader.subscribe(lambda event_type, data: got.append((getattr(event_type, "wire_name", event_type),
                                                          {k: v for k, v in data.items() if k != "event_id"})))
    try:
        while reader.run_once():
            pass
    finally:
        reader.close()
    return got


def raw_events(client: redis.Redis, queue_name: str) -> list[list[str]]:
    """The stream entries as flat [field, value, ...] lists, in the order the script wrote them."""
    entries = client.xrange(QueueKeys(queue_name).events)
    return [[text(x) for pair in fields.items() for x in pair] for _id, fields in entries]


def queue_keys(client: redis.Redis, queue_name: str) -> set[str]:
    return {text(k) for k in client.scan_iter(match=QueueKeys(queue_name).all_keys_pattern(), count=1000)}


def suffixes(client: redis.Redis, queue_name: str) -> set[str]:
    base = QueueKeys(queue_name).job_prefix
    return {key[len(base):] for key in queue_keys(client, queue_name)}
