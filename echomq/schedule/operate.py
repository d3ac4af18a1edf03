"""Operating a schedule (docs/protocol.md §4.6, docs/scheduler.md): pause, resume, run now and
history, the half of ``JobScheduler`` that acts on schedules that exist.

``pause`` parks the pending iteration where no runtime takes it (a BullMQ 6.7 worker advances a
schedule only through that iteration), ``resume`` puts the next run back by the scheduler's
missed-run policy (``misfire``), ``run_now`` adds one manual iteration, ``history`` reads the
runs the iterations' job hashes still tell. Each write is one script.
"""

from __future__ import annotations

from typing import Any

import redis

from ..clock import system_clock
from ..errors import InvalidInputError, SchedulerConflictError, SchedulerNotFoundError
from ..protocol import job_hash
from ..protocol.codec import decode_hash, encode_json, encode_json_like_js, int_or_none, text
from ..protocol.keys import QueueKeys, iteration_job_id
from ..transport.calls import run_script
from ..transport.scripts import BoundKeys
from ..types import Clock
from .arguments import millis_arg, scheduler_id_arg
from .misfire import Misfire
from .records import ScheduleRun
from .repair import SchedulerRepair
from .step import iterations_at, plan_next, slots_after, stored_limit

#: How many of the newest entries of ``completed``, of ``failed`` and of ``active`` ``history``
#: looks through for a scheduler's iterations.
HISTORY_SCAN = 1000
#: The most runs ``history`` returns.
MAX_HISTORY = 1000
def _history_limit(limit: Any) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HISTORY:
        raise InvalidInputError(f"limit={limit!r}: must be an int in 1..{MAX_HISTORY}")


#: How often ``resume`` plans again when the schedule moved under it.
_RESUME_TRIES = 5


