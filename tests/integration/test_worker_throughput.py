"""What the Worker's fast paths must not trade away, on real Redis and fakeredis: with several
processor threads sharing one connection (calls sent together while one is in flight) and the
finishing script reading the queue's meta once, every job is still locked by its own attempt,
finished exactly once with its events and counters, renewed while it runs long, and a lock
taken away is still found."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import redis

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.listeners import WorkerListener
from echomq.worker.worker import Worker

from support.workers import Running, events, wait_until


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class LockLost(WorkerListener):
    def __init__(self) -> None:
        self.lost: list[str] = []

    def on_lock_lost(self, queue_name: str, job_id: str) -> None:
        self.lost.append(job_id)


def test_many_threads_finish_every_job_once_each_locked_by_its_attempt(
    connection: redis.Redis, queue_name: str
) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    ids = [job.id for job in queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(120)])]
    seen: Counter[str] = Counter()
    wrong_lock: list[str] = []
    guard = threading.Lock()

    def check(job: Any) -> int:
        held = connection.get(k.job_lock(job.id))
        with guard:
            seen[job.id] += 1
            if held is None or _s(held) != job.token:
                wrong_lock.append(job.id)
        return int(job.data["i"])

    with Running(Worker(connection, queue_name, check, concurrency=8)):
        assert wait_until(lambda: connection.zcard(k.completed) == 120, timeout=30)
    assert wrong_lock == []
    assert sorted(seen) == sorted(ids) and set(seen.values()) == {1}
    for job_id in ids:
        h = {_s(a): _s(b) for a, b in connection.hgetall(k.job(job_id)).items()}
        assert h["ats"] == "1" and h["atm"] == "1" and "returnvalue" in h
        assert not connection.exists(k.job_lock(job_id))
    kinds = Counter((e["event"], e.get("jobId")) for e in events(connection, queue_name))
    for job_id in ids:
        assert kinds[("active", job_id)] == 1 and kinds[("completed", job_id)] == 1
    assert connection.llen(k.active) == 0 and connection.scard(k.stalled) == 0


def test_a_flushed_script_cache_under_way_loses_no_job(connection: redis.Redis, queue_name: str) -> None:
    """NOSCRIPT in the middle of a batch: those calls are loaded and sent again; none is lost
    or run twice."""
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(60)])
    runs: Counter[str] = Counter()
    flushed = threading.Event()

    def work(job: Any) -> None:
        runs[job.id] += 1
        if int(job.data["i"]) == 20 and not flushed.is_set():
            connection.script_flush()
            flushed.set()

    with Running(Worker(connection, queue_name, work, concurrency=4)):
        assert wait_until(lambda: connection.zcard(k.completed) == 60, timeout=30)
    assert flushed.is_set() and len(runs) == 60 and set(runs.values()) == {1}


def test_a_long_job_keeps_its_lock_while_the_others_flow(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    long_id = queue.add("long", {}).id
    queue.add_bulk([{"name": "short", "data": {"i": i}} for i in range(30)])
    recorder = LockLost()

    def work(job: Any) -> None:
        if job.name == "long":
            time.sleep(2.5)  # past two lock durations: only renewal keeps the lock alive

    worker = Worker(connection, queue_name, work, concurrency=3, lock_duration=1000, stalled_interval=500,
                    listeners=[recorder])
    with Running(worker):
        assert wait_until(lambda: connection.zscore(k.completed, long_id) is not None, timeout=15)
        assert wait_until(lambda: connection.zcard(k.completed) == 31, timeout=15)
    assert recorder.lost == []
    assert worker.maintenance.last_stalled == []
    assert _s(connection.hget(k.job(long_id), "ats")) == "1"


def test_a_lock_taken_away_is_found_with_other_threads_busy(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    victim = queue.add("victim", {}).id
    queue.add_bulk([{"name": "other", "data": {"i": i}} for i in range(20)])
    recorder = LockLost()
    running, release = threading.Event(), threading.Event()

    def work(job: Any) -> None:
        if job.id == victim:
            running.set()
            release.wait(10)

    with Running(Worker(connection, queue_name, work, concurrency=4, listeners=[recorder])):
        assert running.wait(5)
        connection.set(k.job_lock(victim), "another-worker:1")  # another worker's now
        assert wait_until(lambda: connection.zcard(k.completed) == 20, timeout=15)
        release.set()
        assert wait_until(lambda: recorder.lost == [victim], timeout=5)
    assert connection.zscore(k.completed, victim) is None
    assert _s(connection.get(k.job_lock(victim))) == "another-worker:1"


def test_a_spinning_single_thread_and_a_sleeping_one_finish_the_same_jobs(connection: redis.Redis,
                                                                         queue_name: str) -> None:
    # reply_spin_us only changes how the reply is waited for, never what is sent or read.
    queue = Queue(connection, queue_name)
    queue.add_bulk([("n", {"i": i}) for i in range(40)])
    seen: list[int] = []
    for spin in (100, 0):
        worker = Worker(connection, queue_name, lambda job: seen.append(job.data["i"]), reply_spin_us=spin)
        try:
            worker.run(burst=True)
        finally:
            worker.close()
        if spin:
            queue.add_bulk([("n", {"i": i}) for i in range(40, 80)])
    assert sorted(seen) == list(range(80))
    assert queue.get_job_counts("completed")["completed"] == 80


def test_a_bad_reply_spin_is_refused_by_name(connection: redis.Redis, queue_name: str) -> None:
    import pytest

    from echomq import InvalidInputError
    for bad in (-1, 10_001, 1.5, True, "100"):
        with pytest.raises(InvalidInputError, match=r"reply_spin_us="):
            Worker(connection, queue_name, lambda job: None, reply_spin_us=bad)
