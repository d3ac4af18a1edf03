"""Stopping running work: time limits and cancel requests (docs/worker.md, "Time limits and cancel").

Each running attempt has an :class:`AttemptControl`, shared by its processor thread and the
Worker's one :class:`Watchdog` thread. Every ``TICK_S`` while jobs run the watchdog

* reads the cancel requests (``<job>:cancel``, docs/protocol.md §3.8) of all of them in one
  MGET (one slot: every key is under the queue's hash tag), so a request is seen within a tick
  plus a round trip;
* signals the attempts past their soft limit;
* hands the attempts past their hard limit to the Worker, which fails them without their thread.

Signals are cooperative: ``job.cancelled`` turns true and ``job.raise_if_cancelled()`` raises
the ``JobCancelledError`` subclass that says why. Nothing is injected into the processor's
thread (no ``PyThreadState_SetAsyncExc``): an exception raised at an arbitrary bytecode can land
inside a ``finally`` or a ``with`` of the processor's libraries (a redis-py reply half read, a
lock held by logging) and leave them broken for the next job of the thread; a thread blocked in C
(a socket read, ``time.sleep``) does not see it at all. The hard limit is the bound that holds
whatever the processor does.

Who finishes an attempt is decided once, under the control's lock: the processor thread
(``claim_finish``) or the watchdog at the hard limit (``claim_abandon``). The loser does
nothing: an abandoned thread's late result is discarded without a call (the lock is no
longer its own either: every exit checks the token, §3.4).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from ..errors import JobCancelledError, JobCancelRequestedError, JobHardTimeLimitError, JobSoftTimeLimitError
from ..protocol import job_hash
from ..protocol.codec import text
from ..protocol.keys import QueueKeys
from ..queue.cancel import failed_reason
from ..transport.connection import CONNECTION_ERRORS, Backoff

log = logging.getLogger(__name__)

#: How often the watchdog looks, in seconds: a request is seen within this plus a round trip
#: (p99 under 250 ms, tests/bench/bench_cancel.py).
TICK_S = 0.1

#: How long a processor may go on once told of a cancel before it is treated as past its hard
#: limit: the job fails as cancelled without it, and its thread (or process) is replaced.
CANCEL_GRACE_S = 10.0

_RUNNING, _FINISHING, _ABANDONED = 0, 1, 2


def soft_limit_reason(limit_ms: int) -> str:
    return f"soft time limit of {limit_ms} ms exceeded"


def hard_limit_reason(limit_ms: int) -> str:
    return f"hard time limit of {limit_ms} ms exceeded"


def attempt_limits(opts: dict[str, Any], soft_default: int | None, hard_default: int | None) -> tuple[int | None,
                                                                                                     int | None]:
    """(soft, hard) limits in ms of one attempt: the job's options (docs/protocol.md §2.2),
    else the worker's defaults. A stored value that is not a whole number >= 1 counts as unset."""
    soft = job_hash.option_int(opts.get("emqSoftTimeLimit"))
    hard = job_hash.option_int(opts.get("emqTimeLimit"))
    soft = soft if soft is not None and soft >= 1 else soft_default
    hard = hard if hard is not None and hard >= 1 else hard_default
    return soft, hard


class AttemptControl:
    """One running attempt's stop state: why it must stop (``stop``), its deadlines, and who
    finishes it. ``payload`` is what the Worker needs to fail it at the hard limit."""

    __slots__ = ("_lock", "_owner", "cancel_reason", "hard_at", "hard_ms", "job_id", "payload", "soft_at",
                 "soft_ms", "stop", "thread", "token")

    def __init__(self, job_id: str, token: str, soft_ms: int | None, hard_ms: int | None,
                 thread: threading.Thread | None = None, payload: Any = None) -> None:
        now = time.monotonic()
        self.job_id = job_id
        self.token = token
        self.soft_ms = soft_ms
        self.hard_ms = hard_ms
        self.soft_at = None if soft_ms is None else now + soft_ms / 1000
        self.hard_at = None if hard_ms is None else now + hard_ms / 1000
        self.thread = thread
        self.payload = payload
        #: What ``raise_if_cancelled`` raises (None: nothing asked the attempt to stop).
        self.stop: JobCancelledError | None = None
        #: The cancel request's ``failedReason`` once one was seen (it outranks a soft limit).
        self.cancel_reason: str | None = None
        self._owner = _RUNNING
        self._lock = threading.Lock()

    def cancel_requested(self, stored_reason: str) -> None:
        """A cancel request was seen: tell the processor, and give it ``CANCEL_GRACE_S`` to stop."""
        reason = failed_reason(stored_reason)
        with self._lock:
            if self.cancel_reason is None:
                self.cancel_reason = reason
                self.stop = JobCancelRequestedError(reason)
                grace_end = time.monotonic() + CANCEL_GRACE_S
                self.hard_at = grace_end if self.hard_at is None else min(self.hard_at, grace_end)

    def why_abandoned(self) -> str:
        """What the log line of an abandoned attempt says it did."""
        if self.cancel_reason is not None:
            return f"ignored its cancel for {CANCEL_GRACE_S:g} s (or ran past its hard time limit)"
        return f"ran past its hard time limit of {self.hard_ms} ms"

    def soft_limit_reached(self) -> None:
        with self._lock:
            if self.stop is None and self.soft_ms is not None:
                self.stop = JobSoftTimeLimitError(soft_limit_reason(self.soft_ms))

    def claim_finish(self) -> bool:
        """The processor returned or raised: True if its thread records the outcome."""
        with self._lock:
            if self._owner != _RUNNING:
                return False
            self._owner = _FINISHING
            return True

    def claim_abandon(self) -> bool:
        """The hard limit passed: True if the watchdog fails the attempt (its thread still runs,
        and sees ``cancelled`` with the hard limit as the reason unless a cancel came first)."""
        with self._lock:
            if self._owner != _RUNNING:
                return False
            self._owner = _ABANDONED
            if self.cancel_reason is None and self.hard_ms is not None:
                self.stop = JobHardTimeLimitError(hard_limit_reason(self.hard_ms))
            return True


