"""A job as its hash ``<base>:<jobId>`` describes it, and the operations on one job.

The hash is shared with BullMQ: whatever runtime wrote it, ``Job.from_hash`` reads every
protocol field (``atm`` with the legacy ``attemptsMade`` fallback, ``rjk``, ``deid``, ``defa``
...). Worker-side internals (the lock token) live in the worker's own subclass, so this class
stays usable from producers, operators and tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import redis

from .connection import decode_hash, to_str
from .errors import InvalidInputError, JobNotFoundError, raise_for_code
from .keys import QueueKeys
from .options import decode_job_options, dumps_json
from .scripts import script

#: The names ``get_state`` returns, as BullMQ's ``Job.getState`` spells them.
STATES = ("completed", "failed", "delayed", "active", "waiting", "waiting-children", "prioritized")


def now_ms() -> int:
    return int(time.time() * 1000)


def _json_or_raw(text: str | None, default: Any = None) -> Any:
    """Decode a JSON field; a value some producer stored as plain text is returned as is."""
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return text


def _int_or_none(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(float(text))
    except ValueError:
        return None


class Job:
    """One job: its stored fields, decoded, plus the operations a producer or operator runs on it.

    Read-only attributes mirror the hash; call ``reload()`` to read it again.
    """

    def __init__(self, connection: redis.Redis, keys: QueueKeys, job_id: str, *, name: str = "",
                 data: Any = None, opts: Mapping[str, Any] | None = None, timestamp: int = 0) -> None:
        self.connection = connection
        self.keys = keys
        self.id = job_id
        self.name = name
        self.data = data
        self.raw_opts: dict[str, Any] = dict(opts) if opts else {}
        self._opts: dict[str, Any] | None = None
        self.timestamp = timestamp
        self.delay = int(self.raw_opts.get("delay") or 0)
        self.priority = int(self.raw_opts.get("priority") or 0)
        self.progress: Any = 0
        self.attempts_made = 0
        self.attempts_started = 0
        self.stalled_counter = 0
        self.processed_on: int | None = None
        self.finished_on: int | None = None
        self.processed_by: str | None = None
        self.return_value: Any = None
        self.failed_reason: str | None = None
        self.stacktrace: list[str] = []
        self.repeat_job_key: str | None = None
        self.deduplication_id: str | None = None
        self.parent_key: str | None = None
        self.parent: dict[str, Any] | None = None
        self.deferred_failure: str | None = None

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_hash(cls, connection: redis.Redis, keys: QueueKeys, job_id: Any,
                  raw: Mapping[Any, Any] | list[Any]) -> Job:
        """Build a Job from an HGETALL reply (bytes or str, dict or flat list)."""
        fields = decode_hash(raw)
        try:
            stored_opts = json.loads(fields.get("opts") or "{}")
        except ValueError:
            stored_opts = {}
        job = cls(connection, keys, to_str(job_id), name=fields.get("name", ""),
                  data=_json_or_raw(fields.get("data"), {}),
                  opts=stored_opts if isinstance(stored_opts, dict) else {},
                  timestamp=_int_or_none(fields.get("timestamp")) or 0)
        job._apply(fields)
        return job

    def _apply(self, fields: dict[str, str]) -> None:
        self.delay = _int_or_none(fields.get("delay")) or 0
        self.priority = _int_or_none(fields.get("priority")) or 0
        self.progress = _json_or_raw(fields.get("progress"), 0)
        self.attempts_made = _int_or_none(fields.get("atm", fields.get("attemptsMade"))) or 0
        self.attempts_started = _int_or_none(fields.get("ats")) or 0
        self.stalled_counter = _int_or_none(fields.get("stc")) or 0
        self.processed_on = _int_or_none(fields.get("processedOn"))
        self.finished_on = _int_or_none(fields.get("finishedOn"))
        self.processed_by = fields.get("pb")
        self.return_value = _json_or_raw(fields.get("returnvalue"))
        self.failed_reason = fields.get("failedReason")
        stack = _json_or_raw(fields.get("stacktrace"), [])
        self.stacktrace = [str(line) for line in stack] if isinstance(stack, list) else []
        self.repeat_job_key = fields.get("rjk")
        self.deduplication_id = fields.get("deid")
        self.parent_key = fields.get("parentKey")
        parent = _json_or_raw(fields.get("parent"))
        self.parent = parent if isinstance(parent, dict) else None
        self.deferred_failure = fields.get("defa")

    @classmethod
    def fetch(cls, connection: redis.Redis, keys: QueueKeys, job_id: str) -> Job | None:
        """The stored job, or None when its hash does not exist."""
        raw = connection.hgetall(keys.job(job_id))
        return cls.from_hash(connection, keys, job_id, raw) if raw else None

    def reload(self) -> Job:
        raw = self.connection.hgetall(self.keys.job(self.id))
        if not raw:
            raise JobNotFoundError(f"reload: job {self.id!r} does not exist")
        fields = decode_hash(raw)
        fresh = type(self).from_hash(self.connection, self.keys, self.id, fields)
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("connection", "keys")})
        return self

    @property
    def opts(self) -> dict[str, Any]:
        """The options in Python's snake_case (decoded on first use: bulk adds never pay for it)."""
        if self._opts is None:
            self._opts = decode_job_options(self.raw_opts)
        return self._opts

    @property
    def scheduler_id(self) -> str | None:
        """The job scheduler this job is an iteration of (``rjk``), if any."""
        return self.repeat_job_key

    @property
    def key(self) -> str:
        return self.keys.job(self.id)

    def get_state(self) -> str:
        return get_job_state(self.connection, self.keys, self.id)

    def get_logs(self, start: int = 0, end: int = -1) -> list[str]:
        return [to_str(line) for line in self.connection.lrange(self.keys.job_logs(self.id), start, end)]

    def get_children_values(self) -> dict[str, Any]:
        """Return values of the children that completed, by full child key (a flow parent's inputs)."""
        raw = self.connection.hgetall(self.keys.job_processed(self.id))
        return {to_str(k): _json_or_raw(to_str(v)) for k, v in raw.items()}

    def get_pending_dependencies(self) -> list[str]:
        """Full keys of the children that have not completed yet."""
        return sorted(to_str(k) for k in self.connection.smembers(self.keys.job_dependencies(self.id)))

    # -- operations ---------------------------------------------------------------------------
    def update_progress(self, progress: Any) -> None:
        """Store progress (a number or a JSON-able object) and write the ``progress`` event."""
        update_progress(self.connection, self.keys, self.id, progress)
        self.progress = progress

    def log(self, line: str) -> int:
        """Append a log line (trimmed to ``keep_logs``); returns how many lines the log holds."""
        return add_log(self.connection, self.keys, self.id, line, self.raw_opts.get("kl"))

    def remove(self, *, remove_children: bool = True) -> bool:
        return remove_job(self.connection, self.keys, self.id, remove_children=remove_children)

    def promote(self) -> None:
        promote_job(self.connection, self.keys, self.id)
        self.delay = 0

    def change_delay(self, delay_ms: int) -> None:
        change_delay(self.connection, self.keys, self.id, delay_ms)
        self.delay = int(delay_ms)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, queue={self.keys.queue_name!r})"


