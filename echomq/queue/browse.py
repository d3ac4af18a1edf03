"""Reads for a page that shows queues to a person: the limits of many queues at once, a job's
children, a scheduler's latest iterations.

Each reads a window (a count, a bounded SCAN, the newest ids of a set), never a whole list, so
a page answers as fast on a queue of a million jobs as on an empty one. Read-only: no script
runs, nothing is written, so a read-only ACL user can browse. The reads of one call are
pipelined but not atomic, as ``Queue.get_job_counts``: a job moving meanwhile may be shown in
its old place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.keys import QueueKeys, job_key
from ..transport.keyspace import run_commands
from ..transport.refusals import refusals
from .global_limits import rate_limit_of, stored_int


@dataclass(frozen=True)
class QueueLimits:
    """A queue's global limits (meta ``concurrency``, ``max``/``duration``); None when unset."""

    concurrency: int | None
    rate_max: int | None
    rate_duration: int | None


def queue_limits(client: Any, all_keys: Sequence[QueueKeys]) -> list[QueueLimits]:
    """The global limits of each queue, in one pipeline (what ``Queue.get_global_concurrency``
    and ``get_global_rate_limit`` read, for many queues at once)."""
    with refusals("queue_limits", [all_keys[0].meta] if all_keys else []):
        replies = run_commands(client, [("HMGET", keys.meta, "concurrency", "max", "duration") for keys in all_keys])
    limits = []
    for concurrency, rate_max, duration in replies:
        rate = rate_limit_of(rate_max, duration)
        limits.append(QueueLimits(stored_int(concurrency), rate["max"] if rate else None,
                                  rate["duration"] if rate else None))
    return limits


@dataclass(frozen=True)
class Children:
    """A flow parent's children as far as one window shows them: full job keys, the counts."""

    pending: list[str]
    processed: list[str]
    failed: list[str]
    pending_count: int
    processed_count: int
    failed_count: int


def job_children(client: redis.Redis, keys: QueueKeys, job_id: str, window: int = 50) -> Children:
    """The job's children: those not finished yet (``:dependencies``), those completed
    (``:processed``) and those that failed (``:failed``, docs/protocol.md §1.3), at most about
    ``window`` keys of each (one SSCAN/HSCAN step: a parent of 10^5 children costs the same)."""
    _check_window("job_children", window)
    dependencies, processed = keys.job_dependencies(job_id), keys.job_processed(job_id)
    failed = keys.key(f"{job_id}:failed")
    pipe = client.pipeline(transaction=False)
    pipe.sscan(dependencies, 0, count=window)
    pipe.hscan(processed, 0, count=window)
    pipe.hscan(failed, 0, count=window)
    pipe.scard(dependencies)
    pipe.hlen(processed)
    pipe.hlen(failed)
    with refusals("job_children", [dependencies]):
        (_c1, pending), (_c2, done), (_c3, lost), n_pending, n_done, n_lost = pipe.execute()
    return Children(sorted(text(k) for k in pending)[:window], sorted(text(k) for k in done)[:window],
                    sorted(text(k) for k in lost)[:window], int(n_pending), int(n_done), int(n_lost))


def split_job_key(key: str) -> tuple[str, str, str] | None:
    """``<prefix>:{<queue>}:<id>`` -> (prefix, queue, id), or None when the key is not a job
    key of that shape (a parent or child key may come from any runtime)."""
    head, brace, rest = key.partition(":{")
    queue, close, job_id = rest.partition("}:")
    if not brace or not close or not head or not queue or not job_id:
        return None
    return head, queue, job_id


def parent_job_key(parent: dict[str, Any] | None) -> str | None:
    """The full key of a job's parent from its ``parent`` field (``{"id", "queueKey"}``)."""
    if not parent or not isinstance(parent.get("id"), str) or not isinstance(parent.get("queueKey"), str):
        return None
    return job_key(parent["queueKey"], parent["id"])


def _check_window(operation: str, window: Any) -> None:
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 10_000:
        raise InvalidInputError(f"{operation}: window={window!r} must be an int from 1 to 10000")
