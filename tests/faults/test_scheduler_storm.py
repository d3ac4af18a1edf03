"""Many processes at once on one scheduler, on real Redis: the scripts' atomicity is the only lock.

8 processes upsert the same scheduler 100 times each; 8 processes run the worker-side step for
the same iteration; 6 processes pause, resume, upsert, run and remove three schedulers at random,
each of which ends with exactly one pending or parked iteration (or none, removed). Either way
the queue must end with one scheduler hash and one pending (or parked) iteration. And a worker
whose writes are refused now and then (maxmemory pulses) keeps its schedule alive with exactly
one pending iteration.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
from typing import Any

import pytest
import redis

from echomq.errors import SchedulerNotFoundError
from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker

from support.disturb import memory_pulses
from support.queue_keys import SCAN_COUNT
from support.workers import Running, wait_until

pytestmark = pytest.mark.real_only

PROCESSES = 8
UPSERTS_EACH = 100


def _upsert_storm(url: str, queue: str, worker: int, barrier: Any) -> None:
    client = redis.Redis.from_url(url)
    sched = JobScheduler(client, queue)
    barrier.wait()
    for n in range(UPSERTS_EACH):
        # alternate the period so both "template refresh" and "fresh schedule" paths collide
        every = 60_000 if (worker + n) % 2 else 120_000
        sched.upsert("storm", {"every": every}, "job", {"worker": worker, "n": n})
    client.close()


def _produce_storm(url: str, queue: str, job_id: str, barrier: Any, results: Any) -> None:
    client = redis.Redis.from_url(url)
    sched = JobScheduler(client, queue)
    barrier.wait()
    it = sched.produce_next(job_id)
    results.put(None if it is None else it.job_id)
    client.close()


def _run(target: Any, args_for: Any) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=target, args=args_for(i)) for i in range(PROCESSES)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0


def iteration_keys(client: redis.Redis, sched: JobScheduler, sid: str) -> list[str]:
    pattern = sched.keys.job(f"repeat:{sid}:") + "*"
    escaped = pattern.replace("{", "\\{").replace("}", "\\}")
    return sorted(k.decode() for k in client.scan_iter(match=escaped, count=SCAN_COUNT))


def test_concurrent_upserts_end_with_one_hash_and_one_pending_iteration(real_connection, redis_url, queue_name):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(PROCESSES)
    _run(_upsert_storm, lambda i: (redis_url, queue_name, i, barrier))
    sched = JobScheduler(real_connection, queue_name)
    k = sched.keys
    assert sched.count() == 1
    record = sched.get("storm")
    assert record is not None and record.iteration_count == 1
    jobs = iteration_keys(real_connection, sched, "storm")
    pending = real_connection.lrange(k.wait, 0, -1) + real_connection.zrange(k.delayed, 0, -1)
    assert len(jobs) == 1 and len(pending) == 1
    assert jobs[0] == k.job(pending[0].decode())
    assert pending[0].decode() == f"repeat:storm:{record.next_millis}"
    # every upsert created one iteration, the replaced ones wrote no event
    assert int(real_connection.get(k.id)) == PROCESSES * UPSERTS_EACH
    added = [e for _i, e in real_connection.xrange(k.events) if e[b"event"] == b"added"]
    assert len(added) == PROCESSES * UPSERTS_EACH


def test_concurrent_worker_steps_produce_exactly_one_next_iteration(real_connection, redis_url, queue_name):
    sched = JobScheduler(real_connection, queue_name)
    first = sched.upsert("one", {"every": 10_000})
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    _run(_produce_storm, lambda i: (redis_url, queue_name, first.job_id, barrier, results))
    produced = [results.get(timeout=10) for _ in range(PROCESSES)]
    made = [r for r in produced if r is not None]
    assert len(made) == 1
    assert made[0] == f"repeat:one:{first.due_ms + 10_000}"
    assert sched.get("one").iteration_count == 2
    assert iteration_keys(real_connection, sched, "one") == sorted(
        [sched.keys.job(first.job_id), sched.keys.job(made[0])])
    assert int(real_connection.get(sched.keys.id)) == 2


# -- memory pulses under a running schedule ------------------------------------------------------------

def _pending(client: redis.Redis, keys: QueueKeys, sid: str) -> list[str]:
    placed = [m.decode() for m in client.zrange(keys.delayed, 0, -1) + client.zrange(keys.prioritized, 0, -1)
              + client.lrange(keys.wait, 0, -1)]
    return sorted(j for j in placed if j.startswith(f"repeat:{sid}:") and client.exists(keys.job(j))
                  and not client.hexists(keys.job(j), "processedOn"))


def test_memory_pulses_never_leave_a_schedule_without_its_pending_iteration(redis_server_factory):
    """OOM error replies while the worker produces the next iteration (issue item 7): the step
    is retried, or the maintenance pass repairs the schedule; never zero pending, never two."""
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url)
    client.config_set("maxmemory-policy", "noeviction")
    queue = "pulses"
    keys = QueueKeys(queue)
    ran: list[str] = []
    JobScheduler(client, queue).upsert("pulse", {"every": 200}, "pulse")
    worker = Worker(client, queue, lambda job: ran.append(job.id), stalled_interval=500, lock_duration=1000,
                    drain_delay=0.5)
    with Running(worker):
        assert wait_until(lambda: len(ran) >= 3, timeout=10)
        for storm in range(3):
            stop = threading.Event()
            thread = threading.Thread(target=memory_pulses, args=(server.url, stop, storm))
            thread.start()
            time.sleep(2.0)
            stop.set()
            thread.join(10)
            time.sleep(0.3)
        after_storms = len(ran)
        # the runs go on, at the schedule's pace
        assert wait_until(lambda: len(ran) >= after_storms + 5, timeout=15), (after_storms, len(ran))
    score = client.zscore(keys.repeat, "pulse")
    assert score is not None
    assert _pending(client, keys, "pulse") == [f"repeat:pulse:{int(score)}"]
    client.close()


OPERATORS = 6
OPERATIONS_EACH = 80
STORM_IDS = ("alpha", "beta", "gamma")


def _operate_storm(url: str, queue: str, worker: int, barrier: Any) -> None:
    """A random mix of pause, resume, upsert (two periods, sometimes created paused) and remove
    on three schedulers, their slots an hour ahead (so remove deletes a pending iteration)."""
    import random

    rng = random.Random(worker)
    client = redis.Redis.from_url(url)
    sched = JobScheduler(client, queue)
    start = int(time.time() * 1000) + 3_600_000
    barrier.wait()
    for n in range(OPERATIONS_EACH):
        sid = rng.choice(STORM_IDS)
        roll = rng.random()
        if roll < 0.3:
            sched.upsert(sid, {"every": 60_000 if n % 2 else 120_000, "start_date": start}, "job",
                         {"worker": worker}, paused=rng.random() < 0.2)
        elif roll < 0.55:
            with contextlib.suppress(SchedulerNotFoundError):
                sched.pause(sid)
        elif roll < 0.8:
            with contextlib.suppress(SchedulerNotFoundError):
                sched.resume(sid)
        elif roll < 0.9:
            with contextlib.suppress(SchedulerNotFoundError):
                sched.run_now(sid)
        else:
            sched.remove(sid)
    client.close()


def test_pause_resume_upsert_remove_storms_leave_one_pending_or_parked_iteration(real_connection, redis_url,
                                                                                   queue_name):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(OPERATORS)
    procs = [ctx.Process(target=_operate_storm, args=(redis_url, queue_name, i, barrier)) for i in range(OPERATORS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    sched = JobScheduler(real_connection, queue_name)
    k = sched.keys
    waiting = {job_id.decode() for job_id in real_connection.lrange(k.wait, 0, -1)}
    delayed = {job_id.decode() for job_id in real_connection.zrange(k.delayed, 0, -1)}
    parked = {m.decode(): s for m, s in real_connection.zrange(k.key("schedulers:paused"), 0, -1, withscores=True)}
    assert waiting == {j for j in waiting if ":manual-" in j}, "only manual runs wait: every slot is an hour ahead"
    for sid in STORM_IDS:
        record = sched.get(sid)
        slots = [key for key in iteration_keys(real_connection, sched, sid) if ":manual-" not in key]
        if record is None:
            assert slots == [] and sid not in parked, sid
            continue
        current = f"repeat:{sid}:{record.next_millis}"
        assert slots == [k.job(current)], (sid, slots)
        if record.paused:
            assert parked[sid] == record.next_millis and current not in delayed, sid
        else:
            assert sid not in parked and current in delayed, sid
    assert set(parked) <= {sid for sid in STORM_IDS if sched.get(sid) is not None}


def _toggle(url: str, queue: str, sid: str, rounds: int, barrier: Any) -> None:
    client = redis.Redis.from_url(url)
    sched = JobScheduler(client, queue)
    barrier.wait()
    for _ in range(rounds):
        sched.pause(sid)
        time.sleep(0.003)
        sched.resume(sid)
        time.sleep(0.003)
    client.close()


def test_pausing_and_resuming_under_running_workers_never_forks_a_schedule(real_connection, redis_url, queue_name):
    """Two EchoMQ workers step a 20 ms schedule while two processes pause and resume it 40 times:
    a pause that lands between a worker's take and its step leaves that run without a next one,
    which the resume places. At the end: one pending iteration, every slot run at most once."""
    sched = JobScheduler(real_connection, queue_name)
    sched.upsert("fast", {"every": 20})
    ran: list[str] = []
    lock = threading.Lock()

    def work(job: Any) -> None:
        with lock:
            ran.append(job.id)

    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    workers = [Worker(real_connection, queue_name, work, skip_stalled_check=True, drain_delay=0.05)
               for _ in range(2)]
    with Running(workers[0]), Running(workers[1]):
        togglers = [ctx.Process(target=_toggle, args=(redis_url, queue_name, "fast", 40, barrier)) for _ in range(2)]
        for proc in togglers:
            proc.start()
        for proc in togglers:
            proc.join(60)
            assert proc.exitcode == 0
        assert sched.get("fast").paused is False  # type: ignore[union-attr]
        count = len(ran)
        assert wait_until(lambda: len(ran) >= count + 3, timeout=5), "the schedule runs on after the storm"
        sched.pause("fast")
        assert wait_until(lambda: real_connection.llen(sched.keys.active) == 0, timeout=5)
    assert len(ran) == len(set(ran)), "a slot ran twice"
    record = sched.get("fast")
    assert record is not None and record.paused
    k = sched.keys
    slots = iteration_keys(real_connection, sched, "fast")
    current = k.job(f"repeat:fast:{record.next_millis}")
    pending = [key for key in slots if real_connection.hget(key, "processedOn") is None]
    assert pending in ([current], []), pending  # parked, or (paused mid-step) none until the resume
    assert real_connection.llen(k.wait) == 0 and real_connection.zcard(k.delayed) == 0
    assert sched.resume("fast") is True
    on_resume = [key for key in iteration_keys(real_connection, sched, "fast")
                 if real_connection.hget(key, "processedOn") is None]
    assert len(on_resume) == 1 and on_resume[0] == k.job(f"repeat:fast:{sched.get('fast').next_millis}")  # type: ignore[union-attr]
