"""Cutting a blocked read short, on a server the test starts: ``close()`` of a Worker waiting on
its marker and of a QueueEvents in XREAD BLOCK returns in milliseconds, with CLIENT UNBLOCK and
for a user whose ACL refuses it (the socket is shut instead), and leaves no warning behind."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis

from echomq import QueueEvents, Worker
from echomq.transport.blocking import BlockingConnection
from echomq.transport.connection import Connections

from support.workers import wait_until

BLOCK_S = 5.0


def restricted_url(server: Any, *rules: str) -> str:
    admin = redis.Redis.from_url(server.url)
    admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", *rules)
    admin.close()
    return f"redis://app:pw@127.0.0.1:{server.port}/0"


def unblocks_refused(server: Any) -> int:
    """How many CLIENT UNBLOCKs the server's ACL turned down (so the socket was shut instead)."""
    admin = redis.Redis.from_url(server.url)
    try:
        log = admin.execute_command("ACL", "LOG")
    finally:
        admin.close()
    text = repr(log).lower()
    return text.count("client|unblock")


def blocked(kind: str, url: str) -> Any:
    """A Worker waiting on its marker, or a QueueEvents in XREAD BLOCK, for up to BLOCK_S."""
    if kind == "worker":
        component: Any = Worker(url, "interrupts", lambda job: None, drain_delay=BLOCK_S).start()
        assert wait_until(lambda: component.running)
    else:
        component = QueueEvents(url, "interrupts", block_ms=int(BLOCK_S * 1000)).start()
    time.sleep(0.3)  # into the blocking read
    return component


@pytest.mark.real_only
@pytest.mark.parametrize("kind", ["worker", "reader"])
@pytest.mark.parametrize("rules", [(), ("-client|unblock",)], ids=["unblock", "unblock-refused"])
def test_close_cuts_a_blocked_read_short(redis_server_factory: Any, kind: str, rules: tuple[str, ...],
                                         caplog: pytest.LogCaptureFixture) -> None:
    server = redis_server_factory(persistent=False)
    component = blocked(kind, restricted_url(server, *rules))
    with caplog.at_level(logging.WARNING, logger="echomq"):
        started = time.monotonic()
        component.close(timeout=2)
        took = time.monotonic() - started
    assert not component.running
    assert took < 1.0, f"close() took {took:.2f} s"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert (unblocks_refused(server) > 0) == bool(rules)


@pytest.mark.real_only
@pytest.mark.parametrize("kind", ["client", "url"])
def test_interrupt_is_bounded_when_redis_hangs(redis_server_factory: Any, kind: str) -> None:
    """The transport's own bound, whoever blocks (a Worker's marker wait, a reader's XREAD): with
    the server SIGSTOPped, CLIENT UNBLOCK cannot be answered; interrupt() gives up on it quickly
    (once, not per retry of the host's retry policy), shuts the reader's socket instead, and
    later calls do not wait again."""
    server = redis_server_factory(persistent=False)
    connections = Connections(redis.Redis(port=server.port) if kind == "client" else server.url)
    blocking = BlockingConnection(connections, max_block_s=BLOCK_S, client_name="interrupts:test")
    conn = blocking.connect()
    outcome: list[BaseException | object] = []

    def read() -> None:
        conn.send_command("BZPOPMIN", "interrupts:marker", BLOCK_S)
        try:
            outcome.append(conn.read_response())
        except Exception as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert blocking.interrupt() is True
        took = time.monotonic() - started
        reader.join(1.0)
        assert not reader.is_alive(), "the blocked read was not cut"
        assert isinstance(outcome[0], (redis.RedisError, OSError))  # cut: an error, not a reply
        assert took < 1.5, f"interrupt() took {took:.2f} s"
        started = time.monotonic()
        blocking.interrupt()
        blocking.close()
        connections.close()
        assert time.monotonic() - started < 0.2
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