class Watchdog:
    """The Worker's watcher of its running attempts (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: QueueKeys, on_hard_limit: Callable[[AttemptControl], None]) -> None:
        self.client = client
        self.keys = keys
        self.on_hard_limit = on_hard_limit
        self._controls: dict[str, AttemptControl] = {}  # by token: one attempt each
        self._busy = threading.Event()
        self._backoff: Backoff | None = None
        #: MGETs of cancel requests sent (for tests and the bench).
        self.reads = 0

    # watch and forget run twice per job in every processor thread: no lock of ours (a lock
    # contended by ten threads cost a fifth of the throughput at concurrency 10). A dict's item
    # set, pop and copy are each atomic under the GIL, and a token names one attempt only.
    def watch(self, control: AttemptControl) -> None:
        self._controls[control.token] = control
        if not self._busy.is_set():
            self._busy.set()

    def forget(self, control: AttemptControl) -> None:
        if self._controls.get(control.token) is control:
            self._controls.pop(control.token, None)

    def next_hard_limit(self) -> float | None:
        """The earliest hard limit (``time.monotonic()``) of the attempts watched, None for none."""
        limits = [c.hard_at for c in self._controls.copy().values() if c.hard_at is not None]
        return min(limits) if limits else None

    def run(self, stop: threading.Event) -> None:
        """Step every TICK_S while attempts run, until ``stop`` is set (``wake`` ends a wait)."""
        delay = TICK_S
        while not stop.is_set():
            if not self._busy.wait(1.0):
                continue
            if stop.wait(delay):
                return
            delay = self.step()

    def wake(self) -> None:
        self._busy.set()

    def step(self) -> float:
        """One look at every running attempt; the seconds until the next look."""
        controls = list(self._controls.copy().values())
        if not controls:
            self._busy.clear()
            if self._controls:  # one was watched meanwhile: look again at the next tick
                self._busy.set()
            return TICK_S
        now = time.monotonic()
        for control in controls:
            if control.hard_at is not None and now >= control.hard_at and control.claim_abandon():
                self.forget(control)
                self._hard_limit(control)
            elif control.soft_at is not None and now >= control.soft_at:
                control.soft_limit_reached()
        asking = [c for c in controls if c.cancel_reason is None]
        if asking:
            return self._read_requests(asking)
        return TICK_S

    def _hard_limit(self, control: AttemptControl) -> None:
        try:
            self.on_hard_limit(control)
        except Exception:  # the watchdog outlives whatever one attempt's failure does
            log.exception("worker %s: could not fail job %s at its hard time limit", self.keys.queue_name,
                          control.job_id)

    def _read_requests(self, controls: list[AttemptControl]) -> float:
        try:
            self.reads += 1
            values = self.client.mget([self.keys.job_cancel(c.job_id) for c in controls])
        except CONNECTION_ERRORS as exc:
            self._backoff = self._backoff or Backoff(base=TICK_S, cap=2.0)
            delay = self._backoff.next_delay()
            log.warning("worker %s: could not read cancel requests (%s); trying again in %.2f s",
                        self.keys.queue_name, exc, delay)
            return delay
        except redis.ResponseError as exc:
            log.warning("worker %s: could not read cancel requests: %s", self.keys.queue_name, exc)
            return TICK_S
        self._backoff = None
        for control, value in zip(controls, values):
            if value is not None:
                control.cancel_requested(text(value))
        return TICK_S
