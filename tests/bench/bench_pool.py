"""Process pools: ``echomq worker --processes 2`` beside one process, Celery's prefork pool and dramatiq.

No-op jobs: each does one INCR (pool_marks.py), whichever runtime runs it, and the rate is
counted from the first finished job to the last, so start-up and seeding are left out. Every
pool runs one thread per process and as many processes as EchoMQ's: ``echomq worker
--processes 2``, ``celery worker --pool prefork --concurrency 2``, ``dramatiq --processes 2
--threads 1``, all on the same Redis, one after the other, each with its log level at WARNING
(EchoMQ's and Celery's default INFO writes a line per job). The pools take turns for ROUNDS
rounds and each one's best round counts (the machine is shared: a round may lose a core to
something else). Target: EchoMQ with 2 processes at least 1.6x its one process on this 2-core
machine (Redis shares those two cores).

Celery and dramatiq live in .venv-bench (requirements.txt), built by ``make bench``, never
in the package's extras; without it their columns say n/a. Run: ``.venv/bin/python
tests/bench/bench_pool.py`` (``make bench``). BENCH_POOL_JOBS sets N (default 10000),
BENCH_ROUNDS the rounds (default 3). Every queue is unique and its keys deleted afterwards, and
so are the peers' shared keys a run created (``peers_shared_keys``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from pool_marks import finished, jobs_per_second

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
N = int(os.environ.get("BENCH_POOL_JOBS", "10000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PROCESSES = 2
BENCH_VENV = ROOT / ".venv-bench"
DONE_TIMEOUT_S = 300


def noop(job: Any) -> None:
    """The EchoMQ job (``--processor bench_pool:noop``): one INCR on the worker's own client."""
    finished(job.connection, job.data["key"], job.data["n"])


def wait_for_count(client: redis.Redis, key: str, n: int, process: subprocess.Popen[bytes]) -> None:
    """Until the n-th job has counted; a pool that ends first (a burst worker may end right
    after its last job: counted again once it has) or takes too long stops the bench."""
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while int(client.get(key) or 0) < n:
        if process.poll() is not None and int(client.get(key) or 0) < n:
            raise SystemExit(f"{process.args[0]} ended early with status {process.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{process.args[0]}: {client.get(key)} of {n} jobs after {DONE_TIMEOUT_S} s")
        time.sleep(0.05)


def run_pool(client: redis.Redis, key: str, argv: Sequence[str], env: dict[str, str], n: int = N) -> float:
    """Start the pool, wait for the n-th job, stop it with SIGTERM; the rate it ran at."""
    process = subprocess.Popen(list(argv), cwd=HERE, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_count(client, key, n, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return jobs_per_second(client, key, n)


def run_echomq(client: redis.Redis, processes: int) -> float:
    name = f"bench-pool-emq-{uuid.uuid4().hex[:8]}"
    queue = Queue(client, name)
    job = {"name": "noop", "data": {"key": f"{name}:count", "n": N}}
    for at in range(0, N, 1000):
        queue.add_bulk([job] * (min(N, at + 1000) - at))
    argv = [sys.executable, "-m", "echomq", "worker", "--processor", "bench_pool:noop", "--redis", URL,
            "--processes", str(processes), "--log-level", "WARNING", name]
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    try:
        return run_pool(client, f"{name}:count", argv, env)
    finally:
        delete(client, QueueKeys(name).all_keys_pattern(), f"{name}:count*")


def peer_python() -> Path | None:
    python = BENCH_VENV / "bin" / "python"
    return python if python.exists() else None


def run_peer(client: redis.Redis, kind: str) -> float | None:
    python = peer_python()
    if python is None:
        return None
    name = f"bench-pool-{kind}-{uuid.uuid4().hex[:8]}"
    env = {"BENCH_REDIS_URL": URL, "BENCH_QUEUE": name, "PYTHONPATH": str(HERE)}
    module = f"peer_{kind}_pool"
    if kind == "celery":
        argv = [str(BENCH_VENV / "bin" / "celery"), "-A", module, "worker", "--pool", "prefork", "--concurrency",
                str(PROCESSES), "-Q", name, "--loglevel", "WARNING"]
    else:
        argv = [str(BENCH_VENV / "bin" / "dramatiq"), "--processes", str(PROCESSES), "--threads", "1", module]
    try:
        subprocess.run([str(python), f"{module}.py", "seed", str(N)], cwd=HERE, env={**os.environ, **env},
                       check=True, timeout=DONE_TIMEOUT_S)
        return run_pool(client, f"{name}:count", argv, env)
    finally:
        delete(client, f"*{name}*")


#: Keys the peers share across their queues (RQ's queue and worker sets, dramatiq's heartbeats,
#: kombu's bookkeeping), which no queue-named pattern matches.
SHARED_KEYS = ("rq:queues", "rq:workers", "dramatiq:__heartbeats__", "_kombu.binding_deadlines", "unacked",
               "unacked_index", "unacked_mutex")


@contextmanager
def peers_shared_keys(client: redis.Redis) -> Iterator[None]:
    """The peers' shared keys this block created are deleted afterwards; those it found stay."""
    found = [key for key in SHARED_KEYS if client.exists(key)]
    try:
        yield
    finally:
        created = [key for key in SHARED_KEYS if key not in found]
        if created:
            client.delete(*created)


def delete(client: redis.Redis, *patterns: str) -> None:
    for pattern in patterns:
        keys = list(client.scan_iter(match=pattern, count=1000))
        for at in range(0, len(keys), 500):
            client.delete(*keys[at:at + 500])


def best(rates: list[float | None]) -> float | None:
    measured = [rate for rate in rates if rate]
    return max(measured) if measured else None


def main() -> None:
    client = redis.Redis.from_url(URL)
    runs: dict[str, list[float | None]] = {"one": [], "two": [], "celery": [], "dramatiq": []}
    with peers_shared_keys(client):
        for _ in range(ROUNDS):
            runs["one"].append(run_echomq(client, 1))
            runs["two"].append(run_echomq(client, PROCESSES))
            runs["celery"].append(run_peer(client, "celery"))
            runs["dramatiq"].append(run_peer(client, "dramatiq"))
    one, two, celery, dramatiq = (best(runs[pool]) for pool in ("one", "two", "celery", "dramatiq"))
    assert one is not None and two is not None
    print(f"\nProcess pools, no-op jobs (one INCR), {N} jobs, first to last finished, best of {ROUNDS} "
          f"(jobs/s; Redis {URL})")
    print(f"{'pool':<44} {'jobs/s':>8} {'EchoMQ x2 vs it':>16}")
    rows = [("echomq worker --processes 1", one), (f"echomq worker --processes {PROCESSES}", two),
            (f"celery worker --pool prefork --concurrency {PROCESSES}", celery),
            (f"dramatiq --processes {PROCESSES} --threads 1", dramatiq)]
    for label, rate in rows:
        shown = f"{rate:,.0f}" if rate else "n/a"
        ratio = "" if rate is two else f"{two / rate:.2f}x" if rate else "n/a"
        print(f"{label:<44} {shown:>8} {ratio:>16}")
    pairs = [f"{b / a:.2f}x" for a, b in zip(runs["one"], runs["two"]) if a and b]
    print(f"  echomq --processes {PROCESSES} / --processes 1, round by round: {', '.join(pairs)}")
    if peer_python() is None:
        print(f"  (no {BENCH_VENV.relative_to(ROOT)}: `make bench` builds it with Celery and dramatiq)")


if __name__ == "__main__":
    main()
