"""Queue and Worker together: what a producer adds, EchoMQ's own worker runs to the end."""

from __future__ import annotations

import redis

from echomq import Queue, Worker

from support.queue_keys import SCAN_COUNT
from support.queues import read_events
from support.workers import Running, wait_until


def test_added_jobs_run_with_retries_priorities_and_progress(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    calls: dict[str, int] = {}

    def process(job):  # type: ignore[no-untyped-def]
        calls[job.id] = calls.get(job.id, 0) + 1
        job.update_progress(50)
        if job.name == "flaky" and calls[job.id] == 1:
            raise RuntimeError("first try fails")
        return {"twice": job.data["n"] * 2}

    plain = queue.add("plain", {"n": 1})
    urgent = queue.add("urgent", {"n": 2}, priority=1)
    later = queue.add("later", {"n": 3}, delay=200)
    flaky = queue.add("flaky", {"n": 4}, attempts=2, backoff=50)
    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 4)
    for job, n in ((plain, 1), (urgent, 2), (later, 3), (flaky, 4)):
        done = queue.get_job(job.id)
        assert done.get_state() == "completed" and done.return_value == {"twice": n * 2}
        assert done.progress == 50
    assert queue.get_job(flaky.id).attempts_made == 2
    kinds = [e for e, _ in read_events(connection, queue_name)]
    assert kinds.count("completed") == 4 and kinds.count("progress") == 5


def test_flow_parent_runs_after_its_children(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    order: list[str] = []

    def process(job):  # type: ignore[no-untyped-def]
        order.append(job.name)
        return job.data.get("n", 0)

    parent = queue.add_flow({"name": "sum", "data": {}}, [{"name": "part", "data": {"n": 1}},
                                                         {"name": "part", "data": {"n": 2}}])
    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: parent.get_state() == "completed")
    assert order == ["part", "part", "sum"]
    waiting = [d for e, d in read_events(connection, queue_name) if e == "waiting" and d["jobId"] == parent.id]
    assert waiting == [{"jobId": parent.id, "prev": "waiting-children"}]


def test_flow_with_a_child_in_another_queue(connection: redis.Redis, queue_name: str) -> None:
    other = queue_name + "-b"
    queue, other_queue = Queue(connection, queue_name), Queue(connection, other)
    try:
        parent = queue.add_flow({"name": "sum", "data": {}},
                                [{"name": "part", "data": {"n": 1}},
                                 {"name": "remote", "data": {"n": 5}, "queue": other}])
        [remote] = other_queue.get_jobs("waiting")
        assert remote.parent == {"id": parent.id, "queueKey": queue.keys.base}
        assert parent.get_pending_dependencies() == sorted(
            [queue.get_jobs("waiting")[0].key, remote.key])
        with Running(Worker(connection, other, lambda job: job.data["n"] * 10)):
            assert wait_until(lambda: len(parent.get_pending_dependencies()) == 1)
        assert parent.get_state() == "waiting-children"
        with Running(Worker(connection, queue_name, lambda job: sum(job.get_children_values().values())
                            if job.name == "sum" else job.data["n"])):
            assert wait_until(lambda: parent.get_state() == "completed")
        assert parent.reload().return_value == 51
    finally:
        keys = list(connection.scan_iter(match=other_queue.keys.all_keys_pattern(), count=SCAN_COUNT))
        if keys:
            connection.delete(*keys)
