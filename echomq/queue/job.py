"""A job as its hash ``<base>:<jobId>`` describes it, and the operations on one job.

The hash is shared with BullMQ: whatever runtime wrote it, ``Job.from_hash`` reads every field
of docs/protocol.md §2.1 by the rules of ``protocol.job_hash``. What only the worker holding the
lock may do lives in the worker's ``ActiveJob``, so this class stays usable from producers,
operators and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import redis
from redis.cluster import RedisCluster

from ..clock import system_clock
from ..errors import InvalidInputError, JobCancelledError, JobNotFoundError, raise_for_code
from ..protocol import job_hash
from ..protocol.codec import decode_hash, int_or_none, text, utf8_problem
from ..protocol.keys import QueueKeys, names_queue_key
from ..protocol.limits import DataLimits
from ..protocol.options import MAX_EPOCH_MS, decode_job_options, dumps_json
from ..protocol.states import LOOKUP_ORDER, STATES
from ..transport.calls import run_script
from ..transport.connection import is_cluster_client, queue_client
from ..transport.refusals import refusals
from ..transport.scripts import script
from ..types import Clock, EventReader, JobState
from . import cancel, edits, operations, wait_finished

#: ``from_hash``'s "data not read yet" (None is a job's data too).
_UNREAD: Any = object()


class Job:
    """One job: its stored fields, decoded, plus the operations a producer or operator runs on it.

    Read-only attributes mirror the hash; call ``reload()`` to read it again. ``clock`` is the
    time source of the operations that write a timestamp (``change_delay``).
    """

    #: What ``update_data`` accepts (the defaults of ``protocol.limits``); a Queue gives the
    #: jobs it hands out its own ``max_data_bytes``/``max_data_depth``.
    data_limits: DataLimits = DataLimits()

    def __init__(self, connection: redis.Redis | RedisCluster, keys: QueueKeys, job_id: str, *, name: str = "",
                 data: Any = None, opts: Mapping[str, Any] | None = None, timestamp: int = 0,
                 clock: Clock = system_clock) -> None:
        self._identify(connection, keys, job_id, name, data, opts, timestamp, clock)
        # A job not read from a hash yet: what its options say, and a fresh attempt count.
        self.delay = job_hash.option_int(self.raw_opts.get("delay")) or 0
        self.priority = job_hash.option_int(self.raw_opts.get("priority")) or 0
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
        self.deduplication_id: str | None = _deduplication_id(self.raw_opts)
        self.parent_key: str | None = None
        self.parent: dict[str, Any] | None = None
        self.deferred_failure: str | None = None

    def _identify(self, connection: redis.Redis | RedisCluster, keys: QueueKeys, job_id: str, name: str, data: Any,
                  opts: Mapping[str, Any] | None, timestamp: int, clock: Clock) -> None:
        """What every Job has whether or not it was read from a hash (the rest: ``__init__``'s
        defaults, or ``_apply`` for a stored job)."""
        # (keys.meta builds a string: only a cluster client needs it, to find the queue's slot)
        self.connection: redis.Redis = (queue_client(connection, keys.meta) if is_cluster_client(connection)
                                        else cast(redis.Redis, connection))
        self.keys = keys
        self.id = job_id
        self.name = name
        self.data = data
        self.raw_opts: dict[str, Any] = dict(opts) if opts else {}
        self._opts: dict[str, Any] | None = None
        self.clock = clock
        self.timestamp = timestamp

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_hash(cls, connection: redis.Redis | RedisCluster, keys: QueueKeys, job_id: Any, raw: Any, *,
                  opts: dict[str, Any] | None = None, data: Any = _UNREAD, clock: Clock = system_clock) -> Job:
        """Build a Job from an HGETALL reply (bytes or str, dict or flat list).

        ``opts``, ``data``: the stored options and data when the caller already read them (the
        worker does). Never raises on what the hash holds, whoever wrote it: a field that is not
        JSON where JSON belongs (``data``, ``returnvalue``, ``progress``) is kept as its raw text,
        opts that are not a JSON object read as ``{}``, a number that is not one as absent.
        """
        fields = raw if raw.__class__ is dict and _all_str(raw) else decode_hash(raw)
        job = cls.__new__(cls)  # __init__'s defaults would all be replaced by the hash's fields
        job._identify(connection, keys, text(job_id), fields.get("name", ""),
                      job_hash.json_field(fields, "data", {}) if data is _UNREAD else data,
                      job_hash.stored_opts(fields) if opts is None else opts,
                      int_or_none(fields.get("timestamp")) or 0, clock)
        job._apply(fields)
        return job

    def _apply(self, fields: Mapping[str, str]) -> None:
        self.delay = int_or_none(fields.get("delay")) or 0
        self.priority = int_or_none(fields.get("priority")) or 0
        self.progress = job_hash.json_field(fields, "progress", 0)
        self.attempts_made = job_hash.attempts_made(fields)
        self.attempts_started = int_or_none(fields.get("ats")) or 0
        self.stalled_counter = int_or_none(fields.get("stc")) or 0
        self.processed_on = int_or_none(fields.get("processedOn"))
        self.finished_on = int_or_none(fields.get("finishedOn"))
        self.processed_by = fields.get("pb")
        self.return_value = job_hash.json_field(fields, "returnvalue")
        self.failed_reason = fields.get("failedReason")
        self.stacktrace = job_hash.stacktrace(fields)
        self.repeat_job_key = fields.get("rjk")
        self.deduplication_id = fields.get("deid")
        self.parent_key = fields.get("parentKey")
        self.parent = job_hash.parent(fields)
        self.deferred_failure = fields.get("defa")

    @classmethod
    def fetch(cls, connection: redis.Redis | RedisCluster, keys: QueueKeys, job_id: str, *,
              clock: Clock = system_clock) -> Job | None:
        """The stored job, or None when its hash does not exist. An id that names a queue key
        (``meta``, ``events`` ..., docs/protocol.md §1.4) is never a job: None, without reading
        that key as one."""
        if names_queue_key(job_id) is not None:
            return None
        client = queue_client(connection, keys.meta)
        with refusals("get_job", [keys.meta]):
            raw = client.hgetall(keys.job(job_id))
        return cls.from_hash(client, keys, job_id, raw, clock=clock) if raw else None

    def reload(self) -> Job:
        raw = self.connection.hgetall(self.keys.job(self.id))
        if not raw:
            raise JobNotFoundError(f"reload: job {self.id!r} does not exist")
        fresh = type(self).from_hash(self.connection, self.keys, self.id, raw, clock=self.clock)
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

    def get_state(self) -> JobState:
        return get_job_state(self.connection, self.keys, self.id)

    def get_logs(self, start: int = 0, end: int = -1, *, asc: bool = True) -> list[str]:
        """Log lines ``start..end`` (inclusive), oldest first; ``asc=False`` counts from the
        newest line and returns newest first (``Queue.get_job_logs`` also tells the count)."""
        return edits.read_logs(self.connection, self.keys, self.id, start, end, asc)[0]

    def get_children_values(self) -> dict[str, Any]:
        """Return values of the children that completed, by full child key (a flow parent's inputs)."""
        raw = decode_hash(self.connection.hgetall(self.keys.job_processed(self.id)))
        return {key: job_hash.json_field(raw, key) for key in raw}

    def get_pending_dependencies(self) -> list[str]:
        """Full keys of the children that have not completed yet."""
        return sorted(text(k) for k in self.connection.smembers(self.keys.job_dependencies(self.id)))

    # -- operations ---------------------------------------------------------------------------
    def update_progress(self, progress: Any) -> None:
        """Store progress (a number or a JSON-able object) and write the ``progress`` event."""
        update_progress(self.connection, self.keys, self.id, progress)
        self.progress = progress

    def log(self, line: str) -> int:
        """Append a log line (trimmed to ``keep_logs``); returns how many lines the log holds."""
        return add_log(self.connection, self.keys, self.id, line, job_hash.option_int(self.raw_opts.get("kl")))

    def remove(self, *, remove_children: bool = True) -> bool:
        return remove_job(self.connection, self.keys, self.id, remove_children=remove_children)

    def cancel(self, reason: str | None = None) -> bool:
        """``Queue.cancel`` of this job: True when it was taken out (it had not started) or its
        worker was told to stop it; False for a finished or unknown job or a cancel under way."""
        return cancel.cancel_job(self.connection, self.keys, self.id, reason, self.clock()).done

    @property
    def cancelled(self) -> bool:
        """True once the running attempt was told to stop (a cancel, a time limit): the
        processor should wrap up and call ``raise_if_cancelled()``. Always False outside a worker."""
        return self.stop_reason is not None

    def raise_if_cancelled(self) -> None:
        """Raise the ``JobCancelledError`` (a subclass says why) once ``cancelled`` is true."""
        stop = self.stop_reason
        if stop is not None:
            raise stop

    @property
    def stop_reason(self) -> JobCancelledError | None:
        """Why the running attempt must stop (None: it need not); only a worker's job ever has one."""
        return None

    def promote(self) -> None:
        promote_job(self.connection, self.keys, self.id)
        self.delay = 0

    def retry(self, state: str = "failed", *, reset_attempts_made: bool = False,
              reset_attempts_started: bool = False) -> None:
        """Run a finished job again: it leaves ``state`` (``"failed"`` or ``"completed"``) for
        wait (prioritized with a priority), losing its finish (``finishedOn``, ``processedOn``,
        the failed reason or return value) and, when asked, its attempt counters: without
        ``reset_attempts_made`` a job that used up its attempts gets one more, no retries.
        JobNotFoundError / InvalidStateError when it is gone or not in ``state``."""
        operations.retry_job(self.connection, self.keys, self.id, state, reset_attempts_made=reset_attempts_made,
                             reset_attempts_started=reset_attempts_started)
        self.finished_on = self.processed_on = None
        if state == "failed":
            self.failed_reason = None
        else:
            self.return_value = None
        if reset_attempts_made:
            self.attempts_made = 0
        if reset_attempts_started:
            self.attempts_started = 0

    def wait_until_finished(self, queue_events: EventReader, timeout: float | None = None) -> Any:
        """Block until the job finishes: its return value, or JobFailedError (``failed_reason``)
        when it failed for good, or JobWaitTimeoutError after ``timeout`` seconds (None: no
        limit). ``queue_events`` is a QueueEvents of this job's queue, started or not: a
        started one delivers in its own thread, one not started is stepped here (docs/queue.md)."""
        return wait_finished.wait_until_finished(self.connection, self.keys, self.id, queue_events, timeout)

    def change_delay(self, delay_ms: int) -> None:
        change_delay(self.connection, self.keys, self.id, delay_ms, self.clock())
        self.delay = int(delay_ms)

    def change_priority(self, priority: int | None = None, lifo: bool = False) -> None:
        """Give the job a new priority (0 or None: none; 1 is the most urgent, up to 2^21-1).
        A waiting or prioritized job is placed again at once (``lifo``: ahead of the jobs of
        its priority); in any other state the priority applies when it next enters wait."""
        self.priority = edits.change_priority(self.connection, self.keys, self.id, priority, lifo)

    def update_data(self, data: Any) -> None:
        """Replace the job's data, in any state (a processor may update its own job's data
        as it goes); bounded by ``data_limits`` as ``add`` bounds it."""
        self.data = edits.update_data(self.connection, self.keys, self.id, data, self.data_limits)

    def remove_deduplication_key(self) -> bool:
        """Free this job's deduplication id if the job still owns it (True when freed), so the
        next add with that id is a new job; False for a job added without one."""
        if not self.deduplication_id:
            return False
        return edits.release_deduplication_id(self.connection, self.keys, self.deduplication_id, self.id)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, queue={self.keys.queue_name!r})"


