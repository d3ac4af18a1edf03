"""Job metrics: a Worker with ``metrics=`` counts finished jobs per minute of its clock, exactly
as BullMQ's worker does, and ``Queue.get_metrics`` reads them in BullMQ's shape."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.transport.calls import run_script
from echomq.transport.scripts import script
from echomq.worker.worker import Worker

from support.queue_keys import SCAN_COUNT
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

MINUTE = 60_000
#: The start of some minute: the fake clock's origin.
T0 = 28_333_000 * MINUTE


class JobClock:
    """The worker's clock, set by each job from its data ``at`` (ms after T0) while it runs, so
    the finishing script sees exactly that time."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now

    def processor(self, job: Any) -> Any:
        self.now = T0 + job.data["at"]
        if job.data.get("fail") or (job.data.get("fail_first") and job.attempts_made == 0):
            raise RuntimeError("failed on purpose")
        return job.data["at"]


def finish_at(connection: redis.Redis, queue_name: str, times: list[int], *, max_points: int | None = 100,
              metrics: dict[str, Any] | None = None, **opts: Any) -> Queue:
    """Add one job per time (ms after T0), run them in order on one Worker with metrics, return the Queue."""
    queue = Queue(connection, queue_name)
    queue.add_bulk([{"name": "job", "data": {"at": at}, "opts": opts} for at in times])
    clock = JobClock()
    if metrics is None and max_points is not None:
        metrics = {"maxDataPoints": max_points}
    with Running(Worker(connection, queue_name, clock.processor, clock=clock, metrics=metrics)) as worker:
        assert wait_until(lambda: worker.processed == len(times))
    return queue


def test_jobs_over_three_minutes_and_an_idle_one_make_three_points(connection: redis.Redis, queue_name: str) -> None:
    # minute 0: two jobs; minute 1: three; minute 2: none; minute 3: one, which closes the others
    times = [1_000, 20_000, MINUTE + 5_000, MINUTE + 10_000, MINUTE + 59_999, 3 * MINUTE + 1_000]
    queue = finish_at(connection, queue_name, times)
    assert queue.get_metrics("completed") == {
        "meta": {"count": 6, "prevTS": T0 + 3 * MINUTE + 1_000, "prevCount": 5},
        "data": [0, 3, 2],  # newest first: the idle minute, minute 1, minute 0
        "count": 3,
    }
    assert queue.get_metrics("completed", 1, 1)["data"] == [3]
    assert queue.get_metrics("completed", -1)["data"] == [2]
    assert queue.get_metrics("completed", 0, 1) == {**queue.get_metrics("completed"), "data": [0, 3]}
    k = QueueKeys(queue_name)
    # the stored form BullMQ reads: a hash of three counters and a list of points
    assert connection.hgetall(k.key("metrics:completed")) == {
        b"count": b"6", b"prevTS": str(T0 + 3 * MINUTE + 1_000).encode(), b"prevCount": b"5"}
    assert connection.lrange(k.key("metrics:completed") + ":data", 0, -1) == [b"0", b"3", b"2"]


def test_the_first_job_only_stamps_its_minute(connection: redis.Redis, queue_name: str) -> None:
    queue = finish_at(connection, queue_name, [30_000, 40_000])
    assert queue.get_metrics("completed") == {
        "meta": {"count": 2, "prevTS": T0 + 30_000, "prevCount": 0}, "data": [], "count": 0}


def test_points_are_trimmed_to_max_data_points(connection: redis.Redis, queue_name: str) -> None:
    # minute m holds m + 1 jobs for m = 0..3, then one job in minute 4 closes minute 3
    times = [m * MINUTE + i * 1_000 for m in range(4) for i in range(m + 1)] + [4 * MINUTE]
    queue = finish_at(connection, queue_name, times, max_points=3)
    metrics = queue.get_metrics("completed")
    assert metrics["data"] == [4, 3, 2] and metrics["count"] == 3  # minute 0's point fell off
    assert metrics["meta"] == {"count": 11, "prevTS": T0 + 4 * MINUTE, "prevCount": 10}


def test_a_long_idle_spell_pushes_at_most_max_data_points(connection: redis.Redis, queue_name: str) -> None:
    queue = finish_at(connection, queue_name, [0, 10_000, 100 * MINUTE], max_points=5)
    assert queue.get_metrics("completed")["data"] == [0, 0, 0, 0, 2]


def test_metrics_without_max_data_points_keep_a_week_of_minutes(connection: redis.Redis, queue_name: str) -> None:
    queue = finish_at(connection, queue_name, [0, 20_000 * MINUTE], metrics={})
    metrics = queue.get_metrics("completed")
    assert metrics["count"] == 10080  # MetricsTime.ONE_WEEK points, no more
    assert metrics["data"][-1] == 1 and set(metrics["data"][:-1]) == {0}


