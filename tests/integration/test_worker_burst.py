"""``Worker.run(burst=True)``: process what is due, then return once the queue is idle.

Idle means a fetch made while none of the worker's jobs ran found nothing waiting, prioritized
or delayed and due; delayed jobs due later stay for a later run. What ``echomq worker --burst``
builds on (tests/integration/test_cli_worker.py runs the command).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from echomq import Queue, Worker


def counts(client: redis.Redis, queue: str) -> dict[str, int]:
    return Queue(client, queue).get_job_counts("wait", "active", "delayed", "completed", "failed")


def test_a_burst_run_does_what_is_due_and_leaves_what_is_not(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add_bulk([{"name": "now", "data": {"n": n}} for n in range(10)])
    queue.add("prioritized", {}, priority=3)
    queue.add("later", {}, delay=60_000)
    ran: list[str] = []
    began = time.monotonic()
    Worker(connection, queue_name, lambda job: ran.append(job.name), drain_delay=5).run(burst=True)
    assert time.monotonic() - began < 2  # it returns at once, not after a drain_delay
    assert sorted(ran) == ["now"] * 10 + ["prioritized"]
    assert counts(connection, queue_name) == {"wait": 0, "active": 0, "delayed": 1, "completed": 11, "failed": 0}


def test_a_burst_run_on_an_empty_queue_returns_at_once(connection: redis.Redis, queue_name: str) -> None:
    began = time.monotonic()
    Worker(connection, queue_name, lambda job: None, drain_delay=5).run(burst=True)
    assert time.monotonic() - began < 1


def test_a_job_retried_at_once_is_run_again_before_the_burst_ends(connection: redis.Redis, queue_name: str) -> None:
    # While the job runs the queue is empty; its failure puts it back in wait, so the run goes on.
    Queue(connection, queue_name).add("flaky", {}, attempts=3)
    attempts: list[int] = []

    def flaky(job: Any) -> str:
        attempts.append(job.attempts_made)
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        return "done"

    Worker(connection, queue_name, flaky).run(burst=True)
    assert attempts == [0, 1, 2]
    assert counts(connection, queue_name)["completed"] == 1


def test_a_burst_run_waits_for_its_running_jobs_and_takes_jobs_they_add(connection: redis.Redis,
                                                                          queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("parent", {})
    queue.add("short", {})
    seen: list[str] = []
    lock = threading.Lock()

    def process(job: Any) -> None:
        with lock:
            seen.append(job.name)
        if job.name == "parent":
            time.sleep(0.5)  # the other slot finds the queue empty meanwhile
            queue.add("child", {})

    Worker(connection, queue_name, process, concurrency=2, drain_delay=5).run(burst=True)
    assert sorted(seen) == ["child", "parent", "short"]
    assert counts(connection, queue_name)["completed"] == 3
