"""Operating a schedule: pause, resume, run now, missed-run policies, history (docs/scheduler.md,
docs/protocol.md §4.6).

Each test runs on real Redis and on fakeredis (the ``connection`` fixture). Times come from an
injected clock, so a "six hour outage" is a number, not a wait.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import redis

from echomq.errors import InvalidScheduleError, SchedulerNotFoundError
from echomq.protocol.keys import QueueKeys
from echomq.schedule.misfire import MAX_CATCH_UP, MAX_GRACE_MS
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker

from support.workers import Running, wait_until

MIN = 60_000
HOUR = 3_600_000
T0 = 1_900_000_000_000  # a round instant far from now: 2030-03-17T17:46:40Z
START = T0 - T0 % HOUR + HOUR  # the next whole hour


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def sched(connection: redis.Redis, queue_name: str, clock: Clock) -> JobScheduler:
    return JobScheduler(connection, queue_name, clock=clock)


def ids(values: list[Any]) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def placed(client: redis.Redis, keys: QueueKeys, job_id: str) -> str | None:
    """Where a job sits: delayed, wait, prioritized, active, or None (parked or gone)."""
    if client.zscore(keys.delayed, job_id) is not None:
        return "delayed"
    if job_id in ids(client.lrange(keys.wait, 0, -1)):
        return "wait"
    if client.zscore(keys.prioritized, job_id) is not None:
        return "prioritized"
    if job_id in ids(client.lrange(keys.active, 0, -1)):
        return "active"
    return None


def snapshot(client: redis.Redis, keys: QueueKeys) -> dict[str, Any]:
    """Every key of the queue with its type and contents, to prove a refusal wrote nothing."""
    out: dict[str, Any] = {}
    for key in client.scan_iter(match=keys.base.replace("{", "[{]").replace("}", "[}]") + ":*"):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key.decode()] = client.hgetall(key)
        elif kind == "zset":
            out[key.decode()] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key.decode()] = client.lrange(key, 0, -1)
        elif kind == "string":
            out[key.decode()] = client.get(key)
        else:
            out[key.decode()] = kind
    return out


def hourly(sched: JobScheduler, sid: str = "hourly", **policy: Any) -> str:
    """An every-hour schedule whose first run is START (an hour from T0, at most); its id."""
    it = sched.upsert(sid, {"every": HOUR, "start_date": START}, "report", {"n": 1}, **policy)
    assert it is not None and it.due_ms == START
    return it.job_id


def test_pause_parks_the_pending_iteration_and_resume_puts_it_back(connection, sched, clock):
    job_id = hourly(sched)
    keys = sched.keys
    assert placed(connection, keys, job_id) == "delayed"

    assert sched.pause("hourly") is True
    assert placed(connection, keys, job_id) is None, "the parked iteration is in no list a worker reads"
    assert connection.exists(keys.job(job_id)) == 1, "its hash stays, for the resume"
    assert connection.zscore(keys.key("schedulers:paused"), "hourly") == START
    record = sched.get("hourly")
    assert record is not None and record.paused is True and record.next_millis == START
    assert [(r.id, r.paused) for r in sched.list()] == [("hourly", True)]
    assert sched.pause("hourly") is False, "pausing twice is a documented no-op"

    clock.now = T0 + MIN  # the slot is still to come: it goes back as it was
    assert sched.resume("hourly") is True
    assert placed(connection, keys, job_id) == "delayed"
    assert connection.zscore(keys.delayed, job_id) // 4096 == START
    assert connection.zscore(keys.key("schedulers:paused"), "hourly") is None
    assert sched.get("hourly").paused is False  # type: ignore[union-attr]
    assert sched.resume("hourly") is False, "resuming what is not paused is a documented no-op"


def test_resume_run_once_runs_a_missed_slot_once(connection, sched, clock):
    job_id = hourly(sched)
    sched.pause("hourly")
    clock.now = START + 6 * HOUR + 5  # six slots passed while paused
    assert sched.resume("hourly") is True
    assert placed(connection, sched.keys, job_id) == "wait", "the late iteration runs once, now"
    assert connection.zcard(sched.keys.delayed) == 0
    # when a worker takes it, the step places the next slot after now: the missed ones are skipped
    step = sched.step(job_id, now_ms=clock.now)
    assert step.run is True and step.next is not None and step.next.due_ms == START + 7 * HOUR


def test_resume_skip_beyond_the_grace_places_the_next_slot(connection, sched, clock):
    job_id = hourly(sched, misfire="skip", misfire_grace_ms=10 * MIN)
    sched.pause("hourly")
    clock.now = START + 2 * HOUR + MIN
    assert sched.resume("hourly") is True
    assert connection.exists(sched.keys.job(job_id)) == 0, "skipped: the parked iteration is dropped"
    nxt = f"repeat:hourly:{START + 3 * HOUR}"
    assert placed(connection, sched.keys, nxt) == "delayed"
    assert connection.zscore(sched.keys.repeat, "hourly") == START + 3 * HOUR
    assert json.loads(connection.hget(sched.keys.job(nxt), "opts"))["repeat"]["count"] == 2
    assert connection.hget(sched.keys.scheduler("hourly"), "ic") == b"2"


def test_resume_skip_within_the_grace_runs_the_parked_iteration(connection, sched, clock):
    job_id = hourly(sched, misfire="skip", misfire_grace_ms=10 * MIN)
    sched.pause("hourly")
    clock.now = START + 10 * MIN  # exactly the grace late: still runs (the edge is inclusive)
    assert sched.resume("hourly") is True
    assert placed(connection, sched.keys, job_id) == "wait"


def test_resume_run_all_runs_every_missed_slot_within_the_grace_oldest_first(connection, sched, clock):
    job_id = hourly(sched, misfire="run_all", misfire_grace_ms=3 * HOUR)
    sched.pause("hourly")
    clock.now = START + 5 * HOUR + MIN  # slots START .. START+5h missed; grace keeps START+3h..+5h
    assert sched.resume("hourly") is True
    keys = sched.keys
    assert connection.exists(keys.job(job_id)) == 0, "the parked slot is past the grace"
    wanted = [f"repeat:hourly:{START + h * HOUR}" for h in (3, 4, 5)]
    assert ids(connection.lrange(keys.wait, 0, -1))[::-1] == wanted, "oldest first (wait is taken from the right)"
    nxt = f"repeat:hourly:{START + 6 * HOUR}"
    assert placed(connection, keys, nxt) == "delayed" and connection.zscore(keys.repeat, "hourly") == START + 6 * HOUR
    counts = [json.loads(connection.hget(keys.job(j), "opts"))["repeat"]["count"] for j in [*wanted, nxt]]
    assert counts == [2, 3, 4, 5]
    # the catch-up runs are not the current iteration: they produce nothing when taken
    assert sched.step(wanted[0], now_ms=clock.now).next is None


def test_the_step_applies_the_policy_to_a_late_current_iteration(connection, sched, clock):
    job_id = hourly(sched, misfire="skip", misfire_grace_ms=MIN)
    late = sched.step(job_id, now_ms=START + 2 * HOUR + 1)
    assert late.run is False and late.late_ms == 2 * HOUR + 1
    assert late.next is not None and late.next.due_ms == START + 3 * HOUR
    # an iteration that is not current (a retry, a catch-up) always runs
    assert sched.step(job_id, now_ms=START + 5 * HOUR).run is True

    job_id = hourly(sched, "all", misfire="run_all", misfire_grace_ms=2 * HOUR)
    result = sched.step(job_id, now_ms=START + 4 * HOUR)
    assert result.run is False and result.next is not None and result.next.due_ms == START + 5 * HOUR
    missed = ids(connection.lrange(sched.keys.wait, 0, -1))[::-1]
    assert missed == [f"repeat:all:{START + h * HOUR}" for h in (2, 3, 4)]


def test_run_all_is_bounded(connection, sched, clock):
    it = sched.upsert("fast", {"every": 1000, "start_date": START}, misfire="run_all", misfire_grace_ms=HOUR)
    assert it is not None
    result = sched.step(it.job_id, now_ms=START + HOUR)
    assert result.run is True  # exactly the grace late
    assert connection.llen(sched.keys.wait) == MAX_CATCH_UP  # the oldest 100 of the 3600 missed


def test_the_policy_is_kept_by_get_and_dropped_by_an_upsert_without_one(sched):
    hourly(sched, misfire="skip", misfire_grace_ms=5 * MIN)
    record = sched.get("hourly")
    assert record is not None and record.misfire == ("skip", 5 * MIN)
    assert record.to_dict()["misfire"] == "skip" and record.to_dict()["misfire_grace_ms"] == 5 * MIN
    hourly(sched, misfire="run_all")
    assert sched.get("hourly").misfire == ("run_all", 60_000)  # type: ignore[union-attr]
    hourly(sched)
    assert sched.get("hourly").misfire == ("run_once", None)  # type: ignore[union-attr]


def test_upsert_of_a_paused_scheduler_keeps_it_paused(connection, sched, clock):
    job_id = hourly(sched)
    sched.pause("hourly")
    it = sched.upsert("hourly", {"every": 2 * HOUR, "start_date": START + HOUR}, "report", {"n": 2})
    assert it is not None and it.due_ms == START + HOUR
    keys = sched.keys
    assert connection.exists(keys.job(job_id)) == 0, "the old parked iteration was replaced"
    assert placed(connection, keys, it.job_id) is None and connection.exists(keys.job(it.job_id)) == 1
    record = sched.get("hourly")
    assert record is not None and record.paused and record.every == 2 * HOUR
    assert connection.zscore(keys.key("schedulers:paused"), "hourly") == START + HOUR
    clock.now = START + HOUR + 1
    assert sched.resume("hourly") is True and placed(connection, keys, it.job_id) == "wait"
    assert json.loads(connection.hget(keys.job(it.job_id), "data")) == {"n": 2}


def test_remove_of_a_paused_scheduler_removes_its_parked_iteration(connection, sched):
    job_id = hourly(sched)
    sched.pause("hourly")
    assert sched.remove("hourly") is True
    keys = sched.keys
    assert connection.exists(keys.job(job_id), keys.scheduler("hourly"), keys.key("schedulers:paused")) == 0


def test_the_step_and_the_repair_produce_nothing_for_a_paused_scheduler(connection, sched, clock):
    """Paused while its current iteration runs: that run finishes, nothing follows it."""
    job_id = hourly(sched)
    connection.zrem(sched.keys.delayed, job_id)  # as moveToActive takes it
    connection.lpush(sched.keys.active, job_id)
    connection.hset(sched.keys.job(job_id), "processedOn", START)
    assert sched.pause("hourly") is True
    assert sched.step(job_id, now_ms=START + 1).next is None
    assert sched.get("hourly").paused  # type: ignore[union-attr]
    from echomq.schedule.repair import SchedulerRepair
    assert SchedulerRepair(sched.client, sched.keys).run(START + HOUR) == []
    clock.now = START + 90 * MIN
    assert sched.resume("hourly") is True  # nothing was parked: the next slot is placed
    assert connection.zscore(sched.keys.repeat, "hourly") == START + 2 * HOUR
    assert placed(connection, sched.keys, f"repeat:hourly:{START + 2 * HOUR}") == "delayed"


def test_run_now_adds_one_manual_iteration_and_moves_nothing(connection, sched, clock):
    job_id = hourly(sched)
    sched.pause("hourly")
    first = sched.run_now("hourly")
    second = sched.run_now("hourly")
    assert first == f"repeat:hourly:manual-{T0}" and second == f"repeat:hourly:manual-{T0 + 1}"
    keys = sched.keys
    assert ids(connection.lrange(keys.wait, 0, -1)) == [second, first]
    manual = connection.hgetall(keys.job(first))
    assert manual[b"rjk"] == b"hourly" and json.loads(manual[b"data"]) == {"n": 1}
    assert json.loads(manual[b"opts"])["repeat"]["count"] == 1, "limit does not count a manual run"
    assert connection.zscore(keys.repeat, "hourly") == START and connection.hget(keys.scheduler("hourly"), "ic") == b"1"
    assert sched.get("hourly").paused and placed(connection, keys, job_id) is None  # type: ignore[union-attr]
    assert sched.step(first, now_ms=T0).next is None, "a manual run produces nothing"


def test_unknown_ids_and_bad_policies_are_refused_and_write_nothing(connection, sched):
    hourly(sched)
    before = snapshot(connection, sched.keys)
    for call in (sched.pause, sched.resume, sched.run_now, sched.history):
        with pytest.raises(SchedulerNotFoundError, match="'nope'"):
            call("nope")
    with pytest.raises(InvalidScheduleError, match=r"misfire='sometimes': unknown policy \(known: run_once, skip"):
        sched.upsert("hourly", {"every": HOUR}, misfire="sometimes")
    with pytest.raises(InvalidScheduleError, match=r"misfire_grace_ms=-1: must be within 0\.\.2678400000"):
        sched.upsert("hourly", {"every": HOUR}, misfire="skip", misfire_grace_ms=-1)
    with pytest.raises(InvalidScheduleError, match="misfire_grace_ms=2678400001"):
        sched.upsert("hourly", {"every": HOUR}, misfire="run_all", misfire_grace_ms=MAX_GRACE_MS + 1)
    with pytest.raises(InvalidScheduleError, match="applies to misfire='skip' and 'run_all' only"):
        sched.upsert("hourly", {"every": HOUR}, misfire_grace_ms=1000)
    with pytest.raises(InvalidScheduleError, match="must be an int"):
        sched.upsert("hourly", {"every": HOUR}, misfire="skip", misfire_grace_ms=1.5)
    with pytest.raises(ValueError, match="limit=0"):
        sched.history("hourly", limit=0)
    with pytest.raises(ValueError, match="paused='yes': must be True or False"):
        sched.upsert("hourly", {"every": HOUR}, paused="yes")  # type: ignore[arg-type]
    assert snapshot(connection, sched.keys) == before
    assert sched.upsert("hourly", {"every": HOUR}, misfire="skip", misfire_grace_ms=MAX_GRACE_MS) is not None
    assert sched.upsert("hourly", {"every": HOUR}, misfire="skip", misfire_grace_ms=0) is not None


def test_the_first_upsert_on_a_fresh_queue_writes_meta_as_bullmq(connection, sched):
    with pytest.raises(InvalidScheduleError):
        sched.upsert("bad", {"every": 0})
    assert connection.exists(sched.keys.meta) == 0, "a refused upsert writes no meta"
    hourly(sched)
    meta = {k.decode(): v.decode() for k, v in connection.hgetall(sched.keys.meta).items()}
    assert meta == {"opts.maxLenEvents": "10000", "version": meta["version"]}
    assert meta["version"].startswith("echomq-python:")


def test_an_echomq_worker_skips_a_paused_schedule_and_a_misfired_run(connection, queue_name):
    """Real worker, real time: a paused schedule does not run; a run_now runs at once; a current
    iteration past a skip policy's grace completes without running; history tells all three."""
    sched = JobScheduler(connection, queue_name)
    ran: list[str] = []
    done = threading.Event()

    def work(job: Any) -> str:
        ran.append(job.id)
        if "manual" in job.id:
            done.set()
            raise RuntimeError("manual boom")
        return "ok"

    sched.upsert("paused", {"every": 100})
    assert sched.pause("paused") is True
    two_hours_ago = JobScheduler(connection, queue_name, clock=lambda: int(time.time() * 1000) - 2 * HOUR)
    late = two_hours_ago.upsert("late", {"every": HOUR}, misfire="skip", misfire_grace_ms=1000)
    assert late is not None  # due two hours ago: that late when a worker takes it
    manual = sched.run_now("paused")
    with Running(Worker(connection, queue_name, work, skip_stalled_check=True, drain_delay=0.2)):
        assert done.wait(5)
        assert wait_until(lambda: connection.zscore(sched.keys.completed, late.job_id) is not None, timeout=5)
    assert ran == [manual], "only the manual run ran: the paused schedule and the skipped slot did not"
    skipped = sched.history("late")
    assert [(r.job_id, r.outcome) for r in skipped] == [(late.job_id, "skipped")]
    runs = sched.history("paused")
    assert len(runs) == 1 and runs[0].job_id == manual and runs[0].manual and runs[0].outcome == "failed"
    assert runs[0].failed_reason == "manual boom" and runs[0].duration is not None and runs[0].duration >= 0