def _deduplication_id(opts: Mapping[str, Any]) -> str | None:
    """The deduplication id of the options a job was added with (its hash's ``deid`` wins
    when the job is read back)."""
    dedup = opts.get("de")
    dedup_id = dedup.get("id") if isinstance(dedup, Mapping) else None
    return dedup_id if isinstance(dedup_id, str) and dedup_id else None


def _all_str(fields: dict[Any, Any]) -> bool:
    for key in fields:  # the first key tells: a reply is decoded all or nothing
        return key.__class__ is str
    return True


# -- single-job operations, shared by Job and Queue -------------------------------------------------

def get_job_state(client: redis.Redis, keys: QueueKeys, job_id: str) -> JobState:
    """Which state holds the job, or ``"unknown"``, checked in BullMQ's order (one MULTI)."""
    pipe = client.pipeline(transaction=True)
    for name in LOOKUP_ORDER:
        state = STATES[name]
        if state.kind == "list":
            pipe.lpos(keys.key(state.suffix), job_id)
        else:
            pipe.zscore(keys.key(state.suffix), job_id)
    for name, hit in zip(LOOKUP_ORDER, pipe.execute()):
        if hit is not None:
            return name  # type: ignore[return-value]
    return "unknown"


def update_progress(client: redis.Redis, keys: QueueKeys, job_id: str, progress: Any) -> None:
    if isinstance(progress, bool) or not isinstance(progress, (int, float, dict, list, str)):
        raise InvalidInputError(f"progress {progress!r}: must be a number or a JSON object")
    payload = dumps_json(progress, "progress")
    lua = script("updateProgress")
    code = run_script(client, lua, lua.keys_for(keys, job_id), [job_id, payload])
    if int(code) < 0:
        raise_for_code(int(code), "update_progress", job_id=job_id)


