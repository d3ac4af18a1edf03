"""Changing a job in place: its priority, its data, reading its log, its deduplication id.

The operations BullMQ 6.7 offers as ``changePriority``, ``updateData``, ``getJobLogs``,
``getDeduplicationJobId`` and ``removeDeduplicationKey``, with the same effects on the data
(docs/protocol.md §3.7). ``Job`` and ``Queue`` are thin doors onto these functions, so each
rule (the log range, the data limits, who may give up a deduplication id) lives here once.
Every argument is checked before anything is sent: a refusal leaves Redis as it was.
"""

from __future__ import annotations

from typing import Any

import redis

from ..errors import InvalidInputError, InvalidJobOptionsError, raise_for_code
from ..protocol.codec import text, utf8_problem
from ..protocol.keys import QueueKeys
from ..protocol.limits import DataLimits
from ..protocol.options import PRIORITY_LIMIT, dumps_json
from ..transport.calls import run_script
from ..transport.refusals import refusals
from ..transport.scripts import script


def change_priority(client: redis.Redis, keys: QueueKeys, job_id: str, priority: int | None,
                    lifo: bool) -> int:
    """Store ``priority`` (None means 0, no priority, as BullMQ's default) and re-place the job
    if it is waiting or prioritized; returns the priority stored. Any state is accepted: a job
    elsewhere (delayed, active, finished) keeps its place and uses the priority when it next
    enters wait. Writes no event, as BullMQ writes none."""
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= PRIORITY_LIMIT:
        raise InvalidInputError(f"change_priority: priority={priority!r} must be an int from 0 (no priority) "
                                f"to {PRIORITY_LIMIT}, or None")
    if not isinstance(lifo, bool):
        raise InvalidInputError(f"change_priority: lifo={lifo!r} must be True or False")
    lua = script("changePriority")
    code = int(run_script(client, lua, lua.keys_for(keys, job_id), [priority, job_id, "1" if lifo else "0"]))
    if code < 0:
        raise_for_code(code, "change_priority", job_id=job_id)
    return priority


def update_data(client: redis.Redis, keys: QueueKeys, job_id: str, data: Any, limits: DataLimits) -> Any:
    """Replace the job's data, in any state; returns the value stored (None is stored as ``{}``,
    as ``add`` stores it). Data that is not JSON, or over ``limits``, is refused as ``add``
    refuses it (InvalidJobOptionsError), before anything is written. No event, as BullMQ."""
    value = {} if data is None else data
    encoded = dumps_json(value, "data")
    if len(encoded) > limits.certainly_within:
        too_much = limits.problem(encoded)
        if too_much is not None:
            raise InvalidJobOptionsError(f"update_data: the new data of job {job_id!r} is {too_much}")
    lua = script("updateData")
    code = int(run_script(client, lua, lua.keys_for(keys, job_id), [encoded]))
    if code < 0:
        raise_for_code(code, "update_data", job_id=job_id)
    return value


def read_logs(client: redis.Redis, keys: QueueKeys, job_id: str, start: int, end: int,
              asc: bool) -> tuple[list[str], int]:
    """Lines ``start..end`` (inclusive, -1 = the last) of the job's log and how many it holds,
    read in one MULTI. ``asc=False`` counts the range from the newest line and returns it
    newest first, as BullMQ's getJobLogs: ``(0, 1, asc=False)`` are the two latest lines."""
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"job logs: {name}={value!r} must be an int (an index, -1 = the last)")
    if not isinstance(asc, bool):
        raise InvalidInputError(f"job logs: asc={asc!r} must be True or False")
    key = keys.job_logs(job_id)
    pipe = client.pipeline(transaction=True)
    if asc:
        pipe.lrange(key, start, end)
    else:
        pipe.lrange(key, -(end + 1), -(start + 1))
    pipe.llen(key)
    with refusals("get_job_logs", [key]):
        lines, count = pipe.execute()
    logs = [text(line) for line in lines]
    if not asc:
        logs.reverse()
    return logs, int(count)


def _checked_deduplication_id(dedup_id: Any, operation: str) -> str:
    """The id ``add(deduplication={"id": ...})`` accepts: a non-empty str."""
    if not isinstance(dedup_id, str) or not dedup_id:
        raise InvalidInputError(f"{operation}: dedup_id={dedup_id!r:.100} must be a non-empty str")
    problem = utf8_problem(dedup_id)
    if problem is not None:
        raise InvalidInputError(f"{operation}: dedup_id={dedup_id!r:.100}: {problem}")
    return dedup_id


def deduplication_job_id(client: redis.Redis, keys: QueueKeys, dedup_id: str) -> str | None:
    """The id of the job that owns ``dedup_id`` now, or None when the id is free."""
    key = keys.deduplication(_checked_deduplication_id(dedup_id, "get_deduplication_job_id"))
    with refusals("get_deduplication_job_id", [key]):
        owner = client.get(key)
    return None if owner is None else text(owner)


def remove_deduplication_key(client: redis.Redis, keys: QueueKeys, dedup_id: str) -> int:
    """Free ``dedup_id`` whichever job owns it (1), or 0 when it was free: the next add with it
    is a new job again."""
    key = keys.deduplication(_checked_deduplication_id(dedup_id, "remove_deduplication_key"))
    with refusals("remove_deduplication_key", [key]):
        return int(client.delete(key))


def release_deduplication_id(client: redis.Redis, keys: QueueKeys, dedup_id: str, job_id: str) -> bool:
    """Free ``dedup_id`` only while ``job_id`` still owns it; True when it was freed."""
    _checked_deduplication_id(dedup_id, "remove_deduplication_key")
    lua = script("removeDeduplicationKey")
    return int(run_script(client, lua, lua.keys_for(keys), [dedup_id, job_id])) == 1
