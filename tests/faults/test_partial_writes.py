"""A Redis that refuses part-way, on private servers: out of memory (``maxmemory`` with
``noeviction``), a connection lost between two windows of a bulk, a script killed. A flow is
written whole or not at all; a bulk tells which of its jobs were written (issue 24).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.connection import Connection, ConnectionPool

from echomq import Queue
from echomq.errors import BulkInterruptedError, BulkWriteError
from echomq.transport.stream_calls import WINDOW

from support.snapshot import queue_snapshot

pytestmark = [pytest.mark.real_only]

PAYLOAD = {"text": "x" * 1000}


@pytest.fixture
def server(redis_server_factory: Any) -> Any:
    return redis_server_factory(persistent=False)


@pytest.fixture
def client(server: Any) -> Iterator[redis.Redis]:
    conn = redis.Redis.from_url(server.url)
    yield conn
    conn.close()


def limit_memory(client: redis.Redis, room: int) -> None:
    """``maxmemory`` at what the server uses now plus ``room`` bytes, refusing writes past it."""
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + room)


def fill_until_refused(client: redis.Redis) -> None:
    for n in range(10_000):
        try:
            client.set(f"filler:{n}", "f" * 50_000)
        except redis.exceptions.OutOfMemoryError:
            return
    raise AssertionError("the server never ran out of memory")


def test_out_of_memory_refuses_an_add_a_flow_and_a_bulk_writing_nothing(client: redis.Redis) -> None:
    queue = Queue(client, "oom")
    queue.add_flow({"name": "p", "opts": {"job_id": "p"}}, [{"name": "c", "opts": {"job_id": "c"}}])
    limit_memory(client, 2_000_000)
    fill_until_refused(client)
    before = queue_snapshot(client, "oom")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        queue.add("one", PAYLOAD)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        queue.add_flow({"name": "p2"}, [{"name": "c1"}, {"name": "c2", "opts": {"delay": 10}},
                                        {"name": "c3", "children": [{"name": "c4", "opts": {"priority": 1}}]}])
    with pytest.raises(redis.exceptions.OutOfMemoryError):  # refused whole: the refusal itself, not a partial
        queue.add_bulk([("b", PAYLOAD)] * 500)
    with pytest.raises(redis.exceptions.OutOfMemoryError):  # a child of an existing job: checked, then refused
        queue.add("late child", parent={"id": "p", "queue": queue.keys.base})
    assert queue_snapshot(client, "oom") == before


def test_a_bulk_cut_by_out_of_memory_says_which_jobs_were_written(client: redis.Redis) -> None:
    queue = Queue(client, "oom-bulk")
    queue.add("first")
    limit_memory(client, 600_000)
    jobs = [("b", PAYLOAD, {"job_id": f"b-{i}"}) for i in range(2000)]
    with pytest.raises(BulkWriteError) as caught:
        queue.add_bulk(jobs)
    error = caught.value
    assert not isinstance(error, redis.ConnectionError)  # refused, not cut: no connection retry
    written, refused = sorted(error.written), sorted(error.refused)
    assert written and refused and error.unknown == () and error.not_sent == ()
    # Not one cut: memory hovers at the limit (a reply sent frees its buffer), so later jobs may
    # fit again. Every index is in one place or the other, and says so.
    assert sorted(written + refused) == list(range(2000)) and written[0] == 0 and refused[0] > 0
    assert all(isinstance(exc, redis.exceptions.OutOfMemoryError) for exc in error.refused.values())
    assert isinstance(error.__cause__, redis.exceptions.OutOfMemoryError)
    assert error.job_ids == [f"b-{i}" for i in written]
    present = {key.decode().rsplit(":", 1)[1] for key in client.scan_iter(match="emq:{oom-bulk}:b-*", count=1000)}
    assert present == set(error.job_ids)  # every written one is there, none of the refused
    assert str(error).startswith(f"add_bulk: {len(written)} of 2000 jobs written (jobs 0-{refused[0] - 1}")
    assert f"{len(refused)} refused (jobs {refused[0]}" in str(error)


def test_a_flow_that_crosses_the_memory_limit_is_written_whole(client: redis.Redis) -> None:
    queue = Queue(client, "oom-flow")
    queue.add("first")
    # Redis decides "out of memory" when a command starts, its own arguments (here over 1 MB, each
    # node's data sent as is) included, and holds them until it ends; the jobs stored on top push
    # it past the limit half-way.
    limit_memory(client, 1_400_000)
    limit = int(client.config_get("maxmemory")["maxmemory"])
    children = [{"name": "c", "data": "y" * 50_000, "opts": {"job_id": f"c-{i}"}} for i in range(20)]
    used_before = int(client.info("memory")["used_memory"])
    parent = queue.add_flow({"name": "p"}, children)
    stored = int(client.info("memory")["used_memory"]) - used_before
    assert used_before + 1_000_000 + stored > limit  # the arguments, still held, and the jobs: past the limit
    assert len(parent.get_pending_dependencies()) == 20
    assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 21, "waiting-children": 1}
    fill_until_refused(client)
    before = queue_snapshot(client, "oom-flow")
    with pytest.raises(redis.exceptions.OutOfMemoryError):  # over the limit: the next one is refused whole
        queue.add_flow({"name": "p"}, [{"name": "d"}, {"name": "e"}])
    assert queue_snapshot(client, "oom-flow") == before


class _CutAtWindow(Connection):
    """A connection the server kills (CLIENT KILL, from another client) just before it sends the
    ``cut_at``-th window of a bulk (counted among large sends only: the windows)."""

    cut_at = 3
    url = ""
    windows = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        chunks = [command] if isinstance(command, (bytes, str)) else command
        if sum(len(chunk) for chunk in chunks) > 20_000:
            type(self).windows += 1
            if type(self).windows == self.cut_at:
                killer = redis.Redis.from_url(self.url)
                try:
                    assert killer.client_kill(f"127.0.0.1:{self._sock.getsockname()[1]}")
                finally:
                    killer.close()
        super().send_packed_command(command, check_health)


def test_a_bulk_cut_by_a_lost_connection_says_which_jobs_were_written(server: Any, client: redis.Redis) -> None:
    _CutAtWindow.url, _CutAtWindow.windows = server.url, 0
    pool = ConnectionPool(connection_class=_CutAtWindow, host="127.0.0.1", port=server.port)
    cut = redis.Redis(connection_pool=pool)
    queue = Queue(cut, "cut")
    queue.add("warm")  # the script's first-call check is done: the bulk's sends are its windows
    jobs = [("b", PAYLOAD, {"job_id": f"b-{i}"}) for i in range(2000)]
    with pytest.raises(BulkWriteError) as caught:
        queue.add_bulk(jobs)
    error = caught.value
    # Windows 0 and 1 were sent and window 0's replies read when the server dropped the connection,
    # before window 2 was sent: the replies of window 1 it had written by then are read still.
    read = len(error.written)
    assert WINDOW <= read <= 2 * WINDOW and sorted(error.written) == list(range(read))
    # Window 2 counts as sent even if its send failed; the kernel may even take window 3 before the
    # server's reset arrives. The caller is told what was sent, not what it hopes arrived.
    sent = read + len(error.unknown)
    assert sent in (3 * WINDOW, 4 * WINDOW) and error.unknown == tuple(range(read, sent))
    assert error.not_sent == tuple(range(sent, 2000)) and error.refused == {}
    assert isinstance(error.__cause__, redis.ConnectionError)
    # cut by the connection: a redis.ConnectionError too, for the loops that retry those
    assert isinstance(error, BulkInterruptedError) and isinstance(error, redis.ConnectionError)
    present = {key.decode().rsplit(":", 1)[1] for key in client.scan_iter(match="emq:{cut}:b-*", count=1000)}
    assert set(error.job_ids) <= present
    assert present - set(error.job_ids) <= {f"b-{i}" for i in error.unknown}
    assert not present & {f"b-{i}" for i in error.not_sent}
    assert f"(jobs {read}-{sent - 1})" in str(error) and f"{2000 - sent} not sent (jobs {sent}-1999)" in str(error)
    again = Queue(client, "cut").add_bulk([jobs[i] for i in (*error.unknown, *error.not_sent)])
    assert len(again) == 2000 - read  # a job_id makes adding the uncertain ones again safe
    assert client.llen("emq:{cut}:wait") == 2001
    pool.disconnect()


def test_a_flow_under_script_kill_is_written_whole_or_not_at_all(client: redis.Redis) -> None:
    client.config_set("busy-reply-threshold", 1)  # SCRIPT KILL may stop a script after 1 ms
    queue = Queue(client, "killed")
    queue.add("first")
    before = queue_snapshot(client, "killed")
    outcome: list[str] = []
    done = threading.Event()

    def kill() -> None:
        other = redis.Redis(port=client.connection_pool.connection_kwargs["port"])
        while not done.is_set():
            try:
                other.script_kill()
                outcome.append("killed")
                return
            except redis.ResponseError as exc:
                if "UNKILLABLE" in str(exc):
                    outcome.append("unkillable")
                    return
            time.sleep(0.0002)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        queue.add_flow({"name": "p"}, [{"name": "c", "data": {"i": i}} for i in range(3000)])
        written = True
    except redis.ResponseError as exc:
        assert "killed" in str(exc).lower()
        written = False
    finally:
        done.set()
        killer.join(10)
    if written:
        assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 3001, "waiting-children": 1}
    else:
        assert outcome == ["killed"] and queue_snapshot(client, "killed") == before
