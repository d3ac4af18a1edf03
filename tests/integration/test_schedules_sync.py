"""``echomq.contrib.schedules_sync``: the diff and sync behind the Django and Flask schedule
commands, on a real Redis and on fakeredis."""

from __future__ import annotations

import pytest
import redis

from echomq import InvalidJobOptionsError, InvalidQueueNameError, InvalidScheduleError, JobScheduler, Queue
from echomq.contrib.schedules_sync import Change, parse_schedules, sync_schedules

#: Every form a declaration may take: a bare-number backoff, dates as text, an offset, a limit,
#: ``immediately``, data with lists, no data at all.
DECLARED = {
    "phased": {"queue": "{q}", "every": 60_000, "offset": 500, "data": None,
               "opts": {"backoff": 1000, "attempts": 2, "remove_on_complete": True}},
    "windowed": {"queue": "{q}", "pattern": "*/5 * * * *", "tz": "UTC", "start_date": "2030-01-01T00:00:00Z",
                 "end_date": "2031-01-01T00:00:00Z", "limit": 10},
    "eager": {"queue": "{q}", "every": 1000, "immediately": True, "name": "ping", "data": {"hosts": [1, 2]}},
}


def declared(queue: str) -> dict[str, dict[str, object]]:
    return {sid: {**entry, "queue": queue} for sid, entry in DECLARED.items()}


def test_a_second_sync_of_the_same_declaration_changes_nothing(connection: redis.Redis, queue_name: str) -> None:
    first = sync_schedules(connection, "emq", declared(queue_name), prune=False, dry_run=False)
    assert first == [Change("create", queue_name, sid) for sid in DECLARED]
    pending = {record.id: record.next_millis for record in JobScheduler(connection, queue_name).list()}
    assert sync_schedules(connection, "emq", declared(queue_name), prune=True, dry_run=False) == []
    assert {record.id: record.next_millis for record in JobScheduler(connection, queue_name).list()} == pending


def test_the_fields_that_differ_are_named_and_only_they_are_rewritten(connection: redis.Redis,
                                                                      queue_name: str) -> None:
    sync_schedules(connection, "emq", declared(queue_name), prune=False, dry_run=False)
    edited = declared(queue_name)
    edited["phased"] = {**edited["phased"], "opts": {"attempts": 5}, "data": {"v": 2}}
    edited["windowed"] = {**edited["windowed"], "tz": "Europe/Berlin", "limit": None}
    assert sync_schedules(connection, "emq", edited, prune=False, dry_run=False) == [
        Change("update", queue_name, "phased", ("data", "opts")),
        Change("update", queue_name, "windowed", ("tz", "limit")),
    ]
    phased = JobScheduler(connection, queue_name).get("phased")
    assert phased is not None and (phased.template_data, phased.template_opts) == ({"v": 2}, {"attempts": 5})


def test_prune_reaches_the_queues_given_beside_the_declared_ones(connection: redis.Redis, queue_name: str) -> None:
    other = queue_name + "-other"
    try:
        JobScheduler(connection, other).upsert("stale", {"every": 5000})
        JobScheduler(connection, queue_name).upsert("stale", {"every": 5000})
        only_eager = {"eager": declared(queue_name)["eager"]}
        assert sync_schedules(connection, "emq", only_eager, prune=True, dry_run=True, queues=[other]) == [
            Change("create", queue_name, "eager"), Change("remove", queue_name, "stale"),
            Change("remove", other, "stale")]
        assert JobScheduler(connection, other).count() == 1  # a dry run
        sync_schedules(connection, "emq", only_eager, prune=True, dry_run=False, queues=[other])
        assert JobScheduler(connection, other).count() == 0
        assert [r.id for r in JobScheduler(connection, queue_name).list()] == ["eager"]
    finally:
        Queue(connection, other).obliterate(force=True)