def test_history_reads_the_iterations_newest_first(connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    count = 0

    def work(job: Any) -> None:
        nonlocal count
        count += 1
        if count == 2:
            raise ValueError("second fails")

    sched.upsert("tick", {"every": 150})
    with Running(Worker(connection, queue_name, work, skip_stalled_check=True, drain_delay=0.2)):
        assert wait_until(lambda: count >= 3, timeout=5)
    sched.remove("tick")
    sched.upsert("tick", {"every": HOUR, "start_date": 10 ** 13})  # history is per id: a new schedule sees it
    runs = sched.history("tick")
    assert [r.outcome for r in reversed(runs)][:3] == ["completed", "failed", "completed"]
    assert runs[-2].failed_reason == "second fails" and not any(r.manual for r in runs)
    assert [r.slot for r in runs] == sorted((r.slot for r in runs), reverse=True)
    finished = [r for r in runs if r.outcome != "active"]
    assert all(r.start is not None and r.finish is not None and r.duration == r.finish - r.start for r in finished)
    assert all(r.slot <= r.start for r in finished)  # type: ignore[operator]
    assert sched.history("tick", limit=1) == runs[:1]


@pytest.mark.parametrize(("policy", "grace", "runs"),
                         [("run_once", None, 1), ("skip", MIN, 0), ("run_all", 6 * HOUR, 7)])
def test_six_hours_paused_across_berlins_spring_forward(connection, queue_name, policy, grace, runs):
    """Paused at 23:30Z on 2024-03-30 (slot 00:00Z, 01:00 CET), resumed six hours after the slot:
    02:00 local does not exist that night, and every real hour still has its :00 run."""
    clock = Clock(1711841400000)  # 2024-03-30T23:30:00Z
    sched = JobScheduler(connection, queue_name, clock=clock)
    it = sched.upsert("berlin", {"pattern": "0 * * * *", "tz": "Europe/Berlin"}, misfire=policy,
                      misfire_grace_ms=grace)
    assert it is not None and it.due_ms == 1711843200000  # 2024-03-31T00:00Z = 01:00 CET
    sched.pause("berlin")
    clock.now = it.due_ms + 6 * HOUR  # exactly the grace late for run_all: the edge runs
    assert sched.resume("berlin") is True
    due = ids(connection.lrange(sched.keys.wait, 0, -1))[::-1]
    assert len(due) == runs, due
    if runs:
        assert due[0] == it.job_id
    nxt = it.due_ms + 7 * HOUR if policy != "run_once" else None
    if nxt is not None:
        assert connection.zscore(sched.keys.repeat, "berlin") == nxt, "the next run is the first slot after now"
    else:  # the parked one runs once; when a worker takes it, the step places the next slot
        assert sched.step(it.job_id, now_ms=clock.now + 1).next.due_ms == it.due_ms + 7 * HOUR  # type: ignore[union-attr]


@pytest.mark.parametrize(("policy", "grace", "missed"), [("run_once", None, []), ("skip", HOUR, []),
                                                         ("run_all", 2 * HOUR, [1, 2, 3]),
                                                         ("run_all", 3 * HOUR, [0, 1, 2, 3])])
def test_the_repair_of_a_lost_iteration_applies_the_policy(connection, sched, policy, grace, missed):
    """A Redis restart lost the pending iteration three hours ago: the repair places the next
    slot, and before it what the policy runs (the lost one too, when within the grace)."""
    from echomq.schedule.repair import SchedulerRepair

    job_id = hourly(sched, misfire=policy, misfire_grace_ms=grace)
    connection.delete(sched.keys.job(job_id))
    connection.zrem(sched.keys.delayed, job_id)
    now = START + 3 * HOUR  # the grace edge is inclusive
    [placed_next] = SchedulerRepair(sched.client, sched.keys).run(now)
    assert placed_next.due_ms == START + 4 * HOUR
    due = ids(connection.lrange(sched.keys.wait, 0, -1))[::-1]
    assert due == [f"repeat:hourly:{START + h * HOUR}" for h in missed]
    counts = [json.loads(connection.hget(sched.keys.job(j), "opts"))["repeat"]["count"] for j in due]
    assert counts == list(range(2, 2 + len(missed)))
    assert connection.hget(sched.keys.scheduler("hourly"), "ic") == str(2 + len(missed)).encode()


def test_obliterate_removes_a_paused_schedule_and_its_parked_iteration(connection, sched, queue_name):
    from echomq import Queue

    hourly(sched)
    sched.pause("hourly")
    queue = Queue(connection, queue_name)
    queue.pause()
    queue.obliterate()
    assert snapshot(connection, sched.keys) == {}
