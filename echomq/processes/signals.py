"""How a worker process learns it must stop: signals, its supervisor's word, its supervisor's death.

**The inbox.** Signal handlers only record what came (no lock is ever taken inside one) and the
interpreter writes a byte to the inbox's wakeup socket (``signal.set_wakeup_fd``), so the main
thread sleeping in :meth:`SignalInbox.wait` wakes at once, with no polling. ``poke()`` wakes it
from any thread; other file descriptors (a :class:`Lifeline`) wake it too. A supervisor, which
runs no thread, takes its signals with ``sigtimedwait`` instead where the platform has it
(:class:`SenderAwareInbox`), and so learns who sent each one.

**One rule for what a stop signal means** (:class:`StopRule`), in every process of the command:

* SIGTERM or SIGINT: the first stops gracefully. The same signal again within
  ``REPEAT_WINDOW_S`` of the first, from the same sender, is the same stop delivered twice
  and changes nothing: a SIGTERM to the whole process group (systemd's default
  ``KillMode=control-group``, ``kill -TERM -PGID``) reaches a supervisor and each of its
  processes, ``timeout`` signals its command and then the command's group. Where the sender is
  unknown (a signal handler cannot tell), a SIGTERM in the window is taken for that; a SIGINT
  is not, being a terminal's Ctrl-C more often than not. Where it is known, a signal from a
  terminal (the kernel sends it) or from another process than the first is never a repeat.
* Any later SIGTERM or SIGINT is an operator's deliberate second: stop at once.
* SIGQUIT stops at once, first or not (an operator's explicit "now", as for gunicorn and Celery).

**The supervisor's word and death** (:class:`Lifeline`). A supervisor asks its processes to stop
through a pipe of each one's own, never with a signal, so that a stop it passes on never counts
as a second one; the same pipe reads end-of-file the moment the supervisor is gone (killed with
SIGKILL, crashed), whatever the platform. On Linux the kernel also sends ``PARENT_DEATH_SIGNAL``
then (``prctl(PR_SET_PDEATHSIG)``), and each process compares its parent with its supervisor
as it watches: three ways, one outcome, a graceful stop.

This is host code, called only from a command's main thread (``echomq worker``, ``manage.py
echomq_worker``, ``flask echomq worker``): the library's own API never installs a handler.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

#: How soon after the first stop signal the same one again, from the same sender, is taken for
#: the same stop delivered twice (a group signal and its relay arrive microseconds apart).
REPEAT_WINDOW_S = 1.0

#: The signals that stop gracefully (the first of them) or at once (a deliberate second).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: Stops at once, always.
FORCE_SIGNAL = signal.SIGQUIT

#: What the kernel sends a supervisor's process when the supervisor dies (Linux): only a wake-up,
#: the process then finds its parent gone. SIGHUP, "the one you hang on hung up", whose default
#: would end the process abruptly.
PARENT_DEATH_SIGNAL = signal.SIGHUP

#: ``si_code`` values of ``sigtimedwait``'s answer: sent by a process (kill, tkill, sigqueue), or by
#: the kernel (a terminal's Ctrl-C, a hangup).
_SI_FROM_PROCESS = (0, -1, -6)  # SI_USER, SI_QUEUE, SI_TKILL
_SI_KERNEL = 0x80

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Received:
    """One signal as it came: when (monotonic), and who sent it where the kernel says."""

    signum: int
    at: float
    sender: int | None = None  # the sending process's pid; None: unknown, or the kernel
    from_kernel: bool = False  # a terminal's Ctrl-C, a hangup: never sent twice by mistake

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    def described(self) -> str:
        if self.from_kernel:
            return f"{self.name} from the terminal"
        return f"{self.name} from pid {self.sender}" if self.sender else self.name


class Meaning(Enum):
    STOP = "stop"        # begin the graceful stop (nothing new when it is under way)
    REPEAT = "repeat"    # the first stop signal delivered twice: nothing new
    FORCE = "force"      # stop at once
    OTHER = "other"      # not a stop signal (SIGCHLD, PARENT_DEATH_SIGNAL): the caller looks


class StopRule:
    """What each signal means, by the rule of the module doc; one per process."""

    def __init__(self) -> None:
        self.first: Received | None = None

    def meaning(self, received: Received) -> Meaning:
        if received.signum == FORCE_SIGNAL:
            return Meaning.FORCE
        if received.signum not in STOP_SIGNALS:
            return Meaning.OTHER
        first = self.first
        if first is None:
            self.first = received
            return Meaning.STOP
        return Meaning.REPEAT if self._repeats(first, received) else Meaning.FORCE

    @staticmethod
    def _repeats(first: Received, again: Received) -> bool:
        if again.signum != first.signum or again.at - first.at > REPEAT_WINDOW_S or again.from_kernel:
            return False
        if again.sender is not None and first.sender is not None:
            return again.sender == first.sender
        return again.signum == signal.SIGTERM  # unknown senders: a SIGINT is a terminal's, deliberate


def forced_by(received: Received) -> str:
    """What forced a stop, for its log line."""
    if received.signum == FORCE_SIGNAL:
        return received.described()
    return f"a second stop signal ({received.described()})"


class SignalInbox:
    """Signals recorded by their handlers, and a socket that wakes ``wait()`` when one comes (see
    the module doc). Install and restore from the main thread only (signal handlers live there)."""

    def __init__(self, handled: Iterable[int], ignored: Iterable[int] = ()) -> None:
        self.handled = tuple(handled)
        self.ignored = tuple(ignored)
        self._received: list[Received] = []
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)
        self._watched: list[int] = []
        self._previous: dict[int, Any] = {}
        self._previous_fd: int | None = None

    def _record(self, signum: int, _frame: object) -> None:
        self._received.append(Received(signum, time.monotonic()))

    def install(self) -> SignalInbox:
        for signum in (*self.handled, *self.ignored):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._record if signum in self.handled else signal.SIG_IGN)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        return self

    def take(self) -> list[Received]:
        """The signals received since the last call, oldest first."""
        received, self._received = self._received, []
        return received

    def give(self, received: Iterable[Received]) -> None:
        """Count ``received`` as come here (a forked child keeps what reached it before its own
        handlers were in place)."""
        self._received.extend(r for r in received if r.signum in self.handled)

    def watch(self, fd: int) -> None:
        """Wake ``wait()`` also when ``fd`` is readable (its owner reads it, and unwatches it at
        end-of-file)."""
        self._watched.append(fd)

    def unwatch(self, fd: int) -> None:
        with contextlib.suppress(ValueError):
            self._watched.remove(fd)

    def wait(self, timeout: float) -> None:
        """Sleep until a signal, a ``poke``, a watched descriptor or ``timeout`` seconds."""
        if self._received:
            return
        try:
            watched: list[Any] = [self._reader, *self._watched]
            readable, _, _ = select.select(watched, [], [], max(0.0, timeout))
        except OSError:  # a watched descriptor closed under us: its owner notices when it reads
            return
        if self._reader in readable:
            try:
                while self._reader.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError):
                pass

    def poke(self) -> None:
        with contextlib.suppress(OSError):  # a full buffer already holds a wake-up; a closed one has no waiter
            self._writer.send(b"\0")

    def restore(self) -> None:
        """Put back the handlers and wakeup fd found at ``install`` and close the sockets."""
        if self._previous_fd is not None:
            signal.set_wakeup_fd(self._previous_fd)
            self._previous_fd = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        self.close()

    def close(self) -> None:
        """Close the sockets (a forked child closes its copy of its supervisor's inbox this way)."""
        self._reader.close()
        self._writer.close()


class SenderAwareInbox(SignalInbox):
    """A supervisor's inbox: where the platform has ``sigtimedwait`` the handled signals are
    blocked and taken synchronously, each with its sender (``si_pid``) and whether the kernel
    sent it (``si_code``); elsewhere, and for a signal delivered to a thread that does not block
    them, the handlers record it as the plain inbox does. For a process that runs no thread and
    needs no ``poke`` (a supervisor): a forked child calls ``release_mask()`` before anything else."""

    def __init__(self, handled: Iterable[int], ignored: Iterable[int] = ()) -> None:
        super().__init__(handled, ignored)
        self.synchronous = hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")
        self._mask: Any = None  # the mask before install, to put back

    def install(self) -> SenderAwareInbox:
        super().install()
        if self.synchronous:
            self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, self.handled)
        return self

    def wait(self, timeout: float) -> None:
        if not self.synchronous:
            super().wait(timeout)
            return
        if self._received:
            return
        info = signal.sigtimedwait(self.handled, max(0.0, timeout))
        while info is not None:
            code = info.si_code
            sender = info.si_pid if code in _SI_FROM_PROCESS and info.si_pid > 0 else None
            self._received.append(Received(info.si_signo, time.monotonic(), sender, code == _SI_KERNEL))
            info = signal.sigtimedwait(self.handled, 0)

    def release_mask(self) -> None:
        """Unblock the signals again (in a forked child, whose handlers then take them)."""
        if self._mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
            self._mask = None

    def restore(self) -> None:
        self.release_mask()
        super().restore()


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel for ``signum`` when this process's parent dies (Linux ``prctl``); False
    where there is no such thing (then the parent check and the lifeline do it alone)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class Lifeline:
    """A worker process's end of the pipe its supervisor holds the other end of: a byte asks it
    to stop, end-of-file says the supervisor is gone. ``parent`` is the supervisor's pid,
    compared with the process's parent at each look (a parent that changed is gone too)."""

    STOP = b"s"

    def __init__(self, fd: int, parent: int, report_fd: int | None = None) -> None:
        self.fd: int | None = fd
        self.parent = parent
        os.set_blocking(fd, False)
        #: The write end of the pipe the worker process tells its supervisor on (``report``).
        self.report_fd = report_fd
        self._reported: float | None = None
        if report_fd is not None:
            os.set_blocking(report_fd, False)

    def report(self, kill_at: float | None) -> None:
        """Tell the supervisor when to kill this process (``time.monotonic()``, the same clock
        in every process of the machine) unless it reports again: the hard time limit of its
        earliest running job plus a margin (supervisor.py). Sent only when it changed; a full
        pipe (a supervisor that stopped reading) drops it."""
        if self.report_fd is None or kill_at == self._reported:
            return
        self._reported = kill_at
        with contextlib.suppress(OSError):  # BlockingIOError, or a supervisor gone (EPIPE)
            os.write(self.report_fd, b"%.3f\n" % (kill_at or 0.0))

    def look(self, inbox: SignalInbox) -> str | None:
        """Why to stop now, if the supervisor said so or is gone; None while all is well."""
        if os.getppid() != self.parent:
            self.close(inbox)
            return f"its supervisor (pid {self.parent}) is gone"
        if self.fd is None:
            return None
        try:
            data = os.read(self.fd, 64)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if data:
            return "its supervisor asked it to stop"
        self.close(inbox)
        return f"its supervisor (pid {self.parent}) is gone"

    def close(self, inbox: SignalInbox) -> None:
        if self.fd is not None:
            inbox.unwatch(self.fd)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        if self.report_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.report_fd)
            self.report_fd = None
