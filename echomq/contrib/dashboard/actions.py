"""What the dashboard can do, as one table: action name -> what it runs, where its button
shows, whether it destroys (then a confirmation page comes first).

Every action is a thin call of the library (``Queue``'s operator methods), so its rules and
refusals are the library's. The pages draw their buttons from this table (``for_scope``), so an
action added here gets its button, its token check, its read-only refusal, its confirmation and
its log line with nothing else to write: a ``"scheduler"`` action (run with the scheduler's id in
``fields["scheduler"]``) shows on the schedulers page, a ``"job"`` action on the job page.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidInputError, InvalidStateError, JobNotFoundError
from ...processes.arguments import duration_ms
from ...protocol.states import CLEANABLE
from ...queue import Queue
from ...queue.cancel import CancelOutcome, cancel_job
from ...schedule import JobScheduler

#: Jobs per script call of the bulk actions: about a millisecond of Redis's time per call.
BULK_BATCH = 100


@dataclass(frozen=True)
class Input:
    """A field the user fills in before the action runs (the clean action's age): a text field,
    or with ``checkbox`` a box that sends ``default`` when ticked (drain's "delayed too")."""

    name: str
    label: str
    default: str
    checkbox: bool = False


@dataclass(frozen=True)
class Action:
    """``run(queue, fields)`` does it and says what it did; ``shown(context)`` decides whether its
    button is on a page (``context``: ``state`` of the job or list shown, ``paused``)."""

    label: str
    scope: str  # "job", "state" (a list of one state), "queue" or "scheduler"
    run: Callable[[Queue, Mapping[str, str]], str]
    destructive: bool = False
    shown: Callable[[Mapping[str, Any]], bool] = lambda context: True
    inputs: tuple[Input, ...] = field(default=())
    #: what the confirmation page of a destructive action says it does (None: it deletes jobs)
    consequence: str | None = None


def _job_id(fields: Mapping[str, str]) -> str:
    job_id = fields.get("id", "")
    if not job_id:
        raise InvalidInputError("no job id given")
    return job_id


def _existing(queue: Queue, fields: Mapping[str, str]) -> str:
    job_id = _job_id(fields)
    if queue.get_job(job_id) is None:
        raise JobNotFoundError(f"no job {job_id!r} in queue {queue.name!r}")
    return job_id


def _retry(queue: Queue, fields: Mapping[str, str]) -> str:
    job_id, state = _existing(queue, fields), fields.get("state") or "failed"
    queue.retry_job(job_id, state)
    return f"job {job_id!r} ({state}) moved back to wait"


def _promote(queue: Queue, fields: Mapping[str, str]) -> str:
    job_id = _existing(queue, fields)
    queue.promote(job_id)
    return f"job {job_id!r} promoted: it waits for a worker now"


def _remove(queue: Queue, fields: Mapping[str, str]) -> str:
    job_id = _existing(queue, fields)
    if not queue.remove(job_id):
        raise InvalidStateError(f"job {job_id!r} is active and locked by a worker: not removed")
    return f"job {job_id!r} removed"


def _cancel(queue: Queue, fields: Mapping[str, str]) -> str:
    job_id = _job_id(fields)
    outcome = cancel_job(queue.client, queue.keys, job_id, fields.get("reason") or None, queue.clock())
    if outcome is CancelOutcome.MISSING:
        raise JobNotFoundError(f"no job {job_id!r} in queue {queue.name!r}")
    if not outcome.done:
        raise InvalidStateError(f"job {job_id!r} not cancelled: {outcome.explained}")
    return f"job {job_id!r} cancelled: {outcome.explained}"


def _plural(count: int) -> str:
    return f"{count:,} job{'' if count == 1 else 's'}"


def _retry_all(queue: Queue, fields: Mapping[str, str]) -> str:
    state = fields.get("state") or "failed"
    return f"retried {_plural(queue.retry_jobs(state, BULK_BATCH))} ({state})"


def _promote_all(queue: Queue, fields: Mapping[str, str]) -> str:
    return f"promoted {_plural(queue.promote_jobs(BULK_BATCH))}"


def _clean(queue: Queue, fields: Mapping[str, str]) -> str:
    state = fields.get("state", "")
    try:
        grace = duration_ms(fields.get("grace", ""))
    except argparse.ArgumentTypeError as exc:
        raise InvalidInputError(f"age: {exc}") from None
    removed = queue.clean(grace, 0, state)
    return f"removed {_plural(len(removed))} ({state}) older than {fields.get('grace')}"


def _pause(queue: Queue, fields: Mapping[str, str]) -> str:
    queue.pause()
    return "queue paused: workers take no new job until it is resumed"


def _resume(queue: Queue, fields: Mapping[str, str]) -> str:
    queue.resume()
    return "queue resumed"


def _drain(queue: Queue, fields: Mapping[str, str]) -> str:
    delayed = fields.get("delayed") == "1"
    return f"removed {_plural(queue.drain(include_delayed=delayed))} waiting{' and delayed' if delayed else ''}"


def _scheduler(queue: Queue, fields: Mapping[str, str]) -> tuple[JobScheduler, str]:
    scheduler_id = fields.get("scheduler", "")
    if not scheduler_id:
        raise InvalidInputError("no scheduler id given")
    return JobScheduler(queue.client, queue.name, prefix=queue.prefix), scheduler_id


def _pause_scheduler(queue: Queue, fields: Mapping[str, str]) -> str:
    scheduler, scheduler_id = _scheduler(queue, fields)
    if not scheduler.pause(scheduler_id):
        return f"scheduler {scheduler_id!r} was paused already"
    return f"scheduler {scheduler_id!r} paused: no worker runs it until it is resumed"


def _resume_scheduler(queue: Queue, fields: Mapping[str, str]) -> str:
    scheduler, scheduler_id = _scheduler(queue, fields)
    if not scheduler.resume(scheduler_id):
        return f"scheduler {scheduler_id!r} was not paused"
    return f"scheduler {scheduler_id!r} resumed: its next run is placed by its missed-run policy"


def _run_scheduler_now(queue: Queue, fields: Mapping[str, str]) -> str:
    scheduler, scheduler_id = _scheduler(queue, fields)
    return f"scheduler {scheduler_id!r}: job {scheduler.run_now(scheduler_id)!r} added to run now"


def _paused_scheduler(context: Mapping[str, Any]) -> bool:
    record = context.get("scheduler")
    return bool(getattr(record, "paused", False))


def _in(*states: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda context: context.get("state") in states


ACTIONS: dict[str, Action] = {
    "retry": Action("Retry", "job", _retry, shown=_in("failed", "completed")),
    "promote": Action("Promote", "job", _promote, shown=_in("delayed")),
    "cancel": Action("Cancel", "job", _cancel, destructive=True,
                     shown=_in("waiting", "prioritized", "delayed", "active", "paused"),
                     inputs=(Input("reason", "reason", ""),),
                     consequence="It stops the job: it ends failed as cancelled and is not retried."),
    "remove": Action("Remove", "job", _remove, destructive=True),
    "retry-all": Action("Retry all", "state", _retry_all, shown=_in("failed")),
    "promote-all": Action("Promote all", "state", _promote_all, shown=_in("delayed")),
    "clean": Action("Clean", "state", _clean, destructive=True, shown=_in(*CLEANABLE),
                    inputs=(Input("grace", "older than", "1h"),)),
    "pause": Action("Pause", "queue", _pause, shown=lambda context: not context.get("paused")),
    "resume": Action("Resume", "queue", _resume, shown=lambda context: bool(context.get("paused"))),
    "drain": Action("Drain", "queue", _drain, destructive=True,
                    inputs=(Input("delayed", "delayed too", "1", checkbox=True),)),
    "pause-scheduler": Action("Pause", "scheduler", _pause_scheduler,
                              shown=lambda context: not _paused_scheduler(context)),
    "resume-scheduler": Action("Resume", "scheduler", _resume_scheduler, shown=_paused_scheduler),
    "run-scheduler-now": Action("Run now", "scheduler", _run_scheduler_now),
}


def for_scope(scope: str, context: Mapping[str, Any]) -> list[tuple[str, Action]]:
    """The actions whose buttons a page of ``scope`` shows, in the table's order."""
    return [(name, action) for name, action in ACTIONS.items() if action.scope == scope and action.shown(context)]
