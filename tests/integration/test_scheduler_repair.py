"""A schedule never dies silently: the worker's maintenance pass repairs a scheduler whose
pending iteration is missing (docs/protocol.md §4.5).

Each test breaks a schedule the way a fault would (the pending iteration deleted by hand, an
iteration that ran while its worker step failed, a step that never came) and checks what a
user sees after a maintenance pass: exactly one pending iteration, on the schedule's timeline,
and a WARNING naming the scheduler. Repairs racing each other or the normal step still leave
exactly one: the check and the create are one script, and iteration ids are deterministic.
Stepped with a fixed clock, as the other maintenance tests.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest
import redis

from echomq.protocol.keys import QueueKeys
from echomq.schedule.repair import STARTED_GRACE_MS, SchedulerRepair
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.maintenance import LockRegistry, Maintenance
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions

from support.snapshot import queue_snapshot

T0 = 1_900_000_000_000  # 2030-03-17T17:46:40Z
MINUTE = 60_000


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pending(client: redis.Redis, keys: QueueKeys, sid: str) -> list[str]:
    """The scheduler's iterations waiting to run: placed, stored, not started."""
    placed = [_s(m) for m in client.zrange(keys.delayed, 0, -1) + client.zrange(keys.prioritized, 0, -1)
              + client.lrange(keys.wait, 0, -1)]
    return sorted(job_id for job_id in placed if job_id.startswith(f"repeat:{sid}:")
                  and client.exists(keys.job(job_id)) and not client.hexists(keys.job(job_id), "processedOn"))


def maintenance(client: redis.Redis, queue_name: str) -> Maintenance:
    transitions = Transitions(client, QueueKeys(queue_name), WorkerOptions())
    return Maintenance(transitions, LockRegistry(), stalled_interval=1000)


def warnings_naming(caplog: pytest.LogCaptureFixture, sid: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and repr(sid) in r.getMessage()]


def run_without_step(client: redis.Redis, queue_name: str, now: int) -> str:
    """Take the next job and complete it without the scheduler step, as when the step failed."""
    transitions = Transitions(client, QueueKeys(queue_name), WorkerOptions())
    fetched = transitions.move_to_active("tok", now)
    assert fetched.job_id is not None
    transitions.move_to_finished(fetched.job_id, "tok", now + 1, completed=True, value="null", keep=None,
                                 attempts=0, fetch_next=False)
    return fetched.job_id


@pytest.fixture
def sched(connection: redis.Redis, queue_name: str) -> JobScheduler:
    return JobScheduler(connection, queue_name, clock=lambda: T0)


def test_a_pending_iteration_deleted_by_hand_is_recreated_at_its_slot(connection, sched, caplog):
    k = sched.keys
    first = sched.upsert("tick", {"every": MINUTE, "start_date": T0 + MINUTE}, "tick", {"n": 1}, {"attempts": 3})
    stored = json.loads(connection.hget(k.job(first.job_id), "opts"))
    connection.zrem(k.delayed, first.job_id)
    connection.delete(k.job(first.job_id))
    assert pending(connection, k, "tick") == []
    m = maintenance(connection, sched.queue_name)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        m.run_once(T0 + 10)
    assert pending(connection, k, "tick") == [first.job_id]  # the same slot, still in the future
    job = {_s(a): _s(b) for a, b in connection.hgetall(k.job(first.job_id)).items()}
    assert job["name"] == "tick" and json.loads(job["data"]) == {"n": 1} and job["rjk"] == "tick"
    opts = json.loads(job["opts"])
    assert opts["attempts"] == 3 and opts["repeat"] == stored["repeat"] and opts["jobId"] == first.job_id
    assert connection.zscore(k.delayed, first.job_id) == (T0 + MINUTE) * 4096
    assert len(warnings_naming(caplog, "tick")) == 1
    # the next pass finds nothing to do
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="echomq"):
        m.run_once(T0 + 2000)
    assert pending(connection, k, "tick") == [first.job_id] and warnings_naming(caplog, "tick") == []


def test_only_the_hash_deleted_is_recreated_once(connection, sched):
    k = sched.keys
    first = sched.upsert("h", {"every": MINUTE, "start_date": T0 + MINUTE})
    connection.delete(k.job(first.job_id))  # its id stays in delayed
    maintenance(connection, sched.queue_name).run_once(T0)
    assert pending(connection, k, "h") == [first.job_id] and connection.zcard(k.delayed) == 1


