"""Job schedulers: recurring jobs kept on the protocol's ``repeat`` keys, one pending job each.

A scheduler is a hash ``<base>:repeat:<id>`` plus a member of the ``<base>:repeat`` sorted set
whose score is the due time of its single pending iteration, a job ``repeat:<id>:<millis>``.
Nothing runs in the background: ``upsert`` places the first iteration, and whoever moves that
iteration to active calls ``produce_next`` to place the one after (EchoMQ's Worker does, and so
does a BullMQ 6.7 worker). Every write is one Lua script, so concurrent upserts and repeated
``produce_next`` calls converge on one hash and one pending iteration.

The ``every`` arithmetic lives in the scripts (they see the current state, docs/protocol.md
§4.2); cron ticks come from the repeat spec (the one validator of repeat options, shared with
``calculate_next_millis``) and are passed in.

Operating a schedule (docs/protocol.md §4.6): ``pause`` parks the pending iteration where no
runtime takes it, ``resume`` puts the next run back by the scheduler's missed-run policy
(``misfire``), ``run_now`` adds one manual iteration, ``history`` reads the runs the
iterations' job hashes still tell.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

import redis

from ..clock import system_clock
from ..errors import (
    InvalidInputError,
    InvalidJobOptionsError,
    PermissionDeniedError,
    raise_for_code,
)
from ..protocol import job_hash
from ..protocol.codec import decode_hash, encode_json, encode_json_like_js, int_or_none, text
from ..protocol.keys import DEFAULT_PREFIX, META_VERSION, QueueKeys, iteration_job_id
from ..protocol.limits import DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH, DataLimits
from ..protocol.options import dumps_json, encode_job_options, validate_job_name
from ..transport.calls import run_script
from ..transport.connection import Connection, Connections
from ..transport.refusals import refusals
from ..transport.scripts import script
from ..types import Clock, RepeatOptions
from .arguments import int_arg, millis_arg, scheduler_id_arg, validate_scheduler_id
from .misfire import GRACE_FIELD, POLICY_FIELD, Misfire
from .next_run import calculate_next_millis
from .operate import ScheduleOperations
from .records import Iteration, SchedulerRecord, ScheduleRun
from .spec import RepeatSpec
from .step import catch_up_placements, plan_next, slots_after, stored_limit

__all__ = ["Iteration", "JobScheduler", "ScheduleRun", "SchedulerRecord", "StepResult"]

log = logging.getLogger(__name__)

#: Template options that the scheduler sets itself on every iteration.
_RESERVED_TEMPLATE_OPTS = ("job_id", "delay", "repeat", "repeat_job_key", "prev_millis", "timestamp")

#: How many schedulers ``list`` reads per script call (bounds how long Redis is busy).
_LIST_CHUNK = 2000


class StepResult(NamedTuple):
    """What the worker step did for an iteration that became active: the iteration it placed
    (None for none), and whether the taken iteration runs (False: its scheduler's missed-run
    policy skips it, it is ``late_ms`` past its slot)."""

    next: Iteration | None
    run: bool = True
    late_ms: int = 0


class JobScheduler(ScheduleOperations):
    """Create, read and remove the job schedulers of one queue; advance them from workers.

    Every method is one or two synchronous round trips. The instance holds no state beyond its
    client and keys, so it is safe to share between threads. ``clock`` (epoch ms) is "now" for
    every slot and timestamp it computes; ``close()`` closes a client built from a URL.
    ``max_data_bytes`` and ``max_data_depth`` bound a template's data as a Queue bounds a job's.
    """

    #: echomq.calculate_next_millis (the next-runs function), re-exported for convenience.
    calculate_next_millis = staticmethod(calculate_next_millis)

    def __init__(self, connection: Connection, queue_name: str, *, prefix: str = DEFAULT_PREFIX,
                 clock: Clock = system_clock, max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES,
                 max_data_depth: int | None = DEFAULT_MAX_DATA_DEPTH) -> None:
        self.keys = QueueKeys(queue_name, prefix)
        self.queue_name = queue_name
        self.clock = clock
        self.data_limits = DataLimits.checked("JobScheduler", max_data_bytes, max_data_depth)
        self._connections = Connections(connection, route_key=self.keys.meta)
        self.client: redis.Redis = self._connections.client
        self._add = script("addJobScheduler").bind(self.keys)
        self._update = script("updateJobScheduler").bind(self.keys)
        self._remove = script("removeJobScheduler").bind(self.keys)
        self._get = script("getJobScheduler").bind(self.keys)
        self._get_many = script("getJobSchedulers").bind(self.keys)
        self._pause = script("pauseJobScheduler").bind(self.keys)
        self._resume = script("resumeJobScheduler").bind(self.keys)
        self._run_now = script("runJobSchedulerNow").bind(self.keys)
        self._meta_written = False

    def close(self) -> None:
        """Close the client if this JobScheduler built it from a URL (a passed-in client stays open)."""
        self._connections.close()

    def __enter__(self) -> JobScheduler:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # the queue, never the connection (a URL may carry a password)
        return f"JobScheduler({self.queue_name!r}, prefix={self.keys.prefix!r})"

    # -- writing --------------------------------------------------------------------------------
    def upsert(
        self,
        scheduler_id: str,
        repeat_opts: RepeatOptions | Mapping[str, Any],
        job_name: str | None = None,
        job_data: Any = None,
        opts: Mapping[str, Any] | None = None,
        *,
        misfire: str | None = None,
        misfire_grace_ms: int | None = None,
        paused: bool = False,
    ) -> Iteration | None:
        """Create the scheduler or replace it, and place its pending iteration.

        ``job_name`` defaults to the scheduler id and ``job_data`` to ``{}`` (as in BullMQ);
        ``opts`` are the iterations' job options (attempts, backoff, priority,
        remove_on_complete ...). Re-upserting with the same ``every`` keeps the pending slot
        and swaps the template; a changed ``every`` or pattern starts a fresh schedule.
        ``misfire`` is the missed-run policy (``"run_once"``, the default, ``"skip"`` or
        ``"run_all"``) and ``misfire_grace_ms`` how late a run may be for the last two (default
        60000, at most 31 days; docs/scheduler.md, "Missed runs"). A paused scheduler stays
        paused, its new iteration parked; ``paused=True`` pauses it in the same step (a new
        scheduler is created paused: no worker can take its first iteration). Returns the
        iteration created, or None when the schedule has no run left (a pattern with no tick
        before ``end_date``, an ``every`` slot past it). Bad input raises InvalidInputError (a
        ValueError) and writes nothing.
        """
        now = millis_arg("clock()", self.clock())
        sid = validate_scheduler_id(scheduler_id)
        spec = RepeatSpec.parse(repeat_opts)
        policy = Misfire.parse(misfire, misfire_grace_ms)
        if not isinstance(paused, bool):
            raise InvalidInputError(f"paused={paused!r}: must be True or False")
        spec.refuse_ended(now)
        name = validate_job_name(sid if job_name is None else job_name)
        data_json = dumps_json({} if job_data is None else job_data, "data")
        too_much = self.data_limits.problem(data_json)
        if too_much is not None:
            raise InvalidJobOptionsError(f"scheduler {sid!r}: the job data is {too_much}")
        template = self._encode_template(opts)

        next_arg = ""
        if spec.pattern is not None:
            next_millis = spec.next_millis(now)
            if next_millis is None:
                return None
            next_arg = str(max(int(next_millis), now))
        iteration_opts: dict[str, Any] = {**template, "timestamp": now}
        if next_arg:
            iteration_opts["prevMillis"] = int(next_arg)
        iteration_opts["repeatJobKey"] = sid
        iteration_opts["repeat"] = spec.iteration_repeat(count=1)

        result = run_script(
            self.client, self._add.script, self._add.keys,
            [next_arg, encode_json({**spec.scheduler_fields(name), **policy.fields()}), sid, data_json,
             encode_json(template), encode_json(iteration_opts), now, self.keys.job_prefix, "",
             "1" if paused else ""],
        )
        if isinstance(result, int):
            if result == 0:
                return None
            job_id = iteration_job_id(sid, int(next_arg)) if next_arg else "?"
            raise_for_code(result, "upsert", scheduler_id=sid, job_id=job_id)
        self._stamp_meta()
        return Iteration.from_reply(text(result[0]), result[1])

    def _stamp_meta(self) -> None:
        """Stamp meta ``version`` after this scheduler's first upsert that wrote, as BullMQ's
        Queue does when it is built (its ``opts.maxLenEvents`` the script has set): a queue
        made by schedules alone is then found and described like any other (docs/protocol.md
        §1.2). A stamp that fails is logged and tried again at the next upsert, never raised:
        the schedule is written."""
        if self._meta_written:
            return
        try:
            with refusals("upsert", [self.keys.meta]):
                self.client.hset(self.keys.meta, "version", META_VERSION)
        except PermissionDeniedError as exc:
            log.warning("scheduler of queue %s: meta version not stamped, the role may not HSET it: %s",
                        self.queue_name, exc)
        except (redis.RedisError, OSError) as exc:
            log.debug("scheduler of queue %s: meta version not stamped (tried again): %s", self.queue_name, exc)
            return
        self._meta_written = True

    def produce_next(self, job_id: str, *, now_ms: int | None = None) -> Iteration | None:
        """Place the iteration after ``job_id``, the scheduler iteration that just became active.

        Call it right after the job moved to active, before its processor runs (BullMQ's worker
        does the same), so the schedule keeps firing whatever the job's outcome. Only the
        scheduler's current iteration produces; for an older one (retried, stalled, re-run) or a
        job that is no iteration, this returns None and writes nothing. Calling it twice for the
        same iteration creates nothing more and writes a ``duplicated`` event. The limit and the
        end date are read from the job's own opts, name and data from the scheduler hash. The
        opts are read as any runtime may have written them (``step.plan_next``: ``tz: "local"``,
        ISO 8601 dates, numbers as text), so a schedule another runtime made is advanced too;
        InvalidInputError for arguments of the wrong type, or a ``now_ms`` no date holds.
        The scheduler's missed-run policy applies (``step`` says whether the job runs).
        """
        return self.step(job_id, now_ms=now_ms).next

    def step(self, job_id: str, *, now_ms: int | None = None, scheduler_id: str | None = None) -> StepResult:
        """``produce_next``, and whether the iteration runs: the worker step.

        For the scheduler's current iteration taken late, its missed-run policy decides
        (docs/scheduler.md, "Missed runs"): ``skip`` and ``run_all`` do not run one more than the
        grace late (``run`` False: the worker completes it without running its processor),
        ``run_all`` places the missed slots within the grace too (at most 100), oldest first,
        before the next run. A paused scheduler produces nothing. Two round trips, three when
        ``scheduler_id`` (the job's ``rjk``, which a worker has read already) is not given.
        """
        if not isinstance(job_id, str):
            raise InvalidInputError(f"job_id={job_id!r}: must be a str (an iteration's job id)")
        now = millis_arg("clock()" if now_ms is None else "now_ms", self.clock() if now_ms is None else now_ms)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.job(job_id), ["rjk", "opts"])
        if scheduler_id is not None:
            self._read_policy(pipe, scheduler_id)
        replies = pipe.execute()
        raw_rjk, raw_opts = replies[0]
        if raw_rjk is None or raw_opts is None:
            return StepResult(None)
        if text(raw_rjk) != scheduler_id:  # not told, or told wrong: read what the job says
            scheduler_id = text(raw_rjk)
            replies[1:] = self._read_policy(self.client.pipeline(transaction=False), scheduler_id).execute()
        prev_opts = job_hash.stored_opts({"opts": text(raw_opts)})
        if not prev_opts:
            log.warning("job %s: opts are not a JSON object, cannot produce its next iteration", job_id)
            return StepResult(None)
        score, (policy, grace) = replies[1], replies[2]
        misfire = Misfire.stored({POLICY_FIELD: policy, GRACE_FIELD: grace})
        slot = int(score) if score is not None and job_id == iteration_job_id(scheduler_id, int(score)) else None
        run, late, catch_up = True, 0, []
        if slot is not None and slot < now and misfire.grace_ms is not None:
            late = now - slot
            run = misfire.runs_late(slot, now)
            catch_up = misfire.catch_up(slot, now, slots_after(prev_opts, slot))
        plan = plan_next(prev_opts, scheduler_id, now)
        if plan is None:
            return StepResult(None, run, late)
        placements = catch_up_placements(plan, catch_up, stored_limit(prev_opts))
        result = run_script(
            self.client, self._update.script, self._update.for_job(job_id),
            # As JSON.stringify writes them: opts another runtime stored may hold what JSON has
            # no number for (``1e400`` decodes to inf), which becomes null, as in BullMQ.
            [plan.next_arg, scheduler_id, "", encode_json_like_js(plan.opts), now, self.keys.job_prefix, job_id,
             "" if plan.end_ms is None else plan.end_ms, encode_json(placements) if placements else ""],
        )
        if not result:
            return StepResult(None, run, late)
        return StepResult(Iteration.from_reply(text(result[0]), result[1]), run, late)

    def _read_policy(self, pipe: Any, scheduler_id: str) -> Any:
        """Queue the reads the step's missed-run decision needs: the current score, the policy."""
        pipe.zscore(self.keys.repeat, scheduler_id)
        pipe.hmget(self.keys.scheduler(scheduler_id), [POLICY_FIELD, GRACE_FIELD])
        return pipe

    def remove(self, scheduler_id: str) -> bool:
        """Delete the scheduler and its pending iteration if still delayed; False if unknown.

        An iteration already waiting is left to run (it produces nothing more).
        """
        sid = scheduler_id_arg(scheduler_id)
        result = run_script(self.client, self._remove.script, self._remove.keys, [sid, self.keys.job_prefix])
        return int(result) == 0

    def remove_by_key(self, key: str) -> bool:
        """``remove`` for the ``key`` that ``get``/``list`` report (also accepts the full hash key)."""
        full = self.keys.scheduler("")
        return self.remove(scheduler_id_arg(key, "key").removeprefix(full))

    # -- reading --------------------------------------------------------------------------------
    def get(self, scheduler_id: str) -> SchedulerRecord | None:
        """The scheduler's record, or None if there is no such scheduler."""
        sid = scheduler_id_arg(scheduler_id)
        reply = run_script(self.client, self._get.script, self._get.keys, [sid])
        if not reply or not reply[0]:
            return None
        return SchedulerRecord.from_hash(sid, decode_hash(reply[0]), int_or_none(text(reply[1])), reply[2] == 1)

    def list(self, start: int = 0, end: int = -1, asc: bool = False) -> list[SchedulerRecord]:
        """Schedulers ordered by next run (latest first unless ``asc``), ranks start..end inclusive.

        Read in chunks of ranks, one script call each, so a huge listing never blocks Redis
        for long. Members of the repeat set without a hash (BullMQ 5 legacy repeatables) are
        skipped, not deleted.
        """
        start, end = int_arg("start", start), int_arg("end", end)
        if not isinstance(asc, bool):
            raise InvalidInputError(f"asc={asc!r}: must be True or False")
        size = self.count()
        first = start if start >= 0 else max(size + start, 0)
        last = min(end if end >= 0 else size + end, size - 1)
        records: list[SchedulerRecord] = []
        for chunk_start in range(first, last + 1, _LIST_CHUNK):
            chunk_end = min(chunk_start + _LIST_CHUNK - 1, last)
            reply = run_script(self.client, self._get_many.script, self._get_many.keys,
                               [chunk_start, chunk_end, "1" if asc else "0"])
            records.extend(SchedulerRecord.from_flat(reply[at], reply[at + 1], reply[at + 2], reply[at + 3])
                           for at in range(0, len(reply), 4) if reply[at + 2])
        return records

    def count(self) -> int:
        """ZCARD of the repeat set (like BullMQ, legacy entries count too)."""
        with refusals("count", [self.keys.repeat]):  # an ACL refusal names the role's key pattern
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
        encoded = encode_job_options(opts)
        backoff = encoded.get("backoff")
        if isinstance(backoff, dict) and not isinstance(opts.get("backoff"), Mapping):
            # Stored as given, as BullMQ stores a template (docs/protocol.md §4.1): a bare number
            # (validated above) stays a number; readers and the worker step normalise it.
            encoded["backoff"] = backoff["delay"]
        return encoded
