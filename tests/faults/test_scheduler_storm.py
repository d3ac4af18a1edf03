"""Many processes at once on one scheduler, on real Redis: the scripts' atomicity is the only lock.

8 processes upsert the same scheduler 100 times each; 8 processes run the worker-side step for
the same iteration. Either way the queue must end with one scheduler hash and one pending
iteration. And a worker whose writes are refused now and then (maxmemory pulses) keeps its
schedule alive with exactly one pending iteration.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest
import redis

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
