"""Eager mode: jobs run the moment they are added, in the adding thread, for view tests.

Inside ``with eager(processors):`` every ``Queue.add``, ``add_bulk`` and ``add_flow`` (of the
queues given, or of every Queue when none are) adds the job as usual, then runs what is due on
that queue with ``run_until_idle``, so the job is completed (or failed, with its retries due
now) before the call returns, recorded exactly as a worker records it: the view's test reads the
result, the job's state, its events. A delayed job stays delayed until the clock reaches it, as
a scheduler's iterations do. Jobs that processors add while running are run in the same pass,
not in a nested one; a flow's children run first, then its parent.

``with eager(registry):`` takes the processors from a ``JobRegistry``, queue by queue: every
Queue of one of the registry's queues (under its prefix) is eager, the registry's own and any
the code builds, each running the functions registered for that queue, inside the registry's
``job_context``. Queues the registry has no job for are left alone.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInputError
from ..queue.queue import Queue
from ..registry import JobRegistry
from ..types import BackoffStrategy
from .report import JobRun, Outcome, RunReport
from .runner import DEFAULT_MAX_JOBS, Processors, Runner, processors_arg

_PATCHED = ("add", "add_bulk", "add_flow")


class EagerSession:
    """What ran eagerly during one ``with eager(...)`` block: ``report``, attempts in order.
    ``processors`` are the functions given, or None when they come from ``registry``."""

    def __init__(self, processors: Processors | JobRegistry, *, max_jobs: int,
                 backoff_strategy: BackoffStrategy | None) -> None:
        self.registry = processors if isinstance(processors, JobRegistry) else None
        self.processors = None if isinstance(processors, JobRegistry) else processors_arg(processors)
        self.max_jobs = max_jobs
        self.backoff_strategy = backoff_strategy
        self._runs: list[JobRun] = []
        self._runners: dict[int, Runner | None] = {}
        self._local = threading.local()

    @property
    def report(self) -> RunReport:
        return RunReport(tuple(self._runs))

    def result(self, job_id: str) -> Any:
        """The return value of the job's last completed attempt; LookupError if it did not complete."""
        for run in reversed(self._runs):
            if run.job_id == job_id and run.outcome is Outcome.COMPLETED:
                return run.return_value
        raise LookupError(f"job {job_id!r} did not complete in eager mode (its runs: "
                          f"{[str(r) for r in self._runs if r.job_id == job_id]})")

    def _processors_for(self, queue: Queue) -> Processors | None:
        """The functions that run ``queue``'s jobs: those given, or its queue's in the registry
        (None: a queue the registry has no job for, which stays as it is)."""
        registry = self.registry
        if registry is None:
            return self.processors
        if queue.prefix != registry.prefix or queue.name not in registry.queues:
            return None
        return registry.processors(queue.name)

    def _runner(self, queue: Queue) -> Runner | None:
        if id(queue) not in self._runners:
            processors = self._processors_for(queue)
            self._runners[id(queue)] = None if processors is None else Runner(
                queue, processors, backoff_strategy=self.backoff_strategy)
        return self._runners[id(queue)]

    def after_add(self, queue: Queue) -> None:
        """Run what is due on ``queue`` now, unless a run is already going on in this thread (a
        processor adding jobs): that run then also serves this queue before it returns."""
        pending: list[Queue] | None = getattr(self._local, "pending", None)
        if pending is not None:
            if all(q is not queue for q in pending):
                pending.append(queue)
            return
        pending = self._local.pending = [queue]
        try:
            while pending:
                runner = self._runner(pending.pop(0))
                if runner is not None:
                    self._runs.extend(runner.run_until_idle(max_jobs=self.max_jobs))
        finally:
            self._local.pending = None


def _eager_method(session: EagerSession, original: Callable[..., Any], queue: Queue | None) -> Callable[..., Any]:
    @functools.wraps(original)
    def method(*args: Any, **kwargs: Any) -> Any:
        target = queue if queue is not None else args[0]  # unbound on the class: self comes first
        result = original(*args, **kwargs)
        session.after_add(target)
        return result

    return method


@contextmanager
def eager(processors: Processors | JobRegistry, *queues: Queue, max_jobs: int = DEFAULT_MAX_JOBS,
          backoff_strategy: BackoffStrategy | None = None) -> Iterator[EagerSession]:
    """Run jobs as they are added, for the length of the block (see the module doc); yields the
    :class:`EagerSession` with what ran. ``processors``: one function, a mapping of job name ->
    function, or a ``JobRegistry`` (each queue runs the functions registered for it). Without
    ``queues`` every Queue of the process is eager (the one a view builds itself included; with
    a registry, those of its queues), which is meant for tests only: restored on exit."""
    if not all(isinstance(q, Queue) for q in queues):
        raise InvalidInputError(f"eager: queues={queues!r:.100} must be Queue objects")
    session = EagerSession(processors, max_jobs=max_jobs, backoff_strategy=backoff_strategy)
    saved: list[tuple[object, str, Any, bool]] = []
    # Each queue given gets its own methods (instance attributes); without queues, the class does.
    owners: list[tuple[object, Queue | None]] = [(q, q) for q in queues] if queues else [(Queue, None)]
    try:
        for owner, queue in owners:
            for name in _PATCHED:
                had_own = name in vars(owner)
                saved.append((owner, name, vars(owner).get(name), had_own))
                setattr(owner, name, _eager_method(session, getattr(owner, name), queue))
        yield session
    finally:
        for owner, name, previous, had_own in reversed(saved):
            if had_own:
                setattr(owner, name, previous)
            else:
                delattr(owner, name)
