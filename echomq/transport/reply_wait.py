"""Spinning briefly for a reply before sleeping on the socket: the concurrency-1 worker's lever.

A thread that blocks in ``recv`` right after sending is put to sleep, and waking it when the
reply lands costs the kernel a cross-core wake-up: on an idle 2-core machine one PING round trip
took 56-61 us that way and 23 us when the client polled the socket instead (docs/worker.md,
"Throughput"). At concurrency 1 a job is one such round trip (finish this job and fetch the
next), so the worker's single processing thread polls for up to a few tens of microseconds,
then falls back to the blocking read. The CPU this burns is bounded by the spin per call; it is
off above concurrency 1, where threads would spin against each other for the interpreter.
"""

from __future__ import annotations

import select
import time
from typing import Any


def await_reply(conn: Any, seconds: float) -> None:
    """Poll ``conn``'s socket until it is readable or ``seconds`` have passed; the caller then
    reads as usual (at once if the reply came, blocking otherwise). Never reads, never raises
    for the socket: a closed or odd socket just ends the spin."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return
    deadline = time.perf_counter() + seconds
    try:
        while not select.select((sock,), (), (), 0)[0]:
            if time.perf_counter() >= deadline:
                return
    except (OSError, ValueError):  # shut by interrupt(), closed: the read reports it
        return
