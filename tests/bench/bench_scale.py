"""Scale curves: what one operation costs as a queue grows. The goal is flat: the same time per
item whatever is already there.

1. add and process with W jobs already waiting: ``Queue.add`` one at a time, ``Queue.add_bulk``
   in batches of 1000, and a Worker at concurrency 1 and 10 through K of them (first to last
   processed), W growing in one queue;
2. ``JobScheduler.upsert`` up to S schedulers (half ``every``, half cron + tz), then ``list()``
   and ``count()`` of all S, S growing in one queue;
3. ``QueueEvents`` replay from ``last_event_id="0"`` of a stream of E entries;
4. Redis memory per waiting job, EchoMQ's ``add_bulk`` beside BullMQ 6.7's ``addBulk`` (Node)
   for the same job: MEMORY USAGE of every key of the queue and of a job's hash, and the INFO
   used_memory delta.

Every curve prints the time per item at each size (best of REPEATS) and its ratio to the
smallest size; a ratio over GROWTH_FLAG is marked "grows faster than linear". Beside the
wall-clock rows, the "in Redis" rows give the microseconds Redis itself spent in the scripts
(INFO commandstats): the client's side left out, so less blurred by the rest of a shared
machine (not immune: a Redis preempted mid-script counts that time too).

Default sizes are small (``make bench``); ``--large`` or BENCH_SCALE=large (``make bench
BENCH_SCALE=large``) runs 10^3, 10^5 and 10^6 waiting jobs, 10^5 schedulers and 10^6 events
(about a minute and a half here, under 1 GB of Redis memory at the peak). Everything runs on a
redis-server this script starts on a free port and stops afterwards (BENCH_SCALE_REDIS_URL: an
existing server instead, whose keys of this run are deleted; its "in Redis" rows then count
other clients' scripts too), so the shared Redis never holds a million jobs. Exits non-zero if
a run fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
if str(ROOT / "tests") not in sys.path:  # for tests/support (already there under pytest)
    sys.path.append(str(ROOT / "tests"))

from bench_events import prefill
from bench_queue import data
from bench_scheduler import upsert
from node_peer import run_node_peer

from echomq import JobScheduler, Queue, QueueEvents, Worker
from echomq.protocol.keys import QueueKeys

from support.servers import RedisServer, free_port

LARGE = "--large" in sys.argv[1:] or os.environ.get("BENCH_SCALE", "small") == "large"
WAITING = (1_000, 100_000, 1_000_000) if LARGE else (1_000, 10_000)
SCHEDULERS = (1_000, 10_000, 100_000) if LARGE else (1_000, 10_000)
EVENTS = (10_000, 100_000, 1_000_000) if LARGE else (10_000, 100_000)
MEMORY_JOBS = 100_000 if LARGE else 10_000
#: Jobs each add and process measurement goes through at every size.
K = int(os.environ.get("BENCH_SCALE_K", "2000"))
BATCH = 1000
#: count() is one command: timed over this many calls, its cost per call (it should not grow).
COUNT_CALLS = 200
#: Every measurement at every size is taken this many times and its best counts (a shared machine).
REPEATS = 3
#: Time per item this many times the smallest size's is flagged.
GROWTH_FLAG = 1.5
DONE_TIMEOUT_S = 300


@dataclass
class Point:
    """One measurement at one size: ``items`` done in ``seconds``."""

    size: int
    items: int
    seconds: float

    @property
    def us_per_item(self) -> float:
        return self.seconds * 1e6 / self.items


def fill_waiting(queue: Queue, n: int) -> None:
    for at in range(0, n, BATCH):
        queue.add_bulk([("order", data(i)) for i in range(at, min(n, at + BATCH))])


def time_single_adds(queue: Queue, k: int) -> float:
    start = time.perf_counter()
    for i in range(k):
        queue.add("order", data(i))
    return time.perf_counter() - start


def time_bulk_adds(queue: Queue, k: int) -> float:
    start = time.perf_counter()
    fill_waiting(queue, k)
    return time.perf_counter() - start


def script_time(client: redis.Redis) -> tuple[int, int] | None:
    """Script calls Redis has run so far and the microseconds it spent in them (INFO
    commandstats); None where the server cannot say (fakeredis has no INFO)."""
    try:
        stats = client.info("commandstats")
    except redis.ResponseError:
        return None
    entries = [stats.get(name, {}) for name in ("cmdstat_evalsha", "cmdstat_eval")]
    return sum(int(e.get("calls", 0)) for e in entries), sum(int(e.get("usec", 0)) for e in entries)


def redis_side(client: redis.Redis, measure: Callable[[], float]) -> tuple[float, tuple[int, int] | None]:
    """``measure()``'s seconds, and the script calls Redis ran meanwhile with the microseconds
    it spent in them (None where the server cannot say)."""
    before = script_time(client)
    seconds = measure()
    after = script_time(client)
    if before is None or after is None or after[0] == before[0]:
        return seconds, None
    return seconds, (after[0] - before[0], after[1] - before[1])


def time_processing(client: redis.Redis, name: str, k: int, concurrency: int) -> float:
    """Seconds from the first job a Worker processed to the k-th (start-up not counted)."""
    marks: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def noop(job: Any) -> None:
        with lock:
            marks.append(time.perf_counter())
            if len(marks) == k:
                # Asked from the processor, the stop holds before this job's finish could fetch
                # the next one: a close() from the waiting thread comes after the GIL's switch
                # interval, time enough for a noop worker to empty the queue (the next round
                # then waited for jobs that were gone).
                worker.close()
                done.set()

    worker = Worker(client, name, noop, concurrency=concurrency)
    thread = threading.Thread(target=worker.run)
    thread.start()
    finished = done.wait(DONE_TIMEOUT_S)
    worker.close()
    thread.join()
    if not finished:
        raise SystemExit(f"the worker processed {len(marks)} of {k} jobs in {DONE_TIMEOUT_S} s")
    return marks[k - 1] - marks[0]


def waiting_curve(client: redis.Redis, sizes: tuple[int, ...], k: int,
                  repeats: int = REPEATS) -> dict[str, list[Point]]:
    """Add and process costs with each size of waiting jobs (one queue, grown between sizes;
    the adds put back what the workers take, so the backlog stays near the size)."""
    name = f"bench-scale-wait-{uuid.uuid4().hex[:8]}"
    queue = Queue(client, name)
    curves: dict[str, list[Point]] = {"add": [], "add_bulk": [], "process c1": [], "process c10": []}
    server: dict[str, list[Point]] = {"add, in Redis": [], "process c1, in Redis": []}
    waiting = 0
    try:
        for size in sizes:
            fill_waiting(queue, size - waiting)
            waiting = size
            best = {label: float("inf") for label in [*curves, *server]}
            for _ in range(repeats):  # each round adds 2k jobs and processes 2k
                rounds = {
                    "add": redis_side(client, lambda: time_single_adds(queue, k)),
                    "add_bulk": (time_bulk_adds(queue, k), None),
                    "process c1": redis_side(client, lambda: time_processing(client, name, k, 1)),
                    "process c10": (time_processing(client, name, k, 10), None),
                }
                for label, (seconds, in_redis) in rounds.items():
                    best[label] = min(best[label], seconds)
                    if in_redis is not None:
                        calls, usec = in_redis
                        best[f"{label}, in Redis"] = min(best[f"{label}, in Redis"], usec / calls / 1e6)
            for label in curves:
                curves[label].append(Point(size, k - 1 if label.startswith("process") else k, best[label]))
            for label in server:  # one "item" is one script call here
                if best[label] != float("inf"):
                    server[label].append(Point(size, 1, best[label]))
            waiting = client.llen(QueueKeys(name).wait)  # a worker closing may have taken a few more
    finally:
        drop(client, name)
    return {**curves, **{label: points for label, points in server.items() if points}}


def scheduler_curve(client: redis.Redis, sizes: tuple[int, ...], repeats: int = REPEATS) -> dict[str, list[Point]]:
    name = f"bench-scale-sched-{uuid.uuid4().hex[:8]}"
    schedules = JobScheduler(client, name)
    curves: dict[str, list[Point]] = {"upsert": [], "list": [], "count (per call)": []}
    made = 0
    try:
        for size in sizes:
            def upserts(first: int = made, last: int = size) -> float:
                start = time.perf_counter()
                for i in range(first, last):
                    upsert(schedules, i)
                return time.perf_counter() - start

            seconds, spent = redis_side(client, upserts)
            curves["upsert"].append(Point(size, size - made, seconds))
            if spent is not None:
                curves.setdefault("upsert, in Redis", []).append(Point(size, size - made, spent[1] / 1e6))
            made = size
            listing = in_redis = float("inf")
            for _ in range(repeats):
                listed = 0

                def listing_time() -> float:
                    nonlocal listed
                    start = time.perf_counter()
                    listed = len(schedules.list())
                    return time.perf_counter() - start

                seconds, spent = redis_side(client, listing_time)
                listing = min(listing, seconds)
                if spent is not None:
                    in_redis = min(in_redis, spent[1] / 1e6)
            curves["list"].append(Point(size, size, listing))
            if in_redis != float("inf"):
                curves.setdefault("list, in Redis", []).append(Point(size, size, in_redis))
            counting = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(COUNT_CALLS):
                    counted = schedules.count()
                counting = min(counting, time.perf_counter() - start)
            curves["count (per call)"].append(Point(size, COUNT_CALLS, counting))
            if listed != size or counted != size:
                raise SystemExit(f"{size} schedulers upserted, list() found {listed}, count() {counted}")
    finally:
        drop(client, name)
    return curves


def replay(client: redis.Redis, name: str, n: int) -> float:
    """Seconds for a QueueEvents from "0" to hand its subscriber n events."""
    seen = 0
    done = threading.Event()

    def count(event_type: Any, fields: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if seen == n:
            done.set()

    events = QueueEvents(client, name, last_event_id="0", block_ms=1000, count=1000)
    events.subscribe(count)
    start = time.perf_counter()
    events.start()
    finished = done.wait(DONE_TIMEOUT_S)
    seconds = time.perf_counter() - start
    events.close()
    if not finished:
        raise SystemExit(f"the replay got {seen} of {n} events in {DONE_TIMEOUT_S} s")
    return seconds


def events_curve(client: redis.Redis, sizes: tuple[int, ...], repeats: int = REPEATS) -> dict[str, list[Point]]:
    name = f"bench-scale-events-{uuid.uuid4().hex[:8]}"
    key = QueueKeys(name).events
    curve: list[Point] = []
    try:
        for size in sizes:
            prefill(client, key, size - client.xlen(key))
            curve.append(Point(size, size, min(replay(client, name, size) for _ in range(repeats))))
    finally:
        client.delete(key)
    return {"replay from 0": curve}


def used_memory(client: redis.Redis) -> int | None:
    """The server's used_memory; None where the server cannot say (fakeredis has no INFO)."""
    try:
        return int(client.info("memory")["used_memory"])
    except redis.ResponseError:
        return None


