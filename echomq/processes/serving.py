"""One worker process of ``echomq worker``: its Workers, what stops it, and when it ends.

The same loop runs in the command's own process (``--processes 1``) and in each child a
supervisor forks. The process's main thread only watches: each Worker runs in a thread of its
own (``Worker.run``, one per queue) and the main thread waits on a ``SignalInbox``, which the
signal handlers, the supervisor's lifeline, a recycle limit reached and a Worker that ended all
wake (signals.py). What each signal means is ``StopRule``'s to say:

* a graceful stop (the first SIGTERM or SIGINT, the supervisor's request, the supervisor's
  death) closes every Worker at once, in parallel, each with ``--shutdown-timeout``: running
  jobs finish, those still running at the deadline stay active and the stalled check hands them
  out again (docs/worker.md, "Shutdown");
* the same signal again at once, from the same sender, is the same stop delivered twice and
  changes nothing; a deliberate second one (later, or from someone else) and SIGQUIT end the
  process at once (status 1), leaving its jobs to the stalled check;
* ``--max-jobs-per-child`` and ``--max-memory-per-child`` close it the same graceful way and
  end it with ``RECYCLE_STATUS``, which tells the supervisor to start a fresh process; so does,
  in a supervisor's child, a thread lost to a job past its hard time limit (``--time-limit-ms``);
* with ``--burst`` each Worker returns once its queue is idle; when a round of them finished
  any job, another round runs (a job may add jobs to another queue whose Worker was idle),
  and the process ends with 0 after a round that found nothing.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..worker.listeners import WorkerListener
from ..worker.worker import Worker
from .signals import Lifeline, Meaning, SignalInbox, StopRule, forced_by

log = logging.getLogger(__name__)

#: A child's exit status that asks its supervisor for a fresh process (EX_TEMPFAIL: not a failure).
RECYCLE_STATUS = 75

#: A child's exit status when it could not start (its setup or its Workers raised): restarting
#: it would fail the same way, so the supervisor stops.
BOOT_FAILED_STATUS = 76

#: The status of a stop forced by a second signal.
FORCED_STATUS = 1

#: How often the main thread looks at memory and at its Workers when nothing woke it.
WATCH_S = 0.5


#: How long past a job's hard time limit its process is killed by the supervisor if it did not
#: fail the job itself by then (its watchdog does it at the limit, docs/worker-command.md).
HARD_LIMIT_MARGIN_S = 1.0


def _kill_at(workers: Sequence[Worker]) -> float | None:
    """When the supervisor should kill this process: the earliest hard time limit of a running
    job, plus the margin (None: no running job has one)."""
    limits = [at for at in (worker.next_hard_limit for worker in workers) if at is not None]
    return min(limits) + HARD_LIMIT_MARGIN_S if limits else None


class RecycleWatch(WorkerListener):
    """``--max-jobs-per-child`` and ``--max-memory-per-child``, told by the Workers: counts the
    jobs this process starts, measures its memory after each job, and once either limit is
    passed records why (``reason``) and wakes the main thread to recycle the process. Jobs
    taken meanwhile finish before it goes. The main thread measures memory between jobs too."""

    def __init__(self, max_jobs: int | None, max_memory_mib: int | None, wake: Callable[[], None]) -> None:
        self.max_jobs = max_jobs
        self.max_memory_mib = max_memory_mib
        self.started = 0
        self.reason: str | None = None
        self._wake = wake
        self._lock = threading.Lock()

    def _due(self, reason: str) -> None:
        with self._lock:
            first = self.reason is None
            if first:
                self.reason = reason
        if first:
            self._wake()

    def on_active(self, job: Any) -> None:
        with self._lock:
            self.started += 1
            reached = self.started == self.max_jobs
        if reached:
            self._due(f"started {self.max_jobs} job(s) (--max-jobs-per-child)")

    def check_memory(self) -> None:
        if self.max_memory_mib is not None and self.reason is None:
            used = rss_mib()
            if used > self.max_memory_mib:
                self._due(f"uses {used:.0f} MiB, over --max-memory-per-child {self.max_memory_mib}")

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        self.check_memory()

    def on_failed(self, job: Any, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        self.check_memory()


def rss_mib() -> float:
    """This process's resident memory in MiB (Linux: ``/proc/self/statm``; elsewhere the peak
    from ``getrusage``, which only grows, so a recycle still happens once the limit is passed)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            resident_pages = int(statm.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource  # POSIX only, hence here

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024


#: Builds this process's Workers, one per queue, with the listeners given.
WorkerFactory = Callable[[Sequence[WorkerListener]], list[Worker]]


class WorkerProcess:
    """The Workers of one process and the watch over them (see the module doc). ``listeners``
    are told by every Worker of the process; ``lifeline`` links a supervisor's process to it."""

    def __init__(self, build: WorkerFactory, inbox: SignalInbox, *, burst: bool, shutdown_timeout: float,
                 max_jobs: int | None, max_memory_mib: int | None, listeners: Sequence[WorkerListener] = (),
                 lifeline: Lifeline | None = None) -> None:
        self._build = build
        self.inbox = inbox
        self.burst = burst
        self.shutdown_timeout = shutdown_timeout
        self.listeners = list(listeners)
        self.lifeline = lifeline
        self.rule = StopRule()
        self.recycle = RecycleWatch(max_jobs, max_memory_mib, inbox.poke) if max_jobs or max_memory_mib else None
        self._repeat_told = False

    def build(self) -> list[Worker]:
        return self._build([*self.listeners, *([self.recycle] if self.recycle else [])])

    def serve(self, workers: list[Worker]) -> int:
        """Run ``workers`` (built by ``build``) until a stop, a recycle, or an idle burst round;
        return the process's exit status."""
        while True:
            finished, status = self._watch(workers, self._start(workers))
            if status is not None:
                return status
            if not self.burst or finished == 0:
                return 0  # a burst round that found nothing: every queue was idle at once
            log.debug("burst round finished %d job(s); another round", finished)
            workers = self.build()

    def _start(self, workers: list[Worker]) -> list[threading.Thread]:
        threads = []
        for worker in workers:
            thread = threading.Thread(target=self._run, args=(worker,), name=f"echomq-run-{worker.queue_name}",
                                      daemon=True)
            thread.start()
            threads.append(thread)
        return threads

    def _run(self, worker: Worker) -> None:
        try:
            worker.run(burst=self.burst)
        except Exception as exc:  # noqa: BLE001 - the thread's top: what ends run() ends the process
            worker.failure = exc
            log.error("worker for queue %r stopped: %s", worker.queue_name, exc)
        finally:
            self.inbox.poke()

    def _stop_asked(self) -> tuple[str, bool] | None:
        """(why, at once) when a signal, the supervisor or its absence says to stop; None else.
        A stop signal repeated (StopRule) is told once and changes nothing."""
        asked: tuple[str, bool] | None = None
        for received in self.inbox.take():
            meaning = self.rule.meaning(received)
            if meaning is Meaning.FORCE:
                return forced_by(received), True
            if meaning is Meaning.STOP and asked is None:
                asked = received.described(), False
            elif meaning is Meaning.REPEAT and not self._repeat_told:
                self._repeat_told = True
                log.info("worker process %d: %s again: the same stop delivered twice (a signal to the whole "
                         "process group, `timeout`); still stopping gracefully", os.getpid(), received.described())
        if self.lifeline is not None:
            why = self.lifeline.look(self.inbox)
            if why is not None and asked is None:
                asked = why, False
        return asked

    def _watch(self, workers: list[Worker], threads: list[threading.Thread]) -> tuple[int, int | None]:
        """Wait until the round ends by itself (jobs finished, None) or is ended (a status)."""
        while True:
            asked = self._stop_asked()
            if asked is not None:
                why, at_once = asked
                if at_once:
                    return 0, self._forced(workers, why)
                return 0, self._close(workers, threads, f"stopping: {why}", 0)
            if self.recycle is not None:
                self.recycle.check_memory()
                if self.recycle.reason is not None:
                    return 0, self._close(workers, threads, f"{self.recycle.reason}: recycling", RECYCLE_STATUS)
            if self.lifeline is not None:
                self.lifeline.report(_kill_at(workers))
            if self.lifeline is not None and any(worker.leaked_threads for worker in workers):
                # A job ran past its hard time limit: it is failed, but its thread cannot be
                # stopped; a fresh process takes this one's place (docs/worker-command.md).
                return 0, self._close(workers, threads, "a job ran past its hard time limit and its thread cannot be "
                                      "stopped: recycling", RECYCLE_STATUS)
            if any(worker.failure is not None for worker in workers):
                return 0, self._close(workers, threads, "a worker stopped with an error", 1)
            if not any(thread.is_alive() for thread in threads):
                return sum(worker.processed for worker in workers), None
            self.inbox.wait(WATCH_S)

    def _close(self, workers: list[Worker], threads: list[threading.Thread], reason: str, status: int) -> int:
        """Close every Worker at once, each within the shutdown timeout. A signal that forces
        the stop (StopRule) ends it at once with FORCED_STATUS; anything else that asks to stop
        meanwhile changes nothing, the stop is under way."""
        log.info("worker process %d %s (closing %d worker(s), up to %s s)", os.getpid(), reason, len(workers),
                 f"{self.shutdown_timeout:g}")
        closers = [threading.Thread(target=worker.close, args=(self.shutdown_timeout,), daemon=True,
                                    name=f"echomq-close-{worker.queue_name}") for worker in workers]
        for closer in closers:
            closer.start()
        while any(thread.is_alive() for thread in (*closers, *threads)):
            asked = self._stop_asked()
            if asked is not None and asked[1]:
                return self._forced(workers, asked[0])
            self.inbox.wait(0.1)
        if any(worker.failure is not None for worker in workers) and status == 0:
            return 1
        return status

    def _forced(self, workers: list[Worker], why: str) -> int:
        running = sum(len(worker.locks.snapshot()) for worker in workers)
        log.warning("worker process %d: %s: stopping at once; %d running job(s) are left to the stalled check",
                    os.getpid(), why, running)
        return FORCED_STATUS
