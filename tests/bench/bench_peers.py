"""The Python peers a team would otherwise pick: EchoMQ's worker beside RQ, Celery and dramatiq.

The same job everywhere: a no-op that does one INCR on the same Redis (pool_marks.py), N jobs
seeded before the worker starts (not timed), the rate counted from the first finished job to
the last, so neither seeding nor start-up is counted. Each worker runs as its own process
through its own command, one at a time, with its log level at WARNING:

* ``echomq worker --concurrency C`` (one process, C processor threads);
* RQ 2.12 ``rq worker --burst --worker-class rq.worker.SimpleWorker`` (one job at a time in the
  worker's process, no fork per job: RQ's fastest; concurrency 1 only, RQ has no threads);
* Celery 5.7 ``celery worker --pool threads --concurrency C`` and ``--pool prefork --concurrency C``
  (results ignored, its defaults otherwise: prefetch 4, late acks off);
* dramatiq 2.2 ``dramatiq --processes 1 --threads C`` (default middleware, no retries).

Printed as ratios EchoMQ / peer at the same concurrency (1 and 4), the absolute rates beside
them. The runtimes take turns for ROUNDS rounds and each one's best round counts (the machine
is shared). Exits non-zero if a run fails (a worker that ends early or never gets through).

The peers live in .venv-bench (tests/bench/requirements.txt, with hiredis like the package's
venv), built by ``make bench``; without it their rows say n/a. Run: ``.venv/bin/python
tests/bench/bench_peers.py``. BENCH_PEER_JOBS sets N (default 2000), BENCH_PEER_ROUNDS the
rounds (default 2), BENCH_PEER_CONCURRENCY the levels (default "1,4"). Every queue is unique
and every key a run wrote is deleted afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from bench_pool import BENCH_VENV, DONE_TIMEOUT_S, delete, peer_python, peers_shared_keys, run_pool

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
N = int(os.environ.get("BENCH_PEER_JOBS", "2000"))
ROUNDS = int(os.environ.get("BENCH_PEER_ROUNDS", "2"))
LEVELS = tuple(int(c) for c in os.environ.get("BENCH_PEER_CONCURRENCY", "1,4").split(","))

#: The workers measured, in the order they are printed.
RUNTIMES = ("echomq", "rq", "celery-threads", "celery-prefork", "dramatiq")


def label(runtime: str, concurrency: int) -> str:
    return {
        "echomq": f"echomq worker --concurrency {concurrency}",
        "rq": "rq worker --burst (SimpleWorker)",
        "celery-threads": f"celery worker --pool threads --concurrency {concurrency}",
        "celery-prefork": f"celery worker --pool prefork --concurrency {concurrency}",
        "dramatiq": f"dramatiq --processes 1 --threads {concurrency}",
    }[runtime]


def argv(runtime: str, concurrency: int, name: str, url: str) -> list[str]:
    """The command that runs ``runtime``'s worker on queue ``name`` at ``concurrency``."""
    bin_dir = BENCH_VENV / "bin"
    if runtime == "echomq":
        return [sys.executable, "-m", "echomq", "worker", "--processor", "bench_pool:noop", "--redis", url,
                "--concurrency", str(concurrency), "--log-level", "WARNING", name]
    if runtime == "rq":
        return [str(bin_dir / "rq"), "worker", "--burst", "--worker-class", "rq.worker.SimpleWorker", "--url", url,
                "--name", name, "--logging_level", "WARNING", name]
    if runtime.startswith("celery-"):
        return [str(bin_dir / "celery"), "-A", "peer_celery_pool", "worker", "--pool", runtime.split("-")[1],
                "--concurrency", str(concurrency), "-Q", name, "--loglevel", "WARNING"]
    return [str(bin_dir / "dramatiq"), "--processes", "1", "--threads", str(concurrency), "peer_dramatiq_pool"]


def runs_at(runtime: str, concurrency: int) -> bool:
    return runtime != "rq" or concurrency == 1


def seed_echomq(client: redis.Redis, name: str, n: int) -> None:
    queue = Queue(client, name)
    job = {"name": "noop", "data": {"key": f"{name}:count", "n": n}}
    for at in range(0, n, 1000):
        queue.add_bulk([job] * (min(n, at + 1000) - at))


def run(client: redis.Redis, url: str, runtime: str, concurrency: int, n: int,
        name: str | None = None) -> float | None:
    """One worker through n jobs on a fresh queue (``name``, else a unique one): its rate
    (jobs/s), None when the peers' venv is missing."""
    name = name or f"bench-peer-{runtime}-{uuid.uuid4().hex[:8]}"
    try:
        if runtime == "echomq":
            seed_echomq(client, name, n)
            env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
        else:
            python = peer_python()
            if python is None:
                return None
            env = {"BENCH_REDIS_URL": url, "BENCH_QUEUE": name, "PYTHONPATH": str(HERE)}
            module = {"rq": "peer_rq", "dramatiq": "peer_dramatiq_pool"}.get(runtime, "peer_celery_pool")
            subprocess.run([str(python), f"{module}.py", "seed", str(n)], cwd=HERE, env={**os.environ, **env},
                           check=True, timeout=DONE_TIMEOUT_S)
        return run_pool(client, f"{name}:count", argv(runtime, concurrency, name, url), env, n)
    finally:
        delete(client, QueueKeys(name).all_keys_pattern(), f"*{name}*")
        client.srem("rq:queues", f"rq:queue:{name}")


def measure(url: str, n: int = N, rounds: int = ROUNDS, levels: tuple[int, ...] = LEVELS,
            runtimes: tuple[str, ...] = RUNTIMES) -> dict[tuple[str, int], float | None]:
    """Best rate of each (runtime, concurrency) over ``rounds`` rounds taken in turns."""
    client = redis.Redis.from_url(url)
    best: dict[tuple[str, int], float | None] = {}
    try:
        with peers_shared_keys(client):
            for _ in range(rounds):
                for concurrency in levels:
                    for runtime in runtimes:
                        if not runs_at(runtime, concurrency):
                            continue
                        rate = run(client, url, runtime, concurrency, n)
                        known = best.get((runtime, concurrency))
                        best[(runtime, concurrency)] = rate if known is None else max(known, rate or known)
    finally:
        client.close()
    return best


def report(best: dict[tuple[str, int], float | None], url: str, n: int, rounds: int) -> None:
    print(f"\nThe Python peers, no-op jobs (one INCR), {n} jobs each, first to last finished, best of {rounds} "
          f"(jobs/s; Redis {url}; 2 shared cores: read the ratios)")
    print(f"{'concurrency':>11}  {'worker':<52} {'jobs/s':>8} {'EchoMQ / it':>12}")
    for concurrency in sorted({c for _, c in best}):
        ours = best.get(("echomq", concurrency))
        for runtime in RUNTIMES:
            if (runtime, concurrency) not in best:
                continue
            rate = best[(runtime, concurrency)]
            shown = f"{rate:,.0f}" if rate else "n/a"
            ratio = "" if runtime == "echomq" else f"{ours / rate:.2f}x" if rate and ours else "n/a"
            print(f"{concurrency:>11}  {label(runtime, concurrency):<52} {shown:>8} {ratio:>12}")
    if peer_python() is None:
        print(f"  (no {BENCH_VENV.relative_to(ROOT)}: `make bench` builds it with RQ, Celery and dramatiq)")


def main() -> int:
    best = measure(URL)
    report(best, URL, N, ROUNDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
