"""QueueEvents under faults, on redis-servers the tests own: restarts, kills, trimming."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis

from echomq import GapNotice, QueueEvents
from echomq.protocol.keys import QueueKeys

from support.stream_servers import EventLog
from support.workers import wait_until

pytestmark = pytest.mark.real_only

KEY = QueueKeys("faults").events


def write(client: redis.Redis, first: int, n: int) -> list[str]:
    return [client.xadd(KEY, {"event": "waiting", "jobId": str(i)}).decode() for i in range(first, first + n)]


def test_restart_under_a_running_reader_loses_nothing_and_repeats_nothing(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=True)
    producer = redis.Redis.from_url(server.url)
    collector = EventLog()
    qe = QueueEvents(server.url, "faults", block_ms=1000)
    qe.subscribe(collector)
    qe.start()
    try:
        written = write(producer, 0, 50)
        collector.wait_for_count(50)
        for round_no in range(2):
            server.kill()  # SIGKILL mid-BLOCK; AOF with fsync always keeps every entry
            time.sleep(0.2)
            server.start()
            # Written while the reader is still backing off: it must resume from its cursor, not "$".
            producer = redis.Redis.from_url(server.url)
            written += write(producer, 50 + 50 * round_no, 50)
            collector.wait_for_count(len(written))
        time.sleep(0.3)  # anything duplicated would have arrived by now
    finally:
        qe.close()
    assert collector.ids() == written
    assert not any(isinstance(t, GapNotice) for t, _ in collector.items)


def test_killing_the_readers_connection_resumes_without_loss(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=False)
    admin = redis.Redis.from_url(server.url)
    collector = EventLog()
    qe = QueueEvents(server.url, "faults", block_ms=1000)
    qe.subscribe(collector)
    qe.start()
    try:
        written = write(admin, 0, 10)
        collector.wait_for_count(10)
        old_id = qe._blocking.client_id
        admin.client_kill_filter(_id=old_id)
        written += write(admin, 10, 10)
        collector.wait_for_count(20)
        assert qe._blocking.client_id != old_id
    finally:
        qe.close()
    assert collector.ids() == written


@pytest.mark.min_redis(7, 0, reason="gap detection reads XINFO STREAM entries-added")
def test_a_reader_that_falls_behind_a_trim_gets_a_gap_notice(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=False)
    producer = redis.Redis.from_url(server.url)
    release = threading.Event()
    collector = EventLog()

    def slow(event_type: Any, data: dict[str, Any]) -> None:
        release.wait(10)  # the first delivery holds the reader while producers trim past it

    qe = QueueEvents(server.url, "faults", block_ms=1000, count=10)
    qe.subscribe(slow)
    qe.subscribe(collector)
    qe.start()
    try:
        ids = [producer.xadd(KEY, {"event": "waiting", "jobId": str(i)}, maxlen=100, approximate=False).decode()
               for i in range(1000)]
        release.set()
        collector.wait_for_count(1)
        deadline = time.monotonic() + 10
        while (not collector.ids() or collector.ids()[-1] != ids[-1]) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        qe.close()
    gaps = [t for t, _ in collector.items if isinstance(t, GapNotice)]
    assert len(gaps) == 1
    delivered_before = collector.items.index((gaps[0], gaps[0].as_dict()))
    gap = gaps[0]
    assert gap.from_id == ids[delivered_before - 1] and gap.to_id == ids[900]
    assert gap.approx_lost == 900 - delivered_before
    assert collector.ids() == ids[:delivered_before] + ids[900:]


def test_dollar_without_xinfo_permission_still_starts_at_the_tail(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=False)
    admin = redis.Redis.from_url(server.url)
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@all", "-xinfo")
    before = write(admin, 0, 3)
    collector = EventLog()
    qe = QueueEvents(f"redis://reader:pw@127.0.0.1:{server.port}", "faults", block_ms=1000)
    qe.subscribe(collector)
    with qe:
        assert qe.last_event_id == before[-1]
        after = write(admin, 3, 2)
        collector.wait_for_count(2)
    assert collector.ids() == after


@pytest.mark.parametrize("kind", ["client", "url"])
def test_close_is_bounded_when_redis_hangs_mid_read(redis_server_factory: Any, kind: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """SIGSTOP: the server still accepts connections but answers nothing, as in a partition
    without reset. close(timeout) returns within its bound, and the reader is gone."""
    server = redis_server_factory(persistent=False)
    # A client built by the host (redis-py's default retry policy) or a URL the reader owns.
    connection: Any = redis.Redis(port=server.port) if kind == "client" else server.url
    qe = QueueEvents(connection, "faults", block_ms=5000).start()
    time.sleep(0.3)  # into XREAD BLOCK 5000
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        with caplog.at_level(logging.DEBUG, logger="echomq"):
            started = time.monotonic()
            qe.close(timeout=2)
            took = time.monotonic() - started
        assert took < 2.5, f"close(timeout=2) took {took:.2f} s"
        assert not qe.running  # the reader's socket was shut: the reader ended, nothing left behind
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    server.stop()


def test_close_is_bounded_and_logs_a_reader_stuck_reconnecting(redis_server_factory: Any,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """The reader lost its connection and reconnects to a server that hangs: nothing can cut a
    connect short, so close(timeout) returns at its bound and says what it left behind; the
    reader ends (and closes its connections) as soon as Redis answers again."""
    server = redis_server_factory(persistent=False)
    admin = redis.Redis(port=server.port)
    qe = QueueEvents(redis.Redis(port=server.port), "faults", block_ms=1000).start()
    assert server.process is not None
    try:
        time.sleep(0.2)
        assert qe._blocking is not None and qe._blocking.client_id is not None
        admin.client_kill_filter(_id=qe._blocking.client_id)
        os.kill(server.process.pid, signal.SIGSTOP)  # before the reader's reconnect (it backs off first)
        time.sleep(0.3)  # past the backoff: the reader is connecting, and Redis does not answer
        with caplog.at_level(logging.WARNING, logger="echomq"):
            started = time.monotonic()
            qe.close(timeout=1)
            took = time.monotonic() - started
        assert took < 1.5, f"close(timeout=1) took {took:.2f} s"
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("did not stop" in m for m in warnings), warnings
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert wait_until(lambda: not qe.running, timeout=15)
    assert wait_until(lambda: not [c for c in admin.client_list() if c["name"].endswith(":qe")], timeout=5)
    admin.close()
