"""JobScheduler hardening: templates stored as given, schedules other runtimes wrote always
advanced, wrong arguments refused with EchoMQ's errors, numbers range-checked before Lua.

Every refusal is checked to leave the queue's keys byte-identical (``queue_snapshot``), on a
queue that already holds schedulers, iterations and events. The "hand-written" schedules are
what another runtime may leave: a scheduler hash and an iteration whose ``opts.repeat`` holds
``tz: "local"``, ISO 8601 dates, decimal strings (docs/protocol.md §4.1, §4.4).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError, InvalidScheduleError
from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler
from echomq.transport.calls import run_script
from echomq.transport.scripts import script

from support.snapshot import queue_snapshot

HOUR = 3_600_000
DAY = 86_400_000


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def hash_of(client: redis.Redis, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(key).items()}


@pytest.fixture
def sched(connection: redis.Redis, queue_name: str) -> JobScheduler:
    return JobScheduler(connection, queue_name)


@pytest.fixture
def populated(connection: redis.Redis, sched: JobScheduler) -> JobScheduler:
    """A queue with state to protect: two schedulers, their iterations, events, the id counter."""
    start = int(time.time() * 1000) + HOUR
    sched.upsert("keep-every", {"every": 60_000, "start_date": start}, "a", {"n": 1}, {"attempts": 2})
    sched.upsert("keep-cron", {"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, "b")
    return sched


@pytest.fixture
def process_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    def set_tz(value: str) -> None:
        monkeypatch.setenv("TZ", value)
        time.tzset()

    yield set_tz
    monkeypatch.undo()
    time.tzset()


def hand_written(client: redis.Redis, keys: QueueKeys, sid: str, fields: dict[str, Any], score: int,
                 repeat: dict[str, Any], *, prev_millis: int | None = None, opts: dict[str, Any] | None = None) -> str:
    """A scheduler and its current iteration as another runtime stored them, the iteration active."""
    job_id = f"repeat:{sid}:{score}"
    client.zadd(keys.repeat, {sid: score})
    client.hset(keys.scheduler(sid), mapping={k: str(v) for k, v in fields.items()})
    job_opts: dict[str, Any] = {"attempts": 0, **(opts or {}), "jobId": job_id, "delay": 0,
                                "timestamp": score, "repeatJobKey": sid, "repeat": repeat}
    if prev_millis is not None:
        job_opts["prevMillis"] = prev_millis
    client.hset(keys.job(job_id), mapping={"name": fields.get("name", sid), "data": "{}", "opts": json.dumps(job_opts),
                                            "timestamp": score, "delay": 0, "priority": 0, "rjk": sid})
    client.lpush(keys.active, job_id)
    return job_id


# -- item 5: the template is stored as given ---------------------------------------------------------

def test_template_opts_are_stored_as_given_and_normalised_when_read(connection, sched):
    start = int(time.time() * 1000) + HOUR
    it = sched.upsert("t", {"every": 1000, "start_date": start}, "job", {"k": 1},
                      {"backoff": 1000, "attempts": 2, "remove_on_complete": True})
    k = sched.keys
    stored = hash_of(connection, k.scheduler("t"))
    assert json.loads(stored["opts"]) == {"backoff": 1000, "attempts": 2, "removeOnComplete": True}
    assert stored["data"] == '{"k":1}'
    # BullMQ's upsert keeps the number in the first iteration too; its worker normalises later ones
    first = json.loads(connection.hget(k.job(it.job_id), "opts"))
    assert first["backoff"] == 1000
    assert sched.get("t").template_opts == {"backoff": {"type": "fixed", "delay": 1000}, "attempts": 2,
                                             "remove_on_complete": True}
    nxt = sched.produce_next(it.job_id, now_ms=start)
    assert json.loads(connection.hget(k.job(nxt.job_id), "opts"))["backoff"] == {"type": "fixed", "delay": 1000}


def test_a_bad_template_backoff_is_still_refused(connection, populated):
    before = queue_snapshot(connection, populated.queue_name)
    with pytest.raises(InvalidInputError, match="backoff"):
        populated.upsert("t", {"every": 1000}, opts={"backoff": -1})
    assert queue_snapshot(connection, populated.queue_name) == before


# -- item 6: schedules another runtime wrote are always advanced --------------------------------------

@pytest.mark.parametrize("name", ["local", "system", "default", "LOCAL"])
@pytest.mark.parametrize(("zone", "next_run"), [("America/New_York", "2030-01-16T14:00:00+00:00"),
                                                ("Asia/Kolkata", "2030-01-16T03:30:00+00:00")])
def test_the_step_reads_a_process_local_zone(connection, sched, process_tz, name, zone, next_run):
    process_tz(zone)
    current = ms("2030-01-15T14:00:00+00:00")
    job_id = hand_written(connection, sched.keys, "loc", {"name": "loc", "tz": name, "pattern": "0 9 * * *",
                                                          "offset": 0, "ic": 1},
                          current, {"pattern": "0 9 * * *", "tz": name, "count": 1}, prev_millis=current)
    nxt = sched.produce_next(job_id, now_ms=current + 5)
    assert nxt is not None and nxt.due_ms == ms(next_run)
    opts = json.loads(connection.hget(sched.keys.job(nxt.job_id), "opts"))
    assert opts["repeat"] == {"pattern": "0 9 * * *", "tz": name, "count": 2} and opts["prevMillis"] == nxt.due_ms


def test_the_step_reads_iso_dates_and_stops_at_an_iso_end(connection, sched):
    start, end = ms("2030-01-01T00:00:00+00:00"), ms("2030-01-01T00:00:10+00:00")
    repeat = {"every": 1000, "startDate": "2030-01-01T00:00:00.000Z", "endDate": "2030-01-01T00:00:10Z", "count": 1}
    job_id = hand_written(connection, sched.keys, "iso", {"name": "iso", "every": 1000, "offset": 0, "ic": 1},
                          start + 5000, repeat)
    nxt = sched.produce_next(job_id, now_ms=start + 5000)
    assert nxt is not None and nxt.due_ms == start + 6000
    opts = json.loads(connection.hget(sched.keys.job(nxt.job_id), "opts"))
    # written as BullMQ writes them: epoch ms
    assert opts["repeat"] == {"every": 1000, "startDate": start, "endDate": end, "count": 2}
    connection.lpush(sched.keys.active, nxt.job_id)
    before = queue_snapshot(connection, sched.queue_name)
    assert sched.produce_next(nxt.job_id, now_ms=end + 1) is None  # the end date has passed
    assert queue_snapshot(connection, sched.queue_name) == before


def test_the_step_reads_an_iso_end_the_hash_does_not_hold(connection, sched):
    # the slot after 10:00:09 would be 10:00:10.5 > end: an every slot past the end is never made
    start = ms("2030-01-01T10:00:00+00:00")
    repeat = {"every": 1500, "endDate": "2030-01-01T10:00:10+00:00", "count": 4}
    job_id = hand_written(connection, sched.keys, "e", {"name": "e", "every": 1500, "offset": 0, "ic": 4},
                          start + 9000, repeat)
    before = queue_snapshot(connection, sched.queue_name)
    assert sched.produce_next(job_id, now_ms=start + 9000) is None
    assert queue_snapshot(connection, sched.queue_name) == before


def test_the_step_reads_offsetless_and_date_only_starts(connection, sched, process_tz):
    process_tz("America/New_York")
    current = ms("2030-05-01T02:00:00+00:00")
    for sid, start, expected in (("local-day", "2030-06-01T00:00:00", "2030-06-02T02:00:00+00:00"),
                                 ("utc-day", "2030-06-01", "2030-06-01T02:00:00+00:00")):
        job_id = hand_written(connection, sched.keys, sid, {"name": sid, "pattern": "0 2 * * *", "offset": 0, "ic": 1},
                              current, {"pattern": "0 2 * * *", "startDate": start, "count": 1}, prev_millis=current)
        nxt = sched.produce_next(job_id, now_ms=current)
        assert nxt is not None and nxt.due_ms == ms(expected), sid


def test_the_step_reads_numbers_stored_as_text(connection, sched):
    current = ms("2030-01-01T00:00:00+00:00")
    repeat = {"pattern": "*/10 * * * * *", "startDate": str(current), "endDate": str(current + 60_000),
              "count": "2", "limit": "5"}
    job_id = hand_written(connection, sched.keys, "txt", {"name": "txt", "pattern": "*/10 * * * * *", "offset": 0,
                                                          "ic": 2},
                          current, repeat, prev_millis=current)
    nxt = sched.produce_next(job_id, now_ms=current)
    assert nxt is not None and nxt.due_ms == current + 10_000
    assert json.loads(connection.hget(sched.keys.job(nxt.job_id), "opts"))["repeat"]["count"] == 3


def test_an_end_before_the_start_produces_nothing(connection, sched):
    current = ms("2030-01-01T00:00:00+00:00")
    repeat = {"pattern": "* * * * *", "startDate": current + DAY, "endDate": current + HOUR, "count": 1}
    job_id = hand_written(connection, sched.keys, "rev", {"name": "rev", "pattern": "* * * * *", "offset": 0, "ic": 1},
                          current, repeat, prev_millis=current)
    before = queue_snapshot(connection, sched.queue_name)
    assert sched.produce_next(job_id, now_ms=current) is None
    assert queue_snapshot(connection, sched.queue_name) == before


def test_upsert_refuses_an_end_before_the_start_clearly(connection, populated):
    before = queue_snapshot(connection, populated.queue_name)
    start = int(time.time() * 1000) + DAY
    with pytest.raises(InvalidScheduleError, match="is after end_date"):
        populated.upsert("rev", {"every": 1000, "start_date": start, "end_date": start - 1})
    assert queue_snapshot(connection, populated.queue_name) == before


# -- item 14: wrong types get EchoMQ's errors, naming the argument -------------------------------------

BAD_CALLS = [
    pytest.param(lambda s: s.get(None), "scheduler_id", id="get-none"),
    pytest.param(lambda s: s.get(5), "scheduler_id", id="get-int"),
    pytest.param(lambda s: s.remove(None), "scheduler_id", id="remove-none"),
    pytest.param(lambda s: s.remove(["a"]), "scheduler_id", id="remove-list"),
    pytest.param(lambda s: s.remove_by_key(None), "key", id="remove-by-key-none"),
    pytest.param(lambda s: s.remove_by_key(b"keep-every"), "key", id="remove-by-key-bytes"),
    pytest.param(lambda s: s.list("a"), "start", id="list-start-str"),
    pytest.param(lambda s: s.list(0, "b"), "end", id="list-end-str"),
    pytest.param(lambda s: s.list(1.5), "start", id="list-start-float"),
    pytest.param(lambda s: s.list(True), "start", id="list-start-bool"),
    pytest.param(lambda s: s.list(0, None), "end", id="list-end-none"),
    pytest.param(lambda s: s.list(0, -1, "yes"), "asc", id="list-asc-str"),
    pytest.param(lambda s: s.produce_next(None), "job_id", id="produce-next-none"),
    pytest.param(lambda s: s.produce_next("repeat:keep-every:1", now_ms="5"), "now_ms", id="produce-next-now-str"),
    pytest.param(lambda s: s.produce_next("repeat:keep-every:1", now_ms=10**20), "now_ms", id="produce-next-now-huge"),
]


@pytest.mark.parametrize(("call", "argument"), BAD_CALLS)
def test_wrong_arguments_raise_invalid_input_naming_them(connection, populated, call, argument):
    before = queue_snapshot(connection, populated.queue_name)
    with pytest.raises(InvalidInputError) as caught:
        call(populated)
    assert argument in str(caught.value)
    assert queue_snapshot(connection, populated.queue_name) == before


def test_year_9999_west_of_utc_is_an_invalid_schedule_for_upsert(connection, queue_name):
    sched = JobScheduler(connection, queue_name, clock=lambda: ms("9999-12-20T00:00:00+00:00"))
    sched.upsert("keep", {"every": 1000})
    before = queue_snapshot(connection, queue_name)
    for tz, pattern in (("Pacific/Honolulu", "59 23 31 12 *"), ("America/Los_Angeles", "0 20 31 12 *")):
        with pytest.raises(InvalidScheduleError):
            sched.upsert("late", {"pattern": pattern, "tz": tz})
    assert queue_snapshot(connection, queue_name) == before


# -- item 3: every number is range-checked before it reaches Lua --------------------------------------

OUT_OF_RANGE = [
    pytest.param({"every": 1e300}, "every=1e+300: must be <= 8640000000000000", id="every-1e300"),
    pytest.param({"every": 2**53 + 1}, "must be <= 8640000000000000", id="every-2**53"),
    pytest.param({"every": float("inf")}, "every=inf: must be a whole number", id="every-inf"),
    pytest.param({"every": 1000, "limit": 10**30}, "must be <= 9007199254740991", id="limit-huge"),
    pytest.param({"every": 1000, "limit": 2.0**60}, "must be <= 9007199254740991", id="limit-float-huge"),
    pytest.param({"every": 1000, "start_date": 10**20}, "start_date=100000000000000000000: must be <=",
                 id="start-huge"),
    pytest.param({"every": 1000, "end_date": 8_640_000_000_000_001}, "end_date=8640000000000001: must be <=",
                 id="end-past-js-dates"),
    pytest.param({"every": 1000, "start_date": float("nan")}, "start_date=nan: must be a whole number", id="start-nan"),
    pytest.param({"every": 1000, "start_date": "+275761-01-01T00:00:00Z"}, "must be <= 8640000000000000",
                 id="start-iso-past-js-dates"),
    pytest.param({"every": 1000, "offset": 1e300}, "offset=1e+300", id="offset-huge"),
    pytest.param({"pattern": "* * * * *", "start_date": 8_000_000_000_000_000},
                 "outside the years 1-9999", id="pattern-start-past-9999"),
]


@pytest.mark.parametrize(("repeat_opts", "message"), OUT_OF_RANGE)
def test_numbers_out_of_range_are_refused_before_lua(connection, populated, repeat_opts, message):
    before = queue_snapshot(connection, populated.queue_name)
    with pytest.raises(InvalidScheduleError) as caught:
        populated.upsert("big", repeat_opts)
    assert message in str(caught.value)
    assert queue_snapshot(connection, populated.queue_name) == before
    assert len(populated.upsert("sane", {"every": 1000}).job_id) < 40  # the sane case still works


def test_a_clock_no_date_can_hold_is_refused(connection, queue_name):
    JobScheduler(connection, queue_name).upsert("keep", {"every": 1000})
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match="clock"):
        JobScheduler(connection, queue_name, clock=lambda: 10**20).upsert("x", {"every": 1000})
    assert queue_snapshot(connection, queue_name) == before


def test_the_update_script_refuses_a_bad_tick_before_its_first_write(connection, sched):
    it = sched.upsert("cron", {"pattern": "*/5 * * * * *"})
    k = sched.keys
    connection.hdel(k.meta, "opts.maxLenEvents")  # the first thing a careless script would write
    before = queue_snapshot(connection, sched.queue_name)
    update = script("updateJobScheduler")
    opts = json.dumps({"attempts": 0, "repeat": {"pattern": "*/5 * * * * *", "count": 2}})
    with pytest.raises(redis.ResponseError, match="next millis"):
        run_script(connection, update, update.keys_for(k, it.job_id),
                   ["not-a-number", "cron", "", opts, it.due_ms, k.job_prefix, it.job_id])
    assert queue_snapshot(connection, sched.queue_name) == before


def test_the_add_script_refuses_bad_options_before_its_first_write(connection, sched):
    start = int(time.time() * 1000) + HOUR
    it = sched.upsert("ev", {"every": 1000, "start_date": start})
    k = sched.keys
    before = queue_snapshot(connection, sched.queue_name)
    add = script("addJobScheduler")
    for fields in ({"name": "ev", "every": 1000, "limit": "abc"}, {"name": "ev", "every": 1e300},
                   {"name": "ev", "every": 1000, "startDate": "soon"}, {"name": 5, "every": 1000}):
        with pytest.raises(redis.ResponseError, match="addJobScheduler"):
            run_script(connection, add, add.keys_for(k),
                       ["", json.dumps(fields), "ev", "{}", "{}", json.dumps({"repeat": {"every": 1000, "count": 1}}),
                        start - 5, k.job_prefix, ""])
        assert queue_snapshot(connection, sched.queue_name) == before, fields
    assert connection.zscore(k.delayed, it.job_id) is not None
