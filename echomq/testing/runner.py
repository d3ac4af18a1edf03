"""Running due jobs in the calling thread: no threads, no sleeps, the way a Worker runs them.

Each queue gets a Worker that never starts (``worker.inline``): its attempts take the Worker's
own path (moveToActive by the clock, which promotes due delayed jobs; the scheduler step; the
processor; the final move, with backoff computed by the Worker's rules), so what a test sees is
what production does. Queues are served in turn, one attempt each, until none has a job due.

Never waits on real time: a blocking read is never made, locks live only for the synchronous
attempt, and a rate-limited queue is reported (``RunReport.rate_limited``) instead of waited for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from ..protocol import job_hash
from ..protocol.codec import encode_json_like_js, int_or_none, json_or_text, text
from ..queue.queue import Queue
from ..types import BackoffStrategy, Clock, KeepRule, Processor
from ..worker.active_job import ActiveJob
from ..worker.inline import InlineWorker
from ..worker.listeners import WorkerListener
from ..worker.routing import as_processor
from ..worker.transitions import Fetched
from ..worker.worker import Worker
from .report import JobRun, Outcome, RunReport, TooManyJobsError

#: ``processors``: one function for every job, or one per job name.
Processors = Processor | Mapping[str, Processor]

#: The default bound on the attempts of one ``run_until_idle`` call.
DEFAULT_MAX_JOBS = 10_000

_SCORE_SHIFT = 4096  # a delayed score is due * 4096 + seq (docs/protocol.md §1.2)


def _queues_arg(queues: Queue | Sequence[Queue]) -> list[Queue]:
    listed = [queues] if isinstance(queues, Queue) else list(queues) if isinstance(queues, Sequence) else None
    if not listed or not all(isinstance(q, Queue) for q in listed):
        raise InvalidInputError(f"queues={queues!r:.100}: give a Queue or a non-empty list of Queues")
    keys = [q.keys.base for q in listed]
    if len(set(keys)) != len(keys):
        raise InvalidInputError(f"queues: {sorted(keys)} names a queue twice")
    return listed


def processors_arg(processors: Processors) -> Processors:
    """``processors`` checked: a callable, or a non-empty mapping of job name -> callable."""
    if isinstance(processors, Mapping):
        bad = [name for name, fn in processors.items() if not isinstance(name, str) or not callable(fn)]
        if bad or not processors:
            raise InvalidInputError(f"processors: map job names to callables (bad entries: {bad!r:.100})")
        return dict(processors)
    if not callable(processors):
        raise InvalidInputError(f"processors={processors!r:.100}: give a callable or a mapping of job name -> callable")
    return processors


class _Dispatch:
    """The processor of one runner Worker: the function for the job's name, routed as a Worker
    routes (``worker.routing``). A BaseException that is not an Exception stops the run once its
    attempt is recorded: the attempt's final move must not take a next job then, which would be
    left active."""

    def __init__(self, processors: Processors, queue_name: str) -> None:
        self.processor = as_processor(processors, queue_name)
        self.inline: InlineWorker | None = None

    def __call__(self, job: Any) -> Any:
        try:
            return self.processor(job)
        except BaseException as exc:
            if not isinstance(exc, Exception) and self.inline is not None:
                self.inline.take_no_next_job()
            raise


class _Told(WorkerListener):
    """What the Worker told of the attempt just run: its outcome as recorded in Redis."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        self.outcome: Outcome | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.retry_at_ms: int | None = None

    def on_completed(self, job: ActiveJob, result: Any, *, duration_ms: float) -> None:
        self.outcome, self.result = Outcome.COMPLETED, result

    def on_failed(self, job: ActiveJob, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        self.error = error
        if final or retry_delay_ms is None:
            self.outcome = Outcome.FAILED
        else:
            self.outcome, self.retry_at_ms = Outcome.RETRIED, self.clock() + retry_delay_ms


class _Lane:
    """One queue of a runner: its never-started Worker, driven inline, and what it holds."""

    def __init__(self, queue: Queue, worker: Worker, dispatch: _Dispatch, told: _Told) -> None:
        self.queue = queue
        self.inline = dispatch.inline = InlineWorker(worker)
        self.told = told
        self.client = worker.client
        self.keys = worker.keys
        #: The job the last final move took (fetch-next), active and locked, run next.
        self.held: tuple[Fetched, str] | None = None
        #: The last fetch found nothing, and nothing ran since that could have added a job.
        self.idle = False


class Runner:
    """Runs the due jobs of one or more queues in the calling thread (see :func:`run_until_idle`).

    Build one and call :meth:`run_until_idle` as often as the test needs: the Workers and their
    scripts are prepared once. ``clock`` defaults to the queues' own (they must share one). The
    Worker settings that change how attempts end (``backoff_strategy``, ``limiter``, the keep
    rules) are a Worker's.
    """

    def __init__(self, queues: Queue | Sequence[Queue], processors: Processors, *, clock: Clock | None = None,
                 backoff_strategy: BackoffStrategy | None = None, limiter: Mapping[str, int] | None = None,
                 remove_on_complete: KeepRule | None = None, remove_on_fail: KeepRule | None = None) -> None:
        listed = _queues_arg(queues)
        table = processors_arg(processors)
        if clock is None:
            clocks = {id(q.clock) for q in listed}
            if len(clocks) > 1:
                raise InvalidInputError("these queues run on different clocks: pass clock= to say which drives the run")
            clock = listed[0].clock
        elif not callable(clock):
            raise InvalidInputError(f"clock={clock!r}: must be callable () -> epoch ms")
        self.clock: Clock = clock
        self.lanes: list[_Lane] = []
        for queue in listed:
            told, dispatch = _Told(clock), _Dispatch(table, queue.name)
            worker = Worker(queue.client, queue.name, dispatch, prefix=queue.prefix, clock=clock,
                            backoff_strategy=backoff_strategy, limiter=limiter, remove_on_complete=remove_on_complete,
                            remove_on_fail=remove_on_fail, max_data_bytes=queue.data_limits.max_bytes,
                            max_data_depth=queue.data_limits.max_depth, listeners=[told])
            self.lanes.append(_Lane(queue, worker, dispatch, told))

    def run_until_idle(self, *, max_jobs: int = DEFAULT_MAX_JOBS) -> RunReport:
        """Run every due job (and whatever those runs make due now) until no queue has one left;
        raise TooManyJobsError rather than start attempt ``max_jobs + 1``."""
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise InvalidInputError(f"max_jobs={max_jobs!r}: must be an int >= 1")
        runs: list[JobRun] = []
        limited: dict[str, int] = {}
        for lane in self.lanes:
            lane.idle = False  # the test may have added jobs or moved the clock since the last run
        try:
            busy = True
            while busy:
                busy = False
                for lane in self.lanes:
                    if lane.queue.name in limited or (lane.idle and lane.held is None):
                        continue
                    others_held = sum(other.held is not None for other in self.lanes if other is not lane)
                    if lane.held is not None:
                        (fetched, token), lane.held = lane.held, None
                    elif len(runs) + others_held >= max_jobs:  # what is held already uses up what is left
                        self._refuse_past_bound(lane, max_jobs, runs, limited)
                        continue
                    else:
                        fetched, token = lane.inline.take()
                    if fetched.job_id is None:
                        self._note_empty(lane, fetched, limited)
                        continue
                    busy = True
                    # The final move takes the next job (as a Worker's does) only while the bound
                    # leaves room for it beside the jobs held already: a held job must run.
                    room = max_jobs - len(runs) - 1 - others_held
                    run, following = self._attempt(lane, fetched, token, fetch_next=room > 0)
                    runs.append(run)
                    for other in self.lanes:
                        other.idle = False  # a processor may have added jobs anywhere
                    if following is not None and following.job_id is not None:
                        lane.held = (following, token)
                    elif following is not None:
                        self._note_empty(lane, following, limited)
        finally:
            for lane in self.lanes:
                lane.inline.release()
        return RunReport(tuple(runs), limited)

    def _note_empty(self, lane: _Lane, fetched: Fetched, limited: dict[str, int]) -> None:
        """A fetch took nothing: the queue is idle, or its rate limiter holds jobs back."""
        lane.idle = True
        if fetched.rate_limit_ms > 0:
            limited[lane.queue.name] = self.clock() + fetched.rate_limit_ms

    def _refuse_past_bound(self, lane: _Lane, max_jobs: int, runs: list[JobRun], limited: dict[str, int]) -> None:
        if self._due_now(lane):
            raise TooManyJobsError(
                f"run stopped after max_jobs={max_jobs} attempts with jobs still due in queue {lane.queue.name!r}: "
                "a job that keeps adding jobs due now? (raise max_jobs if not)", RunReport(tuple(runs), limited))
        lane.idle = True

    def _attempt(self, lane: _Lane, fetched: Fetched, token: str, *, fetch_next: bool) -> tuple[JobRun, Fetched | None]:
        """Run one attempt and say how it ended, with the job its final move took (if any). A
        BaseException that is not an Exception (KeyboardInterrupt, SystemExit, pytest.fail)
        fails the attempt as in a Worker, then stops the run, as it would stop the test."""
        assert fetched.job_id is not None
        told = lane.told
        told.reset()
        following = lane.inline.run(fetched, token, fetch_next=fetch_next)
        if told.error is not None and not isinstance(told.error, Exception):
            raise told.error
        return self._outcome(lane, fetched.job_id, fetched.hash), following

    def _outcome(self, lane: _Lane, job_id: str, fields: Mapping[str, str]) -> JobRun:
        told = lane.told
        outcome = told.outcome
        value = None
        if outcome is None:  # nothing recorded: parked for its children, completed without running
            # (its scheduler's missed-run policy skipped it, docs/scheduler.md), or the final
            # move was refused
            if lane.client.zscore(lane.keys.completed, job_id) is not None:
                outcome = Outcome.COMPLETED
                value = json_or_text(text(lane.client.hget(lane.keys.job(job_id), "returnvalue") or b"null"))
            else:
                parked = lane.client.zscore(lane.keys.waiting_children, job_id) is not None
                outcome = Outcome.WAITING_CHILDREN if parked else Outcome.UNFINISHED
        elif outcome is Outcome.COMPLETED:
            value = json.loads(encode_json_like_js(told.result))  # as a reader of the job gets it
        error = told.error
        reason = None
        if error is not None:
            reason = str(error) or type(error).__name__
        repeat = job_hash.stored_opts(fields).get("repeat")
        tz = repeat.get("tz") if isinstance(repeat, Mapping) else None
        return JobRun(
            queue=lane.queue.name, job_id=job_id, name=fields.get("name", ""),
            attempt=job_hash.attempts_made(fields) + 1, outcome=outcome,
            at_ms=int_or_none(fields.get("processedOn")) or self.clock(), return_value=value,
            error=error, failed_reason=reason, retry_at_ms=told.retry_at_ms,
            scheduler_id=fields.get("rjk") or None, tz=tz if isinstance(tz, str) else None,
        )

    def _due_now(self, lane: _Lane) -> bool:
        """Whether a fetch would take a job now (read only: nothing is moved)."""
        keys = lane.keys
        pipe = lane.client.pipeline(transaction=False)
        pipe.hexists(keys.meta, "paused")
        pipe.llen(keys.wait)
        pipe.zcard(keys.prioritized)
        pipe.zcount(keys.delayed, 0, (self.clock() + 1) * _SCORE_SHIFT - 1)
        paused, *counts = pipe.execute()
        return not paused and any(int(c) for c in counts)

    def next_due_ms(self) -> int | None:
        """When the earliest delayed job of these queues is due (epoch ms), or None."""
        due: list[int] = []
        for lane in self.lanes:
            first = lane.client.zrange(lane.keys.delayed, 0, 0, withscores=True)
            if first:
                due.append(int(first[0][1]) // _SCORE_SHIFT)
        return min(due) if due else None

    def lift_rate_limit(self, queue_name: str) -> None:
        """End a queue's limiter window now: its key's TTL runs on Redis's time, not the clock's,
        so once the clock has passed the window, the runner ends it (``advance_time`` does)."""
        for lane in self.lanes:
            if lane.queue.name == queue_name:
                lane.client.delete(lane.keys.limiter)


def run_until_idle(queues: Queue | Sequence[Queue], processors: Processors, *, clock: Clock | None = None,
                   max_jobs: int = DEFAULT_MAX_JOBS, backoff_strategy: BackoffStrategy | None = None,
                   limiter: Mapping[str, int] | None = None, remove_on_complete: KeepRule | None = None,
                   remove_on_fail: KeepRule | None = None) -> RunReport:
    """Run every job of ``queues`` that is due now, synchronously, as a Worker would, until none is.

    ``processors`` is one function for all jobs or a mapping of job name -> function (a job whose
    name has none fails at once, saying so). Jobs the processors add, retries due at once,
    parents whose children completed and iterations due now all run in the same call; a retry
    with a backoff waits in ``delayed`` for the clock (``advance_time`` moves it). Time does not
    move: the clock is the queues' own unless ``clock`` is given. Returns a :class:`RunReport`.

    Not to be confused with ``Queue.drain``, which deletes waiting jobs.
    """
    runner = Runner(queues, processors, clock=clock, backoff_strategy=backoff_strategy, limiter=limiter,
                    remove_on_complete=remove_on_complete, remove_on_fail=remove_on_fail)
    return runner.run_until_idle(max_jobs=max_jobs)
