"""Putting jobs back in line: retry a finished job, retry or promote many (docs/protocol.md §3.7).

Each is one transition script per call, writing what BullMQ 6.7's ``job.retry``,
``queue.retryJobs`` and ``queue.promoteJobs`` write (the job's fields, the lists, the capped
``waiting`` event with ``prev``), so a BullMQ worker or dashboard sees the same queue whichever
runtime retried. The bulk calls page through their set ``count`` ids per call, as BullMQ's loop
does, so no call holds the server for long however many jobs the set holds, and stop at
``limit`` jobs when one is given. One difference is stated in docs/protocol.md §7: every job is
placed as the single-job operation places it (its priority, and ``lifo`` for a retry, are
honoured).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from ..errors import InvalidInputError, raise_for_code
from ..protocol.keys import QueueKeys
from ..protocol.options import MAX_EPOCH_MS, MAX_SAFE_INTEGER
from ..transport.calls import run_script
from ..transport.refusals import refusals
from ..transport.scripts import LuaScript, script

#: The states a finished job can be retried from.
RETRYABLE_STATES = ("failed", "completed")

#: Ids one bulk call takes from its set when the caller does not say (BullMQ's default).
DEFAULT_BATCH = 1000


def check_retry_state(operation: str, state: Any) -> str:
    if state not in RETRYABLE_STATES or not isinstance(state, str):
        raise InvalidInputError(f"{operation}: state={state!r} must be 'failed' or 'completed'")
    return state


def _check_flag(operation: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{operation}: {name}={value!r} must be True or False")


def _check_count(operation: str, count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SAFE_INTEGER:
        raise InvalidInputError(f"{operation}: count={count!r} must be an int from 1 to {MAX_SAFE_INTEGER} "
                                "(jobs moved per call)")
    return count


def retry_job(client: redis.Redis, keys: QueueKeys, job_id: str, state: Any = "failed", *,
              reset_attempts_made: Any = False, reset_attempts_started: Any = False) -> None:
    """Move a completed or failed job back to wait (``reprocessJob-9``).

    JobNotFoundError when there is no such job (one removed when it finished included),
    InvalidStateError when it is not in ``state``; both write nothing.
    """
    check_retry_state("retry", state)
    _check_flag("retry", "reset_attempts_made", reset_attempts_made)
    _check_flag("retry", "reset_attempts_started", reset_attempts_started)
    lua = script("reprocessJob")
    code = int(run_script(client, lua, lua.keys_for(keys, job_id, finished=state),
                          [job_id, state, "1" if reset_attempts_made else "0",
                           "1" if reset_attempts_started else "0"]))
    if code < 0:
        raise_for_code(code, "retry", job_id=job_id, state=state)


def retry_jobs(client: redis.Redis, keys: QueueKeys, state: Any, count: Any, timestamp: Any, now_ms: int,
               limit: Any = None) -> int:
    """Retry the jobs of ``state`` that finished at or before ``timestamp`` (None: now), at
    most ``limit`` of them (None: all), ``count`` per call (``retryJobs-8``); returns how many
    were retried."""
    check_retry_state("retry_jobs", state)
    _check_count("retry_jobs", count)
    _check_limit("retry_jobs", limit)
    if timestamp is None:
        timestamp = now_ms
    elif isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp <= MAX_EPOCH_MS:
        raise InvalidInputError(f"retry_jobs: timestamp={timestamp!r} must be None (now) or an int from 0 to "
                                f"{MAX_EPOCH_MS} (epoch ms: jobs finished at or before it are retried)")
    lua = script("retryJobs")
    call_keys = lua.keys_for(keys, finished=state)
    # One timestamp for the whole loop: a job that fails again while we page is not retried twice.
    return _page(client, lua, call_keys, lambda asked: [keys.job_prefix, state, asked, timestamp], count, limit)


def promote_jobs(client: redis.Redis, keys: QueueKeys, count: Any, limit: Any = None) -> int:
    """Promote the delayed jobs, the earliest due first, at most ``limit`` (None: all),
    ``count`` per call (``promoteJobs-8``); returns how many."""
    _check_count("promote_jobs", count)
    _check_limit("promote_jobs", limit)
    lua = script("promoteJobs")
    # A job a worker puts back in delayed while we page (a failed attempt's backoff, a
    # scheduler's next run) is due again: the loop takes at most as many as were delayed when
    # it began, so it ends however fast they come back (docs/queue.md, "Retrying, promoting").
    with refusals("promote_jobs", [keys.delayed]):
        present = int(client.zcard(keys.delayed))
    limit = present if limit is None else min(limit, present)
    return _page(client, lua, lua.keys_for(keys), lambda asked: [keys.job_prefix, asked], count, limit)


def _check_limit(operation: str, limit: Any) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or not 1 <= limit <= MAX_SAFE_INTEGER):
        raise InvalidInputError(f"{operation}: limit={limit!r} must be None (all) or an int from 1 to "
                                f"{MAX_SAFE_INTEGER} (jobs moved in all)")


def _page(client: redis.Redis, lua: LuaScript, call_keys: Sequence[str], args_for: Callable[[int], list[Any]],
          count: int, limit: int | None) -> int:
    """Call a bulk script until a call takes fewer ids than it asked for, or ``limit`` jobs
    moved; the jobs it moved. Each call asks for ``count`` ids (``args_for(asked)`` are its
    arguments), fewer near the limit."""
    moved = 0
    while limit is None or moved < limit:
        asked = count if limit is None else min(count, limit - moved)
        taken, placed = (int(n) for n in run_script(client, lua, call_keys, args_for(asked)))
        moved += placed
        if taken < asked:
            break
    return moved
