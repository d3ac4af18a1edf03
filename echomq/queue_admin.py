"""The operator's side of a queue: counts, listings, pause/resume, clean, drain, obliterate.

Kept apart from ``queue.py`` (the producer's side) so each stays one concept; ``Queue``
delegates here. Every function takes a client and the queue's keys.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis

from .connection import to_str
from .errors import InvalidInputError, InvalidStateError
from .job import Job
from .keys import QueueKeys
from .scripts import script

#: State name -> (key suffix, kind). "waiting" is the wait list, as BullMQ names it.
_STATE_KEYS: dict[str, tuple[str, str]] = {
    "waiting": ("wait", "list"),
    "wait": ("wait", "list"),
    "active": ("active", "list"),
    "paused": ("paused", "list"),
    "prioritized": ("prioritized", "zset"),
    "delayed": ("delayed", "zset"),
    "completed": ("completed", "zset"),
    "failed": ("failed", "zset"),
    "waiting-children": ("waiting-children", "zset"),
}
#: What get_job_counts reports by default (BullMQ's getJobCounts types).
COUNT_STATES = ("active", "completed", "delayed", "failed", "paused", "prioritized", "waiting",
                "waiting-children")
CLEANABLE = ("completed", "failed", "delayed", "prioritized", "wait", "paused", "active")
OBLITERATE_BATCH = 1000


def _state(name: str) -> tuple[str, str]:
    normalised = name.replace("_", "-")
    if normalised not in _STATE_KEYS:
        raise InvalidInputError(f"state {name!r}: must be one of {sorted(_STATE_KEYS)}")
    return _STATE_KEYS[normalised]


def job_counts(client: redis.Redis, keys: QueueKeys, states: Sequence[str]) -> dict[str, int]:
    names = list(states) or list(COUNT_STATES)
    resolved = [_state(name) for name in names]
    pipe = client.pipeline(transaction=False)
    for suffix, kind in resolved:
        (pipe.llen if kind == "list" else pipe.zcard)(keys.key(suffix))
    return {name: int(count) for name, count in zip(names, pipe.execute())}


def get_jobs(client: redis.Redis, keys: QueueKeys, states: str | Sequence[str], start: int, end: int,
             asc: bool) -> list[Job]:
    """Jobs of the given states, newest first unless ``asc``; start/end apply per state."""
    names = [states] if isinstance(states, str) else list(states)
    ids: list[str] = []
    seen: set[str] = set()
    for name in names:
        suffix, kind = _state(name)
        key = keys.key(suffix)
        found: list[Any]
        if kind == "list":
            # Lists grow at the left (LPUSH), so index 0 is the newest.
            if asc:
                length = client.llen(key)
                lo, hi = _reverse_range(start, end, length)
                found = list(reversed(client.lrange(key, lo, hi))) if hi >= lo else []
            else:
                found = client.lrange(key, start, end)
        else:
            found = client.zrange(key, start, end) if asc else client.zrevrange(key, start, end)
        for raw in found:
            job_id = to_str(raw)
            if job_id not in seen:
                seen.add(job_id)
                ids.append(job_id)
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hgetall(keys.job(job_id))
    return [Job.from_hash(client, keys, job_id, raw) for job_id, raw in zip(ids, pipe.execute()) if raw]


def _reverse_range(start: int, end: int, length: int) -> tuple[int, int]:
    """Map [start, end] counted from the oldest end of a list onto LRANGE indices."""
    end = length - 1 if end < 0 else min(end, length - 1)
    return length - 1 - end, length - 1 - start


def pause(client: redis.Redis, keys: QueueKeys) -> None:
    script("pause")(client, [keys.wait, keys.paused, keys.meta, keys.prioritized, keys.events,
                             keys.delayed, keys.marker], ["paused", "1"])


def resume(client: redis.Redis, keys: QueueKeys) -> None:
    # A legacy paused list is migrated in chunks; only the first call writes "resumed".
    emit = "1"
    while True:
        remaining = script("pause")(client, [keys.paused, keys.wait, keys.meta, keys.prioritized,
                                             keys.events, keys.delayed, keys.marker], ["resumed", emit])
        emit = "0"
        if int(remaining) <= 0:
            return


def clean(client: redis.Redis, keys: QueueKeys, grace_ms: int, limit: int, state: str) -> list[str]:
    for field, value in (("grace_ms", grace_ms), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"clean: {field}={value!r} must be an int >= 0")
    state = "wait" if state == "waiting" else state
    if state not in CLEANABLE:
        raise InvalidInputError(f"clean: state={state!r} must be one of {list(CLEANABLE)}")
    cutoff = int(time.time() * 1000) - grace_ms
    deleted = script("cleanJobsInSet")(client, [keys.key(state), keys.events, keys.repeat],
                                       [keys.job_prefix, cutoff, limit, state])
    return [to_str(job_id) for job_id in deleted]


def drain(client: redis.Redis, keys: QueueKeys, include_delayed: bool) -> int:
    return int(script("drain")(client, [keys.wait, keys.paused, keys.delayed, keys.prioritized, keys.repeat],
                               [keys.job_prefix, "1" if include_delayed else "0"]))


def obliterate(client: redis.Redis, keys: QueueKeys, force: bool) -> None:
    pause(client, keys)
    while True:
        code = int(script("obliterate")(client, [keys.meta, keys.job_prefix],
                                        [OBLITERATE_BATCH, "1" if force else ""]))
        if code == 0:
            return
        if code == -2:
            raise InvalidStateError(
                f"obliterate: queue {keys.queue_name!r} has active jobs; pass force=True to delete them too")
        if code < 0:
            raise InvalidStateError(f"obliterate: queue {keys.queue_name!r} is not paused (code {code})")


def trim_events(client: redis.Redis, keys: QueueKeys, max_len: int) -> int:
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 0:
        raise InvalidInputError(f"trim_events: max_len={max_len!r} must be an int >= 0")
    return int(client.xtrim(keys.events, maxlen=max_len, approximate=True))
