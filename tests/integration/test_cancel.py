"""Cancel (Queue.cancel, Job.cancel) on real Redis and fakeredis: a job that has not started is
failed on the spot and never runs; a running one's processor sees ``job.cancelled`` and the job
ends failed ``cancelled: <reason>``, not retried; what cannot be cancelled writes nothing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from echomq import JobCancelledError, JobCancelRequestedError, Queue, Worker
from echomq.errors import CancelPendingError, InvalidInputError
from echomq.protocol.keys import QueueKeys
from echomq.queue.cancel import CancelOutcome, cancel_job
from echomq.worker.transitions import Transitions

from support.workers import Running, events, wait_until


def _dump(connection: redis.Redis, keys: QueueKeys, job_id: str) -> dict[str, Any]:
    """Everything a cancel could write: the job, its request, the sets, the stream's length."""
    return {"hash": connection.hgetall(keys.job(job_id)), "cancel": connection.get(keys.job_cancel(job_id)),
            "failed": connection.zrange(keys.failed, 0, -1), "events": connection.xlen(keys.events),
            "wait": connection.lrange(keys.wait, 0, -1), "active": connection.lrange(keys.active, 0, -1)}


@pytest.mark.parametrize("how", ["waiting", "delayed", "prioritized"])
def test_a_job_that_has_not_started_fails_at_once_and_never_runs(connection: redis.Redis, queue_name: str,
                                                                  how: str) -> None:
    queue = Queue(connection, queue_name)
    opts: dict[str, Any] = {"waiting": {}, "delayed": {"delay": 60_000}, "prioritized": {"priority": 3}}[how]
    job = queue.add("mail", {"to": "a"}, attempts=5, deduplication={"id": "d1"}, **opts)
    other = queue.add("mail", {"to": "b"})
    assert queue.cancel(job.id, "user asked") is True
    stored = queue.get_job(job.id)
    assert stored is not None and stored.get_state() == "failed"
    assert stored.failed_reason == "cancelled: user asked" and stored.finished_on is not None
    assert stored.attempts_made == 0  # it never ran
    assert queue.get_deduplication_job_id("d1") is None  # its deduplication id is free again
    last = events(connection, queue_name)[-1]
    assert last == {"event": "failed", "jobId": job.id, "failedReason": "cancelled: user asked", "prev": how}
    ran: list[str] = []
    with Running(Worker(connection, queue_name, lambda j: ran.append(j.id), drain_delay=0.2)):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 1, timeout=5)
    assert ran == [other.id]


