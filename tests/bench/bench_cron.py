"""Cron next-run benchmark: EchoMQ beside croniter 7 and BullMQ 6.7's own call in Node.

One computation = "the next run strictly after this reference" for a cached pattern, over
1,000 references spread across 2024-2025 (so DST days are included), median of 5 rounds, in
microseconds per call. Measured:

* echomq   ``calculate_next_millis({"pattern": p, "tz": z}, ref)``, the public call (option
           checks included), and ``CronSchedule.next_after(ref)``, the compiled schedule alone;
* croniter ``croniter(p, start).get_next()`` as usually written (a new object per reference),
           and one reused object moved with ``set_current`` (the fastest croniter allows);
* BullMQ   ``defaultRepeatStrategy(ref, {pattern, tz})`` in Node 20 (tests/bench/bench_cron.js).

Target: median under 50 us per call for a cached pattern. No Redis needed.
Run: ``.venv/bin/python tests/bench/bench_cron.py`` (``make bench``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from echomq.schedule.cron.evaluate import compile_schedule
from echomq.schedule.next_run import calculate_next_millis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_PATH = ROOT / "tests" / "interop" / "node_modules"
UTC = dt.timezone.utc
ROUNDS = 5
CASES = [
    {"label": "5-field, UTC", "pattern": "*/5 * * * *", "tz": None},
    {"label": "5-field weekdays, UTC", "pattern": "0 9 * * 1-5", "tz": None},
    {"label": "6-field, UTC", "pattern": "30 */10 * * * *", "tz": None},
    {"label": "5-field, Europe/Berlin", "pattern": "0 9 * * 1-5", "tz": "Europe/Berlin"},
    {"label": "5-field DST hour, Berlin", "pattern": "30 2 * * *", "tz": "Europe/Berlin"},
    {"label": "6-field, America/New_York", "pattern": "15 30 8 * * *", "tz": "America/New_York"},
    {"label": "last day, Europe/Berlin", "pattern": "0 0 L * *", "tz": "Europe/Berlin"},
]


def references(n: int = 1000) -> list[int]:
    rng = random.Random(42)
    low = int(dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    high = int(dt.datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    return [rng.randint(low, high) for _ in range(n)]


def per_call_us(fn: Callable[[int], Any], refs: list[int]) -> float:
    for ref in refs[:100]:
        fn(ref)  # warm caches, as a long-running scheduler would have them
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        for ref in refs:
            fn(ref)
        rounds.append((time.perf_counter_ns() - start) / 1e3 / len(refs))
    return statistics.median(rounds)


def croniter_fresh(pattern: str, tz: str | None) -> Callable[[int], Any]:
    zone = ZoneInfo(tz) if tz else UTC
    six = len(pattern.split()) == 6

    def call(ref: int) -> float:
        start = dt.datetime.fromtimestamp(ref / 1000, zone)
        return croniter(pattern, start, second_at_beginning=six).get_next(float)
    return call


def croniter_reused(pattern: str, tz: str | None) -> Callable[[int], Any]:
    zone = ZoneInfo(tz) if tz else UTC
    it = croniter(pattern, dt.datetime.now(zone), second_at_beginning=len(pattern.split()) == 6)

    def call(ref: int) -> float:
        it.set_current(dt.datetime.fromtimestamp(ref / 1000, zone), force=True)
        return it.get_next(float)
    return call


def bullmq(refs: list[int]) -> dict[str, float] | None:
    env = {**os.environ, "NODE_PATH": str(NODE_PATH)}
    payload = json.dumps({"rounds": ROUNDS, "refs": refs, "cases": CASES})
    try:
        done = subprocess.run(["node", str(HERE / "bench_cron.js")], input=payload, capture_output=True,
                              text=True, env=env, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"(BullMQ Node side unavailable: {exc}; run `make node-deps`)", file=sys.stderr)
        return None
    return {label: row["us"] for label, row in json.loads(done.stdout).items()}


def main() -> int:
    refs = references()
    node = bullmq(refs)
    rows = []
    for case in CASES:
        pattern, tz = case["pattern"], case["tz"]
        opts = {"pattern": pattern, "tz": tz} if tz else {"pattern": pattern}
        schedule = compile_schedule(pattern, tz)
        ours = per_call_us(lambda ref, o=opts: calculate_next_millis(o, ref), refs)
        raw = per_call_us(schedule.next_after, refs)
        fresh = per_call_us(croniter_fresh(pattern, tz), refs)
        reused = per_call_us(croniter_reused(pattern, tz), refs)
        rows.append((case["label"], ours, raw, fresh, reused, node.get(case["label"]) if node else None))

    header = ("case", "echomq", "(schedule)", "croniter new", "croniter reused", "BullMQ Node",
              "croniter/echomq", "BullMQ/echomq")
    print("microseconds per next-run computation (median of 5 rounds x 1,000 references)")
    print(f"{header[0]:<28}" + "".join(f"{h:>16}" for h in header[1:]))
    for label, ours, raw, fresh, reused, js in rows:
        cells = [f"{ours:.1f}", f"{raw:.1f}", f"{fresh:.1f}", f"{reused:.1f}",
                 "n/a" if js is None else f"{js:.1f}", f"{fresh / ours:.1f}x",
                 "n/a" if js is None else f"{js / ours:.1f}x"]
        print(f"{label:<28}" + "".join(f"{c:>16}" for c in cells))
    median = statistics.median(r[1] for r in rows)
    print(f"median echomq: {median:.1f} us/call (target < 50 us)")
    return 0 if median < 50 else 1


if __name__ == "__main__":
    sys.exit(main())