# -- single-job operations, shared by Job and Queue -------------------------------------------------

def get_job_state(client: redis.Redis, keys: QueueKeys, job_id: str) -> str:
    """Which state holds the job, or ``"unknown"``, checked in BullMQ's order."""
    pipe = client.pipeline(transaction=True)
    for zset in ("completed", "failed", "delayed"):
        pipe.zscore(keys.key(zset), job_id)
    pipe.lpos(keys.active, job_id)
    pipe.lpos(keys.wait, job_id)
    pipe.zscore(keys.waiting_children, job_id)
    pipe.zscore(keys.prioritized, job_id)
    pipe.lpos(keys.paused, job_id)
    found = pipe.execute()
    names = ("completed", "failed", "delayed", "active", "waiting", "waiting-children", "prioritized",
             "paused")
    for name, hit in zip(names, found):
        if hit is not None:
            return name
    return "unknown"


def update_progress(client: redis.Redis, keys: QueueKeys, job_id: str, progress: Any) -> None:
    if isinstance(progress, bool) or not isinstance(progress, (int, float, dict, list, str)):
        raise InvalidInputError(f"progress {progress!r}: must be a number or a JSON object")
    payload = dumps_json(progress, "progress")
    code = script("updateProgress")(client, [keys.job(job_id), keys.events, keys.meta], [job_id, payload])
    if int(code) < 0:
        raise_for_code(int(code), "update_progress", job_id=job_id)


def add_log(client: redis.Redis, keys: QueueKeys, job_id: str, line: str, keep_logs: Any = None) -> int:
    if not isinstance(line, str):
        raise InvalidInputError(f"log line {line!r}: must be a str")
    keep = "" if keep_logs is None else str(int(keep_logs))
    count = int(script("addLog")(client, [keys.job(job_id), keys.job_logs(job_id)], [job_id, line, keep]))
    if count < 0:
        raise_for_code(count, "log", job_id=job_id)
    return count


def remove_job(client: redis.Redis, keys: QueueKeys, job_id: str, *, remove_children: bool = True) -> bool:
    """Remove a job from any state. False when a worker holds its lock (nothing was removed)."""
    code = int(script("removeJob")(client, [keys.job(job_id), keys.repeat],
                                   [job_id, "1" if remove_children else "0", keys.job_prefix]))
    if code < 0:
        raise_for_code(code, "remove", job_id=job_id)
    return code == 1


def promote_job(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    code = int(script("promote")(client, [keys.delayed, keys.wait, keys.paused, keys.meta, keys.prioritized,
                                          keys.active, keys.pc, keys.events, keys.marker],
                                 [keys.job_prefix, job_id]))
    if code < 0:
        raise_for_code(code, "promote", job_id=job_id, state="delayed")


def change_delay(client: redis.Redis, keys: QueueKeys, job_id: str, delay_ms: int) -> None:
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 0:
        raise InvalidInputError(f"change_delay: delay {delay_ms!r} must be an int >= 0 (ms)")
    code = int(script("changeDelay")(client, [keys.delayed, keys.meta, keys.marker, keys.events],
                                     [delay_ms, now_ms(), job_id, keys.job(job_id)]))
    if code < 0:
        raise_for_code(code, "change_delay", job_id=job_id, state="delayed")


__all__ = ["STATES", "Job", "get_job_state"]
