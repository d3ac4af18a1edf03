"""dramatiq's side of bench_pool.py and bench_peers.py, in .venv-bench: the actor its workers run,
and its seeding.

    dramatiq --processes 2 --threads 1 peer_dramatiq_pool   (processes, bench_pool.py)
    dramatiq --processes 1 --threads 4 peer_dramatiq_pool   (threads, bench_peers.py)
    python peer_dramatiq_pool.py seed <n>                   (the jobs)

``BENCH_REDIS_URL`` is the broker, ``BENCH_QUEUE`` the queue (its counter: ``<queue>:count``). dramatiq's
default middleware, no retries (no job fails).
"""

from __future__ import annotations

import os
import sys

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker
from pool_marks import finished

URL = os.environ["BENCH_REDIS_URL"]
QUEUE = os.environ["BENCH_QUEUE"]

dramatiq.set_broker(RedisBroker(url=URL))

_client: dict[int, redis.Redis] = {}


def client() -> redis.Redis:
    """This process's client (dramatiq forks its worker processes)."""
    return _client.setdefault(os.getpid(), redis.Redis.from_url(URL))


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def noop(key: str, n: int) -> None:
    finished(client(), key, n)


if __name__ == "__main__" and sys.argv[1:2] == ["seed"]:
    count = int(sys.argv[2])
    for _ in range(count):
        noop.send(f"{QUEUE}:count", count)