def job_hash_bytes(client: redis.Redis, name: str, ids: range) -> float | None:
    """Mean MEMORY USAGE of the hashes of jobs ``ids`` (None without the MEMORY command)."""
    keys = QueueKeys(name)
    try:
        sizes = [client.memory_usage(keys.job(str(i)), samples=0) or 0 for i in ids]
    except redis.ResponseError:
        return None
    return sum(sizes) / len(sizes)


def queue_bytes(client: redis.Redis, name: str) -> int | None:
    """MEMORY USAGE summed over every key of the queue (exact: ``SAMPLES 0``), None without the
    MEMORY command. Unlike a used_memory delta it leaves out what the server spends for all
    queues at once (its key table doubling as keys are added, the allocator's pages), which
    lands on whichever side happens to cross a threshold."""
    total = 0
    batch: list[bytes] = []
    try:
        for key in client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=5000):
            batch.append(key)
            if len(batch) == 1000:
                total += _usage(client, batch)
                batch = []
        return total + _usage(client, batch)
    except redis.ResponseError:
        return None


def _usage(client: redis.Redis, keys: list[bytes]) -> int:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return sum(size or 0 for size in pipe.execute())


@dataclass
class Memory:
    """Bytes per waiting job, measured three ways (None where the server cannot say)."""

    keys_per_job: float | None
    hash_per_job: float | None
    used_memory_per_job: float | None


