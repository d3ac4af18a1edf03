"""Add throughput, EchoMQ beside BullMQ 6.7 in the same run on the same Redis.

1. Adds per second one at a time (each call waits for its reply): ``Queue.add`` vs ``queue.add``.
2. Adds per second in bulk (batches of 1000): ``Queue.add_bulk`` vs ``queue.addBulk``.
Target: at least 1.0x BullMQ for both. The same job (name and a small JSON payload) everywhere;
each side gets its own fresh queue; the runs alternate and the best of ROUNDS counts.

Run: ``.venv/bin/python tests/bench/bench_queue.py`` (``make bench``). Needs node and
tests/interop/node_modules. Every queue is unique and deleted afterwards.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from node_peer import run_node_peer

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
SINGLE = int(os.environ.get("BENCH_SINGLE", "5000"))
BULK = int(os.environ.get("BENCH_BULK", "50000"))
BATCH = 1000
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def data(i: int) -> dict:
    return {"orderId": i, "customer": f"c-{i % 97}", "items": [1, 2, 3]}


def node(*args: str) -> dict:
    return run_node_peer(Path(__file__).with_suffix(".js"), URL, *args)


def echomq_single(client: redis.Redis, name: str, n: int) -> float:
    queue = Queue(client, name)
    queue.add("warmup", data(-1))
    start = time.perf_counter()
    for i in range(n):
        queue.add("order", data(i))
    return time.perf_counter() - start


def echomq_bulk(client: redis.Redis, name: str, n: int) -> float:
    queue = Queue(client, name)
    queue.add_bulk([("warmup", data(-2))])
    start = time.perf_counter()
    for at in range(0, n, BATCH):
        queue.add_bulk([("order", data(i)) for i in range(at, min(n, at + BATCH))])
    return time.perf_counter() - start


def drop(client: redis.Redis, name: str) -> None:
    keys = list(client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=5000))
    for at in range(0, len(keys), 5000):
        client.delete(*keys[at : at + 5000])


def measure(client: redis.Redis, tag: str, mode: str, n: int) -> tuple[float, float]:
    """Best rate (jobs/s) of each side over ROUNDS alternating runs."""
    ours_best = theirs_best = 0.0
    for round_no in range(ROUNDS):
        ours_q, theirs_q = f"bench-q-{mode}-emq-{tag}-{round_no}", f"bench-q-{mode}-bull-{tag}-{round_no}"
        try:
            seconds = echomq_single(client, ours_q, n) if mode == "add" else echomq_bulk(client, ours_q, n)
            assert client.llen(QueueKeys(ours_q).wait) == n + 1
            args = ["add", theirs_q, str(n)] if mode == "add" else ["bulk", theirs_q, str(n), str(BATCH)]
            theirs = node(*args)
            assert theirs["waiting"] == n + 2, theirs
        finally:
            drop(client, ours_q)
            drop(client, theirs_q)
        ours_best = max(ours_best, n / seconds)
        theirs_best = max(theirs_best, n / theirs["seconds"])
    return ours_best, theirs_best


def main() -> int:
    client = redis.Redis.from_url(URL)
    tag = uuid.uuid4().hex[:6]
    single = measure(client, tag, "add", SINGLE)
    bulk = measure(client, tag, "bulk", BULK)
    print(f"{'measure':<34}{'EchoMQ':>12}{'BullMQ 6.7':>12}{'ratio':>8}")
    print(f"{'adds/s one at a time':<34}{single[0]:>12.0f}{single[1]:>12.0f}{single[0] / single[1]:>7.2f}x")
    print(f"{f'adds/s bulk (batches of {BATCH})':<34}{bulk[0]:>12.0f}{bulk[1]:>12.0f}{bulk[0] / bulk[1]:>7.2f}x")
    print(f"(ratio > 1 means EchoMQ is faster; {SINGLE} single adds, {BULK} bulk adds, best of {ROUNDS})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
