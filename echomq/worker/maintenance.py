"""Lock renewal and the stalled check: the loop that proves a worker is alive.

One ``Maintenance`` belongs to one Worker. ``run_once(now_ms)`` does whatever is due at that
instant (renew the locks of running jobs every ``lock_renew_time``, run the stalled check every
``stalled_interval``) and says how long until the next step, so the Worker's thread is a thin
``while not stop.wait(delay)`` around it and tests step it with a fixed clock.

docs/protocol.md §3.5: a lock is ``<job>:lock`` = token with PX ``lock_duration``; renewal also
SREMs the id from ``stalled``. The stalled check (guarded by ``stalled-check`` so one worker
per interval runs it) moves jobs whose lock expired back to wait, or marks them for failure
once they stalled more than ``max_stalled_count`` times. With it, every worker repairs the job
schedulers left without a pending iteration (§4.5), so a schedule never dies silently.
"""

from __future__ import annotations

import logging
import threading

from ..schedule.records import Iteration
from ..schedule.repair import SchedulerRepair
from .listeners import ListenerSet
from .transitions import Transitions

log = logging.getLogger(__name__)


class LockRegistry:
    """The jobs this worker runs right now and their lock tokens (shared by threads).

    A job whose attempt is giving its lock up on purpose (its final move, or moveToWaitingChildren,
    is under way) is marked *releasing*: a renewal that finds such a lock gone has raced the
    release, not lost the lock. The mark is set before the releasing script is sent, so any
    renewal answer that could have seen the release also sees the mark.
    """

    def __init__(self) -> None:
        self._tokens: dict[str, str] = {}
        self._taken: dict[str, tuple[str, str, str]] = {}
        self._releasing: set[str] = set()
        self._lock = threading.Lock()

    def track(self, job_id: str, token: str, taken: tuple[str, str, str] | None = None) -> None:
        """``taken``: the job's processedOn, ats and timestamp as the take left them, which tell
        that take of that job from another after a failover (master_moves.py)."""
        with self._lock:
            self._tokens[job_id] = token
            if taken is not None:
                self._taken[job_id] = taken
            self._releasing.discard(job_id)

    def untrack(self, job_id: str, token: str | None = None) -> None:
        """Stop tracking ``job_id`` (only the attempt holding ``token``, when given: a thread
        left behind at a hard limit must not untrack the job's next attempt)."""
        with self._lock:
            if token is not None and self._tokens.get(job_id) != token:
                return
            self._tokens.pop(job_id, None)
            self._taken.pop(job_id, None)
            self._releasing.discard(job_id)

    def releasing(self, job_id: str, releasing: bool = True) -> None:
        """Mark (or, when the release did not happen after all, unmark) a job letting its lock go."""
        with self._lock:
            if releasing:
                self._releasing.add(job_id)
            else:
                self._releasing.discard(job_id)

    def take_lost(self, job_id: str, token: str) -> bool:
        """Whether a lock that could not be renewed was really lost: the attempt holding
        ``token`` still runs and is not releasing the lock itself. If so it is no longer
        tracked, in the same step, so the loss is told once (see ``take``)."""
        with self._lock:
            if self._tokens.get(job_id) != token or job_id in self._releasing:
                return False
            del self._tokens[job_id]
            self._taken.pop(job_id, None)
            return True

    def take(self, job_id: str, token: str) -> bool:
        """Stop tracking the attempt holding ``token`` (its final move was refused: the lock is
        lost); False if it was not tracked any more, the renewer having found the loss first."""
        with self._lock:
            if self._tokens.get(job_id) != token:
                return False
            del self._tokens[job_id]
            self._taken.pop(job_id, None)
            self._releasing.discard(job_id)
            return True

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._tokens)

    def held(self) -> dict[str, tuple[str, str, str, str]]:
        """Every job tracked: its token, and the processedOn, ats and timestamp its take left ("" unknown)."""
        with self._lock:
            return {job_id: (token, *self._taken.get(job_id, ("", "", ""))) for job_id, token in self._tokens.items()}

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._taken.clear()
            self._releasing.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._tokens)


