"""run_until_idle: every due job runs in the calling thread, as a Worker runs it, and the report
says what happened; on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, Queue, UnrecoverableError, WaitingChildrenError
from echomq.testing import FakeClock, Outcome, Runner, TooManyJobsError, advance_time, run_until_idle

T = "2030-01-01T09:00:00Z"


def fail_always(job: Any) -> None:
    raise ConnectionError("SMTP server unreachable")


def test_a_job_retries_with_its_exponential_backoff_and_then_fails(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    job = queue.add("email", {"to": "a"}, attempts=3, backoff={"type": "exponential", "delay": 1000})
    t = clock.now

    first = run_until_idle(queue, fail_always)
    assert [(r.job_id, r.attempt, r.outcome, r.at_ms, r.retry_at_ms) for r in first] == [
        (job.id, 1, Outcome.RETRIED, t, t + 1000)]
    assert queue.get_job(job.id).get_state() == "delayed"
    assert run_until_idle(queue, fail_always).runs == ()  # not due before the clock moves

    rest = advance_time(clock, queue, fail_always, seconds=30)
    assert [(r.attempt, r.outcome, r.at_ms - t) for r in rest] == [
        (2, Outcome.RETRIED, 1000), (3, Outcome.FAILED, 3000)]
    assert rest[0].retry_at_ms == t + 3000 and rest[1].retry_at_ms is None
    assert isinstance(rest[1].error, ConnectionError) and rest[1].failed_reason == "SMTP server unreachable"
    stored = queue.get_job(job.id)
    assert stored.get_state() == "failed"
    assert (stored.attempts_made, stored.failed_reason, stored.finished_on) == (3, "SMTP server unreachable", t + 3000)
    assert len(stored.stacktrace) == 3


def test_a_completed_job_is_recorded_as_a_worker_records_it(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    job = queue.add("sum", [1, 2, 3])
    clock.advance(250)

    report = run_until_idle(queue, lambda j: {"total": sum(j.data), "tuple": (1, 2)})
    [run] = report
    assert (run.outcome, run.return_value, run.at_ms, run.attempt) == (
        Outcome.COMPLETED, {"total": 6, "tuple": [1, 2]}, clock.now, 1)  # the value as a reader gets it
    stored = queue.get_job(job.id)
    assert (stored.get_state(), stored.return_value, stored.processed_on, stored.finished_on) == (
        "completed", {"total": 6, "tuple": [1, 2]}, clock.now, clock.now)
    assert connection.exists(queue.keys.job_lock(job.id)) == 0  # the lock went with the attempt
    assert report.completed.names() == ["sum"] and report.failed.runs == ()


def test_jobs_a_processor_adds_and_retries_due_now_run_in_the_same_call(connection: redis.Redis,
                                                                        queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    queue.add("first")
    flaky_left = [1]

    def process(job: Any) -> str:
        if job.name == "first":
            queue.add("second")
            queue.add("flaky", attempts=2)  # no backoff: back to wait, at once
        if job.name == "flaky" and flaky_left:
            flaky_left.pop()
            raise RuntimeError("once")
        return job.name

    report = run_until_idle(queue, process)
    assert [(r.name, r.outcome.value) for r in report] == [
        ("first", "completed"), ("second", "completed"), ("flaky", "retried"), ("flaky", "completed")]
    assert report[2].retry_at_ms == clock.now
    assert queue.get_job_counts("completed", "waiting", "active") == {"completed": 3, "waiting": 0, "active": 0}


def test_a_processor_per_job_name_and_a_name_without_one(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock(T))
    queue.add("known", attempts=5)
    queue.add("unknown", attempts=5)
    report = run_until_idle(queue, {"known": lambda job: "ok"})
    assert report.outcomes() == ["completed", "failed"]  # at once, whatever attempts are left
    assert report[1].failed_reason == f"no processor for job name 'unknown' in queue {queue.name!r} (handled: known)"
    assert isinstance(report[1].error, UnrecoverableError)


def test_a_base_exception_fails_the_attempt_then_stops_the_run(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock(T))
    interrupted = queue.add("interrupted", attempts=1)
    untouched = queue.add("next")

    def process(job: Any) -> None:
        if job.name == "interrupted":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_until_idle(queue, process)
    assert queue.get_job(interrupted.id).get_state() == "failed"  # recorded first, as a Worker records it
    assert queue.get_job(untouched.id).get_state() == "waiting"  # then the run stopped
    assert [r.name for r in run_until_idle(queue, process)] == ["next"]


def test_max_jobs_stops_a_job_that_keeps_adding_jobs(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock(T))
    queue.add("again")
    with pytest.raises(TooManyJobsError, match=f"max_jobs=25 attempts with jobs still due in queue '{queue_name}'") \
            as stopped:
        run_until_idle(queue, lambda job: queue.add("again") and None, max_jobs=25)
    assert len(stopped.value.report) == 25
    assert queue.get_job_counts("active", "waiting", "completed") == {"active": 0, "waiting": 1, "completed": 25}

    queue.add("once")  # a bound that is just reached with nothing more due is no error
    assert len(run_until_idle(queue, lambda job: None, max_jobs=2)) == 2


def test_a_paused_queue_runs_nothing_until_resumed(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    queue.add("now")
    queue.add("soon", delay=1000)
    queue.pause()
    assert advance_time(clock, queue, lambda job: None, seconds=5).runs == ()
    assert queue.get_job_counts("waiting", "delayed") == {"waiting": 2, "delayed": 0}  # promoted all the same
    queue.resume()
    assert run_until_idle(queue, lambda job: None).names() == ["now", "soon"]


def test_several_queues_are_served_in_turn_and_a_parent_runs_after_children_elsewhere(
        connection: redis.Redis, queue_name: str, other_queue_name: Callable[[str], str]) -> None:
    clock = FakeClock(T)
    orders = Queue(connection, queue_name, clock=clock)
    warehouse = Queue(connection, other_queue_name("warehouse"), clock=clock)
    for n in range(2):
        orders.add("order", n)
        warehouse.add("restock", n)
    parent = orders.add_flow({"name": "ship"}, [{"name": "pick", "data": "tea", "queue": warehouse.name},
                                                {"name": "pick", "data": "cups", "queue": warehouse.name}])

    def process(job: Any) -> Any:
        if job.name == "ship":
            return sorted(job.get_children_values().values())
        return job.data

    report = run_until_idle([orders, warehouse], process)
    assert [(r.queue == orders.name, r.name) for r in report] == [
        (True, "order"), (False, "restock"), (True, "order"), (False, "restock"),
        (False, "pick"), (False, "pick"), (True, "ship")]
    assert report[-1].job_id == parent.id and report[-1].return_value == ["cups", "tea"]


def test_a_job_waiting_for_children_it_added_runs_again_after_them(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    parent = queue.add("parent")

    def process(job: Any) -> str:
        if job.name == "parent" and not job.get_children_values():
            queue.add("child", parent={"id": job.id, "queue": queue.keys.base}, delay=60_000)
            assert job.move_to_waiting_children() is True
            raise WaitingChildrenError()
        return job.name

    waiting = run_until_idle(queue, process)
    assert [(r.name, r.outcome) for r in waiting] == [("parent", Outcome.WAITING_CHILDREN)]
    later = advance_time(clock, queue, process, minutes=2)
    assert [(r.name, r.outcome, r.at_ms - waiting[0].at_ms) for r in later] == [
        ("child", Outcome.COMPLETED, 60_000), ("parent", Outcome.COMPLETED, 60_000)]
    assert later[1].job_id == parent.id and later[1].attempt == 1  # waiting for children is no failed attempt


def test_jobs_removed_as_they_finish_are_reported_all_the_same(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock(T))
    done = queue.add("done", remove_on_complete=True)
    lost = queue.add("lost", remove_on_fail=True)
    report = run_until_idle(queue, lambda job: job.name if job.name == "done" else 1 / 0)
    assert [(r.job_id, r.outcome, r.return_value, r.failed_reason) for r in report] == [
        (done.id, Outcome.COMPLETED, "done", None), (lost.id, Outcome.FAILED, None, "division by zero")]
    assert queue.get_job(done.id) is None and queue.get_job(lost.id) is None


def test_a_rate_limited_queue_is_reported_not_waited_for(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(T)
    queue = Queue(connection, queue_name, clock=clock)
    for n in range(3):
        queue.add("limited", n)
    limiter = {"max": 1, "duration": 1000}
    runner = Runner(queue, lambda job: job.data, limiter=limiter)
    first = runner.run_until_idle()
    assert first.names() == ["limited"]
    assert clock.now < first.rate_limited[queue.name] <= clock.now + 1000  # the window, counted on the clock

    rest = advance_time(clock, queue, lambda job: job.data, seconds=10, limiter=limiter)
    assert [r.return_value for r in rest] == [1, 2]
    gaps = [b - a for a, b in zip([first[0].at_ms, *rest.times()], rest.times())]
    assert all(500 <= gap <= 1000 for gap in gaps), gaps  # one per window (its TTL is Redis's real time)


def test_bad_arguments_are_refused_before_anything_runs(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock(T))
    queue.add("x")
    with pytest.raises(InvalidInputError, match="give a Queue or a non-empty list"):
        run_until_idle([], lambda job: None)
    with pytest.raises(InvalidInputError, match="names a queue twice"):
        run_until_idle([queue, Queue(connection, queue_name)], lambda job: None, clock=queue.clock)
    with pytest.raises(InvalidInputError, match="different clocks"):
        run_until_idle([queue, Queue(connection, queue_name + "-b")], lambda job: None)
    with pytest.raises(InvalidInputError, match="processors"):
        run_until_idle(queue, {"x": "not callable"})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match="max_jobs"):
        run_until_idle(queue, lambda job: None, max_jobs=0)
    assert queue.get_job_counts("waiting") == {"waiting": 1}
