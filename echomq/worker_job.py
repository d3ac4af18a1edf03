"""What a Worker knows about the attempt it runs, and the Job object its processor receives.

``WorkerJob`` is the worker's own bookkeeping (lock token, attempts, options as stored, the
stack traces so far), read from the hash moveToActive returned, so finishing an attempt needs no
extra round trip. The processor gets an ``ActiveJob``: the public ``Job`` built from the same
hash, plus what only the lock holder may do (wait for its children).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from typing import TYPE_CHECKING, Any

from .backoff import NO_RETRY, BackoffStrategy, compute_delay
from .errors import InvalidInputError, UnrecoverableError, raise_for_code
from .job import Job
from .scripts import script

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

log = logging.getLogger(__name__)


class WorkerJob:
    """One attempt of one job, as the worker that holds its lock sees it."""

    __slots__ = ("hash", "job_id", "opts", "token")

    def __init__(self, job_id: str, token: str, raw: dict[str, str]) -> None:
        self.job_id = job_id
        self.token = token
        self.hash = raw
        try:
            opts = json.loads(raw.get("opts") or "{}")
        except ValueError:
            opts = {}
        self.opts: dict[str, Any] = opts if isinstance(opts, dict) else {}

    @property
    def attempts(self) -> int:
        """``opts.attempts``; BullMQ's default is 0, which still allows the first attempt."""
        try:
            return int(self.opts.get("attempts") or 0)
        except (TypeError, ValueError):
            return 0

    @property
    def attempts_made(self) -> int:
        return int(self.hash.get("atm") or self.hash.get("attemptsMade") or 0)

    @property
    def scheduler_id(self) -> str | None:
        return self.hash.get("rjk") or None

    @property
    def deferred_failure(self) -> str | None:
        """``defa``: the stalled check or a failed child decided this job must fail."""
        return self.hash.get("defa") or None

    def retry_delay(self, exc: BaseException, strategy: BackoffStrategy | None = None) -> int | None:
        """After a failed attempt: the backoff in ms before the next one (0: at once), or None
        when the job fails for good (no attempts left, UnrecoverableError, strategy said -1).
        Protocol §3: retry while ``atm + 1 < attempts``; n = atm + 1 is the attempt that failed."""
        if self.attempts_made + 1 >= self.attempts or isinstance(exc, UnrecoverableError):
            return None
        try:
            delay = compute_delay(self.opts.get("backoff"), self.attempts_made + 1, error=exc, job=self,
                                  strategy=strategy)
        except InvalidInputError as bad:
            log.error("job %s: %s; failing it", self.job_id, bad)
            return None
        return None if delay == NO_RETRY else max(0, delay)

    def stacktrace_with(self, exc: BaseException) -> list[str]:
        """The stored traces plus this failure's, trimmed to ``opts.stackTraceLimit``."""
        try:
            traces = json.loads(self.hash.get("stacktrace") or "[]")
        except ValueError:
            traces = []
        if not isinstance(traces, list):
            traces = []
        traces.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        limit = self.opts.get("stackTraceLimit")
        if limit == 0:
            return []
        if isinstance(limit, int) and limit > 0:
            traces = traces[-limit:]
        return traces


class ActiveJob(Job):
    """The Job a processor receives: a Job plus the lock token of the running attempt."""

    token: str = ""

    def move_to_waiting_children(self, child_key: str | None = None) -> bool:
        """Park this job until its pending children complete (all of them, or ``child_key``).

        True: the job moved to ``waiting-children``; raise ``WaitingChildrenError`` next, and
        the job runs again, from the start, when its last child completes. False: nothing is
        pending, keep going. Only the worker that holds the lock can do this.
        """
        k = self.keys
        job_key = k.job(self.id)
        result = script("moveToWaitingChildren")(
            self.connection,
            [k.active, k.waiting_children, job_key, k.job_dependencies(self.id), f"{job_key}:unsuccessful",
             k.stalled, k.events],
            [self.token, child_key or "", int(time.time() * 1000), self.id, k.job_prefix],
        )
        if int(result) < 0:
            raise_for_code(int(result), "move job to waiting-children", job_id=self.id, state="active")
        return int(result) == 0


def job_for_processor(worker: Worker, state: WorkerJob) -> ActiveJob:
    """The processor's ``ActiveJob`` for ``state``, built from the hash without a round trip."""
    job = ActiveJob.from_hash(worker.client, worker.keys, state.job_id, state.hash)
    assert isinstance(job, ActiveJob)  # from_hash builds cls
    job.token = state.token
    return job
