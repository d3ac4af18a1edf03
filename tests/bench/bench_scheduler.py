"""Scheduler throughput, EchoMQ beside BullMQ 6.7 in the same run on the same Redis.

1. Upserts per second, one at a time (each awaits its reply), half ``every`` and half cron with
   a time zone, each upsert a new scheduler. Target: at least 2x BullMQ.
2. Time to list 10,000 schedulers (EchoMQ ``list()`` vs BullMQ ``getJobSchedulers()``, best of
   3, the same queue for both). Target: no slower than BullMQ.

Run: ``.venv/bin/python tests/bench/bench_scheduler.py`` (``make bench``). Needs node and
tests/interop/node_modules. Both runtimes talk to a private ``redis-server`` this script starts
(so other work on the shared Redis does not skew one side); set ``BENCH_REDIS_URL`` to use an
existing server instead. Every queue is unique and deleted afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from node_peer import run_node_peer

from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler

URL = os.environ.get("BENCH_REDIS_URL", "")
UPSERTS = int(os.environ.get("BENCH_UPSERTS", "3000"))
LISTED = int(os.environ.get("BENCH_LISTED", "10000"))
ROUNDS = 3


@contextmanager
def redis_url() -> Iterator[str]:
    """BENCH_REDIS_URL, else a throwaway redis-server (else the shared one at REDIS_URL)."""
    binary = shutil.which("redis-server")
    if URL or binary is None:
        yield URL or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
        url = f"redis://127.0.0.1:{port}/0"
        try:
            for _ in range(200):
                try:
                    if redis.Redis.from_url(url).ping():
                        break
                except redis.ConnectionError:
                    time.sleep(0.02)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def node(url: str, *args: str) -> dict:
    return run_node_peer(Path(__file__).with_suffix(".js"), url, *args)


def upsert(sched: JobScheduler, i: int) -> None:
    if i % 2 == 0:
        sched.upsert(f"s-{i}", {"every": 60_000 + i}, "bench", {"i": i})
    else:
        sched.upsert(f"s-{i}", {"pattern": "*/5 * * * *", "tz": "Europe/Berlin"}, "bench", {"i": i})


def echomq_upserts(client: redis.Redis, queue: str, n: int) -> float:
    sched = JobScheduler(client, queue)
    upsert(sched, -2)
    upsert(sched, -1)
    start = time.perf_counter()
    for i in range(n):
        upsert(sched, i)
    return time.perf_counter() - start


def populate(client: redis.Redis, queue: str, n: int) -> None:
    sched = JobScheduler(client, queue)
    for i in range(n):
        upsert(sched, i)


def echomq_list(client: redis.Redis, queue: str) -> tuple[int, float]:
    sched = JobScheduler(client, queue)
    best, found = float("inf"), 0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        found = len(sched.list())
        best = min(best, time.perf_counter() - start)
    return found, best


def drop(client: redis.Redis, queue: str) -> None:
    keys = list(client.scan_iter(match=QueueKeys(queue).all_keys_pattern(), count=5000))
    for at in range(0, len(keys), 5000):
        client.delete(*keys[at : at + 5000])


def main() -> int:
    with redis_url() as url:
        return run(url)


def run(url: str) -> int:
    client = redis.Redis.from_url(url)
    tag = uuid.uuid4().hex[:6]
    queues = {name: f"bench-sched-{name}-{tag}" for name in ("emq", "bull", "list")}
    try:
        ours_s = echomq_upserts(client, queues["emq"], UPSERTS)
        theirs = node(url, "upsert", queues["bull"], str(UPSERTS))
        populate(client, queues["list"], LISTED)
        found, ours_list = echomq_list(client, queues["list"])
        listed = node(url, "list", queues["list"], str(ROUNDS))
    finally:
        for queue in queues.values():
            drop(client, queue)
    ours_rate, theirs_rate = UPSERTS / ours_s, UPSERTS / theirs["seconds"]
    assert found == listed["found"] == LISTED, (found, listed)
    print(f"{'measure':<34}{'EchoMQ':>12}{'BullMQ 6.7':>12}{'ratio':>8}")
    print(f"{'upserts/s (1:1 every:cron+tz)':<34}{ours_rate:>12.0f}{theirs_rate:>12.0f}"
          f"{ours_rate / theirs_rate:>7.2f}x")
    print(f"{f'list {LISTED} schedulers (s)':<34}{ours_list:>12.3f}{listed['seconds']:>12.3f}"
          f"{listed['seconds'] / ours_list:>7.2f}x")
    print(f"(ratio > 1 means EchoMQ is faster; {UPSERTS} upserts each, best of {ROUNDS} listings; {url})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
