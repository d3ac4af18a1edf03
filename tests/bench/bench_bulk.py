"""What the commands that act on many cost the server: ``retry_jobs`` / ``promote_jobs`` (``echomq
jobs retry|promote``) on a queue of N jobs, and ``list_queues`` (``echomq queues``) over a
keyspace of N keys.

For each bulk call and batch size: the whole call's time, each script call's time (timed on the
client around its one round trip: the server's time plus a loopback round trip), the slowest
command the server saw (``LATENCY LATEST``, 1 ms resolution) and the round trips of another
client adding jobs to another queue meanwhile (from a thread of this process, so they share its
GIL: an upper bound). Sizes: 10^4 (``make bench``); 10^5 and 10^6 with ``BENCH_SCALE=large``
(``--large``). On a redis-server of its own on a free port (``BENCH_SCALE_REDIS_URL``: another),
as bench_scale.py runs.

Run: ``.venv/bin/python tests/bench/bench_bulk.py [--large]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_scale import scale_redis

import echomq.queue.operations as operations
from echomq import Queue
from echomq.protocol.keys import QueueKeys
from echomq.queue.discovery import list_queues

LARGE = "--large" in sys.argv[1:] or os.environ.get("BENCH_SCALE", "small") == "large"
SIZES = (100_000, 1_000_000) if LARGE else (10_000,)
BATCHES = (100, 1000)
OTHER_QUEUES = 200

#: Moves a queue's waiting jobs to failed as a worker leaves them, 5000 per call, server-side.
_FAIL_WAITING = """
local ids = redis.call('LRANGE', KEYS[1], -tonumber(ARGV[1]), -1)
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], 1000 + tonumber(id), id)
  redis.call('HSET', ARGV[2] .. id, 'finishedOn', 1000 + tonumber(id), 'processedOn', 999,
    'failedReason', 'down', 'atm', 1, 'ats', 1)
end
redis.call('LTRIM', KEYS[1], 0, -tonumber(ARGV[1]) - 1)
return #ids
"""


class Timed:
    """Times every call of ``module.name`` (a function of the code under test) while active."""

    def __init__(self) -> None:
        self.ms: list[float] = []

    @contextmanager
    def around(self, owner: Any, name: str) -> Iterator[None]:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.ms.append((time.perf_counter() - start) * 1000)

        setattr(owner, name, timed)
        try:
            yield
        finally:
            setattr(owner, name, original)


def _other_client(client: redis.Redis, stop: threading.Event, ms: list[float]) -> None:
    other = Queue(type(client)(connection_pool=client.connection_pool), f"bench-bulk-probe-{os.getpid()}")
    while not stop.is_set():
        start = time.perf_counter()
        other.add("probe", {})
        ms.append((time.perf_counter() - start) * 1000)
        time.sleep(0.001)


def _slowest_command_ms(client: redis.Redis) -> int:
    latest = client.execute_command("LATENCY", "LATEST")
    return max((int(entry[2]) for entry in latest if entry[0] in (b"command", "command")), default=0)


def measure(client: redis.Redis, call: Callable[[], Any], owner: Any, name: str, *,
            latency: bool) -> dict[str, Any]:
    """Run ``call`` while timing each ``owner.name`` call, with another client adding meanwhile;
    with ``latency``, the server's latency monitor on (a server of the bench's own: it is a
    setting of the whole server)."""
    if latency:
        client.config_set("latency-monitor-threshold", 1)
        client.execute_command("LATENCY", "RESET")
    timed, stop, other_ms = Timed(), threading.Event(), []
    probe = threading.Thread(target=_other_client, args=(client, stop, other_ms), daemon=True)
    probe.start()
    try:
        with timed.around(owner, name):
            start = time.perf_counter()
            result = call()
            seconds = time.perf_counter() - start
    finally:
        stop.set()
        probe.join()
    calls = timed.ms[1:] if len(timed.ms) > 2 else timed.ms  # the first loads and checks the script
    return {"result": result, "seconds": seconds, "calls": len(timed.ms),
            "median_ms": statistics.median(calls) if calls else 0.0, "max_ms": max(calls, default=0.0),
            "server_slowest_ms": _slowest_command_ms(client) if latency else None,
            "other_median_ms": statistics.median(other_ms) if other_ms else None,
            "other_max_ms": max(other_ms, default=None)}


def failed_queue(client: redis.Redis, name: str, jobs: int) -> Queue:
    queue = Queue(client, name)
    for start in range(0, jobs, 20_000):
        queue.add_bulk([("job", {"n": n}) for n in range(start, min(jobs, start + 20_000))])
    keys = QueueKeys(name)
    fail_waiting = client.register_script(_FAIL_WAITING)
    while fail_waiting(keys=[keys.wait, keys.failed], args=[5000, keys.job_prefix]):
        pass
    return queue


def delay_all(client: redis.Redis, queue: Queue, jobs: int) -> None:
    """Every job of the queue (ids 1..jobs) delayed, far in the future, in id order."""
    client.delete(queue.keys.wait)
    for start in range(1, jobs + 1, 20_000):
        client.zadd(queue.keys.delayed, {str(n): (4_000_000_000_000 + n) * 4096
                                         for n in range(start, min(jobs + 1, start + 20_000))})


def delete_keys(client: redis.Redis, pattern: str) -> None:
    batch = list(client.scan_iter(match=pattern, count=5000))
    for start in range(0, len(batch), 1000):
        client.delete(*batch[start:start + 1000])


def run_size(client: redis.Redis, jobs: int, batch: int, *, latency: bool = False) -> dict[str, dict[str, Any]]:
    name = f"bench-bulk-{os.getpid()}-{jobs}-{batch}"
    try:
        queue = failed_queue(client, name, jobs)
        retry = measure(client, lambda: queue.retry_jobs("failed", batch), operations, "run_script", latency=latency)
        delay_all(client, queue, jobs)
        promote = measure(client, lambda: queue.promote_jobs(batch), operations, "run_script", latency=latency)
        for n in range(OTHER_QUEUES):
            Queue(client, f"{name}-other-{n}").add("x", {})
        listing = measure(client, lambda: len(list_queues(client)), client.__class__, "scan", latency=latency)
    finally:
        delete_keys(client, f"emq:{{{name}*")
        delete_keys(client, f"emq:{{bench-bulk-probe-{os.getpid()}}}:*")
    return {"retry_jobs": retry, "promote_jobs": promote, "list_queues": listing}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    with scale_redis() as url:
        client = redis.Redis.from_url(url)
        print(f"Bulk operations on N jobs (Redis {url}; 2 shared cores). Per call: timed on the client around "
              "its round trip; server: the slowest command LATENCY saw; other: another client's add meanwhile")
        print(f"  {'':<30}{'N':>10}{'batch':>7}{'total s':>9}{'calls':>7}{'median ms':>11}{'max ms':>8}"
              f"{'server ms':>11}{'other med':>11}{'other max':>11}")
        for jobs in SIZES:
            for batch in BATCHES:
                for label, row in run_size(client, jobs, batch, latency=True).items():
                    print(f"  {label:<30}{jobs:>10,}{batch if label != 'list_queues' else '':>7}"
                          f"{row['seconds']:>9.2f}{row['calls']:>7}{row['median_ms']:>11.2f}{row['max_ms']:>8.2f}"
                          f"{row['server_slowest_ms'] if row['server_slowest_ms'] is not None else '-':>11}"
                          f"{_ms(row['other_median_ms']):>11}{_ms(row['other_max_ms']):>11}")
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
