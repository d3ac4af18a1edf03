"""The concurrency-1 worker runs its hot-path socket without a timeout and waits for each reply
itself (transport/reply_wait.py): the client's ``socket_timeout`` must still fail a call on a
server that stopped answering, the retry must still finish the job exactly once, and the
socket must go back to the pool with its timeout."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis

from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import PinnedConnection
from echomq.transport.scripts import script
from echomq.worker.worker import Worker

from support.workers import seed_job, wait_until

pytestmark = [pytest.mark.real_only]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "T"


@pytest.mark.parametrize("spin_us", [0, 250])
def test_a_hung_server_times_the_finish_out_and_the_retry_finishes_it_once(
        redis_server_factory: Any, caplog: pytest.LogCaptureFixture, spin_us: int) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url, socket_timeout=0.5)
    admin = redis.Redis.from_url(server.url, socket_timeout=5)
    name = "socket-timeout"
    k = QueueKeys(name)
    job_id = seed_job(admin, name)
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def process(job: Any) -> str:
        calls.append(job.id)
        entered.set()
        release.wait(10)
        return "done"

    worker = Worker(client, name, process, reply_spin_us=spin_us)
    runner = threading.Thread(target=worker.run, daemon=True)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        runner.start()
        try:
            assert entered.wait(5)
            os.kill(server.process.pid, signal.SIGSTOP)
            assert wait_until(lambda: _stopped(server.process.pid), timeout=5)
            release.set()  # the finish goes out to a server that reads nothing
            stopped_at = time.monotonic()
            assert wait_until(lambda: any("Redis failed while finishing job" in r.getMessage()
                                          and "Timeout" in r.getMessage() for r in caplog.records), timeout=5)
            assert time.monotonic() - stopped_at < 3  # the 0.5 s timeout, not forever
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        assert wait_until(lambda: admin.zscore(k.completed, job_id) is not None, timeout=15)
        worker.close()
        runner.join(10)
    assert calls == [job_id]  # run once, finished once
    assert admin.hget(k.job(job_id), "returnvalue") == b'"done"'
    client.close()
    admin.close()


def test_a_pinned_connection_goes_back_to_the_pool_with_its_timeout(redis_server_factory: Any) -> None:
    client = redis.Redis.from_url(redis_server_factory(persistent=False).url, socket_timeout=2.5)
    pinned = PinnedConnection(client)
    lua = script("getJobScheduler")
    pinned(lua, lua.keys_for(QueueKeys("pool-timeout")), ["none"])
    conn = pinned.conn
    assert conn._sock.gettimeout() is None  # the hot path's own waiting
    pinned.release()
    assert conn._sock.gettimeout() == 2.5  # what every other user of the pool expects
    assert client.ping()
    client.close()