def add_log(client: redis.Redis, keys: QueueKeys, job_id: str, line: str, keep_logs: Any = None) -> int:
    if not isinstance(line, str):
        raise InvalidInputError(f"log line {line!r:.100}: must be a str")
    problem = utf8_problem(line)
    if problem is not None:
        raise InvalidInputError(f"log line {line!r:.100}: {problem}")
    keep = "" if keep_logs is None else str(int(keep_logs))
    lua = script("addLog")
    count = int(run_script(client, lua, lua.keys_for(keys, job_id), [job_id, line, keep]))
    if count < 0:
        raise_for_code(count, "log", job_id=job_id)
    return count


def remove_job(client: redis.Redis, keys: QueueKeys, job_id: str, *, remove_children: bool = True) -> bool:
    """Remove a job from any state. False when a worker holds its lock (nothing was removed) or
    there was no such job."""
    lua = script("removeJob")
    code = int(run_script(client, lua, lua.keys_for(keys, job_id),
                          [job_id, "1" if remove_children else "0", keys.job_prefix]))
    if code < 0:
        raise_for_code(code, "remove", job_id=job_id)
    return code == 1


def promote_job(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    lua = script("promote")
    code = int(run_script(client, lua, lua.keys_for(keys), [keys.job_prefix, job_id]))
    if code < 0:
        raise_for_code(code, "promote", job_id=job_id, state="delayed")


def change_delay(client: redis.Redis, keys: QueueKeys, job_id: str, delay_ms: int, now_ms: int) -> None:
    if (isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 0
            or now_ms + delay_ms > MAX_EPOCH_MS):
        raise InvalidInputError(f"change_delay: delay {delay_ms!r} must be an int >= 0 (ms) that keeps the "
                                f"due time within {MAX_EPOCH_MS} ms since the epoch")
    lua = script("changeDelay")
    code = int(run_script(client, lua, lua.keys_for(keys), [delay_ms, now_ms, job_id, keys.job(job_id)]))
    if code < 0:
        raise_for_code(code, "change_delay", job_id=job_id, state="delayed")
