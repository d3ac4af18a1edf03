"""A job scheduler driven by EchoMQ workers alone (docs/protocol.md §4.4: the worker produces the next
iteration as the current one becomes active).

The issue asks for ``every: 1000`` firing once a second for a minute; to keep the suite fast
this runs ``every: 200`` for 3 seconds (15 slots) and checks the same things: one run per
slot, consecutive slots exactly ``every`` apart, no gap, no double.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import redis

from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker

from support.workers import Running, events

EVERY = 200
WINDOW_S = 3.0


def _slots(ids: list[str]) -> list[int]:
    return [int(job_id.rsplit(":", 1)[1]) for job_id in ids]


def test_every_scheduler_fires_once_per_slot_without_gaps(connection: redis.Redis, queue_name: str) -> None:
    ran: list[tuple[str, int]] = []
    lock = threading.Lock()

    def tick(job: Any) -> None:
        with lock:
            ran.append((job.id, int(time.time() * 1000)))

    JobScheduler(connection, queue_name).upsert("tick", {"every": EVERY}, "tick", {"n": 1})
    with Running(Worker(connection, queue_name, tick, concurrency=2)):
        time.sleep(WINDOW_S)
    ids = [job_id for job_id, _ in ran]
    assert len(ids) == len(set(ids)), "an iteration ran twice"
    slots = _slots(ids)
    assert all(b - a == EVERY for a, b in itertools.pairwise(slots)), slots
    expected = WINDOW_S * 1000 / EVERY
    assert expected - 2 <= len(slots) <= expected + 1, len(slots)
    assert all(0 <= started - slot < 100 for (_, started), slot in zip(ran, slots)), "an iteration ran late"
    # exactly one pending iteration is left, the next slot
    k = QueueKeys(queue_name)
    pending = [m.decode() if isinstance(m, bytes) else m for m in connection.zrange(k.delayed, 0, -1)]
    assert len(pending) == 1 and _slots(pending)[0] == slots[-1] + EVERY
    kinds = [e["event"] for e in events(connection, queue_name)]
    assert "duplicated" not in kinds


def test_a_stalled_iteration_is_requeued_and_still_runs_once(connection: redis.Redis, queue_name: str) -> None:
    """max_stalled_count 0 would fail any other job on its first stall; an iteration of a live
    scheduler is always requeued (docs/protocol.md §4.4), and producing the next one stays single."""
    k = QueueKeys(queue_name)
    JobScheduler(connection, queue_name).upsert("slow", {"every": 60_000}, "slow")
    # a fresh every-scheduler's first run is now: the iteration waits in wait
    first = [m.decode() if isinstance(m, bytes) else m for m in connection.lrange(k.wait, 0, -1)]
    assert len(first) == 1
    entered = threading.Event()
    release = threading.Event()

    def hang(job: Any) -> None:
        entered.set()
        release.wait(10)

    dead = Worker(connection, queue_name, hang, lock_duration=300, stalled_interval=200, max_stalled_count=0)
    thread = threading.Thread(target=dead.run)
    thread.start()
    assert entered.wait(5)
    dead.close(timeout=0.05)
    thread.join(5)
    release.set()
    done: list[str] = []
    with Running(Worker(connection, queue_name, lambda job: done.append(job.id), lock_duration=300,
                        stalled_interval=200, max_stalled_count=0)):
        deadline = time.monotonic() + 5
        while not done and time.monotonic() < deadline:
            time.sleep(0.02)
    assert done == first
    h = {(a.decode() if isinstance(a, bytes) else a): (b.decode() if isinstance(b, bytes) else b)
         for a, b in connection.hgetall(k.job(first[0])).items()}
    assert "defa" not in h and h["stc"] == "1" and "returnvalue" in h
    assert connection.zcard(k.delayed) == 1  # still exactly one next iteration
