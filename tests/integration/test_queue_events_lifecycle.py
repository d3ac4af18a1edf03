"""QueueEvents' lifecycle at its edges: a start() that fails, a forked child, settings refused at
construction. Each runs on a real redis-server and on fakeredis."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis

from echomq import Handler, QueueEvents
from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys

from support.queue_keys import SCAN_COUNT
from support.workers import wait_until


@dataclass
class Switchable:
    """A Redis the test can take away and bring back: a connection for the component, one for the
    test itself, and the two switches."""

    connection: redis.Redis
    admin: redis.Redis
    go_away: Callable[[], None]
    come_back: Callable[[], None]


@pytest.fixture(params=["real", "fake"])
def switchable(request: pytest.FixtureRequest) -> Iterator[Switchable]:
    if request.param == "real":
        server = request.getfixturevalue("redis_server_factory")(persistent=False)

        def come_back() -> None:
            server.start()  # the same port: the component's client finds it again

        conn = redis.Redis(port=server.port)
        admin = redis.Redis(port=server.port)
        yield Switchable(conn, admin, server.stop, come_back)
    else:
        fake = fakeredis.FakeServer()
        conn = fakeredis.FakeRedis(server=fake)
        admin = fakeredis.FakeRedis(server=fake)

        def go_away() -> None:
            fake.connected = False

        def come_back() -> None:
            fake.connected = True

        yield Switchable(conn, admin, go_away, come_back)
    conn.close()
    admin.close()


def closes_within(qe: QueueEvents, seconds: float) -> bool:
    """close() in a helper thread: True if it returned in time (a hung close must not hang the test)."""
    closer = threading.Thread(target=qe.close, kwargs={"timeout": 1.0}, daemon=True)
    closer.start()
    closer.join(seconds)
    return not closer.is_alive()


def test_a_start_against_an_unreachable_redis_fails_and_can_be_retried(switchable: Switchable) -> None:
    qe = QueueEvents(switchable.connection, "lifecycle", block_ms=1000)
    got: list[dict[str, Any]] = []
    qe.subscribe(lambda t, d: got.append(d))
    switchable.go_away()
    with pytest.raises(redis.ConnectionError):
        qe.start()
    assert not qe.running
    # The failed start left nothing behind: a second start works once Redis is back.
    switchable.come_back()
    qe.start()
    try:
        assert qe.running and qe.last_event_id is not None  # "$" resolved before start() returned
        entry = switchable.admin.xadd(QueueKeys("lifecycle").events, {"event": "drained"}).decode()
        assert wait_until(lambda: [d["event_id"] for d in got] == [entry], timeout=5)
    finally:
        qe.close(timeout=2)
    assert not qe.running


def test_a_failed_start_leaves_nothing_running_to_close(switchable: Switchable) -> None:
    qe = QueueEvents(switchable.connection, "lifecycle", block_ms=1000)
    switchable.go_away()
    with pytest.raises(redis.ConnectionError):
        qe.start()
    started = time.monotonic()
    assert closes_within(qe, 2.0)
    assert time.monotonic() - started < 0.5, "close() after a failed start() must return at once"
    assert not qe.running
    assert not [t for t in threading.enumerate() if t.name == "echomq-events-lifecycle"]


def test_a_start_that_redis_refuses_fails_and_can_be_retried(redis_server_factory: Any) -> None:
    """An ACL that refuses the reader's first command: the start fails with Redis's refusal,
    close() returns at once, and once the ACL allows it the same object starts."""
    server = redis_server_factory(persistent=False)
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "&*", "+@all", "-client|id")
    qe = QueueEvents(f"redis://reader:pw@127.0.0.1:{server.port}", "lifecycle", block_ms=1000)
    with pytest.raises(redis.ResponseError, match=r"(?i)permission"):
        qe.start()
    assert not qe.running
    started = time.monotonic()
    assert closes_within(qe, 2.0), "close() after a refused start() hung"
    assert time.monotonic() - started < 0.5
    # close() ended this object for good (documented: after close(), start() raises); a new one
    # on the same settings works once the ACL allows it, and so does retrying without close().
    qe = QueueEvents(f"redis://reader:pw@127.0.0.1:{server.port}", "lifecycle", block_ms=1000)
    with pytest.raises(redis.ResponseError):
        qe.start()
    admin.execute_command("ACL", "SETUSER", "reader", "+client|id")
    qe.start()
    try:
        assert qe.running
    finally:
        qe.close(timeout=2)
    admin.close()


def test_a_forked_child_does_not_see_the_parents_reader_running(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=1000).start()
    try:
        assert qe.running
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            os.write(write, b"running" if qe.running else b"stopped")
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            seen = pipe.read()
        os.waitpid(pid, 0)
        assert seen == b"stopped"
        assert qe.running  # the parent's reader is untouched
    finally:
        qe.close(timeout=2)


class NotCallableHandler(Handler):
    handle_event = "not a method"  # type: ignore[assignment]


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"last_event_id": ">"}, "last_event_id"),  # consumer groups only; QueueEvents reads without one
        ({"last_event_id": "1\n"}, "last_event_id"),  # "$" in a regex would let the newline through
        ({"last_event_id": "\u0661\u0662"}, "last_event_id"),  # Arabic-Indic digits are \d, not Redis digits
        ({"last_event_id": "18446744073709551616"}, "last_event_id"),  # ms past 2**64 - 1
        ({"last_event_id": "1-18446744073709551616"}, "last_event_id"),  # seq past 2**64 - 1
        ({"last_event_id": "1-"}, "last_event_id"),
        ({"last_event_id": 0}, "last_event_id"),
        ({"last_event_id": None}, "last_event_id"),
        ({"block_ms": math.nan}, "block_ms"),
        ({"block_ms": -1}, "block_ms"),
        ({"block_ms": True}, "block_ms"),
        ({"block_ms": "5000"}, "block_ms"),
        ({"block_ms": 10**20}, "block_ms"),  # no socket timeout can hold it
        ({"count": True}, "count"),
        ({"count": 2.0}, "count"),
        ({"count": 2**63}, "count"),  # Redis refuses a COUNT past a signed 64-bit int
        ({"handler": NotCallableHandler()}, "handler"),
        ({"prefix": "a{b"}, "prefix"),
        ({"prefix": 7}, "prefix"),
    ],
)
def test_each_bad_setting_is_refused_by_name_and_writes_nothing(connection: redis.Redis, queue_name: str,
                                                                kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError, match=field):
        QueueEvents(connection, queue_name, **kwargs)
    assert not list(connection.scan_iter(match=f"*{queue_name}*", count=SCAN_COUNT))


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://127.0.0.1:notaport", "redis://127.0.0.1:99999"])
def test_a_bad_connection_url_is_refused_by_name(url: str) -> None:
    with pytest.raises(InvalidInputError, match="connection"):
        QueueEvents(url, "lifecycle")


@pytest.mark.parametrize("last_event_id", ["$", "0", "0-0", "1700000000000", "1700000000000-5",
                                           "18446744073709551615-18446744073709551615"])
def test_every_documented_start_id_is_accepted(connection: redis.Redis, queue_name: str,
                                               last_event_id: str) -> None:
    qe = QueueEvents(connection, queue_name, last_event_id=last_event_id, block_ms=50)
    try:
        assert qe.run_once() == 0  # Redis takes it too
    finally:
        qe.close()
