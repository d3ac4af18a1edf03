"""One clock drives every timestamp: what a component is given as ``clock=`` reaches everything
it builds (the Worker's scheduler step, the jobs its processor receives, a Queue's jobs), and
no script reads the server's TIME."""

from __future__ import annotations

from typing import Any

import redis

from echomq import JobScheduler, Queue, WaitingChildrenError, Worker
from echomq.protocol.keys import QueueKeys

from support.workers import Running, wait_until

#: A fixed instant a day ahead of the real one (the server's own time would be today).
T = 4_102_444_800_000  # 2100-01-01T00:00:00Z


class SteppedClock:
    """A clock that reads ``T`` plus whatever the test advanced it by."""

    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def hget_int(connection: redis.Redis, key: str, field: str) -> int:
    return int(connection.hget(key, field))


def test_a_queue_stamps_its_jobs_with_its_clock(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=SteppedClock(T))
    job = queue.add("x", delay=5000)
    k = queue.keys
    assert job.timestamp == T == hget_int(connection, k.job(job.id), "timestamp")
    assert int(connection.zscore(k.delayed, job.id)) // 4096 == T + 5000
    queue.get_job(job.id).change_delay(1000)
    assert int(connection.zscore(k.delayed, job.id)) // 4096 == T + 1000
    flow = queue.add_flow({"name": "p"}, [{"name": "c"}])
    assert flow.timestamp == T and queue.get_job(flow.id).timestamp == T


def test_a_queue_cleans_by_its_clock(connection: redis.Redis, queue_name: str) -> None:
    clock = SteppedClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    job = queue.add("x", delay=10)
    clock.now = T - 1
    assert queue.clean(0, state="delayed") == []  # stamped T: after the cutoff T - 1
    clock.now = T
    assert queue.clean(0, state="delayed") == [job.id]


def test_a_workers_clock_reaches_the_jobs_it_runs_and_the_next_iteration(connection: redis.Redis,
                                                                        queue_name: str) -> None:
    k = QueueKeys(queue_name)
    first = JobScheduler(connection, queue_name, clock=SteppedClock(T)).upsert("tick", {"every": 60_000})
    assert first is not None
    clock = SteppedClock(first.due_ms + 10)
    seen: list[Any] = []

    def process(job: Any) -> None:
        seen.append(job.clock())

    with Running(Worker(connection, queue_name, process, clock=clock, drain_delay=0.2)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1)
    done = first.job_id
    assert seen == [clock.now]
    assert hget_int(connection, k.job(done), "processedOn") == clock.now
    assert hget_int(connection, k.job(done), "finishedOn") == clock.now
    [following] = [m.decode() for m in connection.zrange(k.delayed, 0, -1)]
    assert following == f"repeat:tick:{first.due_ms + 60_000}"
    assert hget_int(connection, k.job(following), "timestamp") == clock.now  # produced by the worker's step


def test_a_parent_waits_for_its_children_from_the_workers_clock(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    clock = SteppedClock(T)
    queue = Queue(connection, queue_name, clock=clock)  # the child is due an hour after T
    parent = queue.add("parent")

    def process(job: Any) -> str:
        if job.name == "parent":
            queue.add("child", parent={"id": job.id, "queue": k.base}, delay=3_600_000)
            assert job.move_to_waiting_children() is True
            raise WaitingChildrenError()
        return "done"

    with Running(Worker(connection, queue_name, process, clock=clock, drain_delay=0.2)):
        assert wait_until(lambda: connection.zscore(k.waiting_children, parent.id) is not None)
    assert int(connection.zscore(k.waiting_children, parent.id)) == T
