"""The worker side of the job lifecycle: one method per transition script, nothing else.

Every call is one round trip. The scripts take flat ARGV (no msgpack: fakeredis has none),
in the order documented in each script's header. Results are decoded here so the Worker and
the maintenance loop deal in Python values: a ``Fetched`` after moveToActive or a fetch-next,
lists of ids after the lock and stalled scripts, exceptions for negative codes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import NoScriptError

try:  # hiredis packs a whole command in C; redis-py would encode each argument in Python first
    from hiredis import pack_command as _pack_command
except ImportError:  # pragma: no cover - hiredis is an optional extra
    _pack_command = None  # type: ignore[assignment]

from .connection import decode_hash, to_str
from .errors import ScriptError, raise_for_code
from .keys import QueueKeys
from .scripts import LuaScript, script


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


def _flat_hash(raw: Any) -> dict[str, str]:
    # The hot path: HGETALL inside a script always comes back as a flat list.
    if isinstance(raw, list):
        values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw]
        return dict(zip(values[::2], values[1::2]))
    return decode_hash(raw)


def parse_fetched(result: Any) -> Fetched:
    if not isinstance(result, (list, tuple)) or len(result) < 4:
        return NOTHING
    raw, job_id, rate_limit, next_due = result[0], result[1], result[2], result[3]
    if isinstance(raw, (list, tuple, dict)):
        return Fetched(to_str(job_id), _flat_hash(raw))
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


class PinnedConnection:
    """EVALSHA over one pool connection that a thread keeps for its lifetime.

    The hot path (take a job, finish it and take the next) is one script per job; going through
    ``Redis.execute_command`` costs about three times the round trip itself in redis-py 8
    (retry wrapper, pool checkout, per-call bookkeeping), so each worker thread pins one
    connection and talks to it directly. NOSCRIPT reloads the script once; a connection error
    drops the socket (the next call reconnects) and propagates to the caller's retry loop.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.pool = client.connection_pool
        self.conn: Any = None

    def __call__(self, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if len(keys) != lua.numkeys:
            raise ScriptError(f"{lua.name}-{lua.numkeys}.lua takes {lua.numkeys} keys, got {len(keys)}")
        if self.conn is None:
            self.conn = self.pool.get_connection()
        conn = self.conn
        command = ("EVALSHA", lua.sha, len(keys), *keys, *args)
        try:
            try:
                self._send(conn, command)
                return conn.read_response()
            except NoScriptError:
                conn.send_command("SCRIPT", "LOAD", lua.source)
                conn.read_response()
                self._send(conn, command)
                return conn.read_response()
        except (redis.ConnectionError, redis.TimeoutError):
            conn.disconnect()
            raise

    @staticmethod
    def _send(conn: Any, command: tuple[Any, ...]) -> None:
        if _pack_command is not None:
            conn.send_packed_command([_pack_command(command)], check_health=False)
        else:
            conn.send_command(*command)

    def release(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                self.pool.release(conn)
            except (redis.RedisError, OSError):  # the pool may be closed; the socket goes with it
                conn.disconnect()


class Transitions:
    """Runs the worker's transition scripts for one queue on one client.

    Thread-safe: the hot-path scripts go over a connection pinned per thread
    (:class:`PinnedConnection`), the rest through the client's pool; the scripts carry all state.
    """

    def __init__(self, client: redis.Redis, keys: QueueKeys, identity: WorkerIdentity) -> None:
        self.client = client
        self.keys = keys
        self.identity = identity
        self._local = threading.local()
        k = keys
        # Key lists built once: the hot path must not rebuild them per job.
        self._active_keys = [k.wait, k.active, k.prioritized, k.events, k.stalled, k.limiter, k.delayed,
                             k.paused, k.meta, k.pc, k.marker]
        self._finished_keys = {
            target: [k.wait, k.active, k.prioritized, k.events, k.stalled, k.limiter, k.delayed, k.paused,
                     k.meta, k.pc, k.key(target), "", k.key(f"metrics:{target}"), k.marker]
            for target in ("completed", "failed")
        }

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        pinned = getattr(self._local, "pinned", None)
        if pinned is None:
            pinned = self._local.pinned = PinnedConnection(self.client)
        return pinned(script(name), keys, args)

    def release_thread_connection(self) -> None:
        """Give this thread's pinned connection back to the pool (at the thread's end)."""
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            pinned.release()
            self._local.pinned = None

    # -- taking jobs ------------------------------------------------------------------------
    def move_to_active(self, token: str, now_ms: int) -> Fetched:
        args = [self.keys.job_prefix, now_ms, token, *self.identity.fetch_args()]
        return parse_fetched(self._run("moveToActive", self._active_keys, args))

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
        keys = list(self._finished_keys[target])
        keys[11] = k.job(job_id)
        result = self._run("moveToFinished", keys, args)
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
        result = self._run(
            "moveToDelayed",
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
        result = self._run(
            "retryJob",
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