def echomq_memory(client: redis.Redis, m: int) -> Memory:
    """EchoMQ's memory per waiting job after m ``add_bulk`` adds on a fresh queue."""
    name = f"bench-scale-mem-emq-{uuid.uuid4().hex[:8]}"
    before = used_memory(client)
    try:
        fill_waiting(Queue(client, name), m)
        after = used_memory(client)
        return measured_memory(client, name, m, before, after, range(1, min(m, 100) + 1))
    finally:
        drop(client, name)


def bullmq_memory(client: redis.Redis, url: str, m: int) -> Memory:
    """The same for BullMQ 6.7's addBulk in Node (bench_queue.js, the same job and batches)."""
    name = f"bench-scale-mem-bull-{uuid.uuid4().hex[:8]}"
    before = used_memory(client)
    try:
        result = run_node_peer(HERE / "bench_queue.js", url, "bulk", name, str(m), str(BATCH))
        if result["waiting"] != m + 2:  # and its two warm-up jobs (bench_queue.js)
            raise SystemExit(f"BullMQ left {result['waiting']} jobs waiting, expected {m + 2}")
        after = used_memory(client)
        return measured_memory(client, name, m + 2, before, after, range(3, min(m, 100) + 3))
    finally:
        drop(client, name)


def measured_memory(client: redis.Redis, name: str, jobs: int, before: int | None, after: int | None,
                    sample: range) -> Memory:
    total = queue_bytes(client, name)
    delta = after - before if before is not None and after is not None else None
    return Memory(None if total is None else total / jobs, job_hash_bytes(client, name, sample),
                  None if delta is None else delta / jobs)


