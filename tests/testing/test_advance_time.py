"""advance_time: the clock steps from due time to due time and every schedule iteration and
delayed job runs when BullMQ 6.7 would run it, daylight-saving nights included; no sleeping."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, JobScheduler, Queue
from echomq.testing import FakeClock, TooManyJobsError, advance_time, run_until_idle

NIGHTLY = {"pattern": "0 2 * * *", "tz": "Europe/Berlin"}

# When BullMQ 6.7 runs "0 2 * * *" in Europe/Berlin next, as its own repeat strategy answers
# (the cron oracle, BullMQ 6.7.0 and cron-parser 5.10.3, with the scheduler's max(next, now)):
#: then the run after the last one listed.
SPRING = [  # 2027-03-28: 02:00 does not exist, the run is shifted by the gap to 03:00 CEST
    (1806195600000, "2027-03-28T03:00:00+02:00"),
    (1806278400000, "2027-03-29T02:00:00+02:00"),
    (1806364800000, "2027-03-30T02:00:00+02:00"),
]
AUTUMN = [  # 2027-10-31: 02:00 happens twice, a fixed hour runs once, in the first pass (CEST)
    (1824940800000, "2027-10-31T02:00:00+02:00"),
    (1825030800000, "2027-11-01T02:00:00+01:00"),
]


def nightly_report(connection: redis.Redis, queue_name: str, clock: FakeClock) -> Queue:
    JobScheduler(connection, queue_name, clock=clock).upsert("nightly-report", NIGHTLY, "report", {"night": True})
    return Queue(connection, queue_name, clock=clock)


def built(job: Any) -> dict[str, Any]:
    return {"built_at": job.clock(), "night": job.data["night"]}


@pytest.mark.parametrize(("start", "days", "expected", "following"), [
    ("2027-03-27T12:00:00+01:00", 3, SPRING, 1806451200000),
    ("2027-10-30T12:00:00+02:00", 2, AUTUMN, 1825117200000),
], ids=["spring-gap", "autumn-overlap"])
def test_the_nightly_report_across_a_berlin_dst_night(connection: redis.Redis, queue_name: str, start: str,
                                                      days: int, expected: list[tuple[int, str]],
                                                      following: int) -> None:
    clock = FakeClock(start)
    queue = nightly_report(connection, queue_name, clock)
    began = time.monotonic()
    nights = advance_time(clock, queue, built, days=days)
    assert time.monotonic() - began < 10  # nothing waited for those days (a loaded machine still fits)
    assert list(zip(nights.times(), nights.wall_times())) == expected
    assert nights.wall_times("UTC")[0].endswith("+00:00")
    assert [(r.name, r.outcome.value, r.scheduler_id, r.tz, r.attempt) for r in nights] == \
        [("report", "completed", "nightly-report", "Europe/Berlin", 1)] * len(expected)
    assert [r.return_value for r in nights] == [{"built_at": ms, "night": True} for ms, _ in expected]
    assert [r.at.isoformat() for r in nights] == [wall for _, wall in expected]
    assert clock.now == FakeClock(start).advance(days=days)  # the clock ends where the journey ends
    completed = queue.get_jobs("completed", asc=True)
    assert [(j.id, j.processed_on, j.finished_on) for j in completed] == [
        (f"repeat:nightly-report:{ms}", ms, ms) for ms, _ in expected]
    [pending] = JobScheduler(connection, queue_name, clock=clock).list()
    assert pending.next_millis == following  # and the next night waits


def test_every_iteration_and_delayed_job_fires_in_order(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    t = clock.now
    JobScheduler(connection, queue_name, clock=clock).upsert("tick", {"every": 60_000}, "tick")
    queue = Queue(connection, queue_name, clock=clock)
    queue.add("reminder", delay=90_000)
    queue.add("now")

    ran = advance_time(clock, queue, lambda job: None, minutes=3)
    assert [(r.name, r.at_ms - t) for r in ran] == [
        ("tick", 0), ("now", 0), ("tick", 60_000), ("reminder", 90_000), ("tick", 120_000), ("tick", 180_000)]
    assert clock.now == t + 180_000


def test_a_jump_runs_a_schedule_once_where_travel_runs_every_iteration(connection: redis.Redis,
                                                                       queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:30Z")
    queue = Queue(connection, queue_name, clock=clock)
    JobScheduler(connection, queue_name, clock=clock).upsert("tick", {"every": 60_000}, "tick")
    assert len(advance_time(clock, queue, lambda job: None, hours=1)) == 61  # at 00:00:30, then each minute
    clock.advance(hours=1)  # a worker that was down for an hour
    jumped = run_until_idle(queue, lambda job: None)
    assert jumped.times() == [clock.now]  # runs once at once; the missed runs are skipped, as in BullMQ


def test_until_moves_the_clock_to_an_instant(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock("2027-03-27T12:00:00+01:00")
    queue = nightly_report(connection, queue_name, clock)
    nights = advance_time(clock, queue, built, until="2027-03-28T03:00:00+02:00")  # due exactly then: it runs
    assert nights.wall_times() == ["2027-03-28T03:00:00+02:00"]
    assert clock.datetime("Europe/Berlin").isoformat() == "2027-03-28T03:00:00+02:00"
    assert advance_time(clock, queue, built, until=clock.now).runs == ()


def test_max_jobs_bounds_a_journey(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    queue = Queue(connection, queue_name, clock=clock)
    JobScheduler(connection, queue_name, clock=clock).upsert("fast", {"every": 1000}, "fast")
    with pytest.raises(TooManyJobsError, match="max_jobs=30") as stopped:
        advance_time(clock, queue, lambda job: None, hours=1, max_jobs=30)
    assert len(stopped.value.report) == 30
    assert queue.get_job_counts("active") == {"active": 0}


def test_bad_journeys_are_refused(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    queue = Queue(connection, queue_name, clock=clock)
    with pytest.raises(InvalidInputError, match="moves a FakeClock"):
        advance_time(lambda: 0, queue, lambda job: None, hours=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="not built on this clock"):
        advance_time(clock, Queue(connection, queue_name), lambda job: None, hours=1)
    with pytest.raises(InvalidInputError, match="before the clock"):
        advance_time(clock, queue, lambda job: None, until="2029-12-31T23:59:59Z")
    with pytest.raises(InvalidInputError, match="not both"):
        advance_time(clock, queue, lambda job: None, hours=1, until="2030-01-02T00:00:00Z")
    with pytest.raises(InvalidInputError, match="negative"):
        advance_time(clock, queue, lambda job: None, hours=-1)
    assert clock.now == FakeClock("2030-01-01T00:00:00Z").now
