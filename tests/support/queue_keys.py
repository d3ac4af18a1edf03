"""Deleting one queue's keys after a test, on one Redis or on every master of a cluster."""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

#: Keys a test's SCAN asks for per call. The shared Redis may hold a million keys of a
#: neighbouring test's or bench's at that moment: at SCAN's default of 10 a check that a refused
#: call wrote nothing took a minute there.
SCAN_COUNT = 10_000


def delete_queue_keys(client: Any, queue_name: str, prefix: str = "emq") -> None:
    """Delete every key of ``queue_name`` (``<prefix>:{<queue>}:*``) that ``client`` can reach."""
    pattern = f"{prefix}:\\{{{queue_name}\\}}:*"
    # on a cluster, every master (a stray key without the hash tag would sit in another slot)
    scan = {"target_nodes": RedisCluster.PRIMARIES} if isinstance(client, RedisCluster) else {}
    batch = list(client.scan_iter(match=pattern, count=SCAN_COUNT, **scan))
    for start in range(0, len(batch), 500):
        client.delete(*batch[start : start + 500])
