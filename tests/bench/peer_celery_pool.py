"""Celery's side of bench_pool.py and bench_peers.py, in .venv-bench: the app its pools run, and
its seeding.

    celery -A peer_celery_pool worker --pool prefork --concurrency 2 -Q <queue>   (processes)
    celery -A peer_celery_pool worker --pool threads --concurrency 4 -Q <queue>   (threads)
    python peer_celery_pool.py seed <n>                                            (the jobs)

``BENCH_REDIS_URL`` is the broker, ``BENCH_QUEUE`` the queue (its counter: ``<queue>:count``). Celery's
defaults otherwise (prefetch 4, late acks off), with results ignored: no job of the others
stores more than its completion either.
"""

from __future__ import annotations

import os
import sys

import redis
from celery import Celery
from pool_marks import finished

URL = os.environ["BENCH_REDIS_URL"]
QUEUE = os.environ["BENCH_QUEUE"]

app = Celery("bench_pool", broker=URL)
app.conf.update(task_default_queue=QUEUE, task_ignore_result=True, broker_connection_retry_on_startup=True)

_client: dict[int, redis.Redis] = {}


def client() -> redis.Redis:
    """This process's client (the prefork pool forks after import; threads share it)."""
    return _client.setdefault(os.getpid(), redis.Redis.from_url(URL))


@app.task(name="noop")
def noop(key: str, n: int) -> None:
    finished(client(), key, n)


if __name__ == "__main__" and sys.argv[1:2] == ["seed"]:
    count = int(sys.argv[2])
    for _ in range(count):
        noop.delay(f"{QUEUE}:count", count)
