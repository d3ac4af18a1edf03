"""Queue.retry_jobs(limit=) and Queue.promote_jobs(limit=): at most that many jobs, oldest (or
earliest due) first, whatever the batch; and a bulk call that runs while a worker works."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import InvalidInputError, Queue, Worker
from echomq.protocol.keys import QueueKeys

from support.queues import read_events
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

HOUR_MS = 3_600_000


def _failed_jobs(connection: redis.Redis, queue_name: str, count: int) -> list[str]:
    """``count`` jobs failed by a real worker, the oldest first (the failed set's order: by
    finishing time, then by id)."""
    queue = Queue(connection, queue_name)
    for n in range(count):
        queue.add("job", {"n": n}, attempts=1)

    def fail(job: Any) -> None:
        raise RuntimeError("down")

    with Running(Worker(connection, queue_name, fail)):
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == count)
    return [job_id.decode() for job_id in connection.zrange(QueueKeys(queue_name).failed, 0, -1)]


def _retried(connection: redis.Redis, queue_name: str) -> list[str]:
    return [data["jobId"] for event, data in read_events(connection, queue_name)
            if event == "waiting" and data.get("prev") in ("failed", "completed")]


@pytest.mark.parametrize("count", [1, 2, 3, 1000])
def test_retry_jobs_stops_at_the_limit_oldest_first(connection: redis.Redis, queue_name: str, count: int) -> None:
    oldest_first = _failed_jobs(connection, queue_name, 7)
    queue = Queue(connection, queue_name)
    assert queue.retry_jobs("failed", count, limit=3) == 3
    assert _retried(connection, queue_name) == oldest_first[:3]
    assert queue.get_job_counts("failed", "waiting") == {"failed": 4, "waiting": 3}
    assert queue.retry_jobs(count=count, limit=100) == 4          # a limit over what is there: all of it
    assert queue.get_job_counts("failed", "waiting") == {"failed": 0, "waiting": 7}


@pytest.mark.parametrize("count", [1, 2, 1000])
def test_promote_jobs_stops_at_the_limit_earliest_due_first(connection: redis.Redis, queue_name: str,
                                                            count: int) -> None:
    queue = Queue(connection, queue_name)
    due_last_first = [queue.add("later", {"n": n}, delay=HOUR_MS * (10 - n)).id for n in range(5)]
    assert queue.promote_jobs(count, limit=2) == 2
    assert connection.lrange(QueueKeys(queue_name).wait, 0, -1) == [j.encode() for j in due_last_first[-2:]]
    assert queue.promote_jobs(count) == 3 and queue.get_job_counts("delayed")["delayed"] == 0
    assert queue.promote_jobs(count) == 0


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3", 2**53])
def test_a_bad_limit_is_refused_and_writes_nothing(connection: redis.Redis, queue_name: str, limit: Any) -> None:
    queue = Queue(connection, queue_name)
    _failed_jobs(connection, queue_name, 2)
    queue.add("later", {}, delay=HOUR_MS)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match=r"retry_jobs: limit=.* must be None \(all\) or an int from 1 to"):
        queue.retry_jobs(limit=limit)
    with pytest.raises(InvalidInputError, match=r"promote_jobs: limit=.* must be None \(all\) or an int from 1 to"):
        queue.promote_jobs(limit=limit)
    assert queue_snapshot(connection, queue_name) == before


def test_retry_jobs_while_a_worker_fails_them_again_retries_each_once(connection: redis.Redis,
                                                                      queue_name: str) -> None:
    # The worker takes each job the bulk call puts back and fails it again at once, while the
    # call still pages through the set one job per call: a job failed after the call began is
    # not taken again (the call's one timestamp), so the call ends with each job retried once.
    ids = _failed_jobs(connection, queue_name, 60)
    queue = Queue(connection, queue_name)

    def fail(job: Any) -> None:
        raise RuntimeError("still down")

    with Running(Worker(connection, queue_name, fail, concurrency=4)):
        assert queue.retry_jobs("failed", 1) == 60
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == 60)
    assert sorted(_retried(connection, queue_name)) == sorted(ids)


def test_promote_jobs_while_a_worker_puts_jobs_back_ends_after_as_many_as_were_delayed(
        connection: redis.Redis, queue_name: str) -> None:
    # Each promoted job fails and goes back to delayed (a backoff of an hour), due before the
    # jobs still waiting their turn (two hours): without a bound the loop would take the same
    # jobs again and again, while they have attempts left.
    queue = Queue(connection, queue_name)
    for n in range(200):
        queue.add("flaky", {"n": n}, delay=2 * HOUR_MS, attempts=50, backoff={"type": "fixed", "delay": HOUR_MS})

    def fail(job: Any) -> None:
        raise RuntimeError("try later")

    with Running(Worker(connection, queue_name, fail, concurrency=4)):
        assert queue.promote_jobs(1) == 200
    promoted = [data["jobId"] for event, data in read_events(connection, queue_name)
                if event == "waiting" and data.get("prev") == "delayed"]
    assert len(promoted) == 200
