"""One simulated day with echomq.testing: how long a test of a day of schedules takes.

An ``every: 60000`` scheduler and a ``*/5 * * * *`` cron scheduler on one queue, a no-op
processor, and ``advance_time(clock, queue, processor, days=1)``: 1,440 + 288 iterations, each
run the way a Worker runs it (moveToActive, the scheduler step, moveToFinished). Target: under
1 s of wall time on fakeredis. The same day on a real Redis is printed beside it (a throwaway
``redis-server`` this script starts, or ``BENCH_REDIS_URL``; skipped when there is neither).

Run: ``.venv/bin/python tests/bench/bench_testing.py`` (``make bench``). Best of ``BENCH_ROUNDS``
(default 3) rounds, each on a fresh server, printed as wall and CPU seconds.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fakeredis
import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from echomq import JobScheduler, Queue
from echomq.testing import FakeClock, advance_time

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
URL = os.environ.get("BENCH_REDIS_URL", "")
TARGET_S = 1.0
EXPECTED_RUNS = 1440 + 288 + 1  # every minute and every 5 minutes, both ends of the day included


def noop(job: Any) -> None:
    return None


def one_day(client: redis.Redis) -> tuple[float, float, int]:
    """Wall and CPU seconds of one simulated day, and how many attempts ran."""
    name = f"bench-day-{uuid.uuid4().hex[:8]}"
    clock = FakeClock("2030-01-01T00:00:00Z")
    schedules = JobScheduler(client, name, clock=clock)
    schedules.upsert("every-minute", {"every": 60000}, "tick")
    schedules.upsert("every-five", {"pattern": "*/5 * * * *"}, "cron")
    queue = Queue(client, name, clock=clock)
    wall, cpu = time.perf_counter(), time.process_time()
    report = advance_time(clock, queue, noop, days=1)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for key in client.scan_iter(match=f"emq:{{{name}}}:*", count=1000):
        client.delete(key)
    return wall, cpu, len(report)


@contextmanager
def real_redis() -> Iterator[str | None]:
    """BENCH_REDIS_URL, else a throwaway redis-server on a free port, else None."""
    binary = shutil.which("redis-server")
    if URL or binary is None:
        yield URL or None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="bench-testing-") as tmp:
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


def best_of(make_client: Callable[[], redis.Redis]) -> tuple[float, float, float, int]:
    """Best wall, median wall, best CPU, attempts: ROUNDS rounds, each on a fresh client."""
    walls, cpus, runs = [], [], 0
    for _ in range(ROUNDS):
        client = make_client()
        try:
            wall, cpu, runs = one_day(client)
        finally:
            client.close()
        walls.append(wall)
        cpus.append(cpu)
    return min(walls), statistics.median(walls), min(cpus), runs


def main() -> int:
    print(f"one simulated day (every: 60000 + '*/5 * * * *', no-op processor), best of {ROUNDS}")
    print(f"{'backend':<12}{'attempts':>10}{'wall s':>10}{'median s':>10}{'CPU s':>10}{'us/attempt':>12}")
    fake = best_of(lambda: fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    rows = [("fakeredis", fake)]
    with real_redis() as url:
        if url is not None:
            rows.append(("real Redis", best_of(lambda: redis.Redis.from_url(url))))
    for label, (wall, median, cpu, runs) in rows:
        print(f"{label:<12}{runs:>10}{wall:>10.2f}{median:>10.2f}{cpu:>10.2f}{wall / runs * 1e6:>12.0f}")
    if fake[3] != EXPECTED_RUNS:
        print(f"unexpected: {fake[3]} attempts, not {EXPECTED_RUNS}", file=sys.stderr)
        return 1
    verdict = "met" if fake[0] < TARGET_S else "NOT met"
    print(f"target: under {TARGET_S:.0f} s of wall time on fakeredis: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
