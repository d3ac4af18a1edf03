"""A schedule never dies silently: find job schedulers left without a pending iteration and
place one (docs/protocol.md §4.5).

The worker step runs once per iteration, as it becomes active. If that one call fails (an OOM
error reply under ``maxmemory``, READONLY during a failover, a lost connection) and the job then
runs, nothing would ever produce the next iteration, while ``get()`` still shows the scheduler.
So the step retries what is transient (:func:`is_transient_step_error`), and every worker's
maintenance pass runs :meth:`SchedulerRepair.run`, which reads the ``repeat`` set in chunks and
repairs each scheduler whose current iteration ``repeat:<id>:<score>`` is

* missing: recreated at its slot while that is still to come, else the next slot is placed;
* finished, or started longer ago than :data:`STARTED_GRACE_MS`: the next slot is placed, as
  the step would have placed it (``step.plan_next``; the count goes on from the job's opts, or
  from the hash's ``ic`` when the job is gone).

A scheduler's ``run_all`` missed-run policy applies here too: the slots missed within its grace
(the lost iteration's own, when it never ran) are placed before the next one, as the step places
them. A schedule that has ended (limit reached, end date past, no tick left), or a paused one,
is not touched. The
check is repeated and the iteration created in one script, ``repairJobScheduler``; with
deterministic iteration ids, two repairs at once, or a repair racing the worker step, leave
exactly one pending iteration. Each repair is logged as a WARNING naming the scheduler.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, cast

import redis

from ..errors import InvalidInputError
from ..protocol import job_hash
from ..protocol.codec import decode_hash, encode_json, int_or_none, text
from ..protocol.keys import QueueKeys
from ..transport.calls import run_script
from ..transport.connection import CONNECTION_ERRORS
from ..transport.scripts import script
from .misfire import Misfire
from .records import Iteration
from .step import StepPlan, catch_up_placements, plan_next, slots_after, stored_limit

log = logging.getLogger(__name__)

#: How long a started iteration is left to the worker that took it before its step counts as
#: failed: well above the step's retries (:data:`STEP_RETRIES`, under a second in all).
STARTED_GRACE_MS = 5000
#: How often the worker step retries a transient error before leaving it to the repair.
STEP_RETRIES = 4
#: Schedulers read per round trip of a repair pass.
_CHUNK = 500
#: Error replies that say "not now" rather than "never": the same call may pass a moment later.
_TRANSIENT_REPLIES = ("OOM", "READONLY", "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
                      "NOREPLICAS", "MISCONF")
_TRANSIENT_CLASSES: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS, redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError, redis.exceptions.MasterDownError,
)


def is_transient_step_error(exc: BaseException) -> bool:
    """True for an error the worker step may retry: the server went away or refused for now
    (memory, a replica, loading, a busy script). The step is idempotent, so a retry is safe."""
    if isinstance(exc, _TRANSIENT_CLASSES):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).lstrip().upper().startswith(_TRANSIENT_REPLIES)


@dataclass(frozen=True)
class RepairPlan:
    """One scheduler found without a pending iteration, and what to place for it.

    ``mode`` is ``"same"`` (recreate the lost iteration at ``score``) or ``"next"`` (place the
    one after it); ``why`` says what the current iteration was, for the log line; ``catch_up``
    the missed slots a ``run_all`` policy places before the next one.
    """

    scheduler_id: str
    score: int
    mode: str
    step: StepPlan
    why: str
    catch_up: tuple[dict[str, Any], ...] = ()


class SchedulerRepair:
    """Finds and repairs the schedulers of one queue that lost their pending iteration.

    Holds nothing but its client and keys: safe to share, and as many may run at once (in one
    worker or in many) as like, the script deciding.
    """

    def __init__(self, client: redis.Redis, keys: QueueKeys, *, grace_ms: int = STARTED_GRACE_MS) -> None:
        if isinstance(grace_ms, bool) or not isinstance(grace_ms, int) or grace_ms < 0:
            raise InvalidInputError(f"grace_ms={grace_ms!r}: must be an int >= 0")
        self.client = client
        self.keys = keys
        self.grace_ms = grace_ms
        self._repair = script("repairJobScheduler").bind(keys)

    def run(self, now_ms: int) -> list[Iteration]:
        """One pass: find, then repair each one found; returns the iterations placed.

        A repair refused by the server (an error reply) is logged and left for the next pass; a
        lost connection propagates to the caller's loop.
        """
        placed: list[Iteration] = []
        for plan in self.find(now_ms):
            try:
                iteration = self.apply(plan, now_ms)
            except CONNECTION_ERRORS:
                raise
            except redis.RedisError as exc:
                log.warning("scheduler %r of queue %s has no pending iteration (%s); the repair failed (%s), "
                            "the next pass tries again", plan.scheduler_id, self.keys.queue_name, plan.why, exc)
                continue
            if iteration is not None:
                log.warning("scheduler %r of queue %s had no pending iteration (%s); placed %s",
                            plan.scheduler_id, self.keys.queue_name, plan.why, iteration.job_id)
                placed.append(iteration)
        return placed

    def find(self, now_ms: int) -> list[RepairPlan]:
        """The schedulers that have no pending iteration at ``now_ms`` and a run left (reads only)."""
        plans: list[RepairPlan] = []
        start = 0
        while True:
            members = cast("list[tuple[Any, float]]",
                           self.client.zrange(self.keys.repeat, start, start + _CHUNK - 1, withscores=True))
            if not members:
                return plans
            start += len(members)
            pipe = self.client.pipeline(transaction=False)
            ids = [(text(member), float(score)) for member, score in members]
            for sid, score in ids:
                pipe.hmget(self.keys.job(f"repeat:{sid}:{score:.0f}"), ["name", "processedOn", "finishedOn", "opts"])
            suspects = [(sid, score, state) for (sid, score), state in zip(ids, pipe.execute())
                        if self._why(state, now_ms) is not None and score == int(score)]
            if not suspects:
                continue
            for sid, _score, _state in suspects:
                pipe.hgetall(self.keys.scheduler(sid))
            for (sid, score, state), raw in zip(suspects, pipe.execute()):
                plan = self._plan(sid, int(score), [None if v is None else text(v) for v in state],
                                  decode_hash(raw), now_ms)
                if plan is not None:
                    plans.append(plan)

    def apply(self, plan: RepairPlan, now_ms: int) -> Iteration | None:
        """Place the planned iteration if the scheduler still lacks one; None when it no longer
        does (another repair or the worker step came first) or its next slot is past its end."""
        step = plan.step
        result = run_script(
            self.client, self._repair.script, self._repair.keys,
            [plan.scheduler_id, plan.score, plan.mode, step.next_arg if plan.mode == "next" else "",
             encode_json(step.opts), now_ms, self.keys.job_prefix, "" if step.end_ms is None else step.end_ms,
             self.grace_ms, encode_json(list(plan.catch_up)) if plan.catch_up else ""],
        )
        if not isinstance(result, list):
            return None
        return Iteration.from_reply(text(result[0]), result[1])

    # -- helpers ----------------------------------------------------------------------------------
    def _why(self, state: list[Any], now_ms: int) -> str | None:
        """Why the current iteration is not pending (None: it is), from name/processedOn/finishedOn."""
        name, processed_on, finished_on = state[0], state[1], state[2]
        if name is None:
            return "its current iteration is gone"
        if finished_on is not None:
            return "its current iteration finished without placing the next"
        started = int_or_none(text(processed_on)) if processed_on is not None else None
        if started is not None and started < now_ms - self.grace_ms:
            return f"its current iteration started at {started} without placing the next"
        return None

    def _plan(self, sid: str, score: int, state: list[str | None], scheduler: dict[str, str],
              now_ms: int) -> RepairPlan | None:
        ic = int_or_none(scheduler.get("ic"))
        if ic is None:
            return None  # no scheduler hash (a BullMQ 5 repeatable, or gone): not ours to repair
        why = self._why(state, now_ms)
        assert why is not None
        missing = state[0] is None
        mode = "same" if missing and score > now_ms else "next"
        try:
            previous = self.opts_from_hash(scheduler, score) if missing else \
                job_hash.stored_opts({"opts": state[3] or ""})
            step = plan_next(previous, sid, now_ms, base_count=ic if missing else None,
                             same_slot=score if mode == "same" else None)
            catch_up: list[dict[str, Any]] = []
            misfire = Misfire.stored(scheduler)
            if step is not None and mode == "next" and misfire.policy == "run_all":
                slots = misfire.catch_up(score, now_ms, slots_after(previous, score))
                if missing and misfire.runs_late(score, now_ms):  # the lost one never ran
                    slots.insert(0, score)
                catch_up = catch_up_placements(step, slots, stored_limit(previous))
        except InvalidInputError as exc:
            log.warning("scheduler %r of queue %s has no pending iteration (%s) and cannot be repaired: %s",
                        sid, self.keys.queue_name, why, exc)
            return None
        return None if step is None else RepairPlan(sid, score, mode, step, why, tuple(catch_up))

    @staticmethod
    def opts_from_hash(scheduler: dict[str, str], score: int) -> dict[str, Any]:
        """An iteration's opts rebuilt from the scheduler hash, for a lost iteration: the
        template, and ``repeat`` from the hash's fields (docs/protocol.md §4.1)."""
        try:
            template = json.loads(scheduler.get("opts") or "{}")
        except ValueError:
            template = {}
        opts: dict[str, Any] = dict(template) if isinstance(template, dict) else {}
        repeat: dict[str, Any] = {field: scheduler[field] for field in ("pattern", "tz") if scheduler.get(field)}
        for field in ("every", "limit", "startDate", "endDate"):
            number = int_or_none(scheduler.get(field))
            if number is not None:
                repeat[field] = number
        if "every" in repeat:
            repeat.pop("pattern", None)
        opts["repeat"] = repeat
        if "pattern" in repeat:
            opts["prevMillis"] = score
        return opts
