"""The concurrency-1 reply spin (transport/reply_wait.py) on real sockets: it catches a reply
that is there, gives up after a run of late ones, and tries again later."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from echomq.transport.reply_wait import MISSES_BEFORE_PAUSE, PAUSED_CALLS, ReplySpin, await_reply

WINDOW_S = 0.002


@pytest.fixture()
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, server = socket.socketpair()
    yield ours, server
    ours.close()
    server.close()


def _timed_wait(spin: ReplySpin, conn: object) -> float:
    started = time.perf_counter()
    spin.wait(conn)
    return time.perf_counter() - started


def test_a_reply_that_is_there_ends_the_spin_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, server = pair
    server.sendall(b"+OK\r\n")
    assert await_reply(SimpleNamespace(_sock=ours), 1.0) is True  # returns without waiting the second
    assert await_reply(SimpleNamespace(_sock=None), 1.0) is False  # no socket: nothing to spin on


def test_late_replies_pause_the_spin_then_it_is_tried_again(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    conn = SimpleNamespace(_sock=ours)  # nothing ever arrives: every spin misses
    spin = ReplySpin(WINDOW_S)
    for _ in range(MISSES_BEFORE_PAUSE):
        assert _timed_wait(spin, conn) >= WINDOW_S  # each miss spins its whole window
    paused = [_timed_wait(spin, conn) for _ in range(PAUSED_CALLS)]
    assert max(paused) < WINDOW_S / 2  # given up: no window is spent
    assert _timed_wait(spin, conn) >= WINDOW_S  # and tried again afterwards


def test_a_caught_reply_resets_the_run_of_misses(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, server = pair
    conn = SimpleNamespace(_sock=ours)
    spin = ReplySpin(WINDOW_S)
    for _ in range(MISSES_BEFORE_PAUSE - 1):
        spin.wait(conn)
    server.sendall(b"+OK\r\n")
    spin.wait(conn)  # caught
    ours.recv(16)
    for _ in range(MISSES_BEFORE_PAUSE - 1):
        spin.wait(conn)
    assert _timed_wait(spin, conn) >= WINDOW_S  # still spinning: the misses started over
