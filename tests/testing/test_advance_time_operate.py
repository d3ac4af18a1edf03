"""advance_time across a pause and a missed run (docs/testing.md): a paused schedule does not run
while the clock travels, resume puts its next run back by its missed-run policy, and a run the
policy skips is reported as completed without running its processor."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import JobScheduler, Queue
from echomq.schedule.records import SKIPPED_RETURNVALUE_KEY
from echomq.testing import FakeClock, advance_time, run_until_idle

HOURLY = {"every": 3_600_000}


def hourly(connection: redis.Redis, queue_name: str, clock: FakeClock, **policy: Any) -> tuple[JobScheduler, Queue]:
    sched = JobScheduler(connection, queue_name, clock=clock)
    sched.upsert("sync", {**HOURLY, "start_date": clock.now + 1_800_000}, "sync", **policy)  # first at +30 min
    return sched, Queue(connection, queue_name, clock=clock)


def ran(job: Any) -> str:
    return "ran"


@pytest.mark.parametrize(("policy", "after_resume"), [
    ({}, ["2030-01-01T06:00:00+00:00", "2030-01-01T06:30:00+00:00", "2030-01-01T07:30:00+00:00"]),
    ({"misfire": "skip", "misfire_grace_ms": 60_000}, ["2030-01-01T06:30:00+00:00", "2030-01-01T07:30:00+00:00"]),
    ({"misfire": "run_all", "misfire_grace_ms": 7_200_000},
     ["2030-01-01T06:00:00+00:00"] * 2 + ["2030-01-01T06:30:00+00:00", "2030-01-01T07:30:00+00:00"]),
], ids=["run_once", "skip", "run_all"])
def test_advance_time_across_a_pause(connection: redis.Redis, queue_name: str, policy: dict[str, Any],
                                     after_resume: list[str]) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    sched, queue = hourly(connection, queue_name, clock, **policy)
    first = advance_time(clock, queue, ran, hours=1)
    assert first.wall_times("UTC") == ["2030-01-01T00:30:00+00:00"]
    assert sched.pause("sync") is True
    assert advance_time(clock, queue, ran, hours=5) == advance_time(clock, queue, ran), "paused: nothing runs"
    assert len(advance_time(clock, queue, ran)) == 0 and clock.datetime("UTC").hour == 6
    # paused from 01:00 to 06:00: the slots 01:30 .. 05:30 were missed
    assert sched.resume("sync") is True
    after = advance_time(clock, queue, ran, hours=2)
    assert after.wall_times("UTC") == after_resume
    assert all(run.return_value == "ran" for run in after)


def test_a_run_the_policy_skips_completes_without_running(connection: redis.Redis, queue_name: str) -> None:
    """The clock jumps (as a worker that was down): the late iteration is completed unrun."""
    clock = FakeClock("2030-01-01T00:00:00Z")
    sched, queue = hourly(connection, queue_name, clock, misfire="skip", misfire_grace_ms=60_000)
    clock.advance(hours=3)
    calls: list[str] = []
    report = run_until_idle(queue, lambda job: calls.append(job.id))
    assert calls == [], "past the grace: the processor did not run"
    [skipped] = report
    assert skipped.outcome.value == "completed" and skipped.return_value == {SKIPPED_RETURNVALUE_KEY: 9_000_000}
    assert [(r.outcome, r.slot) for r in sched.history("sync")] == [("skipped", clock.now - 9_000_000)]
    assert sched.get("sync").next_millis == clock.now + 1_800_000  # type: ignore[union-attr]
