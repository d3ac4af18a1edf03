"""Job.retry / Queue.retry_job on jobs an EchoMQ Worker finished, and ActiveJob.discard.

A retried job loses its finish (finishedOn, processedOn, its failedReason or returnvalue), keeps
its counters unless told, goes where its options say (wait, the front of wait with lifo,
prioritized), wakes a worker unless the queue is paused or maxed, writes `waiting` with the
state it left as `prev`, and then runs again on a Worker. Every refusal writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import ActiveJob, Queue
from echomq.errors import InvalidInputError, InvalidStateError, JobNotFoundError
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

from support.queues import read_events
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until


def _fields(connection: redis.Redis, k: QueueKeys, job_id: str) -> dict[str, str]:
    return {text(f): text(v) for f, v in connection.hgetall(k.job(job_id)).items()}


def _run(connection: redis.Redis, queue_name: str, processor: Callable[[ActiveJob], Any],
         done: Callable[[], bool]) -> None:
    """Run an EchoMQ Worker until ``done()``."""
    with Running(Worker(connection, queue_name, processor, drain_delay=0.2, name="w")):
        assert wait_until(done), "the worker did not get there"


def _fail(job: ActiveJob) -> Any:
    if job.data.get("fail"):
        raise ValueError(f"boom {job.attempts_made}")
    return {"ran": job.data.get("n"), "attempt": job.attempts_made}


def _finished(connection: redis.Redis, queue_name: str, *specs: dict[str, Any]) -> list[str]:
    """Add jobs and let a Worker finish each for good; their ids."""
    queue = Queue(connection, queue_name)
    ids = [queue.add(spec.pop("name", "job"), spec.pop("data", {}), **spec).id for spec in specs]
    k = QueueKeys(queue_name)
    _run(connection, queue_name, _fail, lambda: connection.zcard(k.completed) + connection.zcard(k.failed) == len(ids))
    return ids


def _job_events(connection: redis.Redis, queue_name: str, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e, d) for e, d in read_events(connection, queue_name) if d.get("jobId") == job_id]


def test_a_failed_job_retried_loses_its_failure_keeps_its_counters_and_runs_again(
        connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    [job_id] = _finished(connection, queue_name, {"data": {"fail": True, "n": 1}, "attempts": 2})
    before = _fields(connection, k, job_id)
    assert before["failedReason"] == "boom 1" and before["atm"] == "2" and before["ats"] == "2"
    connection.delete(k.marker)
    queue = Queue(connection, queue_name)
    job = queue.get_job(job_id)
    job.retry("failed")

    after = _fields(connection, k, job_id)
    assert set(before) - set(after) == {"finishedOn", "processedOn", "failedReason"}
    kept = ("atm", "ats", "stacktrace", "pb")
    assert {f: after[f] for f in kept} == {f: before[f] for f in kept}
    assert job.get_state() == "waiting" and connection.lrange(k.wait, 0, -1) == [job_id.encode()]
    assert connection.zrange(k.marker, 0, -1, withscores=True) == [(b"0", 0.0)]
    assert (job.failed_reason, job.finished_on, job.processed_on, job.attempts_made) == (None, None, None, 2)
    assert _job_events(connection, queue_name, job_id)[-1] == ("waiting", {"jobId": job_id, "prev": "failed"})

    # It has used its two attempts: the retry is one more attempt, no further retries (BullMQ's rule).
    _run(connection, queue_name, _fail, lambda: connection.zscore(k.failed, job_id) is not None)
    again = queue.get_job(job_id)
    assert (again.attempts_made, again.attempts_started, again.failed_reason) == (3, 3, "boom 2")
    assert len(again.stacktrace) == 3


def test_reset_attempts_gives_the_job_all_its_attempts_again(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    [job_id] = _finished(connection, queue_name, {"data": {"fail": True}, "attempts": 2})
    queue = Queue(connection, queue_name)
    job = queue.get_job(job_id)
    job.retry(reset_attempts_made=True, reset_attempts_started=True)
    fields = _fields(connection, k, job_id)
    assert "atm" not in fields and "ats" not in fields
    assert (job.attempts_made, job.attempts_started) == (0, 0)

    seen: list[int] = []

    def record(active: ActiveJob) -> Any:
        seen.append(active.attempts_made)
        return _fail(active)

    _run(connection, queue_name, record, lambda: connection.zscore(k.failed, job_id) is not None)
    assert seen == [0, 1]  # two attempts again, counted from zero
    assert _fields(connection, k, job_id)["atm"] == "2"


def test_a_completed_job_retried_loses_its_return_value(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    [job_id] = _finished(connection, queue_name, {"data": {"n": 7}})
    queue = Queue(connection, queue_name)
    before = _fields(connection, k, job_id)
    assert json.loads(before["returnvalue"]) == {"ran": 7, "attempt": 0}
    queue.retry_job(job_id, "completed")
    after = _fields(connection, k, job_id)
    assert set(before) - set(after) == {"finishedOn", "processedOn", "returnvalue"}
    assert _job_events(connection, queue_name, job_id)[-1] == ("waiting", {"jobId": job_id, "prev": "completed"})
    _run(connection, queue_name, _fail, lambda: connection.zscore(k.completed, job_id) is not None)
    assert queue.get_job(job_id).return_value == {"ran": 7, "attempt": 1}


def test_a_retried_job_goes_where_its_options_say(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    plain, lifo, urgent = _finished(connection, queue_name, {"data": {"fail": True}},
                                    {"data": {"fail": True}, "lifo": True},
                                    {"data": {"fail": True}, "priority": 3})
    queue = Queue(connection, queue_name)
    other = queue.add("other").id
    for job_id in (plain, lifo, urgent):
        queue.retry_job(job_id)
    # LPUSH puts `plain` at the far end, RPUSH puts `lifo` at the end workers take from.
    assert [text(x) for x in connection.lrange(k.wait, 0, -1)] == [plain, other, lifo]
    assert [text(x) for x in connection.zrange(k.prioritized, 0, -1)] == [urgent]
    assert queue.get_job(urgent).get_state() == "prioritized"
    order: list[str] = []
    _run(connection, queue_name, lambda job: order.append(job.id), lambda: len(order) == 4)
    assert order == [lifo, other, plain, urgent]


def test_a_paused_queue_gets_the_retried_job_in_wait_without_waking_a_worker(
        connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    [job_id] = _finished(connection, queue_name, {"data": {"fail": True}})
    queue = Queue(connection, queue_name)
    queue.pause()
    queue.retry_job(job_id)
    assert connection.lrange(k.wait, 0, -1) == [job_id.encode()] and not connection.exists(k.paused)
    assert not connection.exists(k.marker)
    assert queue.get_job(job_id).get_state() == "waiting"
    queue.resume()
    _run(connection, queue_name, lambda job: "done", lambda: connection.zscore(k.completed, job_id) is not None)


def test_a_queue_at_its_global_concurrency_gets_no_marker(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    [job_id] = _finished(connection, queue_name, {"data": {"fail": True}})
    connection.delete(k.marker)
    connection.hset(k.meta, "concurrency", 1)
    connection.lpush(k.active, "someone-else")
    Queue(connection, queue_name).retry_job(job_id)
    assert connection.lrange(k.wait, 0, -1) == [job_id.encode()]
    assert not connection.exists(k.marker)


@pytest.mark.parametrize("call", [
    lambda q, ids: q.retry_job(ids["failed"], "delayed"),
    lambda q, ids: q.retry_job(ids["failed"], "bogus"),
    lambda q, ids: q.retry_job(ids["failed"], 1),
    lambda q, ids: q.retry_job(ids["failed"], reset_attempts_made="yes"),
    lambda q, ids: q.get_job(ids["failed"]).retry(reset_attempts_started=1),
], ids=["delayed", "bogus", "not-a-str", "flag-str", "flag-int"])
def test_bad_arguments_are_refused_before_anything_is_written(connection: redis.Redis, queue_name: str,
                                                              call: Any) -> None:
    [failed] = _finished(connection, queue_name, {"data": {"fail": True}})
    queue = Queue(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match="retry: "):
        call(queue, {"failed": failed})
    assert queue_snapshot(connection, queue_name) == before


def test_a_job_not_in_that_state_or_gone_is_refused_and_nothing_is_written(
        connection: redis.Redis, queue_name: str) -> None:
    failed, completed = _finished(connection, queue_name, {"data": {"fail": True}}, {"data": {}})
    queue = Queue(connection, queue_name)
    waiting = queue.add("waiting").id
    before = queue_snapshot(connection, queue_name)
    for job_id, state in ((failed, "completed"), (completed, "failed"), (waiting, "failed")):
        with pytest.raises(InvalidStateError, match=f"retry: job {job_id!r} is not in the {state} state"):
            queue.retry_job(job_id, state)
    with pytest.raises(JobNotFoundError, match="retry: job 'nope' does not exist"):
        queue.retry_job("nope")
    assert queue_snapshot(connection, queue_name) == before


def test_a_job_removed_when_it_failed_cannot_be_retried(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    gone = queue.add("gone", {"fail": True}, remove_on_fail=True)
    _run(connection, queue_name, _fail, lambda: any(e == "failed" for e, _ in read_events(connection, queue_name)))
    assert not connection.exists(k.job(gone.id))
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(JobNotFoundError):
        gone.retry()
    assert queue_snapshot(connection, queue_name) == before


def test_a_retried_child_is_pending_again_and_its_completion_releases_the_waiting_parent(
        connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "parent", "data": {}},
                            [{"name": "child", "data": {"fail": True}, "opts": {"job_id": "kid"}}])
    _run(connection, queue_name, _fail, lambda: connection.zscore(k.failed, "kid") is not None)
    assert parent.get_state() == "waiting-children"  # a failed child without a flag keeps it waiting
    connection.hset(k.job("kid"), "data", json.dumps({"n": 5}))  # the cause is fixed, retry the child
    queue.retry_job("kid")
    assert queue.get_job(parent.id).get_pending_dependencies() == [k.job("kid")]

    def run(job: ActiveJob) -> Any:
        return job.get_children_values() if job.name == "parent" else _fail(job)

    _run(connection, queue_name, run, lambda: connection.zscore(k.completed, parent.id) is not None)
    assert queue.get_job(parent.id).return_value == {k.job("kid"): {"ran": 5, "attempt": 1}}


@pytest.mark.parametrize(("child_opts", "record"), [
    ({"fail_parent_on_failure": True}, "unsuccessful"),
    ({"continue_parent_on_failure": True}, "failed"),
    ({"ignore_dependency_on_failure": True}, "failed"),
], ids=["fpof", "cpof", "idof"])
def test_a_retried_failed_child_leaves_its_parents_record(connection: redis.Redis, queue_name: str,
                                                          child_opts: dict[str, Any], record: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "parent", "data": {}, "opts": {"job_id": "p"}},
                            [{"name": "child", "data": {"fail": True}, "opts": {"job_id": "kid", **child_opts}}])
    # The child's failure releases the parent, which then fails (fpof) or completes.
    _run(connection, queue_name, _fail, lambda: parent.get_state() in ("completed", "failed"))
    record_key = k.key(f"p:{record}")
    assert connection.exists(record_key)
    queue.retry_job("kid")
    assert not connection.exists(record_key)
    assert parent.get_pending_dependencies() == [k.job("kid")]


def test_a_retried_completed_child_is_taken_out_of_its_parents_results(connection: redis.Redis,
                                                                       queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "parent", "data": {}, "opts": {"job_id": "p"}},
                            [{"name": "child", "data": {"n": 1}, "opts": {"job_id": "kid"}},
                             {"name": "other", "data": {}, "opts": {"job_id": "slow", "delay": 600_000}}])
    _run(connection, queue_name, _fail, lambda: connection.zscore(k.completed, "kid") is not None)
    assert k.job("kid") in parent.get_children_values()
    queue.retry_job("kid", "completed")
    assert parent.get_children_values() == {}
    assert parent.get_pending_dependencies() == sorted([k.job("kid"), k.job("slow")])


# -- ActiveJob.discard -----------------------------------------------------------------------------

def test_a_discarded_attempt_that_fails_is_final_whatever_attempts_are_left(connection: redis.Redis,
                                                                             queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    discarded = queue.add("discarded", {"discard": True}, attempts=5).id
    control = queue.add("control", {}, attempts=2).id
    discarded_ok = queue.add("discarded-ok", {"discard": True, "succeed": True}, attempts=5).id

    def run(job: ActiveJob) -> Any:
        if job.data.get("discard"):
            job.discard()
        if job.data.get("succeed"):
            return "fine"
        raise RuntimeError("permanent")

    _run(connection, queue_name, run, lambda: connection.zcard(k.failed) == 2 and connection.zcard(k.completed) == 1)
    assert queue.get_job(discarded).attempts_made == 1
    assert queue.get_job(control).attempts_made == 2  # not discarded: retried
    assert queue.get_job(discarded_ok).return_value == "fine"
    names = [e for e, d in read_events(connection, queue_name) if d.get("jobId") == discarded]
    assert names == ["added", "waiting", "active", "failed"]  # no retry, and no retries-exhausted (1 < 5)
    assert not connection.exists(k.job_lock(discarded))
    assert "discarded" not in _fields(connection, k, discarded)  # nothing of it is stored
