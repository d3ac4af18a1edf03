"""Cancel under faults, on a private redis-server (AOF, fsync always): a Redis restart between a
cancel and the worker seeing it, a cancel while Redis is down, and a worker process killed
(SIGKILL) while a cancel of its job is pending. The job ends failed as cancelled once, runs no
more often than at-least-once delivery allows, and its cancel request goes with it."""

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

from echomq import Queue, Worker

from support.workers import Running, events, wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _failures(client: redis.Redis, queue: str, job_id: str) -> list[str | None]:
    return [e.get("failedReason") for e in events(client, queue) if e["event"] == "failed" and e["jobId"] == job_id]


def test_a_redis_restart_after_a_cancel_still_stops_the_job_once(redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=True)
    client = redis.Redis.from_url(server.url)
    queue = Queue(client, "faults-cancel-restart")
    runs: list[str] = []
    started = threading.Event()

    def processor(job: Any) -> None:
        runs.append(job.id)
        started.set()
        assert wait_until(lambda: job.cancelled, timeout=20, interval=0.01)
        job.raise_if_cancelled()

    job = queue.add("a", {}, attempts=3)
    with Running(Worker(server.url, queue.name, processor, drain_delay=1.0, lock_duration=5000), close_timeout=20):
        assert started.wait(10)
        server.kill()  # the worker's watchdog and lock renewal lose Redis ...
        with pytest.raises(redis.ConnectionError):
            queue.cancel(job.id, "while down")  # ... and a cancel now says so, writing nothing
        server.start()
        restarted = redis.Redis.from_url(server.url)
        assert not restarted.exists(queue.keys.job_cancel(job.id))
        assert Queue(restarted, queue.name).cancel(job.id, "after the restart") is True
        server.kill()  # the request is on disk (fsync always): it survives this restart too
        time.sleep(0.3)
        server.start()
        restarted = redis.Redis.from_url(server.url)
        assert wait_until(lambda: job.reload().get_state() == "failed", timeout=20)
        job.reload()  # the state was read after the hash: read it again
    assert runs == [job.id]  # told through the restart: never run again
    stored = Queue(restarted, queue.name).get_job(job.id)
    assert stored is not None and stored.failed_reason == "cancelled: after the restart"
    assert stored.attempts_made == 1 and not restarted.exists(queue.keys.job_cancel(job.id))
    assert _failures(restarted, queue.name, job.id) == ["cancelled: after the restart"]


_CHILD = textwrap.dedent(
    """
    import sys, time
    from echomq.worker.worker import Worker

    def deaf(job):  # ignores job.cancelled: its process is killed with the request pending
        job.connection.rpush(sys.argv[3], job.id)
        time.sleep(60)

    Worker(sys.argv[1], sys.argv[2], deaf, lock_duration=1000, stalled_interval=500).run()
    """
)


def test_a_worker_killed_with_a_cancel_pending_leaves_the_job_to_end_cancelled_once(
        redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=True)
    client = redis.Redis.from_url(server.url)
    queue = Queue(client, "faults-cancel-kill9")
    started_key = queue.keys.key("test-started")
    job = queue.add("a", {}, attempts=5)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, server.url, queue.name, started_key], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert client.blpop([started_key], timeout=20) is not None
        assert queue.cancel(job.id, "stop") is True
        time.sleep(0.3)  # its watchdog saw it; its processor does not care
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert job.reload().get_state() == "active" and client.exists(queue.keys.job_cancel(job.id))
    seen: list[bool] = []

    def careful(j: Any) -> None:
        seen.append(wait_until(lambda: j.cancelled, timeout=5, interval=0.01))
        j.raise_if_cancelled()

    # The stalled check hands the job out again (at least once); the request is still there.
    with Running(Worker(client, queue.name, careful, lock_duration=1000, stalled_interval=300, drain_delay=0.5)):
        assert wait_until(lambda: job.reload().get_state() == "failed", timeout=20)
        job.reload()  # the state was read after the hash: read it again
    assert seen == [True] and job.failed_reason == "cancelled: stop"
    assert not client.exists(queue.keys.job_cancel(job.id))
    assert _failures(client, queue.name, job.id) == ["cancelled: stop"]