def test_a_due_iteration_deleted_is_replaced_by_the_next_slot(connection, sched):
    k = sched.keys
    first = sched.upsert("due", {"every": MINUTE, "offset": 1000})
    assert first.due_ms > T0
    connection.zrem(k.delayed, first.job_id)
    connection.delete(k.job(first.job_id))
    late = first.due_ms + 2 * MINUTE + 5  # two runs were missed: they are skipped
    maintenance(connection, sched.queue_name).run_once(late)
    [repaired] = pending(connection, k, "due")
    assert int(repaired.rsplit(":", 1)[1]) == first.due_ms + 3 * MINUTE
    assert connection.zscore(k.repeat, "due") == first.due_ms + 3 * MINUTE


def test_an_iteration_that_ran_without_its_step_gets_its_successor(connection, sched, caplog):
    k = sched.keys
    first = sched.upsert("ran", {"every": MINUTE}, "ran", None, {"remove_on_complete": True})
    assert first.due_ms == T0
    assert run_without_step(connection, sched.queue_name, T0) == first.job_id
    assert pending(connection, k, "ran") == []  # dead before the repair: get() still shows it
    assert sched.get("ran").next_millis == T0
    with caplog.at_level(logging.WARNING, logger="echomq"):
        maintenance(connection, sched.queue_name).run_once(T0 + 10)
    assert pending(connection, k, "ran") == [f"repeat:ran:{T0 + MINUTE}"]
    opts = json.loads(connection.hget(k.job(f"repeat:ran:{T0 + MINUTE}"), "opts"))
    assert opts["repeat"] == {"every": MINUTE, "count": 2} and opts["removeOnComplete"] is True
    assert sched.get("ran").iteration_count == 2
    assert len(warnings_naming(caplog, "ran")) == 1
    # the late step of the old iteration adds nothing: it is no longer the current one
    assert sched.produce_next(first.job_id, now_ms=T0 + 20) is None
    assert pending(connection, k, "ran") == [f"repeat:ran:{T0 + MINUTE}"]


def test_a_pattern_schedule_is_repaired_on_its_timeline(connection, sched):
    k = sched.keys
    first = sched.upsert("cron", {"pattern": "*/10 * * * * *"})
    connection.zrem(k.delayed, first.job_id)
    connection.delete(k.job(first.job_id))
    maintenance(connection, sched.queue_name).run_once(T0)
    assert pending(connection, k, "cron") == [first.job_id]
    run_without_step(connection, sched.queue_name, first.due_ms)
    maintenance(connection, sched.queue_name).run_once(first.due_ms + 3000)
    [nxt] = pending(connection, k, "cron")
    assert nxt == f"repeat:cron:{first.due_ms + 10_000}"
    opts = json.loads(connection.hget(k.job(nxt), "opts"))
    assert opts["prevMillis"] == first.due_ms + 10_000 and opts["repeat"]["count"] == 2


def test_a_running_iteration_is_left_to_its_worker_for_a_grace(connection, sched):
    k = sched.keys
    first = sched.upsert("slow", {"every": MINUTE})
    transitions = Transitions(connection, k, WorkerOptions())
    assert transitions.move_to_active("tok", T0).job_id == first.job_id
    repair = SchedulerRepair(connection, k)
    assert repair.run(T0 + STARTED_GRACE_MS - 1) == []  # its worker is about to step
    [made] = repair.run(T0 + STARTED_GRACE_MS + 1)
    assert pending(connection, k, "slow") == [made.job_id] == [f"repeat:slow:{T0 + MINUTE}"]


def test_two_repairs_at_once_make_one_iteration(connection, sched):
    k = sched.keys
    first = sched.upsert("two", {"every": MINUTE, "start_date": T0 + MINUTE})
    connection.zrem(k.delayed, first.job_id)
    connection.delete(k.job(first.job_id))
    a, b = SchedulerRepair(connection, k), SchedulerRepair(connection, k)
    plans_a, plans_b = a.find(T0), b.find(T0)  # both saw the iteration missing
    assert [p.scheduler_id for p in plans_a] == [p.scheduler_id for p in plans_b] == ["two"]
    made = [a.apply(p, T0) for p in plans_a] + [b.apply(p, T0 + 1) for p in plans_b]
    assert [m.job_id for m in made if m is not None] == [first.job_id]
    assert pending(connection, k, "two") == [first.job_id]
    assert int(connection.get(k.id)) == 2  # the upsert's iteration and the one recreated


