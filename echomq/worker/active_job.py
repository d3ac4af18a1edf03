"""One attempt of one job: the Job its processor receives, and what the worker remembers of it.

Both come from the hash moveToActive returned, read once by ``protocol.job_hash``'s rules, so
finishing the attempt needs no extra round trip. The processor gets an :class:`ActiveJob`: the
public ``Job`` plus what only the lock holder may do. The worker keeps an :class:`Attempt`, its
own snapshot of the stored options and counters, so a processor that edits ``job.raw_opts``
cannot change how its attempt is finished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import redis

from ..errors import JobCancelledError, raise_for_code
from ..protocol import job_hash
from ..protocol.keys import QueueKeys
from ..protocol.limits import DataLimits
from ..queue.job import Job
from ..transport.calls import run_script
from ..transport.scripts import script
from ..types import Clock
from .limits import AttemptControl


class ActiveJob(Job):
    """The Job a processor receives: a Job plus the lock token of the running attempt."""

    token: str = ""
    #: Set by the worker: told before this job gives its lock up itself (True) and, if it did not
    #: after all, afterwards (False), so the lock renewer does not report the lock as lost.
    lock_release: Callable[[bool], None] | None = None
    #: Set by :meth:`discard`: if this attempt fails, it is the last one.
    discarded: bool = False
    #: Set by the worker: the attempt's stop state (limits.py), read by ``cancelled``.
    control: AttemptControl | None = None

    @property
    def stop_reason(self) -> JobCancelledError | None:
        """Why this attempt must stop: a cancel request, a soft or a hard time limit (None: it need not)."""
        control = self.control
        return None if control is None else control.stop

    def discard(self) -> None:
        """Make this attempt the last: if the processor then fails, the job fails for good,
        whatever attempts are left (as if it raised ``UnrecoverableError``). Nothing is written
        to Redis: the flag lives in this object, for this attempt only; a processor that
        returns normally still completes the job. (BullMQ 5's ``job.discard()`` was the same
        in-memory flag; BullMQ 6.7 has no discard and uses UnrecoverableError for this.)"""
        self.discarded = True

    def move_to_waiting_children(self, child_key: str | None = None) -> bool:
        """Park this job until its pending children complete (all of them, or ``child_key``).

        True: the job moved to ``waiting-children``; raise ``WaitingChildrenError`` next, and
        the job runs again, from the start, when its last child completes. False: nothing is
        pending, keep going. Only the worker that holds the lock can do this.
        """
        lua = script("moveToWaitingChildren")
        if self.lock_release is not None:
            self.lock_release(True)
        moved = False
        try:
            result = int(run_script(self.connection, lua, lua.keys_for(self.keys, self.id),
                                    [self.token, child_key or "", self.clock(), self.id, self.keys.job_prefix]))
            if result < 0:
                raise_for_code(result, "move job to waiting-children", job_id=self.id, state="active")
            moved = result == 0
            return moved
        finally:
            if not moved and self.lock_release is not None:
                self.lock_release(False)  # still active, lock kept: a loss is a loss again


class Attempt:
    """What the worker that holds the lock knows about the attempt it runs.

    ``problem`` says why the job must fail without running (a malformed hash, data over the
    worker's limits: ``protocol.job_hash.take``), ``repairs`` what to store with that failure.
    """

    __slots__ = ("data", "fields", "job_id", "limits", "opts", "problem", "repairs", "taken", "token")

    def __init__(self, job_id: str, token: str, fields: dict[str, str], limits: DataLimits | None = None) -> None:
        self.job_id = job_id
        self.token = token
        self.fields = fields
        self.limits = DataLimits() if limits is None else limits
        taken = job_hash.take(fields, self.limits)
        self.opts: dict[str, Any] = taken.opts
        self.data: Any = taken.data
        self.problem: str | None = taken.problem
        self.repairs: list[str] = taken.repairs
        #: processedOn, ats and the job's timestamp as the take left them: which take of which
        #: job this attempt is (reclaimJob).
        self.taken: tuple[str, str, str] = (fields.get("processedOn", ""), fields.get("ats", ""),
                                            fields.get("timestamp", ""))

    @property
    def attempts(self) -> int:
        """``opts.attempts``; BullMQ's default is 0, which still allows the first attempt."""
        return job_hash.option_int(self.opts.get("attempts")) or 0

    @property
    def attempts_made(self) -> int:
        return job_hash.attempts_made(self.fields)

    @property
    def scheduler_id(self) -> str | None:
        return self.fields.get("rjk") or None


    @property
    def deferred_failure(self) -> str | None:
        """``defa``: the stalled check or a failed child decided this job must fail."""
        return self.fields.get("defa") or None

    def job(self, client: redis.Redis, keys: QueueKeys, clock: Clock) -> ActiveJob:
        """The processor's ActiveJob, built from the same hash and options (copied), no round trip."""
        job = cast(ActiveJob, ActiveJob.from_hash(client, keys, self.job_id, self.fields, opts=self.opts,
                                                  data=self.data, clock=clock))  # from_hash builds cls
        job.token = self.token
        job.data_limits = self.limits  # update_data from the processor: bounded as the worker reads
        return job
