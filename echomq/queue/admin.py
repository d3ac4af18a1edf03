"""The operator's side of a queue: counts, listings, pause/resume, clean, drain, obliterate.

Kept apart from ``queue.py`` (the producer's side) so each stays one concept; ``Queue``
delegates here. Every function takes a client and the queue's keys; which key holds which
state is ``protocol.states``' table (docs/protocol.md §3.1, §3.7).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ..errors import InvalidInputError, InvalidStateError
from ..protocol.codec import text
from ..protocol.keys import QueueKeys
from ..protocol.states import CLEANABLE, COUNTED, canonical_state, state_key
from ..transport.calls import run_script
from ..transport.refusals import refusals
from ..transport.scripts import script
from ..types import Clock
from .job import Job

OBLITERATE_BATCH = 1000


def job_counts(client: redis.Redis, keys: QueueKeys, states: Sequence[str]) -> dict[str, int]:
    names = list(states) or list(COUNTED)
    resolved = [state_key(name) for name in names]
    pipe = client.pipeline(transaction=False)
    for state in resolved:
        (pipe.llen if state.kind == "list" else pipe.zcard)(keys.key(state.suffix))
    with refusals("get_job_counts", [keys.meta]):
        counts = pipe.execute()
    return {name: int(count) for name, count in zip(names, counts)}


def get_jobs(client: redis.Redis, keys: QueueKeys, states: str | Sequence[str], start: int, end: int,
             asc: bool, clock: Clock) -> list[Job]:
    """Jobs of the given states, newest first unless ``asc``; start/end apply per state."""
    for field, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"get_jobs: {field}={value!r} must be an int (an index, -1 = the last)")
    if not isinstance(asc, bool):
        raise InvalidInputError(f"get_jobs: asc={asc!r} must be True or False")
    if not isinstance(states, (str, Sequence)):
        raise InvalidInputError(f"get_jobs: states={states!r} must be a state name or a list of them")
    names = [states] if isinstance(states, str) else list(states)
    with refusals("get_jobs", [keys.meta]):
        return _get_jobs(client, keys, names, start, end, asc, clock)


def _get_jobs(client: redis.Redis, keys: QueueKeys, names: list[str], start: int, end: int,
              asc: bool, clock: Clock) -> list[Job]:
    ids: list[str] = []
    seen: set[str] = set()
    for name in names:
        state = state_key(name)
        key = keys.key(state.suffix)
        found: list[Any]
        if state.kind == "list":
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
            job_id = text(raw)
            if job_id not in seen:
                seen.add(job_id)
                ids.append(job_id)
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hgetall(keys.job(job_id))
    return [Job.from_hash(client, keys, job_id, raw, clock=clock)
            for job_id, raw in zip(ids, pipe.execute()) if raw]


def get_workers(client: redis.Redis, keys: QueueKeys) -> list[dict[str, str]]:
    workers: list[dict[str, str]] = []
    with refusals("get_workers", [keys.meta]):  # CLIENT LIST: a user without +client|list is told so
        entries = client.client_list()
    for entry in entries:
        rawname = text(entry.get("name", ""))
        worker_name = keys.worker_name_of(rawname)
        if worker_name is not None:
            workers.append({**{k: text(v) for k, v in entry.items()}, "name": worker_name, "rawname": rawname})
    return workers


def _reverse_range(start: int, end: int, length: int) -> tuple[int, int]:
    """Map [start, end] counted from the oldest end of a list onto LRANGE indices."""
    end = length - 1 if end < 0 else min(end, length - 1)
    return length - 1 - end, length - 1 - start


def pause(client: redis.Redis, keys: QueueKeys) -> None:
    lua = script("pause")
    run_script(client, lua, lua.keys_for(keys, source="wait", target="paused"), ["paused", "1"])


def resume(client: redis.Redis, keys: QueueKeys) -> None:
    # A legacy paused list is migrated in chunks; only the first call writes "resumed".
    lua = script("pause")
    resume_keys = lua.keys_for(keys, source="paused", target="wait")
    emit = "1"
    while True:
        remaining = run_script(client, lua, resume_keys, ["resumed", emit])
        emit = "0"
        if int(remaining) <= 0:
            return


def clean(client: redis.Redis, keys: QueueKeys, grace_ms: int, limit: int, state: str, now_ms: int) -> list[str]:
    for field, value in (("grace_ms", grace_ms), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"clean: {field}={value!r} must be an int >= 0")
    try:
        canonical: str | None = canonical_state(state)
    except InvalidInputError:
        canonical = None
    if canonical not in CLEANABLE:
        raise InvalidInputError(f"clean: state={state!r} must be one of {[state_key(s).suffix for s in CLEANABLE]}")
    suffix = state_key(canonical).suffix
    lua = script("cleanJobsInSet")
    deleted = run_script(client, lua, lua.keys_for(keys, state=suffix),
                         [keys.job_prefix, now_ms - grace_ms, limit, suffix])
    return [text(job_id) for job_id in deleted]


def drain(client: redis.Redis, keys: QueueKeys, include_delayed: bool) -> int:
    lua = script("drain")
    return int(run_script(client, lua, lua.keys_for(keys), [keys.job_prefix, "1" if include_delayed else "0"]))


def obliterate(client: redis.Redis, keys: QueueKeys, force: bool) -> None:
    pause(client, keys)
    lua = script("obliterate")
    obliterate_keys = lua.keys_for(keys)
    while True:
        code = int(run_script(client, lua, obliterate_keys, [OBLITERATE_BATCH, "1" if force else ""]))
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
    with refusals("trim_events", [keys.events]):
        return int(client.xtrim(keys.events, maxlen=max_len, approximate=True))
