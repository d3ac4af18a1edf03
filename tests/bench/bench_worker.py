"""Worker throughput: jobs per second with a no-op processor, at concurrency 1 and 10.

EchoMQ's threaded Worker beside BullMQ 6.7 in Node and the official asyncio ``bullmq`` Python
package, in one run on the same Redis. Each side seeds its own N jobs first (not timed), then
the clock runs from the worker's start until its processor has been called N times.
Targets: >= 1.0x BullMQ Node at concurrency 1, ahead of the asyncio package at both.

The asyncio package pins its own redis/msgpack versions, so it lives in a venv of its own,
tests/bench/.venv-bullmq, created here on first use (``pip install bullmq==3.4.4``; gitignored).

Run: ``.venv/bin/python tests/bench/bench_worker.py`` (``make bench``). BENCH_WORKER_JOBS sets N
(default 5000 at concurrency 1, twice that at 10). Every queue is unique and deleted afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
BASE_N = int(os.environ.get("BENCH_WORKER_JOBS", "5000"))
ASYNCIO_VERSION = "3.4.4"
ASYNCIO_VENV = HERE / ".venv-bullmq"


def seed(client: redis.Redis, name: str, n: int) -> None:
    try:
        from echomq.queue.queue import Queue
    except ImportError:  # before the Queue landed: the same placement through the shared includes
        from support.workers import seed_job

        for i in range(n):
            seed_job(client, name, "noop", {"i": i})
        return
    queue = Queue(client, name)
    for i in range(0, n, 1000):
        queue.add_bulk([{"name": "noop", "data": {"i": j}} for j in range(i, min(n, i + 1000))])


def run_echomq(client: redis.Redis, n: int, concurrency: int) -> float:
    name = f"bench-w-emq-{uuid.uuid4().hex[:8]}"
    seed(client, name, n)
    count = 0
    lock = threading.Lock()
    finished = threading.Event()
    end = [0.0]

    def noop(job: object) -> None:
        nonlocal count
        with lock:
            count += 1
            if count == n:
                end[0] = time.perf_counter()
                finished.set()

    worker = Worker(client, name, noop, concurrency=concurrency)
    thread = threading.Thread(target=worker.run)
    t0 = time.perf_counter()
    thread.start()
    finished.wait(300)
    worker.close()
    thread.join()
    completed = client.zcard(QueueKeys(name).completed)
    cleanup(client, name)
    if completed != n:
        raise SystemExit(f"EchoMQ completed {completed} of {n} jobs")
    return end[0] - t0


def run_node(n: int, concurrency: int) -> float | None:
    name = f"{{bench-w-node-{uuid.uuid4().hex[:8]}}}"
    env = {**os.environ, "REDIS_URL": URL, "NODE_PATH": str(ROOT / "tests/interop/node_modules")}
    done = subprocess.run(["node", str(HERE / "bench_worker.js"), name, str(n), str(concurrency)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    cleanup(redis.Redis.from_url(URL), name.strip("{}"))
    if done.returncode:
        print(f"  (BullMQ Node failed: {done.stderr.strip()[:300]})")
        return None
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def asyncio_python() -> Path | None:
    python = ASYNCIO_VENV / "bin" / "python"
    if python.exists():
        return python
    print(f"  creating {ASYNCIO_VENV.relative_to(ROOT)} with bullmq=={ASYNCIO_VERSION} (once) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(ASYNCIO_VENV)], check=True, capture_output=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"bullmq=={ASYNCIO_VERSION}"], check=True,
                       capture_output=True, timeout=300)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"  (could not install the asyncio bullmq package: {exc}; its column is left empty)")
        return None
    return python


def run_asyncio(python: Path | None, n: int, concurrency: int) -> float | None:
    if python is None:
        return None
    name = f"{{bench-w-py-{uuid.uuid4().hex[:8]}}}"
    done = subprocess.run([str(python), str(HERE / "peer_bullmq_asyncio_worker.py"), URL, name, str(n),
                           str(concurrency)], capture_output=True, text=True, timeout=300, check=False)
    cleanup(redis.Redis.from_url(URL), name.strip("{}"))
    if done.returncode:
        print(f"  (asyncio bullmq failed: {done.stderr.strip()[-300:]})")
        return None
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def cleanup(client: redis.Redis, name: str) -> None:
    keys = list(client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])


def main() -> None:
    client = redis.Redis.from_url(URL)
    python = asyncio_python()
    rows = []
    for concurrency in (1, 10):
        n = BASE_N if concurrency == 1 else BASE_N * 2
        ours = n / run_echomq(client, n, concurrency)
        node_s = run_node(n, concurrency)
        aio_s = run_asyncio(python, n, concurrency)
        rows.append((concurrency, n, ours, n / node_s if node_s else None, n / aio_s if aio_s else None))
    print(f"\nWorker throughput, no-op processor (jobs/s; Redis {URL})")
    print(f"{'concurrency':>11} {'jobs':>6} {'EchoMQ':>9} {'BullMQ Node':>12} {'asyncio bullmq':>15} "
          f"{'vs Node':>8} {'vs asyncio':>10}")
    for concurrency, n, ours, node_rate, aio_rate in rows:
        cells = [f"{v:,.0f}" if v else "n/a" for v in (ours, node_rate, aio_rate)]
        ratios = [f"{ours / v:.2f}x" if v else "n/a" for v in (node_rate, aio_rate)]
        print(f"{concurrency:>11} {n:>6} {cells[0]:>9} {cells[1]:>12} {cells[2]:>15} {ratios[0]:>8} {ratios[1]:>10}")

if __name__ == "__main__":
    main()
