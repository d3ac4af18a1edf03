"""Cancel latency across processes: from ``Queue.cancel`` in this process to the moment the
processor in another process sees ``job.cancelled``, p50 and p99 (docs/worker.md, "Time limits
and cancel"; the target is p99 under 250 ms).

A worker process (``echomq worker``-like: a plain Worker in a ``multiprocessing`` child, started
by spawn so nothing is shared) runs a processor that marks its start in a Redis list, then polls
``job.cancelled`` in a tight loop and records the wall clock time it saw it. This process waits
for each start, sleeps a random 0..100 ms (so the cancel lands anywhere in the watchdog's
100 ms tick), notes the time and cancels. Both clocks are this host's ``time.time()``. Each job
is cancelled once, one running at a time; BENCH_CANCEL_JOBS sets how many (default 200),
BENCH_CANCEL_CONCURRENCY the worker's threads (default 4). Every queue is unique and deleted
afterwards; the worker process logs errors only. Run: ``.venv/bin/python tests/bench/bench_cancel.py``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.worker import Worker

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
JOBS = int(os.environ.get("BENCH_CANCEL_JOBS", "200"))
CONCURRENCY = int(os.environ.get("BENCH_CANCEL_CONCURRENCY", "4"))


def _serve(url: str, name: str, concurrency: int) -> None:
    """The worker process: run until its queue's ``stop`` key appears."""
    logging.getLogger("echomq").setLevel(logging.ERROR)  # a cancelled job is a WARNING line each
    client = redis.Redis.from_url(url)
    keys = QueueKeys(name)

    def spin(job: object) -> None:
        client.rpush(keys.key("bench-started"), job.id)  # type: ignore[attr-defined]
        while not job.cancelled:  # type: ignore[attr-defined]
            time.sleep(0.0005)
        client.hset(keys.key("bench-seen"), job.id, repr(time.time()))  # type: ignore[attr-defined]
        job.raise_if_cancelled()  # type: ignore[attr-defined]

    worker = Worker(client, name, spin, concurrency=concurrency, drain_delay=0.5).start()
    while not client.exists(keys.key("bench-stop")):
        time.sleep(0.05)
    worker.close(5)


def measure(client: redis.Redis, jobs: int, concurrency: int, url: str = URL) -> list[float]:
    """Latencies in ms of ``jobs`` cancels, each of a job running in another process."""
    name = f"bench-cancel-{uuid.uuid4().hex[:8]}"
    keys = QueueKeys(name)
    queue = Queue(client, name)
    child = multiprocessing.get_context("spawn").Process(target=_serve, args=(url, name, concurrency))
    child.start()
    asked: dict[str, float] = {}
    try:
        for _ in range(jobs):
            job = queue.add("spin", {})
            popped = client.blpop([keys.key("bench-started")], timeout=30)
            if popped is None:
                raise SystemExit("the worker process never started a job")
            time.sleep(random.random() * 0.1)
            asked[job.id] = time.time()
            if not queue.cancel(job.id, "bench"):
                raise SystemExit(f"job {job.id} could not be cancelled")
        deadline = time.monotonic() + 30
        while client.hlen(keys.key("bench-seen")) < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = {k.decode(): float(v) for k, v in client.hgetall(keys.key("bench-seen")).items()}
        failed = client.zcard(keys.failed)
    finally:
        client.set(keys.key("bench-stop"), 1)
        child.join(30)
        for key in client.scan_iter(match=f"emq:{{{name}}}*", count=1000):
            client.delete(key)
    if len(seen) != jobs or failed != jobs:
        raise SystemExit(f"{len(seen)} of {jobs} cancels seen, {failed} jobs failed")
    return [(seen[job_id] - asked[job_id]) * 1000 for job_id in asked]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    client = redis.Redis.from_url(URL)
    latencies = measure(client, JOBS, CONCURRENCY)
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    print(f"\nCancel latency across processes ({JOBS} jobs, worker concurrency {CONCURRENCY}; Redis {URL})")
    print(f"  p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies):.1f} ms "
          f"(target p99 < 250 ms: {'met' if p99 < 250 else 'not met'})")


if __name__ == "__main__":
    main()
