"""Spinning briefly for a reply before sleeping on the socket: the concurrency-1 worker's lever.

A thread that blocks in ``recv`` right after sending is put to sleep, and waking it when the
reply lands costs the kernel a cross-core wake-up: on an idle 2-core machine one PING round trip
took 56-61 us that way and 23 us when the client polled the socket instead (docs/worker.md,
"Throughput"). At concurrency 1 a job is one such round trip (finish this job and fetch the
next), so the worker's single processing thread polls for up to a few hundred microseconds,
then falls back to the blocking read. It is off above concurrency 1, where threads would spin
against each other for the interpreter.

Spinning pays only when replies come within the window: a Redis across a network, or one busy
with slow scripts, answers later, and every spin would burn its whole window for nothing.
:class:`ReplySpin` gives up after a run of misses and tries again some calls later, so such a
server costs a few wasted windows per thousand calls.
"""

from __future__ import annotations

import select
import time
from typing import Any

#: Replies in a row that came after the window before spinning is given up ...
MISSES_BEFORE_PAUSE = 8
#: ... for this many calls, after which it is tried again.
PAUSED_CALLS = 1000


def await_reply(conn: Any, seconds: float) -> bool:
    """Poll ``conn``'s socket until it is readable or ``seconds`` have passed; True when it
    became readable. The caller then reads as usual (at once if the reply came, blocking
    otherwise). Never reads, never raises for the socket: a closed or odd socket ends the spin."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False
    deadline = time.perf_counter() + seconds
    try:
        while not select.select((sock,), (), (), 0)[0]:
            if time.perf_counter() >= deadline:
                return False
    except (OSError, ValueError):  # shut by interrupt(), closed: the read reports it
        return False
    return True


class ReplySpin:
    """One thread's spinning for the replies of its calls on one connection (not thread-safe:
    each processing thread keeps its own)."""

    __slots__ = ("_misses", "_paused", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._misses = 0
        self._paused = 0  # calls left without spinning

    def wait(self, conn: Any) -> None:
        """Spin for the reply of the call just sent on ``conn``, unless spinning is paused."""
        if self._paused:
            self._paused -= 1
            return
        if await_reply(conn, self.seconds):
            self._misses = 0
            return
        self._misses += 1
        if self._misses >= MISSES_BEFORE_PAUSE:
            self._misses, self._paused = 0, PAUSED_CALLS
