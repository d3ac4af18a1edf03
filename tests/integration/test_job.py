"""Job: reading every protocol field, and the operations on one job."""

from __future__ import annotations

import json

import pytest
import redis

from echomq import Job, Queue
from echomq.errors import InvalidInputError, InvalidStateError, JobNotFoundError
from echomq.protocol.keys import QueueKeys

from support.queues import raw_events, read_events


def test_from_hash_reads_every_field_bullmq_writes(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    connection.hset(k.job("7"), mapping={
        "name": "n", "data": '{"a":[1,2]}', "opts": '{"attempts":3,"kl":5,"de":{"id":"d"},"fpof":true}',
        "timestamp": "1700000000000", "delay": "0", "priority": "2", "progress": '{"step":2}',
        "attemptsMade": "1", "ats": "2", "stc": "1", "processedOn": "1700000000100",
        "finishedOn": "1700000000200", "pb": "w1", "returnvalue": '{"ok":true}',
        "failedReason": "boom", "stacktrace": '["Error: boom\\n  at x"]', "rjk": "sched",
        "deid": "d", "parentKey": "emq:{p}:9", "parent": '{"id":"9","queueKey":"emq:{p}"}',
        "defa": "child failed",
    })
    job = Queue(connection, queue_name).get_job("7")
    assert job is not None
    assert (job.id, job.name, job.data) == ("7", "n", {"a": [1, 2]})
    assert job.opts == {"attempts": 3, "keep_logs": 5, "deduplication": {"id": "d"}, "fail_parent_on_failure": True}
    assert job.raw_opts["kl"] == 5
    assert (job.timestamp, job.delay, job.priority) == (1700000000000, 0, 2)
    assert job.progress == {"step": 2}
    assert (job.attempts_made, job.attempts_started, job.stalled_counter) == (1, 2, 1)
    assert (job.processed_on, job.finished_on, job.processed_by) == (1700000000100, 1700000000200, "w1")
    assert job.return_value == {"ok": True}
    assert job.failed_reason == "boom"
    assert job.stacktrace == ["Error: boom\n  at x"]
    assert job.scheduler_id == job.repeat_job_key == "sched"
    assert job.deduplication_id == "d"
    assert job.parent_key == "emq:{p}:9" and job.parent == {"id": "9", "queueKey": "emq:{p}"}
    assert job.deferred_failure == "child failed"
    # atm wins over the legacy attemptsMade when both exist.
    connection.hset(k.job("7"), "atm", "4")
    assert job.reload().attempts_made == 4


def test_missing_job_is_none_and_reload_raises(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    assert queue.get_job("nope") is None
    job = queue.add("x")
    connection.delete(QueueKeys(queue_name).job(job.id))
    with pytest.raises(JobNotFoundError):
        job.reload()


def test_fetch_works_with_the_keys_alone(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("x", [1])
    fetched = Job.fetch(connection, QueueKeys(queue_name), job.id)
    assert fetched is not None and fetched.data == [1] and fetched.get_state() == "waiting"


def test_update_progress_stores_json_and_writes_the_event(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("x")
    job.update_progress(42)
    job.update_progress({"step": 2, "of": 3})
    assert job.reload().progress == {"step": 2, "of": 3}
    assert read_events(connection, queue_name)[2:] == [
        ("progress", {"jobId": job.id, "data": 42}), ("progress", {"jobId": job.id, "data": {"step": 2, "of": 3}})]
    assert raw_events(connection, queue_name)[2] == ["event", "progress", "jobId", job.id, "data", "42"]
    with pytest.raises(InvalidInputError):
        job.update_progress(object())
    connection.delete(job.key)
    with pytest.raises(JobNotFoundError):
        job.update_progress(1)


def test_log_appends_and_keep_logs_trims(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("x", keep_logs=2)
    assert [job.log(f"line {n}") for n in range(4)] == [1, 2, 2, 2]
    assert job.get_logs() == ["line 2", "line 3"]
    plain = Queue(connection, queue_name).add("y")
    assert [plain.log("a"), plain.log("b"), plain.log("c")] == [1, 2, 3]


def test_promote_moves_a_delayed_job_to_wait(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("x", delay=60_000)
    job.promote()
    assert job.get_state() == "waiting"
    assert connection.hget(k.job(job.id), "delay") == b"0"
    assert connection.zscore(k.marker, "0") == 0
    assert read_events(connection, queue_name)[-1] == ("waiting", {"jobId": job.id, "prev": "delayed"})
    with pytest.raises(InvalidStateError, match="delayed"):
        job.promote()


def test_promote_keeps_priority(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x", delay=60_000, priority=7)
    queue.promote(job.id)
    assert job.get_state() == "prioritized"


def test_change_delay_rescores_and_writes_delayed(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("x", delay=1000)
    job.change_delay(7_200_000)
    assert connection.hget(k.job(job.id), "delay") == b"7200000"
    score = connection.zscore(k.delayed, job.id)
    event = read_events(connection, queue_name)[-1]
    assert event[0] == "delayed" and event[1]["jobId"] == job.id
    assert int(score) // 4096 == event[1]["delay"]
    assert connection.zscore(k.marker, "1") == event[1]["delay"]
    waiting = queue.add("y")
    with pytest.raises(InvalidStateError):
        waiting.change_delay(5)
    with pytest.raises(JobNotFoundError):
        queue.change_delay("ghost", 5)
    with pytest.raises(InvalidInputError):
        job.change_delay(-1)


@pytest.mark.parametrize("placement,prev", [
    ({}, "wait"), ({"delay": 5000}, "delayed"), ({"priority": 3}, "prioritized"),
])
def test_remove_from_each_state_writes_removed_with_prev(connection: redis.Redis, queue_name: str,
                                                        placement: dict, prev: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("x", **placement)
    job.log("a line")
    assert job.remove() is True
    assert not connection.exists(k.job(job.id), k.job_logs(job.id))
    assert job.get_state() == "unknown"
    assert read_events(connection, queue_name)[-1] == ("removed", {"jobId": job.id, "prev": prev})
    # Removing again finds nothing to remove (False) and writes no second event.
    assert job.remove() is False
    assert [e for e, _ in read_events(connection, queue_name)].count("removed") == 1


def test_remove_finished_and_locked_jobs(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    done = queue.add("x")
    connection.lrem(k.wait, 1, done.id)
    connection.zadd(k.completed, {done.id: 1})
    assert queue.remove(done.id)
    assert read_events(connection, queue_name)[-1] == ("removed", {"jobId": done.id, "prev": "completed"})
    busy = queue.add("y")
    connection.lrem(k.wait, 1, busy.id)
    connection.lpush(k.active, busy.id)
    connection.set(k.job_lock(busy.id), "token")
    assert queue.remove(busy.id) is False
    assert connection.exists(k.job(busy.id))


def test_remove_refuses_a_schedulers_pending_iteration(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("tick", job_id="repeat:s1:1900000000000", delay=1000, repeat_job_key="s1")
    connection.zadd(k.repeat, {"s1": 1900000000000})
    with pytest.raises(InvalidStateError, match="job scheduler"):
        job.remove()
    assert connection.exists(k.job(job.id))


def test_removing_a_flows_last_child_releases_the_parent(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "p"}, [{"name": "c"}])
    [child] = queue.get_jobs("waiting")
    child.remove()
    assert parent.get_state() == "waiting"
    assert read_events(connection, queue_name)[-2:] == [
        ("waiting", {"jobId": parent.id, "prev": "waiting-children"}),
        ("removed", {"jobId": child.id, "prev": "wait"})]


def test_removing_a_parent_removes_its_children(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "p"}, [{"name": "c1"}, {"name": "c2", "children": [{"name": "g"}]}])
    assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 2, "waiting-children": 2}
    parent.remove()
    assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 0, "waiting-children": 0}
    kept = parent.__class__.fetch(connection, QueueKeys(queue_name), parent.id)
    assert kept is None


def test_opts_json_is_what_bullmq_reads(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("x", attempts=3, backoff={"type": "exponential", "delay": 100},
                                           remove_on_fail={"age": 60, "count": 5}, job_id="j-1")
    stored = json.loads(connection.hget(QueueKeys(queue_name).job(job.id), "opts"))
    assert stored == {"attempts": 3, "jobId": "j-1", "backoff": {"type": "exponential", "delay": 100},
                      "removeOnFail": {"age": 60, "count": 5}}
