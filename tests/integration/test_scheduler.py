"""JobScheduler with `every`: storage, upsert semantics, the worker-side step, removal, reads.

Each test runs on real Redis and on fakeredis (the ``connection`` fixture). What is asserted is
what BullMQ 6.7 writes for the same call (docs/protocol.md §4), checked field by field.
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from echomq.errors import InvalidInputError, SchedulerConflictError
from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler

from support.queue_keys import SCAN_COUNT

HOUR = 3_600_000


def now_ms() -> int:
    return int(time.time() * 1000)


def hash_of(client: redis.Redis, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(key).items()}


def events(client: redis.Redis, keys: QueueKeys) -> list[dict[str, str]]:
    return [{k.decode(): v.decode() for k, v in fields.items()} for _id, fields in client.xrange(keys.events)]


@pytest.fixture
def sched(connection: redis.Redis, queue_name: str) -> JobScheduler:
    return JobScheduler(connection, queue_name)


def test_fresh_every_runs_now_and_stores_what_bullmq_stores(connection, sched):
    before = now_ms()
    it = sched.upsert("tick", {"every": 5000}, "tock", {"a": 1}, {"attempts": 3})
    k = sched.keys
    assert it is not None and it.delay == 0 and before <= it.due_ms <= now_ms()
    assert it.job_id == f"repeat:tick:{it.due_ms}"
    assert connection.zscore(k.repeat, "tick") == it.due_ms
    record = hash_of(connection, k.scheduler("tick"))
    assert set(record) == {"name", "every", "offset", "opts", "data", "ic"}
    assert record["name"] == "tock" and record["every"] == "5000" and record["ic"] == "1"
    assert int(record["offset"]) == it.due_ms % 5000
    assert json.loads(record["data"]) == {"a": 1} and json.loads(record["opts"]) == {"attempts": 3}

    job = hash_of(connection, k.job(it.job_id))
    assert set(job) == {"name", "data", "opts", "timestamp", "delay", "priority", "rjk"}
    assert job["rjk"] == "tick" and job["delay"] == "0" and job["priority"] == "0"
    assert json.loads(job["data"]) == {"a": 1}
    opts = json.loads(job["opts"])
    assert opts == {"attempts": 3, "jobId": it.job_id, "delay": 0, "timestamp": opts["timestamp"],
                    "repeatJobKey": "tick", "repeat": {"every": 5000, "count": 1}}
    assert [x.decode() for x in connection.lrange(k.wait, 0, -1)] == [it.job_id]
    assert connection.zscore(k.marker, "0") == 0
    assert int(connection.get(k.id)) == 1
    assert connection.hget(k.meta, "opts.maxLenEvents") == b"10000"
    assert events(connection, k) == [{"event": "added", "jobId": it.job_id, "name": "tock"},
                                     {"event": "waiting", "jobId": it.job_id}]


def test_defaults_name_is_the_id_and_empty_data_is_not_stored(connection, sched):
    it = sched.upsert("bare", {"every": 1000})
    record = hash_of(connection, sched.keys.scheduler("bare"))
    assert set(record) == {"name", "every", "offset", "ic"} and record["name"] == "bare"
    assert connection.hget(sched.keys.job(it.job_id), "data") == b"{}"


def test_start_date_delays_the_first_run_and_sets_the_phase(connection, sched):
    start = now_ms() + HOUR + 1234
    it = sched.upsert("later", {"every": 60_000, "start_date": start, "limit": 5, "tz": "Europe/Berlin"})
    k = sched.keys
    assert it.due_ms == start and it.delay > HOUR - 5000
    record = hash_of(connection, k.scheduler("later"))
    assert record["startDate"] == str(start) and record["limit"] == "5" and record["tz"] == "Europe/Berlin"
    assert int(record["offset"]) == start % 60_000
    assert connection.zscore(k.delayed, it.job_id) == start * 4096
    assert connection.zscore(k.marker, "1") == start
    assert events(connection, k)[-1] == {"event": "delayed", "jobId": it.job_id, "delay": str(start)}
    opts = json.loads(connection.hget(k.job(it.job_id), "opts"))
    assert opts["repeat"] == {"every": 60_000, "startDate": start, "limit": 5, "tz": "Europe/Berlin", "count": 1}


def test_offset_aligns_the_first_run_and_is_carried_in_the_opts(connection, sched):
    before = now_ms()
    it = sched.upsert("phased", {"every": 60_000, "offset": 7_000})
    assert it.due_ms % 60_000 == 7_000 and before < it.due_ms <= before + 60_000 + 1000
    assert connection.hget(sched.keys.scheduler("phased"), "offset") == b"7000"
    opts = json.loads(connection.hget(sched.keys.job(it.job_id), "opts"))
    assert opts["repeat"] == {"every": 60_000, "offset": 7_000, "count": 1}


def test_reupsert_same_every_keeps_the_slot_and_swaps_the_template(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("r", {"every": 10_000, "start_date": start}, "v1", {"v": 1})
    connection.hincrby(sched.keys.scheduler("r"), "ic", 4)  # as if 4 more iterations had run
    second = sched.upsert("r", {"every": 10_000, "start_date": start}, "v2", {"v": 2}, {"priority": 3})
    k = sched.keys
    assert second.job_id == first.job_id
    assert connection.zcard(k.delayed) == 1
    job = hash_of(connection, k.job(second.job_id))
    assert job["name"] == "v2" and json.loads(job["data"]) == {"v": 2} and job["priority"] == "3"
    record = hash_of(connection, k.scheduler("r"))
    assert record["ic"] == "5" and record["name"] == "v2"
    assert [e["event"] for e in events(connection, k)] == ["added", "delayed", "added", "delayed"]


def test_reupsert_with_changed_every_starts_afresh(connection, sched):
    start = now_ms() + HOUR
    old = sched.upsert("c", {"every": 10_000, "start_date": start})
    new = sched.upsert("c", {"every": 20_000})
    k = sched.keys
    assert new.job_id != old.job_id and new.delay == 0
    assert not connection.exists(k.job(old.job_id)) and connection.zcard(k.delayed) == 0
    assert connection.zscore(k.repeat, "c") == new.due_ms
    record = hash_of(connection, k.scheduler("c"))
    assert "startDate" not in record and int(record["offset"]) == new.due_ms % 20_000


def test_running_iteration_is_not_replaced_and_a_taken_slot_is_walked_past(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("w", {"every": 10_000, "start_date": start})
    k = sched.keys
    connection.zrem(k.delayed, first.job_id)  # the iteration is now running
    connection.lpush(k.active, first.job_id)
    connection.hset(k.job(f"repeat:w:{start + 10_000}"), "name", "squatter")
    second = sched.upsert("w", {"every": 10_000, "start_date": start})
    assert second.due_ms == start + 20_000
    assert connection.exists(k.job(first.job_id)) and connection.lrange(k.active, 0, -1) == [first.job_id.encode()]


def test_no_free_slot_raises_conflict(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("busy", {"every": 1000, "start_date": start})
    k = sched.keys
    connection.zrem(k.delayed, first.job_id)
    connection.lpush(k.active, first.job_id)
    for n in range(1, 34):
        connection.hset(k.job(f"repeat:busy:{start + n * 1000}"), "name", "x")
    with pytest.raises(SchedulerConflictError, match="busy"):
        sched.upsert("busy", {"every": 1000, "start_date": start})
    assert connection.zscore(k.repeat, "busy") == start


def test_produce_next_places_the_following_slot_once(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("p", {"every": 10_000, "start_date": start}, "job", {"x": 1}, {"attempts": 2})
    k = sched.keys
    nxt = sched.produce_next(first.job_id, now_ms=start + 5)
    assert nxt.job_id == f"repeat:p:{start + 10_000}" and nxt.delay == 10_000 - 5
    assert connection.zscore(k.repeat, "p") == start + 10_000
    assert connection.hget(k.scheduler("p"), "ic") == b"2"
    job = hash_of(connection, k.job(nxt.job_id))
    assert job["name"] == "job" and json.loads(job["data"]) == {"x": 1} and job["rjk"] == "p"
    opts = json.loads(job["opts"])
    assert opts["repeat"] == {"every": 10_000, "startDate": start, "count": 2}
    assert opts["attempts"] == 2 and opts["jobId"] == nxt.job_id and opts["repeatJobKey"] == "p"
    assert "prevMillis" not in opts
    before = len(events(connection, k))
    assert sched.produce_next(first.job_id, now_ms=start + 6) is None  # no longer the current one
    assert len(events(connection, k)) == before
    assert int(connection.get(k.id)) == 2


def test_repeated_produce_next_for_the_current_iteration_writes_duplicated(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("d", {"every": 10_000, "start_date": start})
    k = sched.keys
    # a squatter at the next slot: the step must not overwrite it
    connection.hset(k.job(f"repeat:d:{start + 10_000}"), "name", "squatter")
    assert sched.produce_next(first.job_id, now_ms=start) is None
    assert events(connection, k)[-1] == {"event": "duplicated", "jobId": f"repeat:d:{start + 10_000}"}
    assert connection.zscore(k.repeat, "d") == start


def test_worker_made_iterations_carry_attempts_zero(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("a0", {"every": 1000, "start_date": start})
    nxt = sched.produce_next(first.job_id, now_ms=start)
    assert json.loads(connection.hget(sched.keys.job(nxt.job_id), "opts"))["attempts"] == 0


def test_missed_runs_are_skipped_in_phase(connection, sched):
    start = now_ms() + HOUR
    first = sched.upsert("m", {"every": 10_000, "start_date": start})
    late = start + 35_500
    nxt = sched.produce_next(first.job_id, now_ms=late)
    assert nxt.due_ms == start + 40_000 and nxt.delay == 4_500


def test_limit_ends_the_schedule(connection, sched):
    start = now_ms() + HOUR
    it = sched.upsert("lim", {"every": 1000, "start_date": start, "limit": 2})
    it = sched.produce_next(it.job_id, now_ms=start)
    assert it is not None
    assert sched.produce_next(it.job_id, now_ms=start + 1000) is None
    record = sched.get("lim")
    assert record.iteration_count == 2 and record.next_millis == start + 1000


def test_every_iteration_past_end_date_is_never_scheduled(connection, sched):
    start = now_ms() + HOUR
    it = sched.upsert("end", {"every": 10_000, "start_date": start, "end_date": start + 15_000})
    it = sched.produce_next(it.job_id, now_ms=start)
    assert it.due_ms == start + 10_000
    assert sched.produce_next(it.job_id, now_ms=start + 10_000) is None  # start+20000 > end
    assert connection.zcard(sched.keys.delayed) == 2  # the two iterations within end_date
    assert connection.zscore(sched.keys.repeat, "end") == start + 10_000


def test_upsert_whose_first_slot_is_past_end_date_writes_nothing(connection, sched):
    every = 100 * HOUR
    now = now_ms()
    offset = (now % every + HOUR) % every or 1  # the first slot of this phase is ~1 h away
    assert sched.upsert("late", {"every": every, "offset": offset, "end_date": now + HOUR // 2}) is None
    assert list(connection.scan_iter(match=sched.keys.all_keys_pattern(), count=SCAN_COUNT)) == []


def test_remove_deletes_the_delayed_iteration_with_a_removed_event(connection, sched):
    start = now_ms() + HOUR
    it = sched.upsert("rm", {"every": 1000, "start_date": start})
    k = sched.keys
    assert sched.remove("rm") is True
    assert not connection.exists(k.job(it.job_id), k.scheduler("rm"))
    assert connection.zcard(k.delayed) == 0 and connection.zcard(k.repeat) == 0
    assert events(connection, k)[-1] == {"event": "removed", "jobId": it.job_id, "prev": "delayed"}
    assert sched.remove("rm") is False


def test_remove_leaves_a_waiting_iteration_to_run(connection, sched):
    it = sched.upsert("rw", {"every": 1000})
    k = sched.keys
    assert sched.remove_by_key(sched.get("rw").key) is True
    assert connection.lrange(k.wait, 0, -1) == [it.job_id.encode()]
    assert sched.produce_next(it.job_id) is None  # its scheduler is gone
    assert sched.get("rw") is None


def test_get_list_count(connection, sched):
    base = now_ms() + HOUR
    for n, sid in enumerate(["a", "b", "c"]):
        sched.upsert(sid, {"every": 1000 * (n + 1), "start_date": base + n}, f"job-{sid}", {"n": n},
                     {"remove_on_complete": True})
    assert sched.count() == 3
    assert [r.id for r in sched.list()] == ["c", "b", "a"]
    assert [r.id for r in sched.list(asc=True)] == ["a", "b", "c"]
    assert [r.id for r in sched.list(0, 0, asc=True)] == ["a"]
    record = sched.get("b")
    assert (record.key, record.name, record.next_millis, record.every, record.iteration_count) == \
        ("b", "job-b", base + 1, 2000, 1)
    assert record.template_data == {"n": 1} and record.template_opts == {"remove_on_complete": True}
    assert record.start_date == base + 1 and record.pattern is None and record.limit is None
    assert record.next_run.timestamp() * 1000 == base + 1
    assert sched.get("nope") is None
    assert sched.remove_by_key(sched.keys.scheduler("a")) is True and sched.count() == 2


BAD_INPUT = [
    pytest.param("", {"every": 1000}, {}, id="empty-id"),
    pytest.param("a:b", {"every": 1000}, {}, id="id-with-colon"),
    pytest.param(7, {"every": 1000}, {}, id="id-not-str"),
    pytest.param("x", {"every": 1000, "pattern": "* * * * *"}, {}, id="every-and-pattern"),
    pytest.param("x", {"tz": "UTC"}, {}, id="neither-every-nor-pattern"),
    pytest.param("x", {"every": 0}, {}, id="every-zero"),
    pytest.param("x", {"every": -5}, {}, id="every-negative"),
    pytest.param("x", {"every": "10"}, {}, id="every-not-int"),
    pytest.param("x", {"every": 1000, "tz": "Mars/Olympus"}, {}, id="unknown-tz"),
    pytest.param("x", {"every": 1000, "end_date": 1_000_000}, {}, id="end-date-past"),
    pytest.param("x", {"every": 1000, "limit": 0}, {}, id="limit-zero"),
    pytest.param("x", {"every": 1000, "offset": 1000}, {}, id="offset-not-below-every"),
    pytest.param("x", {"every": 1000, "every_ms": 3}, {}, id="unknown-repeat-option"),
    pytest.param("x", {"every": 1000, "immediately": True, "start_date": 4102444800000}, {}, id="immediately-start"),
    pytest.param("x", {"every": 1000}, {"data": object()}, id="data-not-json"),
    pytest.param("x", {"every": 1000}, {"data": float("nan")}, id="data-nan"),
    pytest.param("x", {"every": 1000}, {"opts": {"attempts": "3"}}, id="opts-bad-attempts"),
    pytest.param("x", {"every": 1000}, {"opts": {"atempts": 3}}, id="opts-unknown"),
    pytest.param("x", {"every": 1000}, {"opts": {"job_id": "fixed"}}, id="opts-job-id"),
    pytest.param("x", {"every": 1000}, {"name": 5}, id="name-not-str"),
]


@pytest.mark.parametrize("scheduler_id, repeat_opts, extra", BAD_INPUT)
def test_bad_input_raises_and_writes_nothing(connection, sched, scheduler_id, repeat_opts, extra):
    with pytest.raises(InvalidInputError) as info:
        sched.upsert(scheduler_id, repeat_opts, extra.get("name"), extra.get("data"), extra.get("opts"))
    assert isinstance(info.value, ValueError) and str(info.value)
    assert list(connection.scan_iter(match=sched.keys.all_keys_pattern(), count=SCAN_COUNT)) == []


def test_reupsert_replaces_a_prioritized_pending_iteration(connection, sched):
    first = sched.upsert("prio", {"every": 60_000}, "p", None, {"priority": 5})
    k = sched.keys
    assert connection.zscore(k.prioritized, first.job_id) is not None
    second = sched.upsert("prio", {"every": 60_000}, "p", {"v": 2}, {"priority": 7})
    assert second.job_id == first.job_id
    assert connection.zcard(k.prioritized) == 1 and connection.hget(k.job(second.job_id), "priority") == b"7"


def test_reupsert_while_paused_replaces_the_waiting_iteration(connection, sched):
    # BullMQ 6.7 looks in the legacy paused list here, misses the job and adds a second one;
    # we look in wait, where BullMQ 6 keeps paused jobs, and replace it.
    k = sched.keys
    connection.hset(k.meta, "paused", 1)
    first = sched.upsert("pz", {"every": 60_000}, "v1")
    assert connection.lrange(k.wait, 0, -1) == [first.job_id.encode()]
    assert connection.zscore(k.marker, "0") is None  # paused: no wake-up marker
    second = sched.upsert("pz", {"every": 60_000}, "v2")
    assert second.job_id == first.job_id and connection.llen(k.wait) == 1
    assert connection.hget(k.job(second.job_id), "name") == b"v2"


def test_deduplication_in_the_template_marks_iterations_like_bullmq(connection, sched):
    it = sched.upsert("dd", {"every": 5000}, None, None, {"deduplication": {"id": "x"}})
    job = hash_of(connection, sched.keys.job(it.job_id))
    assert job["deid"] == "x" and json.loads(job["opts"])["de"] == {"id": "x"}
    assert not connection.exists(sched.keys.deduplication("x"))  # BullMQ 6.7 sets no de: key here
    assert sched.get("dd").template == {"opts": {"deduplication": {"id": "x"}}}
