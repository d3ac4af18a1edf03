"""RQ's side of bench_peers.py, in .venv-bench: the job its SimpleWorker runs, and its seeding.

    rq worker --burst --worker-class rq.worker.SimpleWorker --url <url> <queue>   (the worker)
    python peer_rq.py seed <n>                                                     (the jobs)

``BENCH_REDIS_URL`` is the Redis, ``BENCH_QUEUE`` the queue (its counter: ``<queue>:count``). RQ's
defaults otherwise (results kept 500 s, one job at a time in the worker's own process: the
SimpleWorker, no fork per job). Job ids start with the queue name, so every key a run leaves
matches ``*<queue>*`` and is deleted afterwards.
"""

from __future__ import annotations

import os
import sys

import redis
from pool_marks import finished
from rq import Queue

URL = os.environ["BENCH_REDIS_URL"]
QUEUE = os.environ["BENCH_QUEUE"]

_client: dict[int, redis.Redis] = {}


def client() -> redis.Redis:
    """This process's client for the job's own INCR (not the worker's)."""
    return _client.setdefault(os.getpid(), redis.Redis.from_url(URL))


def noop(key: str, n: int) -> None:
    finished(client(), key, n)


if __name__ == "__main__" and sys.argv[1:2] == ["seed"]:
    count = int(sys.argv[2])
    queue = Queue(QUEUE, connection=redis.Redis.from_url(URL))
    for i in range(count):  # by its import path: run as a script this module is __main__
        queue.enqueue("peer_rq.noop", f"{QUEUE}:count", count, job_id=f"{QUEUE}-{i}")
