"""Time limits in a thread worker, on real Redis and fakeredis: the soft limit reaches the
processor, the hard limit fails the attempt without its thread (retries apply), the late
thread's result is discarded, its slot refilled and the leak counted; bad limits are refused."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, InvalidJobOptionsError, JobRegistry, JobSoftTimeLimitError, Queue, Worker
from echomq.worker import limits

from support.workers import Running, events, wait_until


def test_the_soft_limit_tells_the_processor_and_fails_the_attempt_as_any_error(connection: redis.Redis,
                                                                                queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    stops: list[Any] = []

    def processor(job: Any) -> str:
        if job.attempts_made == 0:
            assert wait_until(lambda: job.cancelled, timeout=3, interval=0.005)
            stops.append(job.stop_reason)
            job.raise_if_cancelled()
        return "second"

    job = queue.add("a", {}, attempts=2, soft_time_limit_ms=50)
    with Running(Worker(connection, queue_name, processor, drain_delay=0.2, time_limit_ms=5000)):
        assert wait_until(lambda: job.reload().get_state() == "completed", timeout=5)
        job.reload()  # the state was read after the hash: read it again
    assert isinstance(stops[0], JobSoftTimeLimitError) and str(stops[0]) == "soft time limit of 50 ms exceeded"
    assert job.return_value == "second" and job.attempts_made == 2  # retried, as any failure
    assert job.stacktrace and "JobSoftTimeLimitError" in job.stacktrace[0]


def test_the_hard_limit_fails_the_attempt_discards_the_late_result_and_refills_the_slot(
        connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    release = threading.Event()
    seen: list[bool] = []

    def processor(job: Any) -> str:
        if job.name == "stuck" and job.attempts_made == 0:
            release.wait(5)  # a call without a timeout: nothing the processor checks
            seen.append(job.cancelled)
            return "late"
        return f"ran {job.name}"

    stuck = queue.add("stuck", {}, attempts=2, time_limit_ms=150)
    worker = Worker(connection, queue_name, processor, drain_delay=0.2, time_limit_ms=60_000)
    with Running(worker):
        assert wait_until(lambda: stuck.reload().get_state() == "completed", timeout=5)
        stuck.reload()  # the state was read after the hash: read it again
        other = queue.add("other", {})  # the one slot works again while the old thread is stuck
        assert wait_until(lambda: other.reload().get_state() == "completed", timeout=5)
        other.reload()  # the state was read after the hash: read it again
        assert worker.leaked_threads == 1
        release.set()
        assert wait_until(lambda: seen == [True], timeout=5)  # it saw cancelled, too late
    assert stuck.return_value == "ran stuck" and stuck.attempts_made == 2  # the retry's, not "late"
    assert stuck.stacktrace and "hard time limit of 150 ms exceeded" in stuck.stacktrace[0]
    failures = [e for e in events(connection, queue_name) if e.get("jobId") == stuck.id and e["event"] == "waiting"
                and e.get("prev") == "active"]
    assert len(failures) == 1  # one failed attempt, retried at once
    assert json.loads(connection.hget(queue.keys.job(stuck.id), "returnvalue")) == "ran stuck"


def test_a_hard_limit_without_attempts_left_fails_the_job_for_good(connection: redis.Redis,
                                                                   queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    release = threading.Event()
    job = queue.add("a", {})
    worker = Worker(connection, queue_name, lambda j: release.wait(5), drain_delay=0.2, time_limit_ms=100)
    try:
        with Running(worker):
            assert wait_until(lambda: job.reload().get_state() == "failed", timeout=5)
            job.reload()  # the state was read after the hash: read it again
            assert not connection.exists(queue.keys.job_lock(job.id))  # released at the limit
    finally:
        release.set()
    assert job.failed_reason == "hard time limit of 100 ms exceeded" and worker.leaked_threads == 1


@pytest.mark.parametrize(("opts", "match"), [
    ({"time_limit_ms": 0}, "time_limit_ms=0: must be an integer between 1"),
    ({"soft_time_limit_ms": 2**31}, "soft_time_limit_ms=2147483648"),
    ({"time_limit_ms": 1.5}, "time_limit_ms=1.5"),
    ({"time_limit_ms": True}, "time_limit_ms=True"),
    ({"time_limit_ms": 100, "soft_time_limit_ms": 100}, "soft_time_limit_ms=100: must be below time_limit_ms=100"),
])
def test_bad_job_limits_are_refused_before_anything_is_written(connection: redis.Redis, queue_name: str,
                                                               opts: dict[str, Any], match: str) -> None:
    queue = Queue(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError, match=match):
        queue.add("a", {}, **opts)
    assert connection.exists(queue.keys.id, queue.keys.wait) == 0


def test_bad_worker_limits_are_refused_naming_the_argument(connection: redis.Redis, queue_name: str) -> None:
    with pytest.raises(InvalidInputError, match="Worker time_limit_ms=0"):
        Worker(connection, queue_name, lambda j: None, time_limit_ms=0)
    with pytest.raises(InvalidInputError, match="Worker soft_time_limit_ms=500: must be below time_limit_ms=400"):
        Worker(connection, queue_name, lambda j: None, time_limit_ms=400, soft_time_limit_ms=500)


def test_the_limits_are_stored_under_echomqs_own_names(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("a", {}, time_limit_ms=900, soft_time_limit_ms=300)
    stored = json.loads(connection.hget(job.key, "opts"))
    assert stored["emqTimeLimit"] == 900 and stored["emqSoftTimeLimit"] == 300
    assert job.reload().opts["time_limit_ms"] == 900 and job.opts["soft_time_limit_ms"] == 300


def test_a_processor_that_ignores_a_cancel_past_the_grace_is_left_behind(connection: redis.Redis, queue_name: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "CANCEL_GRACE_S", 0.2)
    queue = Queue(connection, queue_name)
    started, release = threading.Event(), threading.Event()

    def deaf(job: Any) -> str:
        started.set()
        release.wait(5)
        return "late"

    job = queue.add("a", {}, attempts=3)
    worker = Worker(connection, queue_name, deaf, drain_delay=0.2)
    try:
        with Running(worker):
            assert started.wait(5)
            assert queue.cancel(job.id, "go away") is True
            assert wait_until(lambda: job.reload().get_state() == "failed", timeout=5)
            job.reload()  # the state was read after the hash: read it again
            assert worker.leaked_threads == 1
    finally:
        release.set()
    assert job.failed_reason == "cancelled: go away" and job.attempts_made == 1  # not retried


def test_a_registered_jobs_default_limits_are_its_jobs_options(connection: redis.Redis, queue_name: str) -> None:
    registry = JobRegistry(connection=connection)

    @registry.job(queue=queue_name, time_limit_ms=2000, soft_time_limit_ms=1500)
    def report(job: Any) -> None:
        return None

    job = report.enqueue(month="2026-11")
    assert (job.opts["time_limit_ms"], job.opts["soft_time_limit_ms"]) == (2000, 1500)
    with pytest.raises(InvalidJobOptionsError, match="time_limit_ms=-1"):
        registry.job(queue=queue_name, name="bad", time_limit_ms=-1)(lambda job: None)