def test_two_repairs_of_a_finished_iteration_make_one_successor(connection, sched):
    k = sched.keys
    sched.upsert("fin", {"every": MINUTE})
    run_without_step(connection, sched.queue_name, T0)
    a, b = SchedulerRepair(connection, k), SchedulerRepair(connection, k)
    plans = a.find(T0 + 10) + b.find(T0 + 20)
    made = [repair.apply(plan, T0 + 30) for repair, plan in zip((a, b), plans)]
    assert len([m for m in made if m is not None]) == 1
    assert pending(connection, k, "fin") == [f"repeat:fin:{T0 + MINUTE}"]
    assert sched.get("fin").iteration_count == 2


def test_many_maintenance_passes_at_once_make_one_iteration(connection, sched):
    k = sched.keys
    first = sched.upsert("many", {"every": MINUTE, "start_date": T0 + MINUTE})
    connection.zrem(k.delayed, first.job_id)
    connection.delete(k.job(first.job_id))
    passes = [maintenance(connection, sched.queue_name) for _ in range(6)]
    barrier = threading.Barrier(len(passes))

    def go(m: Maintenance) -> None:
        barrier.wait()
        m.repair_schedulers(T0)

    threads = [threading.Thread(target=go, args=(m,)) for m in passes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert pending(connection, k, "many") == [first.job_id]
    assert sum(len(m.last_repaired) for m in passes) == 1


@pytest.mark.parametrize("step_first", [True, False], ids=["step-then-repair", "repair-then-step"])
def test_a_repair_racing_the_worker_step_leaves_one(connection, sched, step_first):
    k = sched.keys
    first = sched.upsert("race", {"every": MINUTE})
    Transitions(connection, k, WorkerOptions()).move_to_active("tok", T0)
    now = T0 + STARTED_GRACE_MS + 1  # the step is late: a repair pass sees the iteration running
    repair = SchedulerRepair(connection, k)
    [plan] = repair.find(now)
    if step_first:
        assert sched.produce_next(first.job_id, now_ms=now) is not None
        assert repair.apply(plan, now) is None
    else:
        assert repair.apply(plan, now) is not None
        assert sched.produce_next(first.job_id, now_ms=now) is None
    assert pending(connection, k, "race") == [f"repeat:race:{T0 + MINUTE}"]
    assert sched.get("race").iteration_count == 2


def test_ended_healthy_and_foreign_schedules_are_left_alone(connection, sched, caplog):
    k = sched.keys
    sched.upsert("once", {"every": MINUTE, "limit": 1})
    run_without_step(connection, sched.queue_name, T0)  # its only run: the schedule has ended
    sched.upsert("ended", {"every": MINUTE, "end_date": T0 + 30_000})
    run_without_step(connection, sched.queue_name, T0)
    sched.upsert("healthy", {"every": MINUTE, "start_date": T0 + MINUTE})
    sched.upsert("cron", {"pattern": "0 9 * * *", "tz": "Europe/Berlin"})
    connection.zadd(k.repeat, {"legacy:key::5000:": T0})  # a BullMQ 5 repeatable: no hash
    before = queue_snapshot(connection, sched.queue_name)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        assert maintenance(connection, sched.queue_name).repair_schedulers(T0 + MINUTE) == []
    assert queue_snapshot(connection, sched.queue_name) == before
    assert [r for r in caplog.records if r.name.startswith("echomq.schedule")] == []


def test_a_schedule_that_cannot_be_read_is_named_in_a_warning(connection, sched, caplog):
    k = sched.keys
    first = sched.upsert("broken", {"every": MINUTE})
    run_without_step(connection, sched.queue_name, T0)
    # another runtime left a pattern no runtime can read
    connection.hset(k.scheduler("broken"), "pattern", "61 * * * *")
    connection.hdel(k.scheduler("broken"), "every")
    connection.hset(k.job(first.job_id), "opts", json.dumps({"repeat": {"pattern": "61 * * * *", "count": 1}}))
    before = queue_snapshot(connection, sched.queue_name)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        assert maintenance(connection, sched.queue_name).repair_schedulers(T0 + 10) == []
    assert queue_snapshot(connection, sched.queue_name) == before
    assert len(warnings_naming(caplog, "broken")) == 1
