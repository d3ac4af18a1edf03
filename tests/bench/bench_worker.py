"""Worker throughput: jobs per second with a no-op processor, at concurrency 1 and 10.

EchoMQ's threaded Worker beside BullMQ 6.7 in Node and the official asyncio ``bullmq`` Python
package, in one run on the same Redis. Each side seeds its own N jobs first (not timed), then
the clock runs from the worker's start until its processor has been called N times.

Printed beside them:

* **the physical limit**: one client's round trips per second against the same Redis (a PING
  loop on the ``redis.Redis.from_url`` client the Worker is given here, with hiredis when it
  is installed: on one of its connections with the command packed once, as the worker's hot
  path sends its scripts, and through ``Redis.ping()``), and EchoMQ's concurrency-1 jobs/s as
  a fraction of it (a job costs at least one round trip: its finish-and-fetch);
* **CPU contention**: EchoMQ and BullMQ Node at concurrency 10 again while a process this
  script starts keeps one core busy (a pure-Python spin loop, stopped afterwards);
* the targets of docs/worker.md's work (issue 15): >= 2.0x Node at concurrency 1, >= 1.5x at
  10, ahead of Node at 10 under load, each marked met / not met. A missed target is a
  measurement, not a failure: the script exits non-zero only when a run fails.

The asyncio package pins its own redis/msgpack versions, so it lives in a venv of its own,
tests/bench/.venv-bullmq, created here on first use (``pip install bullmq==3.4.4``; gitignored;
BENCH_WORKER_ASYNCIO=0 leaves its column out).

Every measurement is taken in each of BENCH_WORKER_ROUNDS rounds (default 3), the sides taking
turns, and each side's best round counts (the machine is shared); the ratios of every round are
printed too. Run: ``.venv/bin/python tests/bench/bench_worker.py`` (``make bench``).
BENCH_WORKER_JOBS sets N (default 5000 at concurrency 1, twice that at 10). Every queue is unique
and deleted afterwards.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from redis.utils import HIREDIS_AVAILABLE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.transport.connection import checkout
from echomq.worker.worker import Worker

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
BASE_N = int(os.environ.get("BENCH_WORKER_JOBS", "5000"))
WITH_ASYNCIO = os.environ.get("BENCH_WORKER_ASYNCIO", "1") != "0"
ROUNDS = int(os.environ.get("BENCH_WORKER_ROUNDS", "3"))
ASYNCIO_VERSION = "3.4.4"
ASYNCIO_VENV = HERE / ".venv-bullmq"
PING_SECONDS = 1.0
#: What one process keeping a core busy runs: pure Python, so it holds its own interpreter's
#: lock all the time and competes for the CPU the way a busy neighbour does.
SPIN = "while True:\n    pass\n"
#: (label, what is compared, target ratio) of issue 15, each printed met / not met.
TARGETS = (("concurrency 1 vs BullMQ Node", "c1", 2.0), ("concurrency 10 vs BullMQ Node", "c10", 1.5),
           ("concurrency 10 vs BullMQ Node, one core busy", "c10 load", 1.0))


def seed(client: redis.Redis, name: str, n: int) -> None:
    queue = Queue(client, name)
    for i in range(0, n, 1000):
        queue.add_bulk([{"name": "noop", "data": {"i": j}} for j in range(i, min(n, i + 1000))])


def round_trips(client: redis.Redis, seconds: float = PING_SECONDS) -> float:
    """PINGs per second one client gets, each waiting for its reply: the most jobs per second
    anything can finish at concurrency 1 if a job costs one round trip."""
    client.ping()  # connect outside the clock
    count = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(100):
            client.ping()
        count += 100
        now = time.perf_counter()
        if now >= end:
            return count / (now - start)


def raw_round_trips(client: redis.Redis, seconds: float = PING_SECONDS) -> float:
    """The same on one connection of the client's pool, each PING packed once and written
    straight to a socket without a timeout (the path the concurrency-1 worker's hot-path
    scripts take, docs/worker.md), without redis-py's per-command bookkeeping: the physical
    limit itself."""
    pool = client.connection_pool
    conn = checkout(pool)
    untimed = False
    try:
        packed = conn.pack_command("PING")
        conn.send_packed_command(packed, check_health=False)
        conn.read_response()  # connect outside the clock
        untimed = isinstance(conn._sock, socket.socket)  # a real socket (fakeredis has its own)
        if untimed:
            conn._sock.settimeout(None)  # no poll before each send and receive (given back below)
        count = 0
        start = time.perf_counter()
        end = start + seconds
        while True:
            for _ in range(100):
                conn.send_packed_command(packed, check_health=False)
                conn.read_response()
            count += 100
            now = time.perf_counter()
            if now >= end:
                return count / (now - start)
    finally:
        if untimed and conn._sock is not None:
            conn._sock.settimeout(conn.socket_timeout)
        pool.release(conn)


@contextmanager
def one_core_busy() -> Iterator[None]:
    """Another process spinning on one core while the body runs; stopped (and checked to have
    kept running) afterwards."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.2)  # let it get going
        yield
        if spinner.poll() is not None:
            raise SystemExit(f"the CPU load ended early with status {spinner.returncode}")
    finally:
        spinner.kill()
        spinner.wait()