def drop(client: redis.Redis, name: str) -> None:
    keys = list(client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=5000))
    for at in range(0, len(keys), 5000):
        client.delete(*keys[at:at + 5000])


def print_curves(family: str, title: str, curves: dict[str, list[Point]], unit: str) -> list[str]:
    """The table of one family of curves; returns the curves that grow faster than linearly."""
    print(f"\n{title}")
    sizes = [p.size for p in next(iter(curves.values()))]
    print(f"  {'measure':<22}" + "".join(f"{f'{size:,} {unit}':>24}" for size in sizes))
    growing = []
    for label, points in curves.items():
        base = points[0].us_per_item
        cells = [f"{p.us_per_item:,.2f} us ({p.us_per_item / base:.2f}x)" for p in points]
        flagged = max(p.us_per_item for p in points) > GROWTH_FLAG * base
        if flagged:
            growing.append(f"{family}: {label}")
        print(f"  {label:<22}" + "".join(f"{cell:>24}" for cell in cells)
              + ("  <- grows faster than linear" if flagged else ""))
    return growing


@contextmanager
def scale_redis() -> Iterator[str]:
    """BENCH_SCALE_REDIS_URL, else a redis-server of this run's own on a free port."""
    url = os.environ.get("BENCH_SCALE_REDIS_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        server = RedisServer(port=free_port(), dir=Path(tmp), persistent=False).start()
        try:
            yield server.url
        finally:
            server.stop()


def main() -> int:
    with scale_redis() as url:
        client = redis.Redis.from_url(url)
        size = "large" if LARGE else "small (--large or BENCH_SCALE=large for 10^5 and 10^6)"
        print(f"Scale curves, {size}; time per item and its ratio to the smallest size "
              f"(Redis {url}; 2 shared cores)")
        growing = print_curves("waiting jobs", f"add and process, with N jobs waiting ({K} jobs each; 'in Redis': the "
                               "microseconds Redis spent per script call)",
                               waiting_curve(client, WAITING, K), "waiting")
        growing += print_curves("schedulers", "schedulers: upsert (to N), list() and count() of N (', in Redis': "
                                "Redis's own time per scheduler upserted or listed)",
                                scheduler_curve(client, SCHEDULERS), "schedulers")
        growing += print_curves("events", "events: QueueEvents replay of a stream of N entries",
                                events_curve(client, EVENTS), "events")
        ours, theirs = echomq_memory(client, MEMORY_JOBS), bullmq_memory(client, url, MEMORY_JOBS)
        print(f"\nRedis memory per waiting job ({MEMORY_JOBS:,} jobs added in bulk, the bench_queue job; bytes)")
        print(f"  {'':<44}{'EchoMQ':>10}{'BullMQ 6.7':>12}{'ratio':>8}")
        for label, field_name in (("every key of the queue / job (MEMORY USAGE)", "keys_per_job"),
                                  ("the job's hash (MEMORY USAGE)", "hash_per_job"),
                                  ("used_memory delta / job", "used_memory_per_job")):
            a, b = getattr(ours, field_name), getattr(theirs, field_name)
            ratio = f"{a / b:.2f}x" if a and b else "n/a"
            print(f"  {label:<44}{a or 0:>10,.0f}{b or 0:>12,.0f}{ratio:>8}")
        print("  (ratio < 1 means EchoMQ uses less; the used_memory delta also carries the server's own "
              "growth, its key table doubling, whichever side crosses it)")
        print("\nFaster than linear (wall-clock rows move with the rest of a shared machine: a flag there is worth"
              " a second run; the 'in Redis' rows are Redis's own time, less blurred):")
        print("  " + (", ".join(growing) if growing else "none (every curve flat within "
                                           f"{GROWTH_FLAG}x of its smallest size)"))
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
