"""What every job of bench_pool.py and bench_peers.py does, whichever runtime runs it: one INCR.

The job that makes the count 1 and the one that makes it N also store the time, so the rate is
counted from the first finished job to the last (start-up and seeding left out). Imported by
the EchoMQ processor and by the RQ, Celery and dramatiq peers, in their own virtualenvs (redis only).
"""

from __future__ import annotations

import time

import redis


def finished(client: redis.Redis, key: str, n: int) -> None:
    count = client.incr(key)
    if count == 1:
        client.set(f"{key}:first", repr(time.time()))
    if count == n:
        client.set(f"{key}:last", repr(time.time()))


def jobs_per_second(client: redis.Redis, key: str, n: int) -> float:
    first, last = (float(client.get(f"{key}:{end}") or 0) for end in ("first", "last"))
    return (n - 1) / (last - first) if last > first else float("nan")