@pytest.mark.parametrize(("entry", "error", "message"), [
    ({"every": 1000}, InvalidScheduleError, "names no queue"),
    ({"queue": "q", "every": 0}, InvalidScheduleError, "every=0"),
    ({"queue": "q", "every": 1000, "pattern": "* * * * *"}, InvalidScheduleError, "not both"),
    ({"queue": "q", "every": 1000, "opts": {"job_id": "x"}}, InvalidJobOptionsError, "set by the scheduler"),
    ({"queue": "q", "every": 1000, "data": {1, 2}}, InvalidJobOptionsError, "not JSON"),
    ({"queue": "q", "every": 1000, "end_date": 1000}, InvalidScheduleError, "already in the past"),
    ({"queue": "q:x", "every": 1000}, InvalidQueueNameError, "'q:x' must not contain ':'"),
])
def test_a_bad_entry_is_refused_by_name_before_anything_is_written(
        connection: redis.Redis, queue_name: str, entry: dict[str, object], error: type[Exception],
        message: str) -> None:
    schedules = {**declared(queue_name), "broken": entry}
    with pytest.raises(error, match=rf"schedule 'broken'.*{message}"):
        sync_schedules(connection, "emq", schedules, prune=True, dry_run=False)
    assert JobScheduler(connection, queue_name).count() == 0


def test_parse_schedules_refuses_what_is_not_a_declaration() -> None:
    with pytest.raises(InvalidScheduleError, match="mapping of scheduler id"):
        parse_schedules([("nightly", {})])  # type: ignore[arg-type]
    with pytest.raises(InvalidScheduleError, match="schedule 'nightly': must be a mapping"):
        parse_schedules({"nightly": "0 2 * * *"})  # type: ignore[dict-item]
    with pytest.raises(InvalidScheduleError, match=r"unknown key\(s\) cron"):
        parse_schedules({"nightly": {"queue": "q", "cron": "0 2 * * *"}})
    assert [s.job_name for s in parse_schedules({"nightly": {"queue": "q", "every": 1000}})] == ["nightly"]


def test_declared_paused_and_misfire_are_kept_by_the_sync(connection: redis.Redis, queue_name: str) -> None:
    """``paused`` given is enforced, left out leaves an operator's pause alone; ``misfire`` is
    stored and a changed one is an update that names it."""
    entry = {"queue": queue_name, "every": 60_000, "paused": True, "misfire": "skip", "misfire_grace_ms": 5000}
    assert sync_schedules(connection, "emq", {"s": entry}) == [Change("create", queue_name, "s")]
    sched = JobScheduler(connection, queue_name)
    record = sched.get("s")
    assert record is not None and record.paused and record.misfire == ("skip", 5000)
    assert connection.llen(sched.keys.wait) == 0 and connection.zcard(sched.keys.delayed) == 0, \
        "created paused in one step: its first iteration was never where a worker looks"
    assert sync_schedules(connection, "emq", {"s": entry}) == []

    unmanaged = {k: v for k, v in entry.items() if k != "paused"}
    assert sync_schedules(connection, "emq", {"s": unmanaged}) == [], "left out: the pause is left alone"
    assert sched.get("s").paused  # type: ignore[union-attr]
    resumed = {**entry, "paused": False, "misfire": "run_all"}
    assert sync_schedules(connection, "emq", {"s": resumed}) == [Change("update", queue_name, "s",
                                                                        ("misfire", "paused"))]
    record = sched.get("s")
    assert record is not None and not record.paused and record.misfire == ("run_all", 5000)
    sched.pause("s")  # an operator's pause, then a deploy that declares it running again
    assert sync_schedules(connection, "emq", {"s": resumed}) == [Change("update", queue_name, "s", ("paused",))]
    assert sched.get("s").paused is False  # type: ignore[union-attr]


def test_declared_pause_and_misfire_refuse_bad_values() -> None:
    for bad, message in (({"paused": "yes"}, "paused='yes': must be True or False"),
                         ({"misfire": "never"}, "misfire='never': unknown policy"),
                         ({"misfire": "skip", "misfire_grace_ms": -1}, "misfire_grace_ms=-1: must be within")):
        with pytest.raises(InvalidScheduleError, match=f"schedule 's': {message}"):
            parse_schedules({"s": {"queue": "q", "every": 1000, **bad}})
