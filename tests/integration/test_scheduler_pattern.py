"""JobScheduler with a cron `pattern`: ticks from calculate_next_millis, passed to the scripts.

Runs on real Redis and fakeredis. Fixed reference times keep the expectations exact.
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from echomq.errors import InvalidScheduleError, SchedulerConflictError
from echomq.schedule.next_run import calculate_next_millis
from echomq.schedule.scheduler import JobScheduler

from support.queue_keys import SCAN_COUNT

HOUR = 3_600_000


def now_ms() -> int:
    return int(time.time() * 1000)


def hash_of(client: redis.Redis, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(key).items()}


@pytest.fixture
def sched(connection: redis.Redis, queue_name: str) -> JobScheduler:
    return JobScheduler(connection, queue_name)


def test_pattern_with_tz_is_stored_as_bullmq_stores_it(connection, sched):
    before = now_ms()
    it = sched.upsert("daily", {"pattern": "0 9 * * *", "tz": "Europe/Berlin", "limit": 3}, "report",
                      {"kind": "d"}, {"attempts": 2, "backoff": {"type": "exponential", "delay": 500}})
    k = sched.keys
    expected = calculate_next_millis({"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, before)
    assert it.due_ms in (expected, calculate_next_millis({"pattern": "0 9 * * *", "tz": "Europe/Berlin"}))
    assert it.delay > 0 and connection.zscore(k.delayed, it.job_id) == it.due_ms * 4096
    record = hash_of(connection, k.scheduler("daily"))
    assert set(record) == {"name", "tz", "limit", "pattern", "offset", "opts", "data", "ic"}
    assert record["offset"] == "0" and record["tz"] == "Europe/Berlin" and record["pattern"] == "0 9 * * *"
    opts = json.loads(connection.hget(k.job(it.job_id), "opts"))
    assert opts["prevMillis"] == it.due_ms and opts["delay"] == it.delay and opts["jobId"] == it.job_id
    assert opts["repeat"] == {"pattern": "0 9 * * *", "tz": "Europe/Berlin", "limit": 3, "count": 1}
    assert opts["attempts"] == 2 and opts["backoff"] == {"type": "exponential", "delay": 500}
    got = sched.get("daily")
    assert (got.pattern, got.tz, got.limit, got.offset, got.every) == ("0 9 * * *", "Europe/Berlin", 3, 0, None)
    assert got.next_run_local.hour == 9 and got.next_run_local.minute == 0


def test_immediately_runs_now_and_is_not_stored(connection, sched):
    before = now_ms()
    it = sched.upsert("now", {"pattern": "0 0 1 1 *", "immediately": True})
    assert it.delay == 0 and before <= it.due_ms <= now_ms()
    k = sched.keys
    assert connection.lrange(k.wait, 0, -1) == [it.job_id.encode()]
    opts = json.loads(connection.hget(k.job(it.job_id), "opts"))
    assert opts["repeat"] == {"pattern": "0 0 1 1 *", "count": 1} and opts["prevMillis"] == it.due_ms
    assert "immediately" not in hash_of(connection, k.scheduler("now"))


def test_produce_next_follows_the_pattern_from_the_previous_tick(connection, sched):
    start = (now_ms() // HOUR + 2) * HOUR  # on an hour boundary, two hours ahead
    it = sched.upsert("q", {"pattern": "*/15 * * * *", "start_date": start - 1})
    assert it.due_ms == start
    nxt = sched.produce_next(it.job_id, now_ms=start - 5000)  # a worker that started a bit early
    assert nxt.due_ms == start + 15 * 60_000
    opts = json.loads(connection.hget(sched.keys.job(nxt.job_id), "opts"))
    assert opts["prevMillis"] == nxt.due_ms and opts["repeat"]["count"] == 2 and opts["attempts"] == 0
    assert sched.get("q").iteration_count == 2
    late = start + 15 * 60_000 + 40 * 60_000  # missed two ticks: the next one after now
    assert sched.produce_next(nxt.job_id, now_ms=late).due_ms == start + 60 * 60_000


def test_reupsert_with_a_new_pattern_replaces_the_pending_tick(connection, sched):
    old = sched.upsert("p", {"pattern": "0 3 * * *"})
    new = sched.upsert("p", {"pattern": "30 4 * * *"}, "renamed")
    k = sched.keys
    assert new.job_id != old.job_id and not connection.exists(k.job(old.job_id))
    assert connection.zrange(k.delayed, 0, -1) == [new.job_id.encode()]
    assert hash_of(connection, k.scheduler("p"))["name"] == "renamed"


def test_taken_tick_is_a_conflict_and_writes_nothing(connection, sched):
    tick = calculate_next_millis({"pattern": "0 5 * * *"}, now_ms())
    k = sched.keys
    connection.hset(k.job(f"repeat:clash:{tick}"), "name", "squatter")
    with pytest.raises(SchedulerConflictError, match="clash"):
        sched.upsert("clash", {"pattern": "0 5 * * *"})
    assert connection.zcard(k.repeat) == 0 and not connection.exists(k.scheduler("clash"), k.meta)


def test_no_tick_before_end_date_returns_none_and_writes_nothing(connection, sched):
    now = now_ms()
    assert sched.upsert("never", {"pattern": "0 0 1 1 *", "end_date": now + 60_000}) is None
    assert list(connection.scan_iter(match=sched.keys.all_keys_pattern(), count=SCAN_COUNT)) == []


def test_limit_stops_pattern_iterations(connection, sched):
    start = (now_ms() // HOUR + 2) * HOUR
    it = sched.upsert("lim", {"pattern": "0 * * * *", "start_date": start - 1, "limit": 1})
    assert sched.produce_next(it.job_id, now_ms=start) is None
    assert sched.get("lim").iteration_count == 1


@pytest.mark.parametrize("repeat_opts", [
    pytest.param({"pattern": "61 * * * *"}, id="minute-out-of-range"),
    pytest.param({"pattern": "not a cron"}, id="garbage"),
    pytest.param({"pattern": "0 9 * * *", "tz": "Nowhere/City"}, id="unknown-tz"),
    pytest.param({"pattern": "0 9 * * *", "offset": 5}, id="offset-with-pattern"),
    pytest.param({"pattern": ""}, id="empty"),
])
def test_bad_patterns_raise_and_write_nothing(connection, sched, repeat_opts):
    with pytest.raises(InvalidScheduleError):
        sched.upsert("bad", repeat_opts)
    assert list(connection.scan_iter(match=sched.keys.all_keys_pattern(), count=SCAN_COUNT)) == []
