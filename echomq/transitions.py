"""The worker side of the job lifecycle: one method per transition script, nothing else.

Every call is one round trip. The scripts take flat ARGV (no msgpack: fakeredis has none),
in the order documented in each script's header. Results are decoded here so the Worker and
the maintenance loop deal in Python values: a ``Fetched`` after moveToActive or a fetch-next,
lists of ids after the lock and stalled scripts, exceptions for negative codes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import redis

from .connection import decode_hash, to_str
from .errors import raise_for_code
from .keys import QueueKeys
from .scripts import script


@dataclass(frozen=True)
class Fetched:
    """What moveToActive (or a fetch-next) handed over.

    ``job_id`` is None when no job was taken; then ``rate_limit_ms`` says how long the
    limiter holds jobs back and ``next_due_ms`` when the earliest delayed job is due (0: none).
    """

    job_id: str | None
    hash: dict[str, str] = field(default_factory=dict)
    rate_limit_ms: int = 0
    next_due_ms: int = 0


NOTHING = Fetched(None)


def parse_fetched(result: Any) -> Fetched:
    if not isinstance(result, (list, tuple)) or len(result) < 4:
        return NOTHING
    raw, job_id, rate_limit, next_due = result[0], result[1], result[2], result[3]
    if isinstance(raw, (list, tuple, dict)):
        return Fetched(to_str(job_id), decode_hash(raw))
    return Fetched(None, {}, int(rate_limit or 0), int(float(next_due or 0)))


def keep_args(keep: Any) -> tuple[str, str, str]:
    """removeOnComplete / removeOnFail (bool, count or {age, count, limit}) as the script's
    (keep count, keep age s, keep limit): True deletes at once, False or None keeps all."""
    if keep is None or keep is False:
        return "-1", "", ""
    if keep is True:
        return "0", "", ""
    if isinstance(keep, (int, float)):
        return str(int(keep)), "", ""
    if isinstance(keep, Mapping):
        count = keep.get("count")
        age = keep.get("age")
        limit = keep.get("limit")
        return (
            "-1" if count is None else str(int(count)),
            "" if age is None else str(int(age)),
            "" if limit is None else str(int(limit)),
        )
    return "-1", "", ""


@dataclass
class WorkerIdentity:
    """The per-worker values every fetch sends: lock duration, name (pb), limiter."""

    lock_duration: int
    name: str | None = None
    limiter_max: int | None = None
    limiter_duration: int | None = None

    def fetch_args(self) -> list[str]:
        return [
            str(self.lock_duration),
            self.name or "",
            "" if self.limiter_max is None else str(self.limiter_max),
            "" if self.limiter_duration is None else str(self.limiter_duration),
        ]


class Transitions:
    """Runs the worker's transition scripts for one queue on one client (thread-safe: redis-py
    pools connections, and the scripts carry all state)."""

    def __init__(self, client: redis.Redis, keys: QueueKeys, identity: WorkerIdentity) -> None:
        self.client = client
        self.keys = keys
        self.identity = identity

    # -- taking jobs ------------------------------------------------------------------------
    def move_to_active(self, token: str, now_ms: int) -> Fetched:
        k = self.keys
        args = [k.job_prefix, now_ms, token, *self.identity.fetch_args()]
        result = script("moveToActive")(
            self.client,
            [k.wait, k.active, k.prioritized, k.events, k.stalled, k.limiter, k.delayed,
             k.paused, k.meta, k.pc, k.marker],
            args,
        )
        return parse_fetched(result)

    # -- finishing an attempt ---------------------------------------------------------------
    def move_to_finished(
        self,
        job_id: str,
        token: str,
        now_ms: int,
        *,
        completed: bool,
        value: str,
        keep: Any,
        attempts: int,
        fetch_next: bool,
        fields: Sequence[str] = (),
    ) -> Fetched | None:
        """Complete (value = return value JSON) or finally fail (value = failed reason).
        Returns the next job's Fetched when fetch_next took one (or learnt the next due time)."""
        k = self.keys
        target = "completed" if completed else "failed"
        count, age, limit = keep_args(keep)
        args = [
            job_id, now_ms, "returnvalue" if completed else "failedReason", value, target,
            "1" if fetch_next else "0", k.job_prefix, token, count, age, limit, str(int(attempts)),
            json.dumps(list(fields)) if fields else "", *self.identity.fetch_args(),
        ]
        result = script("moveToFinished")(
            self.client,
            [k.wait, k.active, k.prioritized, k.events, k.stalled, k.limiter, k.delayed,
             k.paused, k.meta, k.pc, k.key(target), k.job(job_id), k.key(f"metrics:{target}"),
             k.marker],
            args,
        )
        if isinstance(result, int):
            if result < 0:
                raise_for_code(result, f"move job to {target}", job_id=job_id, state="active")
            return None
        return parse_fetched(result)

    def move_to_delayed(
        self, job_id: str, token: str, now_ms: int, delay_ms: int, *, fields: Sequence[str] = (),
        fetch_next: bool = False,
    ) -> Fetched | None:
        k = self.keys
        args = [k.job_prefix, now_ms, job_id, token, int(delay_ms), "0",
                json.dumps(list(fields)) if fields else "", "1" if fetch_next else "0",
                *self.identity.fetch_args()]
        result = script("moveToDelayed")(
            self.client,
            [k.marker, k.active, k.prioritized, k.delayed, k.job(job_id), k.events, k.meta,
             k.stalled, k.wait, k.limiter, k.pc],
            args,
        )
        if isinstance(result, int):
            if result < 0:
                raise_for_code(result, "move job to delayed", job_id=job_id, state="active")
            return None
        return parse_fetched(result)

    def retry(self, job_id: str, token: str, now_ms: int, *, lifo: bool = False,
              fields: Sequence[str] = ()) -> None:
        k = self.keys
        result = script("retryJob")(
            self.client,
            [k.active, k.wait, k.paused, k.job(job_id), k.meta, k.events, k.delayed,
             k.prioritized, k.pc, k.marker, k.stalled],
            [k.job_prefix, now_ms, "RPUSH" if lifo else "LPUSH", job_id, token,
             json.dumps(list(fields)) if fields else ""],
        )
        if isinstance(result, int) and result < 0:
            raise_for_code(result, "retry job", job_id=job_id, state="active")

    # -- maintenance ------------------------------------------------------------------------
    def extend_lock(self, job_id: str, token: str) -> bool:
        k = self.keys
        return bool(script("extendLock")(
            self.client, [k.job_lock(job_id), k.stalled],
            [token, self.identity.lock_duration, job_id]))

    def extend_locks(self, tokens: Mapping[str, str]) -> list[str]:
        """Renew every lock in ``{job_id: token}``; return the ids whose lock is lost."""
        if not tokens:
            return []
        k = self.keys
        args: list[Any] = [k.job_prefix, self.identity.lock_duration]
        for job_id, token in tokens.items():
            args += [job_id, token]
        failed = script("extendLocks")(self.client, [k.stalled], args)
        return [to_str(x) for x in failed or []]

    def move_stalled_to_wait(self, max_stalled_count: int, interval_ms: int, now_ms: int) -> list[str]:
        k = self.keys
        moved = script("moveStalledJobsToWait")(
            self.client,
            [k.stalled, k.wait, k.active, k.stalled_check, k.meta, k.paused, k.marker, k.events,
             k.repeat],
            [max_stalled_count, k.job_prefix, now_ms, interval_ms],
        )
        return [to_str(x) for x in moved or []]
