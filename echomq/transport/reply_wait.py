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
import socket
import time
from typing import Any

import redis

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

    def wait(self, conn: Any) -> bool:
        """Spin for the reply of the call just sent on ``conn``, unless spinning is paused; True
        when the reply began within the window."""
        if self._paused:
            self._paused -= 1
            return False
        if await_reply(conn, self.seconds):
            self._misses = 0
            return True
        self._misses += 1
        if self._misses >= MISSES_BEFORE_PAUSE:
            self._misses, self._paused = 0, PAUSED_CALLS
        return False


# -- the socket's timeout, kept by the caller ---------------------------------------------------
# CPython polls a socket that has a timeout before every send and every receive, and redis-py 8
# gives every socket one (5 s unless set): on this machine that cost a round trip 53 us instead
# of 32 us. A connection one thread keeps for its hot-path calls (transport.calls.
# PinnedConnection) therefore runs its socket without one, and waits for each reply itself with
# the connection's timeout (wait_for_reply): a server that does not start answering within it
# still fails the call with TimeoutError. Once a reply has begun it is read to its end without
# a timeout (redis-py < 8's default for every read); close() cuts such a read (interrupt()).
# Sends are one command at a time, far below the socket's buffer; one larger than LARGE_SEND
# goes out with the timeout restored. Not for TLS: decrypted data may wait inside the SSL
# object while the socket shows nothing to read.

#: A command this large is sent with the connection's own timeout.
LARGE_SEND = 64 * 1024


def untimed(conn: Any) -> bool:
    """Run ``conn``'s socket without a timeout (once per socket); False when it cannot be (no
    socket yet, TLS): then it keeps its own and the caller reads as usual."""
    sock = getattr(conn, "_sock", None)
    if sock.__class__ is not socket.socket:  # not connected, an SSL socket, fakeredis's
        return False
    if sock.gettimeout() is not None:
        sock.settimeout(None)
    return True


def timed(conn: Any) -> None:
    """Give ``conn``'s socket its own timeout back (before redis-py's own reads on it, a large
    send, or the connection's return to the pool)."""
    sock = getattr(conn, "_sock", None)
    timeout = getattr(conn, "socket_timeout", None)
    if sock.__class__ is socket.socket and timeout is not None and sock.gettimeout() is None:
        sock.settimeout(timeout)


def wait_for_reply(conn: Any) -> None:
    """Block until the untimed socket of ``conn`` has something to read, or raise TimeoutError
    after the connection's ``socket_timeout`` (None: wait as long as it takes)."""
    timeout = getattr(conn, "socket_timeout", None)
    if timeout is None:
        return
    try:
        readable = select.select((conn._sock,), (), (), timeout)[0]
    except (OSError, ValueError):  # shut by interrupt(), closed: the read reports it
        return
    if not readable:
        raise redis.TimeoutError("Timeout reading from socket")
