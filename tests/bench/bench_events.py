"""QueueEvents benchmark: EchoMQ beside BullMQ 6.7's QueueEvents (Node) and a bare redis-py loop.

One run, one real Redis (REDIS_URL or 127.0.0.1:6379), one pre-filled stream of 100,000 events
(20,000 jobs x added, waiting, active, progress, completed), a subscriber that only counts:

1. replay throughput from ``last_event_id="0"``: EchoMQ, a bare ``XREAD COUNT`` loop and BullMQ
   Node, with hiredis and with redis-py's pure-Python parser (best of 7 interleaved rounds,
   wall-clock events/s and the reading process's CPU time per event);
2. live latency, a producer process at 2,000 events/s for 5 s: XADD -> subscriber p50/p99,
   EchoMQ and BullMQ Node reading the same events at the same time (median of 2 runs);
3. ``close()`` latency in the middle of a 5 s BLOCK.

Targets: replay >= 1.0x BullMQ and >= 0.85x the bare loop (hiredis); p99 no worse than
BullMQ's; close < 100 ms. Run: ``.venv/bin/python tests/bench/bench_events.py`` (``make bench``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.connection import _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from echomq import QueueEvents
from echomq.protocol.keys import QueueKeys

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_PATH = ROOT / "tests" / "interop" / "node_modules"
URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
N = 100_000
RUNS = 7
COUNT = 1000
LIVE_RATE = 2000
LIVE_SECONDS = 5.0


def client(pure_python: bool) -> redis.Redis:
    if pure_python:
        return redis.Redis.from_url(URL, parser_class=_RESP2Parser)
    return redis.Redis.from_url(URL)


def prefill(conn: redis.Redis, key: str, n: int) -> None:
    pipe = conn.pipeline(transaction=False)
    for job in range(n // 5):
        jid = str(job + 1)
        pipe.xadd(key, {"event": "added", "jobId": jid, "name": "resize"})
        pipe.xadd(key, {"event": "waiting", "jobId": jid})
        pipe.xadd(key, {"event": "active", "jobId": jid, "prev": "waiting"})
        pipe.xadd(key, {"event": "progress", "jobId": jid, "data": '{"percent":50}'})
        pipe.xadd(key, {"event": "completed", "jobId": jid, "returnvalue": '{"ok":true,"size":[640,480]}',
                        "prev": "active"})
        if job % 500 == 499:
            pipe.execute()
    pipe.execute()


class Sample:
    """One replay: wall-clock events/s and CPU microseconds per event of the reading process."""

    def __init__(self, n: int, seconds: float, cpu_seconds: float) -> None:
        self.rate = n / seconds
        self.cpu_us = cpu_seconds * 1e6 / n


def echomq_replay(conn: redis.Redis, queue: str, n: int) -> Sample:
    done = threading.Event()
    seen = 0

    def count(event_type: Any, data: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if seen == n:
            done.set()

    qe = QueueEvents(conn, queue, last_event_id="0", block_ms=1000, count=COUNT)
    qe.subscribe(count)
    cpu = time.process_time()
    started = time.perf_counter()
    qe.start()
    if not done.wait(120):
        raise RuntimeError(f"EchoMQ replay got {seen} of {n}")
    sample = Sample(n, time.perf_counter() - started, time.process_time() - cpu)
    qe.close()
    return sample


def bare_replay(conn: redis.Redis, key: str, n: int) -> Sample:
    seen = 0
    last = "0"
    cpu = time.process_time()
    started = time.perf_counter()
    while seen < n:
        reply = conn.xread({key: last}, count=COUNT, block=1000)
        entries = reply[0][1]
        for _entry_id, _fields in entries:  # the loop a consumer runs, left in the baseline's cost
            seen += 1
        last = entries[-1][0]
    return Sample(n, time.perf_counter() - started, time.process_time() - cpu)


def bare_decoding_replay(conn: redis.Redis, key: str, n: int) -> Sample:
    """The bare loop plus the decoding the events contract asks for (str fields, JSON
    ``returnvalue``/``data``): what a hand-written consumer would have to do too."""
    seen = 0
    last = "0"
    cpu = time.process_time()
    started = time.perf_counter()
    while seen < n:
        reply = conn.xread({key: last}, count=COUNT, block=1000)
        entries = reply[0][1]
        for _entry_id, fields in entries:
            data = {k.decode(): v.decode() for k, v in fields.items()}
            event = data.pop("event")
            if event == "completed":
                data["returnvalue"] = json.loads(data["returnvalue"])
            elif event == "progress":
                data["data"] = json.loads(data["data"])
            seen += 1
        last = entries[-1][0]
    return Sample(n, time.perf_counter() - started, time.process_time() - cpu)


def bullmq_replay(queue: str, n: int) -> Sample:
    result = node("replay", queue, str(n))
    return Sample(n, result["seconds"], result["cpu_seconds"])


def node(*args: str, on_line: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    env = {**os.environ, "NODE_PATH": str(NODE_PATH), "REDIS_URL": URL}
    proc = subprocess.Popen(["node", str(HERE / "bench_events.js"), *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    last: dict[str, Any] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        last = json.loads(line)
        if on_line is not None:
            on_line(last)
    if proc.wait() != 0:
        raise RuntimeError(f"bench_events.js {args[0]} failed: {proc.stderr.read() if proc.stderr else ''}")
    return last


# -- live latency ------------------------------------------------------------------------------
def produce(queue: str, rate: int, seconds: float) -> None:
    """The producer process: XADD progress events carrying their write time, paced at ``rate``."""
    conn = redis.Redis.from_url(URL)
    key = QueueKeys(queue).events
    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        conn.xadd(key, {"event": "progress", "jobId": str(i), "data": json.dumps({"ts": time.time_ns() // 1000})})


def start_producer(queue: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--produce", queue, str(LIVE_RATE), str(LIVE_SECONDS)])


def percentiles(latencies_us: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_us)
    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"events": len(ordered), "p50_us": pick(0.5), "p99_us": pick(0.99), "max_us": ordered[-1]}


def live_side_by_side(queue: str) -> tuple[dict[str, float], dict[str, Any]]:
    """EchoMQ and BullMQ read the same producer's events at the same time, so both see the
    same load (this machine is shared); each measures XADD -> its subscriber."""
    total = int(LIVE_RATE * LIVE_SECONDS)
    latencies: list[float] = []
    done = threading.Event()
    producer: list[subprocess.Popen[bytes]] = []

    def on_event(event_type: Any, data: dict[str, Any]) -> None:
        latencies.append(time.time_ns() / 1000 - data["data"]["ts"])
        if len(latencies) == total:
            done.set()

    def on_line(line: dict[str, Any]) -> None:
        if line.get("ready"):
            time.sleep(0.3)  # BullMQ's '$' is only fixed by its first XREAD
            producer.append(start_producer(queue))

    qe = QueueEvents(client(False), queue, block_ms=1000)
    qe.subscribe(on_event)
    with qe:
        node_result = node("live", queue, str(total), on_line=on_line)
        done.wait(20)
    for proc in producer:
        proc.wait()
    return percentiles(latencies), node_result


def echomq_close(samples: int = 20, pure_python: bool = False) -> tuple[float, float]:
    queue = f"bench-close-{uuid.uuid4().hex[:8]}"
    times = []
    conn = client(pure_python)
    for _ in range(samples):
        qe = QueueEvents(conn, queue, block_ms=5000).start()
        time.sleep(0.05)
        started = time.perf_counter()
        qe.close()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times)


def main() -> int:
    if not HIREDIS_AVAILABLE:
        print("hiredis is not installed: pip install 'echomq[hiredis]' for the full comparison")
    queue = f"bench-events-{uuid.uuid4().hex[:8]}"
    live_queues = [f"bench-live-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    key = QueueKeys(queue).events
    admin = redis.Redis.from_url(URL)
    try:
        print(f"pre-filling {key} with {N:,} events ...", flush=True)
        prefill(admin, key, N)
        readers: dict[str, Callable[[], Sample]] = {
            "EchoMQ QueueEvents (hiredis)": lambda: echomq_replay(client(False), queue, N),
            "bare redis-py XREAD loop (hiredis)": lambda: bare_replay(client(False), key, N),
            "EchoMQ QueueEvents (pure-Python parser)": lambda: echomq_replay(client(True), queue, N),
            "bare redis-py XREAD loop (pure-Python parser)": lambda: bare_replay(client(True), key, N),
            "bare loop + str/JSON decoding (hiredis)": lambda: bare_decoding_replay(client(False), key, N),
            "BullMQ 6.7 QueueEvents (Node)": lambda: bullmq_replay(queue, N),
        }
        samples: dict[str, list[Sample]] = {name: [] for name in readers}
        for _ in range(RUNS):  # interleaved rounds, so a burst of load elsewhere hits every reader
            for name, run in readers.items():
                samples[name].append(run())
        best_rate = {name: max(x.rate for x in xs) for name, xs in samples.items()}
        best_cpu = {name: min(x.cpu_us for x in xs) for name, xs in samples.items()}
        node_name = "BullMQ 6.7 QueueEvents (Node)"
        print(f"\nreplay of {N:,} events from last_event_id='0', COUNT {COUNT}, best of {RUNS} interleaved rounds")
        print(f"  {'reader':<46}{'events/s':>10}{'vs BullMQ':>10}{'vs bare':>9}"
              f"{'CPU us/ev':>11}{'vs BullMQ':>10}{'vs bare':>9}")
        for name in readers:
            bare = "bare redis-py XREAD loop (" + ("pure-Python parser)" if "pure" in name else "hiredis)")
            rate, cpu = best_rate[name], best_cpu[name]
            vs_bare = "-" if name == node_name else f"{rate / best_rate[bare]:.2f}x"
            cpu_vs_bare = "-" if name == node_name else f"{best_cpu[bare] / cpu:.2f}x"
            print(f"  {name:<46}{rate:>10,.0f}{rate / best_rate[node_name]:>9.2f}x{vs_bare:>9}"
                  f"{cpu:>11.2f}{best_cpu[node_name] / cpu:>9.2f}x{cpu_vs_bare:>9}")
        print("  (CPU ratios are speed ratios too: the other reader's CPU per event over this one's)")
        decoding = "bare loop + str/JSON decoding (hiredis)"
        print(f"  EchoMQ (hiredis) vs a bare loop that decodes what EchoMQ decodes: "
              f"{best_rate['EchoMQ QueueEvents (hiredis)'] / best_rate[decoding]:.2f}x "
              f"({best_cpu[decoding] / best_cpu['EchoMQ QueueEvents (hiredis)']:.2f}x in CPU)")
        echo_h = best_rate["EchoMQ QueueEvents (hiredis)"]
        echo_p = best_rate["EchoMQ QueueEvents (pure-Python parser)"]
        print(f"  hiredis buys EchoMQ {echo_h / echo_p:.2f}x on replay "
              f"({best_cpu['EchoMQ QueueEvents (pure-Python parser)'] / best_cpu['EchoMQ QueueEvents (hiredis)']:.2f}x "
              "in CPU)")

        print(f"\nlive: producer at {LIVE_RATE}/s for {LIVE_SECONDS:.0f}s, XADD -> subscriber latency, "
              "both readers on the same events at once (median of 2 runs)")
        runs = [live_side_by_side(q) for q in live_queues]  # two 5 s runs; the median p99 of each
        echo_live = {k: statistics.median(r[0][k] for r in runs) for k in runs[0][0]}
        node_live = {k: statistics.median(r[1][k] for r in runs) for k in ("events", "p50_us", "p99_us", "max_us")}
        print(f"  {'reader':<44}{'events':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
        for name, res in (("EchoMQ QueueEvents (hiredis)", echo_live), ("BullMQ 6.7 QueueEvents (Node)", node_live)):
            print(f"  {name:<44}{int(res['events']):>8}{res['p50_us'] / 1000:>9.2f}{res['p99_us'] / 1000:>9.2f}"
                  f"{res['max_us'] / 1000:>9.2f}")
        print(f"  p99 ratio EchoMQ/BullMQ: {echo_live['p99_us'] / node_live['p99_us']:.2f} (<= 1.00 is the target)")

        print("\nclose() in the middle of a 5 s BLOCK")
        for label, pure in (("hiredis", False), ("pure-Python parser", True)):
            med, worst = echomq_close(pure_python=pure)
            print(f"  EchoMQ ({label}): median {med:.1f} ms, max {worst:.1f} ms (target < 100 ms)")
        node_close = node("close", f"bench-close-{uuid.uuid4().hex[:8]}")
        print(f"  BullMQ 6.7 (Node): median {node_close['median_ms']:.1f} ms, max {node_close['max_ms']:.1f} ms")
    finally:
        admin.delete(key, *(QueueKeys(q).events for q in live_queues))
        admin.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--produce":
        produce(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
