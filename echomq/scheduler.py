"""Job schedulers: recurring jobs kept on the protocol's ``repeat`` keys, one pending job each.

A scheduler is a hash ``<base>:repeat:<id>`` plus a member of the ``<base>:repeat`` sorted set
whose score is the due time of its single pending iteration, a job ``repeat:<id>:<millis>``.
Nothing runs in the background: ``upsert`` places the first iteration, and whoever moves that
iteration to active calls ``produce_next`` to place the one after (EchoMQ's Worker does, and so
does a BullMQ 6.7 worker). Every write is one Lua script, so concurrent upserts and repeated
``produce_next`` calls converge on one hash and one pending iteration.

The ``every`` arithmetic lives in the scripts (they see the current state); cron ticks come from
``echomq.repeat.calculate_next_millis`` and are passed in.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import redis

from .connection import Connection, decode_hash, resolve_connection, to_str
from .errors import InvalidInputError, InvalidJobOptionsError, raise_for_code
from .keys import DEFAULT_PREFIX, QueueKeys, iteration_job_id
from .options import dumps_json, encode_job_options, validate_job_name
from .repeat import calculate_next_millis
from .scheduler_records import Iteration, SchedulerRecord
from .scheduler_spec import RepeatSpec
from .scripts import script

__all__ = ["Iteration", "JobScheduler", "SchedulerRecord"]

logger = logging.getLogger(__name__)

#: Template options that the scheduler sets itself on every iteration.
_RESERVED_TEMPLATE_OPTS = ("job_id", "delay", "repeat", "repeat_job_key", "prev_millis", "timestamp")

#: How many schedulers ``list`` reads per script call (bounds how long Redis is busy).
_LIST_CHUNK = 2000


def _now_ms() -> int:
    return int(time.time() * 1000)


def validate_scheduler_id(scheduler_id: Any) -> str:
    """A scheduler id: a non-empty str without ``:`` (iteration ids embed it between colons)."""
    if not isinstance(scheduler_id, str) or not scheduler_id:
        raise InvalidInputError(f"scheduler id {scheduler_id!r}: must be a non-empty str")
    if ":" in scheduler_id:
        raise InvalidInputError(
            f"scheduler id {scheduler_id!r}: must not contain ':' (its iterations are repeat:<id>:<millis>)"
        )
    return scheduler_id


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _normalise_backoff(opts: dict[str, Any]) -> None:
    # A BullMQ worker rebuilds the job in memory, which turns a bare backoff number into
    # {type: fixed, delay}; the next iteration's opts carry that form.
    backoff = opts.get("backoff")
    if isinstance(backoff, (int, float)) and not isinstance(backoff, bool):
        opts["backoff"] = {"type": "fixed", "delay": backoff}


class JobScheduler:
    """Create, read and remove the job schedulers of one queue; advance them from workers.

    Every method is one or two synchronous round trips. The instance holds no state beyond its
    client and keys, so it is safe to share between threads.
    """

    #: echomq.repeat.calculate_next_millis (the next-runs function), re-exported for convenience.
    calculate_next_millis = staticmethod(calculate_next_millis)

    def __init__(self, connection: Connection, queue_name: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.client: redis.Redis = resolve_connection(connection)
        self.keys = k = QueueKeys(queue_name, prefix)
        # KEYS of addJobScheduler-11; updateJobScheduler-12 takes the same ten, the producer, active
        self._add_keys = [k.repeat, k.delayed, k.wait, k.paused, k.meta, k.prioritized, k.marker, k.id,
                          k.events, k.pc, k.active]

    # -- writing --------------------------------------------------------------------------------
    def upsert(
        self,
        scheduler_id: str,
        repeat_opts: Mapping[str, Any],
        job_name: str | None = None,
        job_data: Any = None,
        opts: Mapping[str, Any] | None = None,
    ) -> Iteration | None:
        """Create the scheduler or replace it, and place its pending iteration.

        ``job_name`` defaults to the scheduler id and ``job_data`` to ``{}`` (as in BullMQ);
        ``opts`` are the iterations' job options (attempts, backoff, priority,
        remove_on_complete ...). Re-upserting with the same ``every`` keeps the pending slot
        and swaps the template; a changed ``every`` or pattern starts a fresh schedule.
        Returns the iteration created, or None when the schedule has no run left (a pattern
        with no tick before ``end_date``, an ``every`` slot past it). Bad input raises
        InvalidInputError (a ValueError) and writes nothing.
        """
        now = _now_ms()
        sid = validate_scheduler_id(scheduler_id)
        spec = RepeatSpec.parse(repeat_opts, now)
        name = validate_job_name(sid if job_name is None else job_name)
        data_json = dumps_json({} if job_data is None else job_data, "data")
        template = self._encode_template(opts)

        next_arg = ""
        if spec.pattern is not None:
            next_millis = now if spec.immediately else calculate_next_millis(spec.cron_opts(), now)
            if next_millis is None:
                return None
            next_arg = str(max(int(next_millis), now))
        iteration_opts: dict[str, Any] = {**template, "timestamp": now}
        if next_arg:
            iteration_opts["prevMillis"] = int(next_arg)
        iteration_opts["repeatJobKey"] = sid
        iteration_opts["repeat"] = spec.iteration_repeat(count=1)

        result = script("addJobScheduler")(
            self.client, self._add_keys,
            [next_arg, _compact(spec.scheduler_fields(name)), sid, data_json, _compact(template),
             _compact(iteration_opts), now, self.keys.job_prefix, ""],
        )
        if isinstance(result, int):
            if result == 0:
                return None
            job_id = iteration_job_id(sid, int(next_arg)) if next_arg else "?"
            raise_for_code(result, "upsert", scheduler_id=sid, job_id=job_id)
        return Iteration.from_reply(to_str(result[0]), result[1])

    def produce_next(self, job_id: str, *, now_ms: int | None = None) -> Iteration | None:
        """Place the iteration after ``job_id``, the scheduler iteration that just became active.

        Call it right after the job moved to active, before its processor runs (BullMQ's worker
        does the same), so the schedule keeps firing whatever the job's outcome. Only the
        scheduler's current iteration produces; for an older one (retried, stalled, re-run) or a
        job that is no iteration, this returns None and writes nothing. Calling it twice for the
        same iteration creates nothing more and writes a ``duplicated`` event. The limit and the
        end date are read from the job's own opts, name and data from the scheduler hash.
        """
        now = _now_ms() if now_ms is None else int(now_ms)
        raw_rjk, raw_opts = self.client.hmget(self.keys.job(job_id), ["rjk", "opts"])
        if raw_rjk is None or raw_opts is None:
            return None
        scheduler_id = to_str(raw_rjk)
        try:
            prev_opts = json.loads(to_str(raw_opts))
        except ValueError:
            logger.warning("job %s: opts are not JSON, cannot produce its next iteration", job_id)
            return None
        if not isinstance(prev_opts, dict):
            return None
        stored_repeat = prev_opts.get("repeat")
        repeat_opts: dict[str, Any] = stored_repeat if isinstance(stored_repeat, dict) else {}
        count = int(repeat_opts.get("count") or 0) + 1
        limit = repeat_opts.get("limit")
        if limit is not None and count > int(limit):
            return None
        end_date = repeat_opts.get("endDate")
        if end_date is not None and now > int(end_date):
            return None
        reference = max(now, int(prev_opts.get("prevMillis") or 0))

        next_arg = ""
        pattern = repeat_opts.get("pattern")
        if pattern and not repeat_opts.get("every"):
            cron = {"pattern": pattern, "tz": repeat_opts.get("tz"),
                    "start_date": repeat_opts.get("startDate"), "end_date": end_date}
            next_millis = calculate_next_millis({k: v for k, v in cron.items() if v is not None}, reference)
            if next_millis is None:
                return None
            next_arg = str(max(int(next_millis), reference))

        new_opts = {k: v for k, v in prev_opts.items() if k not in ("repeatJobKey", "prevMillis")}
        new_opts.setdefault("attempts", 0)
        _normalise_backoff(new_opts)
        new_opts["timestamp"] = now
        if next_arg:
            new_opts["prevMillis"] = int(next_arg)
        new_opts["repeatJobKey"] = scheduler_id
        new_opts["repeat"] = {**repeat_opts, "count": count}

        result = script("updateJobScheduler")(
            self.client, [*self._add_keys[:10], self.keys.job(job_id), self.keys.active],
            [next_arg, scheduler_id, "", _compact(new_opts), now, self.keys.job_prefix, job_id],
        )
        if not result:
            return None
        return Iteration.from_reply(to_str(result[0]), result[1])

    def remove(self, scheduler_id: str) -> bool:
        """Delete the scheduler and its pending iteration if still delayed; False if unknown.

        An iteration already waiting is left to run (it produces nothing more).
        """
        k = self.keys
        result = script("removeJobScheduler")(self.client, [k.repeat, k.delayed, k.events],
                                             [scheduler_id, k.job_prefix])
        return int(result) == 0

    def remove_by_key(self, key: str) -> bool:
        """``remove`` for the ``key`` that ``get``/``list`` report (also accepts the full hash key)."""
        full = self.keys.scheduler("")
        return self.remove(key.removeprefix(full))

    # -- reading --------------------------------------------------------------------------------
    def get(self, scheduler_id: str) -> SchedulerRecord | None:
        """The scheduler's record, or None if there is no such scheduler."""
        reply = script("getJobScheduler")(self.client, [self.keys.repeat], [scheduler_id])
        if not reply or not reply[0]:
            return None
        return SchedulerRecord.from_hash(scheduler_id, decode_hash(reply[0]), int(float(to_str(reply[1]))))

    def list(self, start: int = 0, end: int = -1, asc: bool = False) -> list[SchedulerRecord]:
        """Schedulers ordered by next run (latest first unless ``asc``), ranks start..end inclusive.

        Read in chunks of ranks, one script call each, so a huge listing never blocks Redis
        for long. Members of the repeat set without a hash (BullMQ 5 legacy repeatables) are
        skipped, not deleted.
        """
        size = self.count()
        first = start if start >= 0 else max(size + start, 0)
        last = min(end if end >= 0 else size + end, size - 1)
        records: list[SchedulerRecord] = []
        read = script("getJobSchedulers")
        for chunk_start in range(first, last + 1, _LIST_CHUNK):
            chunk_end = min(chunk_start + _LIST_CHUNK - 1, last)
            reply = read(self.client, [self.keys.repeat], [chunk_start, chunk_end, "1" if asc else "0"])
            for at in range(0, len(reply), 3):
                if reply[at + 2]:
                    records.append(SchedulerRecord.from_flat(reply[at], reply[at + 1], reply[at + 2]))
        return records

    def count(self) -> int:
        """ZCARD of the repeat set (like BullMQ, legacy entries count too)."""
        return int(self.client.zcard(self.keys.repeat))

    # -- helpers ----------------------------------------------------------------------------------
    @staticmethod
    def _encode_template(opts: Mapping[str, Any] | None) -> dict[str, Any]:
        if opts is None:
            return {}
        if not isinstance(opts, Mapping):
            raise InvalidJobOptionsError(f"template opts must be a mapping, got {type(opts).__name__}")
        reserved = [name for name in _RESERVED_TEMPLATE_OPTS if opts.get(name) is not None]
        if reserved:
            raise InvalidJobOptionsError(
                f"template opts {reserved}: set by the scheduler on each iteration, not by the template"
            )
        return encode_job_options(opts)
