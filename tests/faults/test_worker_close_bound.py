"""``Worker.close(timeout)`` is a bound even when Redis hangs: a server stopped with SIGSTOP (as
in a partition without a reset, nothing answers and nothing fails) while a job is in flight.
close() and run() both return within the timeout plus a small margin, and what was left behind
is logged; once the server runs again, the threads left behind finish."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

from support.workers import seed_job, wait_until

pytestmark = [pytest.mark.real_only]

#: What close() may take beyond its timeout when Redis hangs.
MARGIN_S = 3.0


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rpartition(")")[2].split()[0]


@contextmanager
def hung(server: Any) -> Iterator[None]:
    """The server stopped (state T: it reads nothing, answers nothing) for the block's length."""
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: _process_state(pid) == "T", timeout=5)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _threads_of(queue_name: str) -> list[str]:
    return [t.name for t in threading.enumerate() if queue_name in t.name and t.is_alive()]


def _blocked_on_marker(admin: redis.Redis) -> bool:
    """The worker's fetcher is in its BZPOPMIN (so it holds an open marker connection)."""
    return any(c.get("cmd") == "bzpopmin" and "b" in c.get("flags", "") for c in admin.client_list())


def test_close_returns_within_its_timeout_while_redis_hangs(redis_server_factory: Any,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url, socket_timeout=None)  # no socket timeout (redis-py < 8 default)
    admin = redis.Redis.from_url(server.url, socket_timeout=2)  # the test's own view
    name = "close-bound-hung"
    k = QueueKeys(name)
    job_id = seed_job(client, name)
    entered = threading.Event()
    finish = threading.Event()

    def process(job: Any) -> str:
        entered.set()
        finish.wait(10)
        return "late"

    # concurrency 2: the fetcher waits on the marker while the job runs; renewals every 500 ms
    worker = Worker(client, name, process, concurrency=2, lock_duration=1000)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    assert entered.wait(5)
    assert wait_until(lambda: _blocked_on_marker(admin), timeout=5)
    with caplog.at_level(logging.WARNING, logger="echomq"), hung(server):
        time.sleep(0.6)  # a renewal is now stuck on the stopped server
        finish.set()  # the job ends: its final move is stuck too
        started = time.monotonic()
        worker.close(timeout=2)
        took = time.monotonic() - started
        runner.join(MARGIN_S)
        run_took = time.monotonic() - started
        assert took < 2 + MARGIN_S, f"close(timeout=2) took {took:.1f} s"
        assert not runner.is_alive() and run_took < 2 + MARGIN_S, f"run() took {run_took:.1f} s"
        assert not worker.running
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(f"still running ({job_id})" in m and "stalled check" in m for m in messages), messages  # the job
    assert any("still alive" in m for m in messages), messages  # and the threads
    assert wait_until(lambda: not _threads_of(name), timeout=10), _threads_of(name)  # they end once it answers
    assert admin.lindex(k.active, 0) in (None, job_id.encode())  # never lost
    client.close()
    admin.close()


def test_run_returns_within_the_bound_when_close_comes_from_another_thread(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url, socket_timeout=None)
    admin = redis.Redis.from_url(server.url, socket_timeout=2)
    name = "close-bound-host"
    first = seed_job(admin, name)
    entered = threading.Event()
    release = threading.Event()
    worker = Worker(client, name, lambda job: entered.set() or release.wait(10), concurrency=2)
    real_move_to_active = worker.transitions.move_to_active
    armed = threading.Event()
    seeded = threading.Event()
    stuck = threading.Event()

    def move_to_active_on_a_hung_server(token: str, now_ms: int) -> Any:
        if armed.is_set() and not stuck.is_set():  # the server stops answering as this fetch is sent
            # once the seed's own reply is read: the script that woke this fetch may not have
            # had its reply written yet, and the test's client would time out on a stopped server
            assert seeded.wait(5)
            os.kill(server.process.pid, signal.SIGSTOP)
            assert wait_until(lambda: _process_state(server.process.pid) == "T", timeout=5)
            stuck.set()
        return real_move_to_active(token, now_ms)

    worker.transitions.move_to_active = move_to_active_on_a_hung_server  # type: ignore[method-assign]
    returned = threading.Event()

    def host() -> None:  # the host's thread, blocked in run()
        worker.run()
        returned.set()

    threading.Thread(target=host, daemon=True).start()
    try:
        assert entered.wait(5)
        assert wait_until(lambda: _blocked_on_marker(admin), timeout=5)
        armed.set()
        seed_job(admin, name)  # wakes the fetcher, whose moveToActive then hangs
        seeded.set()
        assert stuck.wait(5)
        time.sleep(0.2)
        started = time.monotonic()
        closer = threading.Thread(target=worker.close, args=(1.0,), daemon=True)  # e.g. the host's watchdog
        closer.start()
        assert returned.wait(1.0 + MARGIN_S), "run() did not return within the bound"
        assert time.monotonic() - started < 1.0 + MARGIN_S
        closer.join(MARGIN_S)
        assert not closer.is_alive()
    finally:
        release.set()
        os.kill(server.process.pid, signal.SIGCONT)
    assert wait_until(lambda: not _threads_of(name), timeout=10), _threads_of(name)
    assert admin.hget(QueueKeys(name).job(first), "ats") == b"1"
    client.close()
    admin.close()
