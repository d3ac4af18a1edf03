"""A queue's global limits: the fields of meta that every worker of the queue obeys.

``concurrency`` caps how many jobs are active at once, ``max`` / ``duration`` how many are
taken per window, across all workers of the queue, EchoMQ's and BullMQ's alike: the fetch step
of moveToActive, moveToFinished and moveToDelayed reads them (docs/protocol.md §1.2, §3.3).
The fields are the ones BullMQ 6.7's ``setGlobalConcurrency`` / ``setGlobalRateLimit`` write,
plain HSET / HDEL on meta, so either runtime's setter steers the other's workers.

Values are checked before anything is sent, since a worker reads them as numbers in every
fetch: a whole number of at least 1, at most 2^53 - 1 (what a Lua or JavaScript number holds
exactly), and the window at most 2^31 - 1 ms, the longest wait a BullMQ worker in Node can set
(a longer one fires at once, and its worker would spin).
"""

from __future__ import annotations

from typing import Any

import redis

from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.keys import QueueKeys
from ..protocol.options import MAX_SAFE_INTEGER
from ..transport.refusals import refusals

#: The longest rate-limit window (ms): a Worker's ``limiter`` has the same bound.
MAX_DURATION_MS = 2**31 - 1


def _whole(operation: str, field: str, value: Any, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInputError(f"{operation}: {field}={value!r} must be an int between 1 and {maximum}")
    return value


def stored_int(raw: Any) -> int | None:
    """A meta field as an int; None when absent or not a whole number (no setter writes one)."""
    if raw is None:
        return None
    try:
        return int(text(raw))
    except ValueError:
        return None


def set_concurrency(client: redis.Redis, keys: QueueKeys, concurrency: int) -> None:
    _whole("set_global_concurrency", "concurrency", concurrency, MAX_SAFE_INTEGER)
    with refusals("set_global_concurrency", [keys.meta]):
        client.hset(keys.meta, "concurrency", concurrency)


def get_concurrency(client: redis.Redis, keys: QueueKeys) -> int | None:
    with refusals("get_global_concurrency", [keys.meta]):
        return stored_int(client.hget(keys.meta, "concurrency"))


def remove_concurrency(client: redis.Redis, keys: QueueKeys) -> None:
    with refusals("remove_global_concurrency", [keys.meta]):
        client.hdel(keys.meta, "concurrency")


def set_rate_limit(client: redis.Redis, keys: QueueKeys, max_jobs: int, duration: int) -> None:
    _whole("set_global_rate_limit", "max", max_jobs, MAX_SAFE_INTEGER)
    _whole("set_global_rate_limit", "duration", duration, MAX_DURATION_MS)
    with refusals("set_global_rate_limit", [keys.meta]):
        client.hset(keys.meta, mapping={"max": max_jobs, "duration": duration})


def get_rate_limit(client: redis.Redis, keys: QueueKeys) -> dict[str, int] | None:
    """``{"max", "duration"}`` when both are set (as BullMQ's getGlobalRateLimit), else None."""
    with refusals("get_global_rate_limit", [keys.meta]):
        raw_max, raw_duration = client.hmget(keys.meta, ["max", "duration"])
    return rate_limit_of(raw_max, raw_duration)


def rate_limit_of(raw_max: Any, raw_duration: Any) -> dict[str, int] | None:
    """Meta's ``max`` and ``duration`` as a rate limit: only when both are set (BullMQ's rule)."""
    max_jobs, duration = stored_int(raw_max), stored_int(raw_duration)
    if max_jobs is None or duration is None:
        return None
    return {"max": max_jobs, "duration": duration}


def remove_rate_limit(client: redis.Redis, keys: QueueKeys) -> None:
    with refusals("remove_global_rate_limit", [keys.meta]):
        client.hdel(keys.meta, "max", "duration")