class Maintenance:
    """Steppable lock renewal and stalled check: ``run_once(now_ms)`` is one step, the thread a
    thin loop around it, so tests step it with a fixed clock."""

    def __init__(
        self,
        transitions: Transitions,
        locks: LockRegistry,
        *,
        lock_duration: int = 30000,
        lock_renew_time: int | None = None,
        stalled_interval: int = 30000,
        max_stalled_count: int = 1,
        skip_stalled_check: bool = False,
        listeners: ListenerSet | None = None,
    ) -> None:
        self.transitions = transitions
        self.locks = locks
        self.listeners = listeners or ListenerSet((), transitions.keys.queue_name)
        self.lock_duration = int(lock_duration)
        # at least 1 ms: a 1 ms lock would otherwise be renewed in a busy loop
        self.lock_renew_time = int(lock_renew_time or max(1, self.lock_duration // 2))
        self.stalled_interval = int(stalled_interval)
        self.max_stalled_count = int(max_stalled_count)
        self.skip_stalled_check = skip_stalled_check
        self.next_renew_ms: int | None = None
        self.next_stalled_check_ms: int | None = None
        #: The ids the last stalled check moved back to wait (for tests and logs).
        self.last_stalled: list[str] = []
        #: Repairs schedulers left without a pending iteration, on the stalled check's cadence.
        self.schedules = SchedulerRepair(transitions.client, transitions.keys)
        #: The iterations the last repair pass placed (for tests and logs).
        self.last_repaired: list[Iteration] = []

    def run_once(self, now_ms: int) -> int:
        """Do what is due at ``now_ms``; return the milliseconds until the next step.

        The first call runs the stalled check at once (a fresh worker recovers what a dead
        one left behind) and schedules the first renewal ``lock_renew_time`` later.
        """
        if self.next_renew_ms is None:
            self.next_renew_ms = now_ms + self.lock_renew_time
        if now_ms >= self.next_renew_ms:
            self.renew_locks()
            self.next_renew_ms = now_ms + self.lock_renew_time
        stalled_due = self.next_stalled_check_ms is None or now_ms >= self.next_stalled_check_ms
        if stalled_due and not self.skip_stalled_check:
            self.check_stalled(now_ms)
            self.repair_schedulers(now_ms)
            self.next_stalled_check_ms = now_ms + self.stalled_interval
        due = [self.next_renew_ms]
        if not self.skip_stalled_check and self.next_stalled_check_ms is not None:
            due.append(self.next_stalled_check_ms)
        return max(0, min(due) - now_ms)

    def renew_locks(self) -> list[str]:
        """Extend every tracked lock; report (and stop tracking) the ones that are lost."""
        tokens = self.locks.snapshot()
        if not tokens:
            return []
        lost = self.transitions.extend_locks(tokens)
        if lost and self.transitions.settle(force=True):
            # a failover the worker had not seen yet (the pool reconnected to a new server): the
            # jobs it runs were held again there; renew what is still lost
            lost = self.transitions.extend_locks({job_id: tokens[job_id] for job_id in lost})
        # A job that finished (or parked for its children) while the renewal was in flight gave
        # its lock up on purpose: it is untracked by now, or marked releasing (LockRegistry).
        lost = [job_id for job_id in lost if self.locks.take_lost(job_id, tokens[job_id])]
        for job_id in lost:
            # Another worker's stalled check took it, or someone removed it: our final move
            # will be refused, which is what keeps a job from finishing twice.
            log.warning("lock of job %s could not be renewed; it may be processed again", job_id)
            self.listeners.lock_lost(job_id)
        return lost

    def repair_schedulers(self, now_ms: int) -> list[Iteration]:
        """Place a pending iteration for each job scheduler of the queue that has lost its own
        (its worker step failed, or it was deleted): recovery, like the stalled check, so it
        runs with it (docs/protocol.md §4.5). Each repair is logged as a WARNING."""
        self.last_repaired = self.schedules.run(now_ms)
        return self.last_repaired

    def check_stalled(self, now_ms: int) -> list[str]:
        moved = self.transitions.move_stalled_to_wait(self.max_stalled_count, self.stalled_interval, now_ms)
        self.last_stalled = moved
        for job_id in moved:
            log.warning("job %s stalled (its worker stopped renewing the lock) and was moved back to wait",
                        job_id)
            self.listeners.stalled(job_id)
        return moved