class ScheduleOperations:
    """The operations of ``JobScheduler`` on existing schedules (it provides the attributes)."""

    client: redis.Redis
    keys: QueueKeys
    queue_name: str
    clock: Clock = system_clock
    _pause: BoundKeys
    _resume: BoundKeys
    _run_now: BoundKeys

    def _not_found(self, operation: str, sid: str) -> SchedulerNotFoundError:
        return SchedulerNotFoundError(f"{operation}: no job scheduler {sid!r} in queue {self.queue_name!r}")

    def pause(self, scheduler_id: str) -> bool:
        """Pause the scheduler: no runtime runs it until ``resume`` (BullMQ 6.7 workers included).

        Its pending iteration is parked where no worker takes it (docs/protocol.md §4.6); an
        iteration already running finishes. True when this call paused it, False when it was
        paused already (nothing written). SchedulerNotFoundError for an unknown id.
        """
        sid = scheduler_id_arg(scheduler_id)
        result = int(run_script(self.client, self._pause.script, self._pause.keys, [sid, self.keys.job_prefix]))
        if result < 0:
            raise self._not_found("pause", sid)
        return result == 1

    def resume(self, scheduler_id: str, *, now_ms: int | None = None) -> bool:
        """Resume a paused scheduler: its next run is put back by its missed-run policy.

        The parked iteration goes back as it was when its slot is still to come. When it is
        past: ``run_once`` runs it once now; ``skip`` runs it only if it is within the grace,
        else places the first slot after now; ``run_all`` runs every slot missed within the
        grace (at most 100), oldest first, then places the next. True when this call resumed it,
        False when it was not paused (nothing written). SchedulerNotFoundError for an unknown id.
        """
        sid = scheduler_id_arg(scheduler_id)
        now = millis_arg("clock()" if now_ms is None else "now_ms", self.clock() if now_ms is None else now_ms)
        for _ in range(_RESUME_TRIES):
            pipe = self.client.pipeline(transaction=False)
            pipe.zscore(self.keys.repeat, sid)
            pipe.zscore(self.keys.key("schedulers:paused"), sid)
            pipe.hgetall(self.keys.scheduler(sid))
            score, parked, raw = pipe.execute()
            scheduler = decode_hash(raw)
            if score is None or "ic" not in scheduler:
                raise self._not_found("resume", sid)
            if parked is None or parked != score:
                return False
            slot = int(score)
            mode, placements = self._resume_plan(sid, slot, scheduler, now)
            result = int(run_script(self.client, self._resume.script, self._resume.keys,
                                    [sid, slot, mode, encode_json(placements), now, self.keys.job_prefix]))
            if result != -2:
                if result == -1:
                    raise self._not_found("resume", sid)
                return result == 1
        raise SchedulerConflictError(f"resume: scheduler {sid!r} kept changing under {_RESUME_TRIES} tries; "
                                     "nothing written, try again")

    def _resume_plan(self, sid: str, slot: int, scheduler: dict[str, str], now: int
                     ) -> tuple[str, list[dict[str, Any]]]:
        """What ``resume`` asks its script for: the parked iteration's fate (``requeue``,
        ``drop``, or ``none`` when nothing is parked) and the new iterations, oldest first, the
        last one the next run. A parked iteration that runs and is current places the next run
        itself when a worker takes it (the step), so only ``run_all`` places more beside it."""
        raw_opts, processed = self.client.hmget(self.keys.job(iteration_job_id(sid, slot)), ["opts", "processedOn"])
        parked = raw_opts is not None and processed is None
        prev_opts = job_hash.stored_opts({"opts": text(raw_opts)}) if raw_opts is not None else {}
        base_count = None
        if not prev_opts:  # gone: rebuilt from the hash, as the repair rebuilds a lost iteration
            prev_opts, base_count = SchedulerRepair.opts_from_hash(scheduler, slot), int_or_none(scheduler.get("ic"))
        if parked and slot > now:
            return "requeue", []
        misfire = Misfire.stored(scheduler)
        runs_parked = parked and misfire.runs_late(slot, now)
        if runs_parked and misfire.policy != "run_all":
            return "requeue", []
        mode = "requeue" if runs_parked else "drop" if parked else "none"
        plan = plan_next(prev_opts, sid, now, base_count=base_count)
        if plan is None:  # no run left (limit reached, end date past)
            return mode, []
        after = slots_after(prev_opts, slot)
        slots = misfire.catch_up(slot, now, after)
        next_at = int(plan.next_arg) if plan.next_arg else after(max(now, slot))
        if next_at is not None:
            slots.append(next_at)
        return mode, iterations_at(plan, slots, plan.opts["repeat"]["count"], limit=stored_limit(prev_opts))

    def run_now(self, scheduler_id: str) -> str:
        """Run the scheduler once now, paused or not: one extra iteration goes to ``wait``.

        Its id is ``repeat:<id>:manual-<ms>`` (it says it is a manual run); the next scheduled
        run does not move and ``limit`` does not count it. Returns the job id.
        SchedulerNotFoundError for an unknown id.
        """
        sid = scheduler_id_arg(scheduler_id)
        now = millis_arg("clock()", self.clock())
        pipe = self.client.pipeline(transaction=False)
        pipe.zscore(self.keys.repeat, sid)
        pipe.hgetall(self.keys.scheduler(sid))
        score, raw = pipe.execute()
        scheduler = decode_hash(raw)
        if score is None or "ic" not in scheduler:
            raise self._not_found("run_now", sid)
        current = self.client.hget(self.keys.job(iteration_job_id(sid, int(score))), "opts")
        opts = job_hash.stored_opts({"opts": text(current)}) if current is not None else {}
        if not opts:
            opts = SchedulerRepair.opts_from_hash(scheduler, int(score))
            opts["repeat"]["count"] = int_or_none(scheduler.get("ic")) or 0
        opts = {k: v for k, v in opts.items() if k not in ("jobId", "delay", "prevMillis")}
        opts["timestamp"] = now
        opts["repeatJobKey"] = sid
        result = run_script(self.client, self._run_now.script, self._run_now.keys,
                            [sid, encode_json_like_js(opts), now, self.keys.job_prefix])
        if isinstance(result, int):
            raise self._not_found("run_now", sid)
        return text(result)

    def history(self, scheduler_id: str, limit: int = 20) -> list[ScheduleRun]:
        """The scheduler's last runs, newest first: slot, start, finish, outcome and duration.

        Read from what the iterations leave (docs/scheduler.md, "History"): the job hashes of
        its iterations among the newest 1000 entries of ``completed``, of ``failed`` and of
        ``active``, whichever runtime ran them. No record of EchoMQ's own is kept, so an
        iteration deleted on completion (``remove_on_complete``) is not in it.
        """
        sid = scheduler_id_arg(scheduler_id)
        _history_limit(limit)
        if self.client.zscore(self.keys.repeat, sid) is None:
            raise self._not_found("history", sid)
        return self.histories([sid], limit)[sid]

    def histories(self, scheduler_ids: list[str], limit: int = 20) -> dict[str, list[ScheduleRun]]:
        """``history`` of several schedulers in one pass over the same windows (a page listing
        schedulers reads the three windows once, not once per schedule); an id without runs, or
        with no scheduler, maps to []."""
        sids = [scheduler_id_arg(sid) for sid in scheduler_ids]
        _history_limit(limit)
        pipe = self.client.pipeline(transaction=False)
        pipe.zrevrange(self.keys.completed, 0, HISTORY_SCAN - 1)
        pipe.zrevrange(self.keys.failed, 0, HISTORY_SCAN - 1)
        pipe.lrange(self.keys.active, 0, HISTORY_SCAN - 1)
        completed, failed, active = pipe.execute()
        heads = {f"repeat:{sid}:": sid for sid in sids}
        found: dict[str, tuple[str, int, bool, str]] = {}
        for where, ids in (("active", active), ("failed", failed), ("completed", completed)):
            for raw_id in ids:
                job_id = text(raw_id)
                head, _sep, tail = job_id.rpartition(":")
                sid = heads.get(head + ":")
                if sid is None:
                    continue
                manual = tail.startswith("manual-")
                digits = tail[len("manual-"):] if manual else tail
                if digits.isdigit() and digits.isascii():
                    found.setdefault(job_id, (sid, int(digits), manual, where))
        pipe = self.client.pipeline(transaction=False)
        for job_id in found:
            pipe.hmget(self.keys.job(job_id), ["processedOn", "finishedOn", "failedReason", "returnvalue"])
        runs: dict[str, list[ScheduleRun]] = {sid: [] for sid in sids}
        for (job_id, (sid, slot, manual, where)), fields in zip(found.items(), pipe.execute() if found else []):
            run = ScheduleRun.from_fields(job_id, slot, manual, [*fields, where])
            if run is not None:
                runs[sid].append(run)
        for sid, listed in runs.items():
            listed.sort(key=lambda run: (run.start if run.start is not None else run.slot, run.slot), reverse=True)
            runs[sid] = listed[:limit]
        return runs

