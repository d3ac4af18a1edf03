"""record_events: what a queue's stream received since the recorder began, decoded, without a
thread or a blocking read; with assertions that show what was recorded when they fail."""

from __future__ import annotations

import pytest
import redis

from echomq import EventType, InvalidInputError, Queue
from echomq.testing import FakeClock, TrimmedEventsError, record_events, run_until_idle


def test_it_records_only_what_came_after_it_began(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    queue = Queue(connection, queue_name, clock=clock)
    queue.add("before")
    events = record_events(connection, queue)
    assert events.events == []
    queue.add("later", job_id="later", delay=5000)
    run_until_idle(queue, lambda job: {"ok": job.name})
    assert events.names() == ["added", "delayed", "active", "completed"]  # no "drained": a job is delayed
    assert events.names("1") == ["active", "completed"] and [e.job_id for e in events.of("1")] == ["1", "1"]
    completed = events.events[3]
    assert (completed.type, completed.name, completed.data["returnvalue"]) == (
        EventType.COMPLETED, "completed", {"ok": "before"})  # decoded as QueueEvents decodes it
    assert events.of("later")[1].data["delay"] == clock.now + 5000
    assert str(completed) == "completed(1: returnvalue={'ok': 'before'}, prev='active')"
    assert len(events) == 4 and [e.id for e in events] == sorted(e.id for e in events)


def test_as_a_context_manager_it_stops_at_the_end_of_the_block(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    with record_events(connection, queue_name) as events:  # by name, too
        queue.add("inside")
    queue.add("outside")
    assert events.names() == ["added", "waiting"]


def test_assert_sequence_in_order_exact_and_per_job(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, clock=FakeClock("2030-01-01T00:00:00Z"))
    events = record_events(connection, queue)
    job = queue.add("flaky", attempts=2)
    run_until_idle(queue, lambda j: 1 / 0)
    events.assert_sequence(["added", EventType.FAILED, "retries_exhausted"])
    events.assert_sequence([("active", job.id), "retries-exhausted"])
    events.assert_sequence(["added", "waiting", "active", "waiting", "active", "failed", "retries-exhausted"],
                           job_id=job.id, exact=True)
    with pytest.raises(AssertionError, match=r"expected \[completed\] in order; recorded:\n  added\(1"):
        events.assert_sequence(["completed"])
    with pytest.raises(AssertionError, match="expected exactly"):
        events.assert_sequence(["added"], exact=True)
    with pytest.raises(AssertionError, match=r"(?s)\(job 2\).*\(none\)"):
        events.assert_sequence(["added"], job_id="2")


def test_events_trimmed_before_they_were_read_are_an_error(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("first")
    events = record_events(connection, queue)
    queue.add("second")
    assert events.names() == ["added", "waiting"]
    connection.xtrim(queue.keys.events, maxlen=0, approximate=False)
    queue.add("third")
    with pytest.raises(TrimmedEventsError, match="lost entries"):
        events.names()


def test_a_queue_must_be_a_queue_or_a_name(connection: redis.Redis) -> None:
    with pytest.raises(InvalidInputError, match="must be a Queue or a queue name"):
        record_events(connection, 42)  # type: ignore[arg-type]
