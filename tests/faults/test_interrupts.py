"""Cutting a blocked read short, on a server the test starts: ``close()`` of a Worker waiting on
its marker and of a QueueEvents in XREAD BLOCK returns in milliseconds, with CLIENT UNBLOCK and
for a user whose ACL refuses it (the socket is shut instead), and leaves no warning behind."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from echomq import QueueEvents, Worker

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
