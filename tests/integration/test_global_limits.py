"""A queue's global concurrency and global rate limit (meta ``concurrency``, ``max``/``duration``):
set, read and removed through Queue, refused when malformed, and obeyed by every worker of the
queue at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.worker import Worker

from support.sampling import ActiveSampler
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until


class Overlaps:
    """Records how many processors run at the same moment, across every worker that shares it."""

    def __init__(self, run_s: float) -> None:
        self.run_s = run_s
        self.running = 0
        self.most = 0
        self.starts: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, job: Any) -> None:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.starts.append(time.monotonic())
        time.sleep(self.run_s)
        with self._lock:
            self.running -= 1


def test_global_concurrency_is_set_read_and_removed(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    meta = QueueKeys(queue_name).meta
    assert queue.get_global_concurrency() is None
    queue.set_global_concurrency(3)
    assert connection.hget(meta, "concurrency") == b"3"  # what BullMQ's setGlobalConcurrency writes
    assert queue.get_global_concurrency() == 3
    queue.set_global_concurrency(1)
    assert queue.get_global_concurrency() == 1
    queue.remove_global_concurrency()
    assert queue.get_global_concurrency() is None and not connection.hexists(meta, "concurrency")


def test_global_rate_limit_is_set_read_and_removed(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    meta = QueueKeys(queue_name).meta
    assert queue.get_global_rate_limit() is None
    queue.set_global_rate_limit(5, 1000)
    assert connection.hmget(meta, ["max", "duration"]) == [b"5", b"1000"]
    assert queue.get_global_rate_limit() == {"max": 5, "duration": 1000}
    queue.remove_global_rate_limit()
    assert queue.get_global_rate_limit() is None
    assert connection.hmget(meta, ["max", "duration"]) == [None, None]
    connection.hset(meta, "max", 5)  # half a limit, as BullMQ reads it: none
    assert queue.get_global_rate_limit() is None


def test_removing_one_limit_leaves_the_other_and_the_rest_of_meta(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.pause()
    queue.set_global_concurrency(2)
    queue.set_global_rate_limit(10, 500)
    queue.remove_global_rate_limit()
    assert queue.get_global_concurrency() == 2 and queue.is_paused()
    queue.set_global_rate_limit(10, 500)
    queue.remove_global_concurrency()
    assert queue.get_global_rate_limit() == {"max": 10, "duration": 500} and queue.is_paused()


@pytest.mark.parametrize(
    ("call", "args", "field"),
    [
        ("set_global_concurrency", (0,), "concurrency"),
        ("set_global_concurrency", (-1,), "concurrency"),
        ("set_global_concurrency", (1.5,), "concurrency"),
        ("set_global_concurrency", ("2",), "concurrency"),
        ("set_global_concurrency", (True,), "concurrency"),
        ("set_global_concurrency", (None,), "concurrency"),
        ("set_global_concurrency", (2**53,), "concurrency"),
        ("set_global_rate_limit", (0, 1000), "max"),
        ("set_global_rate_limit", (2.0, 1000), "max"),
        ("set_global_rate_limit", (2**53, 1000), "max"),
        ("set_global_rate_limit", (False, 1000), "max"),
        ("set_global_rate_limit", (5, 0), "duration"),
        ("set_global_rate_limit", (5, -100), "duration"),
        ("set_global_rate_limit", (5, "1000"), "duration"),
        ("set_global_rate_limit", (5, 2**31), "duration"),
        ("set_global_rate_limit", (0, 2**31), "max"),  # the first wrong one is named, nothing is written
    ],
)
def test_bad_limits_are_refused_and_nothing_is_written(
    connection: redis.Redis, queue_name: str, call: str, args: tuple[Any, ...], field: str
) -> None:
    queue = Queue(connection, queue_name)
    queue.add("job", {"n": 1})
    queue.set_global_concurrency(4)
    queue.set_global_rate_limit(3, 700)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match=f"{call}: {field}="):
        getattr(queue, call)(*args)
    assert queue_snapshot(connection, queue_name) == before


@pytest.mark.parametrize("limit", [1, 2])
def test_workers_together_never_run_more_than_the_global_concurrency(
    connection: redis.Redis, queue_name: str, limit: int
) -> None:
    queue = Queue(connection, queue_name)
    queue.set_global_concurrency(limit)
    queue.add_bulk([("job", {"n": n}) for n in range(16)])
    overlaps = Overlaps(run_s=0.03)
    workers = [Worker(connection, queue_name, overlaps, concurrency=3, name=f"w{i}") for i in range(2)]
    with ActiveSampler(connection, queue_name) as sampler, Running(workers[0]), Running(workers[1]):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 16, timeout=20)
    # six processor slots in all, yet never more than the limit at once, and the limit is reached
    assert overlaps.most == limit, overlaps.most
    assert sampler.most == limit, sampler.most


def test_removing_the_global_concurrency_lets_jobs_run_side_by_side(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.set_global_concurrency(1)
    queue.remove_global_concurrency()
    queue.add_bulk([("job", {"n": n}) for n in range(8)])
    overlaps = Overlaps(run_s=0.05)
    with Running(Worker(connection, queue_name, overlaps, concurrency=4)):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 8, timeout=20)
    assert overlaps.most > 1


def test_workers_together_start_no_more_than_the_global_rate_limit(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.set_global_rate_limit(2, 400)
    queue.add_bulk([("job", {"n": n}) for n in range(8)])
    overlaps = Overlaps(run_s=0.0)
    # the workers' own limiter is looser: the queue's max wins over it
    workers = [Worker(connection, queue_name, overlaps, concurrency=3, limiter={"max": 50, "duration": 400})
               for _ in range(2)]
    with Running(workers[0]), Running(workers[1]):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 8, timeout=20)
    starts = sorted(overlaps.starts)
    # fixed windows of 400 ms, two jobs each: any five consecutive starts span three windows,
    # and eight jobs need four windows (timer slack: 50 ms)
    assert all(starts[i + 4] - starts[i] >= 0.35 for i in range(len(starts) - 4)), starts
    assert starts[-1] - starts[0] >= 3 * 0.4 - 0.05, starts


def test_a_global_rate_limit_applies_without_a_worker_limiter(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.set_global_rate_limit(1, 300)
    queue.add_bulk([("job", {"n": n}) for n in range(3)])
    overlaps = Overlaps(run_s=0.0)
    with Running(Worker(connection, queue_name, overlaps, concurrency=3)):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 3, timeout=20)
    starts = sorted(overlaps.starts)
    assert starts[1] - starts[0] >= 0.25 and starts[2] - starts[1] >= 0.25, starts
