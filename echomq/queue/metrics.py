"""Reading a queue's job metrics: finished jobs counted per minute by the workers.

A worker built with ``metrics={"maxDataPoints": n}`` (EchoMQ's or BullMQ's) counts every job it
completes or fails for good in ``metrics:completed`` / ``metrics:failed`` and their ``:data``
lists (docs/protocol.md §1.2). This reads them back in the shape BullMQ 6.7's
``queue.getMetrics`` returns, so a dashboard written for either runtime reads both: the three
reads go in one MULTI, a consistent snapshot while workers keep counting.
"""

from __future__ import annotations

from typing import Any

import redis

from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.keys import QueueKeys
from ..protocol.options import MAX_SAFE_INTEGER
from ..transport.refusals import refusals

#: What can be measured: the two finished states.
METRIC_KINDS = ("completed", "failed")


def _int_or_zero(raw: Any) -> int:
    """A stored count or point as an int; 0 when absent or not a number, as BullMQ reads it."""
    if raw is None:
        return 0
    try:
        return int(text(raw))
    except ValueError:
        return 0


def get_metrics(client: redis.Redis, keys: QueueKeys, kind: str, start: int, end: int) -> dict[str, Any]:
    """``{"meta": {"count", "prevTS", "prevCount"}, "data": [points], "count": all points}``.

    ``data`` is the slice ``start..end`` (LRANGE indices, both inclusive) of the per-minute
    points, newest first: 0 is the last full minute, -1 the oldest point. ``count`` is the
    number of points stored, not of the slice; ``meta.count`` the jobs counted in all.
    """
    if kind not in METRIC_KINDS:
        raise InvalidInputError(f"get_metrics: kind={kind!r} must be 'completed' or 'failed'")
    for field, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_SAFE_INTEGER:
            raise InvalidInputError(f"get_metrics: {field}={value!r} must be an int index (-1 = the oldest point)")
    metrics_key = keys.key(f"metrics:{kind}")
    data_key = f"{metrics_key}:data"
    pipe = client.pipeline(transaction=True)
    pipe.hmget(metrics_key, ["count", "prevTS", "prevCount"])
    pipe.lrange(data_key, start, end)
    pipe.llen(data_key)
    with refusals("get_metrics", [metrics_key]):
        (count, prev_ts, prev_count), points, stored = pipe.execute()
    return {
        "meta": {"count": _int_or_zero(count), "prevTS": _int_or_zero(prev_ts), "prevCount": _int_or_zero(prev_count)},
        "data": [_int_or_zero(point) for point in points],
        "count": int(stored),
    }
