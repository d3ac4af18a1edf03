"""Fault tests on a private redis-server (AOF on): a worker process killed with SIGKILL, and a
Redis restart under a running worker. Nothing may be lost either way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.worker import Worker

from support.queue_keys import SCAN_COUNT
from support.workers import Running, events, wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent(
    """
    import sys, time
    from echomq.worker.worker import Worker

    def slow(job):
        time.sleep(0.2)
        return job.data["i"]

    Worker(sys.argv[1], sys.argv[2], slow, concurrency=5, lock_duration=1000,
           stalled_interval=500).run()
    """
)


def test_a_killed_worker_process_loses_no_job(redis_server_factory: Any) -> None:
    server = redis_server_factory()
    client = redis.Redis.from_url(server.url)
    name = "faults-kill9"
    k = QueueKeys(name)
    Queue(client, name).add_bulk([{"name": "n", "data": {"i": i}} for i in range(50)])
    child = subprocess.Popen([sys.executable, "-c", _CHILD, server.url, name], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert wait_until(lambda: client.zcard(k.completed) >= 10, timeout=20)
        assert client.llen(k.active) > 0  # it dies holding jobs
        orphans = {x.decode() for x in client.lrange(k.active, 0, -1)}
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert client.llen(k.active) == len(orphans)
    done: list[int] = []
    with Running(Worker(client, name, lambda job: done.append(job.data["i"]) or job.data["i"], concurrency=5,
                        lock_duration=1000, stalled_interval=500)):
        assert wait_until(lambda: client.zcard(k.completed) == 50, timeout=30)
    assert client.llen(k.active) == 0 and client.llen(k.wait) == 0
    assert client.zcard(k.failed) == 0
    stalled = {e["jobId"] for e in events(client, name) if e["event"] == "stalled"}
    assert orphans <= stalled  # recovered through the stalled check
    assert sorted(int(client.hget(k.job(j.decode()), "returnvalue")) for j in client.zrange(k.completed, 0, -1)) \
        == list(range(50))
    client.close()


def test_a_redis_restart_under_a_running_worker_loses_no_job(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=True)
    client = redis.Redis.from_url(server.url)
    name = "faults-restart"
    k = QueueKeys(name)
    queue = Queue(client, name)
    queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(30)])
    seen: list[int] = []
    lock = threading.Lock()

    def slow(job: Any) -> int:
        time.sleep(0.05)
        with lock:
            seen.append(job.data["i"])
        return job.data["i"]

    # A moveToActive whose reply dies with the server leaves a job active that this worker never
    # received: the stalled check hands it back once its lock expires (short here, 2 s).
    worker = Worker(server.url, name, slow, concurrency=3, drain_delay=1.0, lock_duration=2000,
                    stalled_interval=1000)
    with Running(worker, close_timeout=30):
        assert wait_until(lambda: len(seen) >= 5, timeout=20)
        server.kill()  # SIGKILL: replies in flight are lost
        time.sleep(1.0)
        server.start()  # same port and dir: the AOF brings the data back
        restarted = redis.Redis.from_url(server.url)
        Queue(restarted, name).add_bulk([{"name": "n", "data": {"i": i}} for i in range(30, 40)])
        assert wait_until(lambda: restarted.zcard(k.completed) == 40, timeout=60), (
            restarted.zcard(k.completed), restarted.llen(k.active), restarted.llen(k.wait))
        # again while the worker is idle, blocked on the marker
        time.sleep(0.3)
        server.kill()
        server.start()
        restarted = redis.Redis.from_url(server.url)
        Queue(restarted, name).add_bulk([{"name": "n", "data": {"i": i}} for i in range(40, 45)])
        assert wait_until(lambda: restarted.zcard(k.completed) == 45, timeout=30)
    assert restarted.llen(k.active) == 0 and restarted.llen(k.wait) == 0 and restarted.zcard(k.failed) == 0
    # A finish applied and persisted whose reply died with the server is not counted by this
    # worker (its resend finds the job finished): at most one per processor thread in flight.
    assert worker.processed >= 45 - 3
    values = sorted(int(restarted.hget(k.job(j.decode()), "returnvalue")) for j in restarted.zrange(k.completed, 0, -1))
    assert values == list(range(45))
    restarted.close()


_SIGTERM_CHILD = textwrap.dedent(
    """
    import signal, sys, time
    from echomq.worker.worker import Worker

    def slow(job):
        print("started", job.id, flush=True)
        time.sleep(2.0)  # long enough that SIGTERM surely lands while it runs, even on a busy box
        return "finished"

    worker = Worker(sys.argv[1], sys.argv[2], slow)
    signal.signal(signal.SIGTERM, lambda signum, frame: worker.close())  # the host's handler
    worker.run()  # in the main thread, as a management command would
    print("closed", flush=True)
    """
)


def test_close_from_the_hosts_sigterm_handler(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    name = f"faults-sigterm-{os.getpid()}-{time.monotonic_ns()}"
    k = QueueKeys(name)
    queue = Queue(client, name)
    first = queue.add("slow").id
    queue.add("slow")
    child = subprocess.Popen([sys.executable, "-c", _SIGTERM_CHILD, redis_url, name], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().split() == ["started", first]
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=15)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0 and out.strip() == "closed"
    assert [x.decode() for x in client.zrange(k.completed, 0, -1)] == [first]  # the running job finished
    assert client.llen(k.active) == 0 and client.llen(k.wait) == 1  # the next one was not started
    for key in client.scan_iter(match=k.all_keys_pattern(), count=SCAN_COUNT):
        client.delete(key)
    client.close()