def run_echomq(client: redis.Redis, n: int, concurrency: int, name: str | None = None) -> float:
    """Seconds from the Worker's start to its n-th job, on a fresh queue (``name``, else a
    unique one) whose keys are deleted afterwards."""
    name = name or f"bench-w-emq-{uuid.uuid4().hex[:8]}"
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
    try:
        t0 = time.perf_counter()
        thread.start()
        finished.wait(300)
        worker.close()
        thread.join()
        completed = client.zcard(QueueKeys(name).completed)
    finally:
        cleanup(client, name)
    if completed != n:
        raise SystemExit(f"EchoMQ completed {completed} of {n} jobs")
    return end[0] - t0


def run_node(n: int, concurrency: int) -> float:
    name = f"{{bench-w-node-{uuid.uuid4().hex[:8]}}}"
    env = {**os.environ, "REDIS_URL": URL, "NODE_PATH": str(ROOT / "tests/interop/node_modules")}
    try:
        done = subprocess.run(["node", str(HERE / "bench_worker.js"), name, str(n), str(concurrency)], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    finally:
        cleanup(redis.Redis.from_url(URL), name.strip("{}"))
    if done.returncode:
        raise SystemExit(f"BullMQ Node failed: {done.stderr.strip()[:600]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def asyncio_python() -> Path | None:
    if not WITH_ASYNCIO:
        return None
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
    try:
        done = subprocess.run([str(python), str(HERE / "peer_bullmq_asyncio_worker.py"), URL, name, str(n),
                               str(concurrency)], capture_output=True, text=True, timeout=300, check=False)
    finally:
        cleanup(redis.Redis.from_url(URL), name.strip("{}"))
    if done.returncode:
        raise SystemExit(f"asyncio bullmq failed: {done.stderr.strip()[-600:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def cleanup(client: redis.Redis, name: str) -> None:
    keys = list(client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "not met"


def best_rate(rates: list[float | None]) -> float | None:
    measured = [rate for rate in rates if rate]
    return max(measured) if measured else None


def main() -> None:
    client = redis.Redis.from_url(URL)
    python = asyncio_python()
    cases = {"c1": (1, BASE_N), "c10": (10, BASE_N * 2)}
    runs: dict[tuple[str, str], list[float | None]] = {}
    ping_rates, raw_rates = [], []
    for _ in range(ROUNDS):  # interleaved: a burst of load elsewhere hits every side alike
        ping_rates.append(round_trips(client))
        raw_rates.append(raw_round_trips(client))
        for case, (concurrency, n) in cases.items():
            runs.setdefault((case, "echomq"), []).append(n / run_echomq(client, n, concurrency))
            runs.setdefault((case, "node"), []).append(n / run_node(n, concurrency))
            aio_s = run_asyncio(python, n, concurrency)
            runs.setdefault((case, "asyncio"), []).append(n / aio_s if aio_s else None)
        with one_core_busy():
            n = cases["c10"][1]
            runs.setdefault(("c10 load", "echomq"), []).append(n / run_echomq(client, n, 10))
            runs.setdefault(("c10 load", "node"), []).append(n / run_node(n, 10))
    best = {key: best_rate(rates) for key, rates in runs.items()}
    pings, raw = max(ping_rates), max(raw_rates)
    rows = [(concurrency, n, best[(case, "echomq")], best[(case, "node")], best[(case, "asyncio")])
            for case, (concurrency, n) in cases.items()]
    loaded_n = cases["c10"][1]
    loaded = (best[("c10 load", "echomq")], best[("c10 load", "node")])

    parser = "hiredis" if HIREDIS_AVAILABLE else "redis-py's pure-Python parser"
    print(f"\nWorker throughput, no-op processor (jobs/s, best of {ROUNDS} interleaved rounds; Redis {URL}; "
          f"{parser})")
    print(f"{'concurrency':>11} {'jobs':>6} {'EchoMQ':>9} {'BullMQ Node':>12} {'asyncio bullmq':>15} "
          f"{'vs Node':>8} {'vs asyncio':>10}")
    for concurrency, n, ours, node_rate, aio_rate in rows:
        cells = [f"{v:,.0f}" if v else "n/a" for v in (ours, node_rate, aio_rate)]
        ratios = [f"{ours / v:.2f}x" if v else "n/a" for v in (node_rate, aio_rate)]
        print(f"{concurrency:>11} {n:>6} {cells[0]:>9} {cells[1]:>12} {cells[2]:>15} {ratios[0]:>8} {ratios[1]:>10}")
    print(f"{'10, load':>11} {loaded_n:>6} {loaded[0]:>9,.0f} {loaded[1]:>12,.0f} {'':>15} "
          f"{loaded[0] / loaded[1]:>7.2f}x {'':>10}")
    print("  (10, load: another process keeps one core busy with a pure-Python spin loop)")
    for case in ("c1", "c10", "c10 load"):
        pairs = [f"{ours / theirs:.2f}x" for ours, theirs in zip(runs[(case, "echomq")], runs[(case, "node")])
                 if ours and theirs]
        print(f"  {case} vs Node, round by round: {', '.join(pairs)}")

    c1 = rows[0][2]
    assert c1 is not None and loaded[0] is not None and loaded[1] is not None
    print(f"\nThe physical limit: one client's round trips (PING, waiting for each reply, best of {ROUNDS}), "
          f"{parser}")
    print(f"  one socket, packed once, untimed: {raw:>7,.0f} round trips/s ({1e6 / raw:.0f} us each)")
    print(f"  through redis.Redis.ping():       {pings:>7,.0f} round trips/s ({1e6 / pings:.0f} us each)")
    print(f"  EchoMQ at concurrency 1: {c1:,.0f} jobs/s ({1e6 / c1:.0f} us each) = {c1 / raw:.2f} of the "
          f"connection's round-trip rate ({c1 / pings:.2f} of redis-py's)")

    measured = {case: best[(case, "echomq")] / best[(case, "node")] for case in ("c1", "c10", "c10 load")}
    print("\nTargets (issue 15; one run on a shared 2-core machine: a measurement, not a pass/fail)")
    for label, key, target in TARGETS:
        print(f"  {label:<46} {measured[key]:>6.2f}x  target >= {target:.1f}x  {verdict(measured[key], target)}")


if __name__ == "__main__":
    main()
