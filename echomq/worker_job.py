"""What a Worker knows about the attempt it runs, and the Job object its processor receives.

``WorkerJob`` is the worker's own bookkeeping (lock token, attempts, options as stored, the
stack traces so far), read from the hash moveToActive returned, so finishing an attempt needs no
extra round trip. The processor gets the public ``Job`` built from the same hash.
"""

from __future__ import annotations

import json
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker


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


def job_for_processor(worker: Worker, state: WorkerJob) -> Any:
    """The public ``Job`` for ``state``, built from the hash without another round trip."""
    from .job import Job

    return Job.from_hash(worker.client, worker.keys, state.job_id, state.hash)