def test_final_failures_count_as_failed_and_retries_not_at_all(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("bad", {"at": 1_000, "fail": True})
    queue.add("bad", {"at": 2_000, "fail": True})
    queue.add("retried", {"at": MINUTE + 1_000, "fail_first": True}, attempts=2)
    clock = JobClock()
    with Running(Worker(connection, queue_name, clock.processor, clock=clock, metrics={"maxDataPoints": 10})):
        assert wait_until(lambda: queue.get_job_counts("completed", "failed") == {"completed": 1, "failed": 2})
    failed = queue.get_metrics("failed")
    assert failed["meta"] == {"count": 2, "prevTS": T0 + 1_000, "prevCount": 0} and failed["data"] == []
    completed = queue.get_metrics("completed")
    assert completed["meta"] == {"count": 1, "prevTS": T0 + MINUTE + 1_000, "prevCount": 0}


def test_jobs_removed_on_completion_are_still_counted(connection: redis.Redis, queue_name: str) -> None:
    queue = finish_at(connection, queue_name, [0, 1_000, MINUTE], remove_on_complete=True)
    assert queue.get_job_counts("completed") == {"completed": 0}
    assert queue.get_metrics("completed")["meta"]["count"] == 3
    assert queue.get_metrics("completed")["data"] == [2]


def test_a_worker_without_metrics_writes_none(connection: redis.Redis, queue_name: str) -> None:
    queue = finish_at(connection, queue_name, [0, MINUTE, 2 * MINUTE + 1, 3 * MINUTE], max_points=None)
    assert queue.get_job_counts("completed") == {"completed": 4}
    assert list(connection.scan_iter(QueueKeys(queue_name).key("metrics:*"), count=SCAN_COUNT)) == []
    assert queue.get_metrics("completed") == {"meta": {"count": 0, "prevTS": 0, "prevCount": 0},
                                              "data": [], "count": 0}


@pytest.mark.parametrize("kind", ["active", "Completed", "", None, 1, "completed:data"])
def test_get_metrics_refuses_anything_but_completed_and_failed(connection: redis.Redis, queue_name: str,
                                                               kind: Any) -> None:
    with pytest.raises(InvalidInputError, match="get_metrics: kind="):
        Queue(connection, queue_name).get_metrics(kind)


@pytest.mark.parametrize(("start", "end", "field"), [("0", -1, "start"), (0, 1.0, "end"), (True, -1, "start"),
                                                     (0, 2**64, "end")])
def test_get_metrics_refuses_indices_that_are_not_ints(connection: redis.Redis, queue_name: str, start: Any,
                                                       end: Any, field: str) -> None:
    with pytest.raises(InvalidInputError, match=f"get_metrics: {field}="):
        Queue(connection, queue_name).get_metrics("completed", start, end)


@pytest.mark.parametrize("metrics", [{"maxDataPoints": 0}, {"maxDataPoints": -5}, {"maxDataPoints": 1.5},
                                     {"maxDataPoints": "10"}, {"maxDataPoints": True}, {"maxDataPoints": 2**20 + 1},
                                     {"maxDataPoints": None}, {"max": 10}, {"maxDataPoints": 10, "x": 1}, 10, []])
def test_bad_metrics_settings_are_refused_and_nothing_is_written(connection: redis.Redis, queue_name: str,
                                                                 metrics: Any) -> None:
    with pytest.raises(InvalidInputError, match="Worker metrics="):
        Worker(connection, queue_name, lambda job: None, metrics=metrics)
    assert list(connection.scan_iter(QueueKeys(queue_name).all_keys_pattern(), count=SCAN_COUNT)) == []


@pytest.mark.parametrize("points", ["0", "-1", "1.5", "ten"])
def test_move_to_finished_refuses_bad_data_points_before_writing(connection: redis.Redis, queue_name: str,
                                                                  points: str) -> None:
    """The script checks its metrics argument before its first write (docs/protocol.md §6.1)."""
    queue = Queue(connection, queue_name)
    job = queue.add("job", {"at": 0})
    k = QueueKeys(queue_name)
    connection.rpoplpush(k.wait, k.active)  # active without a lock: token "0" skips the check
    before = queue_snapshot(connection, queue_name)
    finished = script("moveToFinished").bind(k, finished="completed")
    args = [job.id, T0, "returnvalue", "null", "completed", "0", k.job_prefix, "0", -1, "", "", 0, "",
            "30000", "", "", "", points]
    with pytest.raises(redis.ResponseError, match="metrics data points"):
        run_script(connection, finished.script, finished.for_job(job.id), args)
    assert queue_snapshot(connection, queue_name) == before
