"""A schedule driven only by EchoMQ Workers keeps firing: each iteration produces the next."""

from __future__ import annotations

import threading

import redis

from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker


def test_echomq_worker_advances_an_every_schedule(connection: redis.Redis, queue_name: str) -> None:
    sched = JobScheduler(connection, queue_name)
    first = sched.upsert("beat", {"every": 300}, "beat", {"n": 1})
    seen: list[tuple[str, int, object]] = []
    enough = threading.Event()

    def processor(job):  # type: ignore[no-untyped-def]
        seen.append((job.id, job.opts["repeat"]["count"], job.data))
        if len(seen) >= 3:
            enough.set()

    worker = Worker(connection, queue_name, processor, drain_delay=0.2)
    with worker:
        assert enough.wait(15)
    due = [int(job_id.rsplit(":", 1)[1]) for job_id, _c, _d in seen[:3]]
    # on the schedule's 300 ms grid, each run advancing it (a late pickup skips missed slots)
    assert due[0] == first.due_ms and due[0] < due[1] < due[2]
    assert all((d - first.due_ms) % 300 == 0 for d in due)
    assert [count for _j, count, _d in seen[:3]] == [1, 2, 3]
    assert all(data == {"n": 1} for _j, _c, data in seen)
    record = sched.get("beat")
    assert record.iteration_count >= 4 and record.next_millis >= first.due_ms + 900
