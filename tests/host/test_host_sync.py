"""``sync_schedules`` is all or nothing: every declared schedule is validated, and checked against
Redis, before any is written, so a refused sync leaves every key as it was; on a real Redis and
on fakeredis. And the one output both frameworks print (``Change.line``, ``summary``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import InvalidQueueNameError, InvalidScheduleError, JobScheduler, Queue
from echomq.contrib.schedules_sync import Change, parse_schedules, summary, sync_schedules
from echomq.errors import EchoMQError, InvalidInputError, InvalidJobOptionsError
from echomq.testing import FakeClock, run_until_idle

from support.snapshot import queue_snapshot

START = "2030-01-01T01:00:00+00:00"  # an hour before the nightly run at 02:00 UTC


def declared(queue: str, **extra: Any) -> dict[str, Any]:
    """Three good schedules in ``queue`` (and what ``extra`` adds or replaces)."""
    return {"nightly": {"queue": queue, "pattern": "0 2 * * *", "tz": "UTC", "name": "report"},
            "tick": {"queue": queue, "every": 60_000},
            "eager": {"queue": queue, "every": 5_000, "data": {"hosts": [1, 2]}, "opts": {"attempts": 2}},
            **extra}


def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _taken_slot(connection: redis.Redis, queue: str, clock: FakeClock) -> dict[str, Any]:
    """A finished iteration ``repeat:nightly:<02:00>`` kept in the queue, its scheduler removed,
    and the clock back before 02:00: a sync of ``nightly`` would need that job id again."""
    JobScheduler(connection, queue, clock=clock).upsert("nightly", {"pattern": "0 2 * * *", "tz": "UTC"}, "report")
    clock.set("2030-01-01T02:00:00+00:00")
    ran = run_until_idle(Queue(connection, queue, clock=clock), lambda job: "done")
    assert ("report", "completed") in zip(ran.names(), ran.outcomes())
    JobScheduler(connection, queue, clock=clock).remove("nightly")
    clock.set(START)
    return declared(queue)


REFUSALS: dict[str, tuple[Callable[[redis.Redis, str, FakeClock], dict[str, Any]], type[Exception], str]] = {
    "an entry without a queue": (lambda c, q, k: declared(q, broken={"every": 1000}), InvalidScheduleError,
                                 "schedule 'broken': names no queue"),
    "an entry whose end date has passed": (
        lambda c, q, k: declared(q, over={"queue": q, "every": 1000, "end_date": 1000}),
        InvalidScheduleError, "schedule 'over': end_date 1000 is already in the past"),
    "a pattern with no run before its end": (
        lambda c, q, k: declared(q, never={"queue": q, "pattern": "0 2 * * *", "tz": "UTC",
                                           "end_date": "2030-01-01T01:30:00+00:00"}),
        InvalidScheduleError, "schedule 'never': no run of pattern '0 2 * * *' falls before end_date"),
    "an every slot past its end": (
        lambda c, q, k: declared(q, late={"queue": q, "every": 3_600_000, "offset": 1_800_000,
                                          "end_date": "2030-01-01T01:10:00+00:00"}),
        InvalidScheduleError, "schedule 'late': no slot of every 3600000 ms at offset 1800000"),
    "data nested too deep for the queue": (lambda c, q, k: declared(q, deep={"queue": q, "every": 1000,
                                                                           "data": {"x": deep(600)}}),
                                           InvalidScheduleError, "schedule 'deep': the job data is"),
    "options no iteration may carry": (lambda c, q, k: declared(q, ided={"queue": q, "every": 1000,
                                                                       "opts": {"job_id": "x"}}),
                                       InvalidJobOptionsError, "schedule 'ided'"),
    "the job's name spelt both ways": (lambda c, q, k: declared(q, both={"queue": q, "every": 1000, "name": "a",
                                                                       "job": "b"}),
                                       InvalidScheduleError, "give the job's name once"),
    "a next iteration another job holds": (_taken_slot, InvalidScheduleError,
                                           "schedule 'nightly': its next iteration 'repeat:nightly:"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refused_sync_leaves_every_key_as_it_was(case: str, connection: redis.Redis, queue_name: str) -> None:
    make, error, message = REFUSALS[case]
    clock = FakeClock(START)
    schedulers = JobScheduler(connection, queue_name, clock=clock)
    schedulers.upsert("tick", {"every": 30_000})  # to be updated: the first change a sync would write
    schedulers.upsert("stale", {"every": 5000})   # to be pruned
    schedules = make(connection, queue_name, clock)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(error, match=re.escape(message)):
        sync_schedules(connection, "emq", schedules, prune=True, clock=clock)
    assert queue_snapshot(connection, queue_name) == before


def test_a_refused_sync_of_several_queues_writes_none_of_them(connection: redis.Redis, queue_name: str) -> None:
    other = queue_name + "-b"
    clock = FakeClock(START)
    schedules = {**declared(queue_name), "elsewhere": {"queue": other, "every": 1000},
                 "over": {"queue": other, "every": 1000, "end_date": 1000}}
    try:
        with pytest.raises(InvalidScheduleError, match="'over'"):
            sync_schedules(connection, "emq", schedules, clock=clock)
        assert queue_snapshot(connection, queue_name) == {} and queue_snapshot(connection, other) == {}
        with pytest.raises(InvalidQueueNameError, match="'a:b'"):
            sync_schedules(connection, "emq", declared(queue_name), prune=True, queues=["a:b"], clock=clock)
        with pytest.raises(InvalidInputError, match="prefix"):
            sync_schedules(connection, "{emq}", declared(queue_name), clock=clock)
        assert queue_snapshot(connection, queue_name) == {}
    finally:
        Queue(connection, other).obliterate(force=True)


def test_the_pending_iteration_itself_is_no_conflict(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(START)
    assert [c.action for c in sync_schedules(connection, "emq", declared(queue_name), clock=clock)] == ["create"] * 3
    edited = declared(queue_name)
    edited["nightly"] = {**edited["nightly"], "data": {"v": 2}}
    assert sync_schedules(connection, "emq", edited, clock=clock) == [
        Change("update", queue_name, "nightly", ("data",))]
    record = JobScheduler(connection, queue_name).get("nightly")
    assert record is not None and record.template_data == {"v": 2}


def test_a_sync_on_a_fake_clock_places_the_runs_at_the_test_s_time(connection: redis.Redis,
                                                                   queue_name: str) -> None:
    clock = FakeClock("2027-03-27T12:00:00+01:00")
    nightly = {"nightly": {"queue": queue_name, "pattern": "0 2 * * *", "tz": "Europe/Berlin"}}
    sync_schedules(connection, "emq", nightly, clock=clock)
    record = JobScheduler(connection, queue_name).get("nightly")
    assert record is not None and record.next_millis == FakeClock("2027-03-28T03:00:00+02:00").now


def test_create_only_creates_and_leaves_what_differs(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(START)
    JobScheduler(connection, queue_name, clock=clock).upsert("tick", {"every": 30_000})
    JobScheduler(connection, queue_name, clock=clock).upsert("stale", {"every": 5000})
    changes = sync_schedules(connection, "emq", declared(queue_name), prune=True, create_only=True, clock=clock)
    assert changes == [Change("create", queue_name, "nightly"), Change("create", queue_name, "eager")]
    tick = JobScheduler(connection, queue_name).get("tick")
    assert tick is not None and tick.every == 30_000  # not rewritten
    assert JobScheduler(connection, queue_name).get("stale") is not None  # not pruned


def test_the_old_spelling_of_the_job_name_is_read_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="schedule 'nightly': the key 'job' is deprecated: spell the job's "
                                                "name 'name'"):
        [schedule] = parse_schedules({"nightly": {"queue": "q", "every": 1000, "job": "report"}})
    assert (schedule.job_name, schedule.deprecated != ()) == ("report", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        [named] = parse_schedules({"nightly": {"queue": "q", "every": 1000, "name": "report"}})
        parse_schedules({"nightly": {"queue": "q", "every": 1000, "job": "report"}}, warn=False)
    assert named.job_name == "report"
    with pytest.raises(InvalidScheduleError, match=r"unknown key\(s\) nmae \(did you mean 'name'\?"):
        parse_schedules({"nightly": {"queue": "q", "every": 1000, "nmae": "report"}})


def test_the_lines_both_commands_print() -> None:
    changes = [Change("create", "reports", "nightly"), Change("update", "reports", "tick", ("every", "data")),
               Change("remove", "reports", "old")]
    assert [c.line() for c in changes] == ["created reports/nightly", "updated reports/tick: every, data",
                                           "removed reports/old"]
    assert [c.line(dry_run=True) for c in changes] == ["would create reports/nightly",
                                                       "would update reports/tick: every, data",
                                                       "would remove reports/old"]
    assert summary(changes, 3) == "3 declared: 1 created, 1 updated, 1 unchanged; 1 removed"
    assert summary(changes, 3, dry_run=True) == (
        "3 declared: 1 to create, 1 to update, 1 unchanged; 1 to remove (dry run: nothing written)")


def test_a_connection_lost_between_two_writes_says_what_was_made_and_a_second_run_finishes(
        connection: redis.Redis, queue_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(START)
    upsert = JobScheduler.upsert
    calls: list[str] = []

    def flaky(self: JobScheduler, scheduler_id: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(scheduler_id)
        if len(calls) == 2:
            raise redis.ConnectionError("Connection closed by server.")
        return upsert(self, scheduler_id, *args, **kwargs)

    monkeypatch.setattr(JobScheduler, "upsert", flaky)
    with pytest.raises(EchoMQError, match=re.escape(
            f"the sync stopped after 1 of 3 change(s) (created {queue_name}/nightly): Connection closed by server.; "
            "run it again to finish it")) as stopped:
        sync_schedules(connection, "emq", declared(queue_name), clock=clock)
    assert isinstance(stopped.value.__cause__, redis.ConnectionError)
    assert [r.id for r in JobScheduler(connection, queue_name).list(asc=True)] == ["nightly"]  # each change whole
    monkeypatch.setattr(JobScheduler, "upsert", upsert)
    assert sync_schedules(connection, "emq", declared(queue_name), clock=clock) == [
        Change("create", queue_name, "tick"), Change("create", queue_name, "eager")]

    def down(self: JobScheduler, *args: Any, **kwargs: Any) -> Any:
        raise redis.ConnectionError("Connection refused.")

    monkeypatch.setattr(JobScheduler, "upsert", down)
    with pytest.raises(redis.ConnectionError, match="refused"):  # nothing made yet: Redis's own error, as it came
        sync_schedules(connection, "emq", {"other": {"queue": queue_name, "every": 7000}}, clock=clock)