def test_a_keep_rule_of_the_job_applies_and_no_reason_has_a_default(connection: redis.Redis,
                                                                     queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    gone = queue.add("a", {}, remove_on_fail=True)
    kept = queue.add("a", {})
    assert queue.cancel(gone.id) and _job_cancel(queue, kept.id)
    assert queue.get_job(gone.id) is None and not connection.exists(queue.keys.job_cancel(gone.id))
    assert queue.get_job(kept.id).failed_reason == "cancelled: no reason given"  # type: ignore[union-attr]


def _job_cancel(queue: Queue, job_id: str) -> bool:
    job = queue.get_job(job_id)
    assert job is not None
    return job.cancel()


def test_what_cannot_be_cancelled_answers_false_and_writes_nothing(connection: redis.Redis,
                                                                    queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    keys = queue.keys
    done = queue.add("a", {})
    assert queue.cancel(done.id, "first") is True
    parent = queue.add_flow({"name": "p", "data": {}}, [{"name": "c", "data": {}}])
    before = _dump(connection, keys, done.id)
    assert queue.cancel(done.id, "again") is False  # failed already
    assert cancel_job(connection, keys, done.id, None, 1) is CancelOutcome.FINISHED
    assert cancel_job(connection, keys, "nope", None, 1) is CancelOutcome.MISSING
    assert queue.cancel("nope") is False
    assert _dump(connection, keys, done.id) == before and not connection.exists(keys.job("nope"))
    assert cancel_job(connection, keys, parent.id, None, 1) is CancelOutcome.WAITING_CHILDREN
    for bad in ("", "  ", 7, "x" * 1001):
        with pytest.raises(InvalidInputError, match="reason"):
            queue.cancel(done.id, bad)  # type: ignore[arg-type]
    assert _dump(connection, keys, done.id) == before


def test_a_running_job_sees_cancelled_and_fails_for_good_once(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    started = threading.Event()
    seen: dict[str, Any] = {}

    def processor(job: Any) -> None:
        assert job.cancelled is False
        started.set()
        deadline = time.monotonic() + 5
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        seen["after_s"] = time.monotonic() - asked[0]
        seen["stop"] = job.stop_reason
        job.raise_if_cancelled()

    asked = [0.0]
    job = queue.add("slow", {}, attempts=3, backoff=1)
    with Running(Worker(connection, queue_name, processor, drain_delay=0.2)):
        assert started.wait(5)
        asked[0] = time.monotonic()
        assert queue.cancel(job.id, "stop it") is True
        assert queue.cancel(job.id, "twice") is False  # a request is pending: nothing written
        assert wait_until(lambda: job.reload().get_state() == "failed", timeout=5)
        job.reload()  # the state was read after the hash: read it again
    assert isinstance(seen["stop"], JobCancelRequestedError) and isinstance(seen["stop"], JobCancelledError)
    assert seen["after_s"] < 1.0  # the bench measures it; the test bounds it loosely
    assert job.failed_reason == "cancelled: stop it" and job.attempts_made == 1  # not retried
    assert not connection.exists(queue.keys.job_cancel(job.id))  # the request goes with the finish
    kinds = [(e["event"], e.get("failedReason")) for e in events(connection, queue_name)]
    assert kinds.count(("failed", "cancelled: stop it")) == 1 and not any(k == "delayed" for k, _ in kinds)


def test_a_processor_that_returns_after_a_cancel_still_fails_as_cancelled(connection: redis.Redis,
                                                                           queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    started, release = threading.Event(), threading.Event()

    def processor(job: Any) -> str:
        started.set()
        release.wait(5)
        wait_until(lambda: job.cancelled, timeout=2)
        return "done anyway"

    job = queue.add("a", {})
    with Running(Worker(connection, queue_name, processor, drain_delay=0.2)):
        assert started.wait(5)
        assert queue.cancel(job.id, "late") is True
        release.set()
        assert wait_until(lambda: job.reload().get_state() == "failed", timeout=5)
        job.reload()  # the state was read after the hash: read it again
    assert job.failed_reason == "cancelled: late" and job.return_value is None


def test_a_cancel_racing_the_finish_takes_effect_once(connection: redis.Redis, queue_name: str) -> None:
    """The request lands after the processor's outcome was decided but before its finish: the
    finish is refused (-12), writing nothing, and the worker ends the job as cancelled instead."""
    queue = Queue(connection, queue_name)
    keys = queue.keys
    job = queue.add("a", {}, attempts=2)
    worker = Worker(connection, queue_name, lambda j: None)
    transitions = Transitions(worker.client, keys, worker.options)
    fetched = transitions.move_to_active("tok-1", int(time.time() * 1000))
    assert fetched.job_id == job.id
    assert queue.cancel(job.id, "raced") is True
    before = _dump(connection, keys, job.id)
    for finish in (
        lambda: transitions.move_to_finished(job.id, "tok-1", 1, completed=True, value="1", keep=None, attempts=2,
                                             fetch_next=False),
        lambda: transitions.retry(job.id, "tok-1", 1),
        lambda: transitions.move_to_delayed(job.id, "tok-1", 1, 500),
    ):
        with pytest.raises(CancelPendingError, match="being cancelled"):
            finish()
    assert _dump(connection, keys, job.id) == before  # every refusal before any write
    transitions.move_to_finished(job.id, "tok-1", 2, completed=False, value="cancelled: raced", keep=None,
                                 attempts=2, fetch_next=False, cancelling=True)
    assert job.reload().get_state() == "failed" and not connection.exists(keys.job_cancel(job.id))
    assert queue.cancel(job.id) is False  # and once only


def test_the_worker_ends_a_job_as_cancelled_when_its_finish_is_refused_for_a_request(
        connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("a", {}, attempts=3)

    def processor(j: Any) -> str:
        assert queue.cancel(j.id, "in the finish window") is True  # the watchdog has not seen it yet
        return "ok"

    with Running(Worker(connection, queue_name, processor, drain_delay=0.2)):
        assert wait_until(lambda: job.reload().get_state() == "failed", timeout=5)
        job.reload()  # the state was read after the hash: read it again
    assert job.failed_reason == "cancelled: in the finish window" and job.attempts_made == 1
    assert not connection.exists(queue.keys.job_cancel(job.id))


def test_removing_a_job_removes_its_cancel_request(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("a", {})
    worker = Worker(connection, queue_name, lambda j: None)
    transitions = Transitions(worker.client, queue.keys, worker.options)
    assert transitions.move_to_active("0", int(time.time() * 1000)).job_id == job.id  # token "0": no lock
    assert queue.cancel(job.id) is True
    ttl = connection.pttl(queue.keys.job_cancel(job.id))
    assert 3_500_000 < ttl <= 3_600_000  # bounded even if a runtime that ignores it finishes the job
    assert queue.remove(job.id) is True
    assert not connection.exists(queue.keys.job_cancel(job.id))
