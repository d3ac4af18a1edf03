"""A queue's keys read back in full, to check that a refused call wrote nothing.

``queue_snapshot`` reads every key of a queue by its type (on real Redis and on fakeredis
alike, where DUMP's bytes would differ) so two snapshots compare equal exactly when the data
is byte-identical. TTLs count as "has one or not": their remaining milliseconds tick.
"""

from __future__ import annotations

from typing import Any

import redis

from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys

from support.queue_keys import SCAN_COUNT


def _value(client: redis.Redis, key: str, kind: str) -> Any:
    if kind == "string":
        return client.get(key)
    if kind == "hash":
        return sorted(client.hgetall(key).items())
    if kind == "list":
        return client.lrange(key, 0, -1)
    if kind == "set":
        return sorted(client.smembers(key))
    if kind == "zset":
        return client.zrange(key, 0, -1, withscores=True)
    if kind == "stream":
        return [(entry_id, sorted(fields.items())) for entry_id, fields in client.xrange(key)]
    return kind


def queue_snapshot(client: redis.Redis, queue_name: str, prefix: str = "emq") -> dict[str, Any]:
    """Every key of the queue -> (type, full content, has a TTL)."""
    pattern = QueueKeys(queue_name, prefix).all_keys_pattern()
    out: dict[str, Any] = {}
    for raw in client.scan_iter(match=pattern, count=1000):
        key = text(raw)
        kind = text(client.type(key))
        out[key] = (kind, _value(client, key, kind), client.pttl(key) >= 0)
    return out


def save_queue(client: redis.Redis, queue_name: str, prefix: str = "emq") -> dict[str, tuple[bytes, int]]:
    """Every key of the queue as DUMP has it, with its TTL (ms, -1 none): what a replica holds
    now, for :func:`rewind_queue` to play a failover that loses what comes after."""
    pattern = QueueKeys(queue_name, prefix).all_keys_pattern()
    found = client.scan_iter(match=pattern, count=SCAN_COUNT)
    return {text(key): (client.dump(key), client.pttl(key)) for key in found}


def rewind_queue(client: redis.Redis, queue_name: str, saved: dict[str, tuple[bytes, int]],
                 prefix: str = "emq") -> None:
    """The queue as the promoted replica holds it: every write after :func:`save_queue` is lost."""
    for key in list(client.scan_iter(match=QueueKeys(queue_name, prefix).all_keys_pattern(), count=SCAN_COUNT)):
        client.delete(key)
    for key, (dumped, ttl) in saved.items():
        client.restore(key, max(ttl, 0), dumped, replace=True)
