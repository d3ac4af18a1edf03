"""``echomq worker --processes N``: a parent that forks N worker processes and keeps them running.

The parent holds no thread, no Redis connection and no Worker: it forks, waits for signals and
for its children's deaths (SIGCHLD, taken with the other signals by a ``SenderAwareInbox``, which
knows who sent each), and decides. Each child makes every connection of its own after the fork (``child`` builds its
Workers there; a ``JobRegistry`` builds its client once per process), so no socket is shared.

* A child that dies (killed, crashed, or exited unasked) is replaced after an exponential
  backoff, ``RESTART_BASE_S`` doubling per death in a row up to ``RESTART_CAP_S``, with a log
  line; a child that had lived ``HEALTHY_S`` starts the count afresh.
* A child that ends with ``RECYCLE_STATUS`` (``--max-jobs-per-child``, ``--max-memory-per-child``)
  closed gracefully and is replaced at once.
* With ``--burst`` a child that ends with 0 found its queues idle; it is not replaced, and the
  parent exits 0 once every child has.
* The first SIGTERM or SIGINT (signals.py says which signal counts as what) asks every child
  to stop through its lifeline, a pipe of its own, never with a signal: each closes its Workers
  within ``--shutdown-timeout`` (a child still there ``STOP_MARGIN_S`` later is killed) and the
  parent exits 0 once they are gone. A signal to the whole process group reaches the children
  directly too, and the stop it asks for is the same one. A deliberate second signal, or
  SIGQUIT, kills them at once (exit 1): their running jobs stay active and the stalled check of
  any worker hands them out again. The children ignore SIGINT, so a terminal's Ctrl-C, sent to
  the whole process group, reaches them through the parent only.
* A child notices its parent's death (the lifeline's end-of-file, Linux's parent-death signal,
  its parent pid changing) and stops the same graceful way: no child outlives its supervisor by
  more than the time its running jobs take to finish, within ``--shutdown-timeout``; an idle
  one exits at once.
* A child that could not start (``BOOT_FAILED_STATUS``) would fail again: the parent stops them
  all and exits 1.
* A child reports, on a pipe of its own, when to kill it: the earliest hard time limit of its
  running jobs plus a margin (serving.py). Its own watchdog fails such a job at the limit and the
  child recycles itself; one that did not by then (its threads stuck, the GIL held by C code,
  the process frozen) is sent SIGTERM, SIGKILL ``KILL_GRACE_S`` later, and is replaced at once;
  its job goes back through the stalled check (docs/worker-command.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from .serving import BOOT_FAILED_STATUS, FORCED_STATUS, RECYCLE_STATUS
from .signals import FORCE_SIGNAL, Lifeline, Meaning, Received, SenderAwareInbox, StopRule, forced_by

log = logging.getLogger(__name__)

#: The first restart delay after a death, doubled for each further death in a row.
RESTART_BASE_S = 1.0
#: The longest restart delay.
RESTART_CAP_S = 30.0
#: A child that lived this long before dying was healthy: its slot's backoff starts again.
HEALTHY_S = 60.0
#: How long past ``--shutdown-timeout`` a stopping child may take before it is killed (a Worker's
#: close returns within about a second past its timeout, docs/worker.md).
STOP_MARGIN_S = 3.0
#: How long a child sent SIGTERM for a job past its hard time limit has before SIGKILL.
KILL_GRACE_S = 2.0

#: Runs in a forked child and returns its exit status (it must never return into the parent's code):
#: it is given the parent's inbox (to close, and the stops it recorded), its lifeline and its
#: place in the pool (1..N).
ChildMain = Callable[[SenderAwareInbox, Lifeline, int], int]


@dataclass
class _Slot:
    """One of the N places a child runs in: its deaths in a row and when it may start again."""

    index: int
    deaths: int = 0
    started_at: float = 0.0
    restart_at: float | None = None


def describe_status(code: int) -> str:
    """A child's ``os.waitstatus_to_exitcode`` for a log line."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Supervisor:
    """Forks ``processes`` children running ``child`` and keeps them running (see the module doc)."""

    def __init__(self, processes: int, child: ChildMain, *, shutdown_timeout: float, burst: bool) -> None:
        self.processes = processes
        self.child = child
        self.shutdown_timeout = shutdown_timeout
        self.burst = burst
        self.slots = [_Slot(index) for index in range(processes)]
        self.children: dict[int, _Slot] = {}
        self.lifelines: dict[int, int] = {}  # child pid -> the write end of its lifeline
        self.reports: dict[int, int] = {}  # child pid -> the read end of its reports (Lifeline.report)
        self.kill_at: dict[int, float] = {}  # child pid -> when its reports say to kill it
        self.sigkill_at: dict[int, float] = {}  # child pid sent SIGTERM for a time limit -> when SIGKILL
        self.inbox = SenderAwareInbox((signal.SIGTERM, signal.SIGINT, FORCE_SIGNAL, signal.SIGCHLD))
        self.rule = StopRule()
        self.stopping = False
        self.stop_kill_at: float | None = None
        self.status = 0

    def run(self) -> int:
        """Start the children and supervise them until they are all gone; the exit status."""
        self.inbox.install()
        try:
            for slot in self.slots:
                self._spawn(slot)
            while self.children or any(slot.restart_at is not None for slot in self.slots):
                self.inbox.wait(self._next_wake())
                for received in self.inbox.take():
                    if received.signum != signal.SIGCHLD:
                        self._on_stop_signal(received)
                self._read_reports()
                self._enforce_time_limits()
                self._reap()
                self._restart_due()
                if self.stop_kill_at is not None and time.monotonic() >= self.stop_kill_at and self.children:
                    log.warning("worker process(es) %s still running %s s after the stop; killing them",
                                ", ".join(map(str, self.children)), f"{self.shutdown_timeout + STOP_MARGIN_S:g}")
                    self._signal_children(signal.SIGKILL)
                    self.stop_kill_at = None
        finally:
            self.inbox.restore()
            for fd in (*self.lifelines.values(), *self.reports.values()):
                os.close(fd)
            self.lifelines.clear()
            self.reports.clear()
        return self.status

    def _next_wake(self) -> float:
        now = time.monotonic()
        due = [slot.restart_at for slot in self.slots if slot.restart_at is not None]
        due += [*self.kill_at.values(), *self.sigkill_at.values()]
        if self.stop_kill_at is not None:
            due.append(self.stop_kill_at)
        return min([1.0, *(max(0.0, when - now) for when in due)])

    def _spawn(self, slot: _Slot) -> None:
        slot.restart_at = None
        slot.started_at = time.monotonic()
        supervisor = os.getpid()
        read_end, write_end = os.pipe()
        report_read, report_write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): nothing of this attempt stays open
            for fd in (read_end, write_end, report_read, report_write):
                os.close(fd)
            raise
        if pid == 0:  # the child: run, then leave without ever returning into the parent's stack
            status = 1
            try:
                os.close(write_end)
                os.close(report_read)
                for other in (*self.lifelines.values(), *self.reports.values()):  # the other children's
                    os.close(other)
                status = self.child(self.inbox, Lifeline(read_end, supervisor, report_write), slot.index + 1)
            except BaseException:  # whatever ends the child is logged; its status says it died
                log.exception("worker process %d failed", os.getpid())
            finally:
                for handler in logging.getLogger().handlers:
                    handler.flush()
                os._exit(status)
        os.close(read_end)
        os.close(report_write)
        os.set_blocking(report_read, False)
        self.children[pid] = slot
        self.lifelines[pid] = write_end
        self.reports[pid] = report_read

    def _on_stop_signal(self, received: Received) -> None:
        meaning = self.rule.meaning(received)
        if meaning is Meaning.STOP and not self.stopping:
            self._begin_stop(f"{received.described()}: stopping {len(self.children)} worker process(es) within "
                             f"{self.shutdown_timeout:g} s")
            return
        if meaning is not Meaning.FORCE:  # the first during a stop under way, or the same one delivered twice
            log.info("%s: the stop is under way (a signal to the whole process group reaches every process; "
                     "`timeout` signals twice); a later one, or SIGQUIT, stops at once", received.described())
            return
        log.warning("%s: killing %d worker process(es) at once; their running jobs are left to the stalled check",
                    forced_by(received), len(self.children))
        self.stopping = True
        for slot in self.slots:
            slot.restart_at = None
        self._signal_children(signal.SIGKILL)
        self.stop_kill_at = None
        self.status = FORCED_STATUS

    def _begin_stop(self, message: str) -> None:
        log.info(message)
        self.stopping = True
        for slot in self.slots:
            slot.restart_at = None
        for pid, lifeline in self.lifelines.items():
            try:
                os.write(lifeline, Lifeline.STOP)
            except OSError as exc:  # it died meanwhile (EPIPE): the next reap collects it
                log.debug("worker process %d did not take the stop request: %s", pid, exc)
        self.stop_kill_at = time.monotonic() + self.shutdown_timeout + STOP_MARGIN_S

    def _signal_children(self, signum: int) -> None:
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):  # died meanwhile: the next reap collects it
                os.kill(pid, signum)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = self.children.pop(pid, None)
            for fd in (self.lifelines.pop(pid, None), self.reports.pop(pid, None)):
                if fd is not None:
                    os.close(fd)
            self.kill_at.pop(pid, None)
            killed = self.sigkill_at.pop(pid, None) is not None
            if slot is not None:
                if killed and not self.stopping:  # killed on purpose for a time limit: replaced at once
                    log.info("worker process %d %s; starting a new one", pid,
                             describe_status(os.waitstatus_to_exitcode(wait_status)))
                    self._spawn(slot)
                    continue
                self._child_ended(pid, slot, os.waitstatus_to_exitcode(wait_status))

    def _child_ended(self, pid: int, slot: _Slot, code: int) -> None:
        if self.stopping:
            log.debug("worker process %d %s", pid, describe_status(code))
        elif code == RECYCLE_STATUS:
            log.info("worker process %d was recycled; starting a new one", pid)
            self._spawn(slot)
        elif self.burst and code == 0:
            log.info("worker process %d finished: its queues are idle", pid)
        elif code == BOOT_FAILED_STATUS:
            self.status = 1
            self._begin_stop(f"worker process {pid} could not start; stopping the others")
        else:
            lived = time.monotonic() - slot.started_at
            slot.deaths = 1 if lived >= HEALTHY_S else slot.deaths + 1
            delay = min(RESTART_CAP_S, RESTART_BASE_S * 2 ** (slot.deaths - 1))
            log.warning("worker process %d %s after %.1f s; starting another in %.1f s", pid,
                        describe_status(code), lived, delay)
            slot.restart_at = time.monotonic() + delay

    def _read_reports(self) -> None:
        """The latest of each child's reports (Lifeline.report): when to kill it, or 0 for never."""
        for pid, fd in self.reports.items():
            try:
                data = os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            lines = data.split(b"\n")[:-1]  # writes of a few bytes to a pipe are atomic: whole lines
            if not lines:
                continue
            try:
                when = float(lines[-1])
            except ValueError:
                continue
            if when > 0:
                self.kill_at[pid] = when
            else:
                self.kill_at.pop(pid, None)

    def _enforce_time_limits(self) -> None:
        """SIGTERM a child past the kill time it reported, SIGKILL it ``KILL_GRACE_S`` later."""
        now = time.monotonic()
        for pid, when in list(self.kill_at.items()):
            if now >= when and pid not in self.sigkill_at:
                log.warning("worker process %d is still running a job past its hard time limit (it could not "
                            "fail the job itself): sending SIGTERM, SIGKILL in %g s", pid, KILL_GRACE_S)
                self.sigkill_at[pid] = now + KILL_GRACE_S
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        for pid, when in list(self.sigkill_at.items()):
            if now >= when:
                log.warning("worker process %d did not end after SIGTERM: SIGKILL", pid)
                self.sigkill_at[pid] = float("inf")  # killed: the reap replaces it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _restart_due(self) -> None:
        if self.stopping:
            return
        now = time.monotonic()
        for slot in self.slots:
            if slot.restart_at is not None and slot.restart_at <= now:
                self._spawn(slot)
