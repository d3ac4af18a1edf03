"""The keeper of the declared schedules: a schedule lost with its queue's data is re-created
and logged, one removed by hand is left alone (and said once), one that ran out stays as it
is; on a real Redis and on fakeredis, and on a private redis-server restarted without
persistence, where a running Worker's Redis error wakes the keeper."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from echomq import JobRegistry, JobScheduler, Queue
from echomq.contrib.host.keeper import ScheduleKeeper
from echomq.contrib.schedules_sync import sync_schedules
from echomq.testing import FakeClock, run_until_idle

from support.host_runs import blocked_fetchers
from support.queue_keys import delete_queue_keys
from support.workers import wait_until

START = "2030-01-01T01:00:00+00:00"


def declared(queue: str) -> dict[str, Any]:
    return {"nightly": {"queue": queue, "pattern": "0 2 * * *", "tz": "UTC", "name": "report"},
            "tick": {"queue": queue, "every": 60_000, "name": "report", "data": {"kind": "tick"}}}


def ids(connection: redis.Redis, queue: str) -> list[str]:
    return sorted(record.id for record in JobScheduler(connection, queue).list())


def keeper_of(connection: redis.Redis, schedules: dict[str, Any], clock: FakeClock | None = None) -> ScheduleKeeper:
    registry = JobRegistry(connection)
    return ScheduleKeeper(registry, schedules, interval_s=30, **({"clock": clock} if clock else {}))


def test_a_schedule_lost_with_its_queue_is_recreated_and_logged(connection: redis.Redis, queue_name: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(START)
    keeper = keeper_of(connection, declared(queue_name), clock)
    with caplog.at_level(logging.INFO, logger="echomq.contrib.host.keeper"):
        assert keeper.check() == [] == keeper.check()  # never synced: the schedule command's to create
    assert ids(connection, queue_name) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"EchoMQ: declared schedule {queue_name}/{sid} is not in Redis, nor any data of its queue (never synced?); "
        "not re-created: the schedule command creates it" for sid in ("nightly", "tick")]
    sync_schedules(connection, "emq", declared(queue_name), clock=clock)  # the deploy
    assert keeper.check() == []  # all there: nothing written
    caplog.clear()

    delete_queue_keys(connection, queue_name)  # what a restart without persistence leaves
    with caplog.at_level(logging.WARNING, logger="echomq.contrib.host.keeper"):
        assert [c.scheduler_id for c in keeper.check()] == ["nightly", "tick"]
    assert ids(connection, queue_name) == ["nightly", "tick"]
    tick = JobScheduler(connection, queue_name).get("tick")
    assert tick is not None and (tick.every, tick.template_data) == (60_000, {"kind": "tick"})
    assert [r.getMessage() for r in caplog.records] == [
        f"EchoMQ: schedule {queue_name}/{sid} was gone from Redis with the queue's data (its job id counter is gone: "
        "a restart without persistence, a failover to a replica behind, a flush); re-created it from the declaration"
        for sid in ("nightly", "tick")]


def test_a_counter_that_went_back_tells_a_loss_even_once_the_queue_has_jobs_again(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(START)
    keeper = keeper_of(connection, declared(queue_name), clock)
    sync_schedules(connection, "emq", declared(queue_name), clock=clock)
    queue = Queue(connection, queue_name, clock=clock)
    for _ in range(3):
        queue.add("x")
    keeper.check()  # the counter as the keeper last saw it: 5
    caplog.clear()
    delete_queue_keys(connection, queue_name)
    queue.add("after the restart")  # a producer was quicker than the keeper: the counter is 1
    with caplog.at_level(logging.WARNING, logger="echomq.contrib.host.keeper"):
        assert [c.scheduler_id for c in keeper.check()] == ["nightly", "tick"]
    told = [r.getMessage() for r in caplog.records if r.name == "echomq.contrib.host.keeper"]
    assert told and all("its job id counter went back from 5 to 1" in message for message in told)
    # the producer said it too: it moved the counter past the ids it had been handed
    assert any(r.name == "echomq.queue.add_book" and "job ids 3, 4, 5" in r.getMessage() for r in caplog.records)


def test_a_schedule_removed_by_hand_is_left_alone_and_said_once(connection: redis.Redis, queue_name: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    keeper = keeper_of(connection, declared(queue_name), FakeClock(START))
    sync_schedules(connection, "emq", declared(queue_name), clock=FakeClock(START))
    keeper.check()
    caplog.clear()
    JobScheduler(connection, queue_name).remove("tick")  # an operator's `echomq schedulers remove`
    with caplog.at_level(logging.INFO, logger="echomq.contrib.host.keeper"):
        assert keeper.check() == []
        assert keeper.check() == []
    assert ids(connection, queue_name) == ["nightly"]
    assert [r.getMessage() for r in caplog.records] == [
        f"EchoMQ: declared schedule {queue_name}/tick is not in Redis, though the queue's data is (removed by "
        "hand?); not re-created: the schedule command creates it"]


def test_a_schedule_that_ran_out_or_ended_is_never_revived(connection: redis.Redis, queue_name: str) -> None:
    clock = FakeClock(START)
    schedules = {"once": {"queue": queue_name, "every": 60_000, "limit": 1},
                 "over": {"queue": queue_name, "every": 60_000, "end_date": "2030-01-01T01:30:00+00:00"}}
    keeper = keeper_of(connection, schedules, clock)
    sync_schedules(connection, "emq", schedules, clock=clock)
    queue = Queue(connection, queue_name, clock=clock)
    clock.set("2030-01-01T02:00:00+00:00")
    run_until_idle(queue, lambda job: "ran")  # "once" ran its one run, "over" passed its end
    before = ids(connection, queue_name)
    assert keeper.check() == [] == keeper.check()
    assert ids(connection, queue_name) == before == ["once", "over"]  # a schedule that ran out stays in Redis
    delete_queue_keys(connection, queue_name)
    assert [c.scheduler_id for c in keeper.check()] == ["once"]  # lost: "once" again; "over" has ended


def test_the_thread_checks_at_start_and_a_worker_s_redis_error_wakes_it(connection: redis.Redis,
                                                                         queue_name: str) -> None:
    keeper = keeper_of(connection, declared(queue_name))
    sync_schedules(connection, "emq", declared(queue_name))
    keeper.start()
    try:
        assert wait_until(lambda: keeper._counters.get(queue_name, 0) > 0, 10)  # its first look
        delete_queue_keys(connection, queue_name)
        started = time.monotonic()
        keeper.on_redis_error(queue_name, redis.ConnectionError("gone"), during="fetch")
        assert wait_until(lambda: ids(connection, queue_name) == ["nightly", "tick"], 10)
        assert time.monotonic() - started < 5  # not the 30 s interval
    finally:
        keeper.stop()
    assert keeper._thread is None


@pytest.mark.real_only
def test_a_private_redis_restarted_without_persistence_gets_its_schedules_back(
        redis_server_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url)
    registry = JobRegistry(server.url)

    @registry.job(queue="reports")
    def report(job: Any) -> str:
        return "built"

    sync_schedules(client, "emq", declared("reports"))  # the deploy
    keeper = ScheduleKeeper(registry, declared("reports"), interval_s=30)
    worker = registry.worker("reports", listeners=[keeper])
    worker.start()
    keeper.start()
    try:
        assert wait_until(lambda: keeper._counters.get("reports", 0) > 0, 10)
        # the Worker waits for jobs: a restart before it connected would go unseen but by the interval
        assert wait_until(lambda: blocked_fetchers(server) >= 1, 10)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="echomq.contrib.host.keeper"):
            server.stop()
            server.start()  # the same port, empty: no persistence
            restarted = time.monotonic()
            assert wait_until(lambda: ids(client, "reports") == ["nightly", "tick"], 20)
            took = time.monotonic() - restarted
        assert took < 10, took  # woken by the Worker's lost connection, not the 30 s interval
        assert [r.getMessage().split(" was gone")[0] for r in caplog.records if r.name.endswith("keeper")] == [
            "EchoMQ: schedule reports/nightly", "EchoMQ: schedule reports/tick"]
    finally:
        keeper.stop()
        worker.close(5)
        registry.close()
        client.close()


def test_a_refusing_redis_is_a_warning_and_the_keeper_keeps_going(
        connection: redis.Redis, queue_name: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    keeper = ScheduleKeeper(JobRegistry(connection), declared(queue_name), interval_s=0.05)
    checks: list[str] = []
    real_check = keeper.check

    def refusing() -> list[Any]:
        checks.append("check")
        if len(checks) == 1:
            raise redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'.")
        if len(checks) == 2:
            raise redis.ConnectionError("Connection refused.")  # retried within a second, quietly
        return real_check()

    monkeypatch.setattr(keeper, "check", refusing)
    with caplog.at_level(logging.DEBUG, logger="echomq.contrib.host.keeper"):
        keeper.start()
        try:
            assert wait_until(lambda: len(checks) >= 4, 10)
        finally:
            keeper.stop()
    levels = [(r.levelname, r.getMessage().split(":")[1].strip()) for r in caplog.records]
    assert levels[:2] == [("WARNING", "could not check or re-create the declared schedules"),
                          ("DEBUG", "Redis did not answer (Connection refused.); trying again in 1 s")]
