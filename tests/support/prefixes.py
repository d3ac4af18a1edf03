"""A key prefix of a test's own, for what spans every queue of a server (``list_queues``,
``echomq queues``): the shared Redis holds other tests' queues under ``emq``, a prefix of the
test's own holds only its own. Everything under it is read back in full and deleted afterwards.
"""

from __future__ import annotations

import uuid
from typing import Any

from redis.cluster import RedisCluster

from echomq.protocol.codec import text

from support.snapshot import _value


def new_prefix(label: str = "t") -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def _keys(client: Any, prefix: str) -> list[str]:
    scan = {"target_nodes": RedisCluster.PRIMARIES} if isinstance(client, RedisCluster) else {}
    return sorted({text(k) for k in client.scan_iter(match=f"{prefix}:*", count=1000, **scan)})


def prefix_snapshot(client: Any, prefix: str) -> dict[str, Any]:
    """Every key under ``prefix`` -> (type, full content, has a TTL)."""
    out: dict[str, Any] = {}
    for key in _keys(client, prefix):
        kind = text(client.type(key))
        out[key] = (kind, _value(client, key, kind), client.pttl(key) >= 0)
    return out


def delete_prefix(client: Any, prefix: str) -> None:
    for key in _keys(client, prefix):
        client.delete(key)
