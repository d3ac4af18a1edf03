"""Queue.retry_jobs and Queue.promote_jobs: every job of a state back in line, a batch per call.

Each job is placed as Job.retry / Job.promote place one; the events come oldest first; the
loop pages through its set whatever the batch size; refusals, the client's and the scripts'
own, write nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import ActiveJob, Queue
from echomq.errors import InvalidInputError
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import run_script
from echomq.transport.scripts import script
from echomq.worker.worker import Worker

from support.queues import read_events
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until


def _finish(connection: redis.Redis, k: QueueKeys, job_id: str, state: str, finished_on: int) -> None:
    """Put a waiting job into completed/failed as a worker leaves it."""
    outcome = {"failedReason": "boom"} if state == "failed" else {"returnvalue": '"ok"'}
    connection.lrem(k.wait, 1, job_id)
    connection.zadd(k.key(state), {job_id: finished_on})
    connection.hset(k.job(job_id), mapping={"finishedOn": finished_on, "processedOn": finished_on - 5,
                                            "atm": 1, "ats": 1, **outcome})


def _waiting_events(connection: redis.Redis, queue_name: str) -> list[dict[str, Any]]:
    return [d for e, d in read_events(connection, queue_name) if e == "waiting" and "prev" in d]


def _process_all(connection: redis.Redis, queue_name: str, count: int) -> list[str]:
    done: list[str] = []

    def run(job: ActiveJob) -> str:
        done.append(job.id)
        return "again"

    with Running(Worker(connection, queue_name, run, drain_delay=0.2)):
        assert wait_until(lambda: len(done) == count)
    return done


@pytest.mark.parametrize("state", ["failed", "completed"])
def test_retry_jobs_pages_through_the_whole_set_oldest_first(connection: redis.Redis, queue_name: str,
                                                              state: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    ids = [queue.add("job", {"n": n}).id for n in range(7)]
    for n, job_id in enumerate(reversed(ids)):  # the last added finished first
        _finish(connection, k, job_id, state, 1_000 + n)
    other = "completed" if state == "failed" else "failed"
    untouched = queue.add("other").id
    _finish(connection, k, untouched, other, 500)

    assert queue.retry_jobs(state, count=3) == 7
    assert connection.zcard(k.key(state)) == 0 and connection.zscore(k.key(other), untouched) == 500
    oldest_first = list(reversed(ids))
    assert _waiting_events(connection, queue_name) == [{"jobId": j, "prev": state} for j in oldest_first]
    outcome = "failedReason" if state == "failed" else "returnvalue"
    for job_id in ids:
        fields = {text(f) for f in connection.hkeys(k.job(job_id))}
        assert not fields & {"finishedOn", "processedOn", outcome}
        assert {"atm", "ats"} <= fields  # the bulk retry resets no counter
    assert connection.zrange(k.marker, 0, -1, withscores=True) == [(b"0", 0.0)]
    assert _process_all(connection, queue_name, 7) == oldest_first
    assert all(queue.get_job(j).return_value == "again" for j in ids)


def test_retry_jobs_takes_only_jobs_finished_by_the_timestamp(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    old, new = queue.add("old").id, queue.add("new").id
    _finish(connection, k, old, "failed", 1_000)
    _finish(connection, k, new, "failed", 2_000)
    assert queue.retry_jobs(timestamp=1_999) == 1
    assert old.encode() in connection.lrange(k.wait, 0, -1)
    assert connection.zrange(k.failed, 0, -1) == [new.encode()]
    assert queue.retry_jobs() == 1  # now: everything that finished so far


def test_bulk_moves_honour_priority_and_lifo_and_a_paused_queue(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    plain, lifo, urgent = queue.add("j").id, queue.add("j", lifo=True).id, queue.add("j", priority=2).id
    connection.delete(k.prioritized)  # _finish takes the others out of wait
    for n, job_id in enumerate((plain, lifo, urgent)):
        _finish(connection, k, job_id, "failed", 1_000 + n)
    connection.delete(k.marker)
    queue.pause()
    assert queue.retry_jobs() == 3
    assert [text(x) for x in connection.lrange(k.wait, 0, -1)] == [plain, lifo]
    assert [text(x) for x in connection.zrange(k.prioritized, 0, -1)] == [urgent]
    assert not connection.exists(k.marker) and not connection.exists(k.paused)


def test_a_member_without_a_hash_is_dropped_not_queued(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    real = queue.add("real").id
    _finish(connection, k, real, "failed", 1_000)
    connection.zadd(k.failed, {"ghost": 900})
    connection.zadd(k.delayed, {"ghost2": 4096})
    assert queue.retry_jobs(count=1) == 1
    assert queue.promote_jobs() == 0
    assert [text(x) for x in connection.lrange(k.wait, 0, -1)] == [real]
    assert not connection.exists(k.failed) and not connection.exists(k.delayed)
    assert [d["jobId"] for d in _waiting_events(connection, queue_name)] == [real]


def test_nothing_to_retry_or_promote_writes_nothing(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("waiting")
    before = queue_snapshot(connection, queue_name)
    assert queue.retry_jobs() == 0 and queue.retry_jobs("completed") == 0 and queue.promote_jobs() == 0
    assert queue_snapshot(connection, queue_name) == before


def test_promote_jobs_moves_every_delayed_job_as_promote_does(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    later = queue.add("later", delay=90_000).id
    soon = queue.add("soon", delay=60_000).id
    urgent = queue.add("urgent", delay=120_000, priority=1).id
    assert queue.promote_jobs(count=2) == 3
    assert connection.zcard(k.delayed) == 0
    assert [text(x) for x in connection.lrange(k.wait, 0, -1)] == [later, soon]
    assert [text(x) for x in connection.zrange(k.prioritized, 0, -1)] == [urgent]
    assert [queue.get_job(j).delay for j in (later, soon, urgent)] == [0, 0, 0]
    assert _waiting_events(connection, queue_name) == [{"jobId": j, "prev": "delayed"} for j in (soon, later, urgent)]
    assert _process_all(connection, queue_name, 3) == [soon, later, urgent]


@pytest.mark.parametrize("call", [
    lambda q: q.retry_jobs("delayed"),
    lambda q: q.retry_jobs("wait"),
    lambda q: q.retry_jobs(None),
    lambda q: q.retry_jobs(count=0),
    lambda q: q.retry_jobs(count=-1),
    lambda q: q.retry_jobs(count=2**53),
    lambda q: q.retry_jobs(count=True),
    lambda q: q.retry_jobs(count=1.5),
    lambda q: q.retry_jobs(timestamp=-1),
    lambda q: q.retry_jobs(timestamp=8_640_000_000_000_001),
    lambda q: q.retry_jobs(timestamp="now"),
    lambda q: q.promote_jobs(0),
    lambda q: q.promote_jobs(2**53),
    lambda q: q.promote_jobs("10"),
], ids=["state-delayed", "state-wait", "state-none", "count-0", "count-neg", "count-big", "count-bool",
        "count-float", "ts-neg", "ts-big", "ts-str", "promote-0", "promote-big", "promote-str"])
def test_bad_arguments_are_refused_before_anything_is_written(connection: redis.Redis, queue_name: str,
                                                              call: Any) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    failed = queue.add("f").id
    _finish(connection, k, failed, "failed", 1_000)
    queue.add("d", delay=5_000)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match=r"(retry|promote)_jobs: (state|count|timestamp)="):
        call(queue)
    assert queue_snapshot(connection, queue_name) == before


@pytest.mark.parametrize(("name", "args", "message"), [
    ("reprocessJob", ["{id}", "delayed", "0", "0"], "reprocessJob: state must be completed or failed, got delayed"),
    ("retryJobs", ["{prefix}", "wait", "10", "9999999999999"], "state must be completed or failed, got wait"),
    ("retryJobs", ["{prefix}", "failed", "0", "9999999999999"], "retryJobs: count must be an integer >= 1, got 0"),
    ("retryJobs", ["{prefix}", "failed", "1.5", "9999999999999"], "retryJobs: count must be an integer >= 1, got 1.5"),
    ("retryJobs", ["{prefix}", "failed", "10", "soon"], "retryJobs: timestamp must be an integer (ms), got soon"),
    ("retryJobs", ["{prefix}", "failed", "10", "1e400"], "retryJobs: timestamp must be an integer (ms), got 1e400"),
    ("promoteJobs", ["{prefix}", "-1"], "promoteJobs: count must be an integer >= 1, got -1"),
    ("promoteJobs", ["{prefix}", "2.5"], "promoteJobs: count must be an integer >= 1, got 2.5"),
], ids=["reprocess-state", "retry-state", "retry-count-0", "retry-count-float", "retry-ts", "retry-ts-inf",
        "promote-count", "promote-count-float"])
def test_the_scripts_refuse_bad_arguments_themselves_writing_nothing(connection: redis.Redis, queue_name: str,
                                                                     name: str, args: list[str], message: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    failed = queue.add("f").id
    _finish(connection, k, failed, "failed", 1_000)
    queue.add("d", delay=5_000)
    before = queue_snapshot(connection, queue_name)
    lua = script(name)
    keys = lua.keys_for(k, failed, finished="failed") if name != "promoteJobs" else lua.keys_for(k)
    with pytest.raises(redis.ResponseError) as refused:
        run_script(connection, lua, keys, [a.format(id=failed, prefix=k.job_prefix) for a in args])
    assert message in str(refused.value)
    assert queue_snapshot(connection, queue_name) == before
