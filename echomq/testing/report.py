"""What the test runners report: one :class:`JobRun` per attempt, in the order they ran.

Small frozen dataclasses, so a test compares them, filters them, or prints them in an assertion
message. Times are epoch ms on the test's clock; ``JobRun.at`` shows one in the schedule's zone.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, overload

from ..errors import EchoMQError
from .clock import wall_clock


class Outcome(str, Enum):
    """How one attempt ended, as the job's state says right after it."""

    COMPLETED = "completed"
    #: Failed for good: no attempts left, an UnrecoverableError, or a job that could not run.
    FAILED = "failed"
    #: Failed, with an attempt left: back in wait now, or delayed until ``retry_at_ms``.
    RETRIED = "retried"
    #: The job moved to waiting-children (``WaitingChildrenError``) and runs again after them.
    WAITING_CHILDREN = "waiting-children"
    #: The final move was refused (the lock was lost or the job removed under the processor).
    UNFINISHED = "unfinished"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class JobRun:
    """One attempt of one job: which, when (``at_ms``, the clock when it became active) and how
    it ended. ``return_value`` is the result as stored (JSON, read back); ``error`` the exception
    the processor raised (None when the job failed without running: bad data, a failed child);
    ``failed_reason`` what the job records. ``tz`` is its schedule's zone, if it has one."""

    queue: str
    job_id: str
    name: str
    attempt: int
    outcome: Outcome
    at_ms: int
    return_value: Any = None
    error: BaseException | None = field(default=None, compare=False)
    failed_reason: str | None = None
    retry_at_ms: int | None = None
    scheduler_id: str | None = None
    tz: str | None = None

    @property
    def at(self) -> _dt.datetime:
        """When it ran, as an aware datetime in its schedule's zone (UTC for other jobs)."""
        return wall_clock(self.at_ms, self.tz)

    def local_time(self, tz: str | _dt.tzinfo | None = None) -> _dt.datetime:
        """When it ran, in ``tz`` (or its schedule's zone when None)."""
        return wall_clock(self.at_ms, self.tz if tz is None else tz)

    def __str__(self) -> str:
        detail = ""
        if self.outcome is Outcome.COMPLETED:
            detail = f" -> {self.return_value!r:.80}"
        elif self.failed_reason is not None:
            detail = f": {self.failed_reason:.80}"
        if self.retry_at_ms is not None and self.outcome is Outcome.RETRIED:
            detail += f" (again at {wall_clock(self.retry_at_ms, self.tz).isoformat()})"
        return (f"{self.at.isoformat()} {self.queue}/{self.job_id} {self.name!r} attempt {self.attempt}: "
                f"{self.outcome}{detail}")


@dataclass(frozen=True)
class RunReport(Sequence[JobRun]):
    """The attempts a run made, oldest first; a sequence of :class:`JobRun`.

    ``rate_limited`` maps each queue whose rate limiter held jobs back when the run stopped to
    the clock time it lets them through (``advance_time`` moves on past it by itself).
    """

    runs: tuple[JobRun, ...] = ()
    rate_limited: dict[str, int] = field(default_factory=dict)

    @overload
    def __getitem__(self, index: int) -> JobRun: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[JobRun]: ...

    def __getitem__(self, index: int | slice) -> JobRun | Sequence[JobRun]:
        return self.runs[index]

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[JobRun]:
        return iter(self.runs)

    def __add__(self, other: RunReport) -> RunReport:
        return RunReport(self.runs + other.runs, other.rate_limited)

    def of(self, *, name: str | None = None, job_id: str | None = None, queue: str | None = None,
           scheduler_id: str | None = None, outcome: Outcome | str | None = None) -> RunReport:
        """The runs that match every criterion given."""
        wanted = None if outcome is None else Outcome(outcome)
        return RunReport(tuple(
            run for run in self.runs
            if (name is None or run.name == name) and (job_id is None or run.job_id == job_id)
            and (queue is None or run.queue == queue) and (scheduler_id is None or run.scheduler_id == scheduler_id)
            and (wanted is None or run.outcome is wanted)
        ), self.rate_limited)

    @property
    def completed(self) -> RunReport:
        return self.of(outcome=Outcome.COMPLETED)

    @property
    def failed(self) -> RunReport:
        """The attempts that failed for good (not those that will be retried)."""
        return self.of(outcome=Outcome.FAILED)

    def outcomes(self) -> list[str]:
        return [run.outcome.value for run in self.runs]

    def names(self) -> list[str]:
        return [run.name for run in self.runs]

    def times(self) -> list[int]:
        """When each attempt ran, epoch ms."""
        return [run.at_ms for run in self.runs]

    def wall_times(self, tz: str | _dt.tzinfo | None = None, fmt: str | None = None) -> list[str]:
        """When each attempt ran as wall-clock text in ``tz`` (each run's schedule zone when None):
        ISO 8601 with the offset, or ``fmt`` for ``strftime``."""
        shown = [run.local_time(tz) for run in self.runs]
        return [moment.isoformat() if fmt is None else moment.strftime(fmt) for moment in shown]

    def __str__(self) -> str:
        return "\n".join(str(run) for run in self.runs) or "(nothing ran)"


class TooManyJobsError(EchoMQError):
    """A run reached its ``max_jobs`` bound with jobs still due: a job that keeps adding jobs, or a
    schedule that never runs dry. ``report`` holds what ran until then."""

    def __init__(self, message: str, report: RunReport) -> None:
        super().__init__(message)
        self.report = report
