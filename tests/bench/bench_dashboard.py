"""Dashboard answer times on a big queue among many, EchoMQ's dashboard beside bull-board's API.

The data: one queue of BIG jobs waiting (10^6 under ``BENCH_SCALE=large``, 20,000 by default)
with a few hundred failed and delayed, and 49 more queues of a few jobs each: 50 queues in all.
Both dashboards serve the same 50 queues over HTTP on 127.0.0.1 (EchoMQ's through the standard
library's threaded server, as ``echomq dashboard`` serves it; bull-board 9.10.1 on express,
tests/interop/bullboard.js), and each page is asked for ROUNDS times after a warm-up, one
request at a time, a new connection each:

- overview: ``/`` vs ``GET /api/queues`` (every queue's counts);
- list page: the big queue's newest 25 waiting jobs, ``/queue?q=..&state=waiting`` vs
  ``GET /api/queues?activeQueue=..&status=waiting&page=1&jobsPerPage=25``;
- last page: the same list's oldest 25 (EchoMQ's only: an LRANGE from the far end).

Target: p95 at most 300 ms for the overview and the list page. Printed as p50/p95 in ms and the
ratio bull-board/EchoMQ. The discovery SCAN (once per 30 s, not per page) is timed on its own.

Run: ``.venv/bin/python tests/bench/bench_dashboard.py`` (``make bench``); under
``BENCH_SCALE=large`` give it a Redis of its own (``REDIS_URL``): 10^6 keys slow every SCAN
of a shared one, other tests' included. Needs node and
tests/interop/node_modules for bull-board (without them, EchoMQ's figures alone). Every queue
is unique and deleted afterwards.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from node_peer import NODE_MODULES

from echomq.contrib.dashboard import Dashboard
from echomq.queue.discovery import find_queues
from echomq.queue.queue import Queue

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
BIG = 1_000_000 if os.environ.get("BENCH_SCALE") == "large" else int(os.environ.get("BENCH_DASHBOARD_JOBS", "20000"))
QUEUES = 50
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "60"))
TARGET_MS = 300.0


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def fill(client: redis.Redis, names: list[str]) -> None:
    big = Queue(client, names[0])
    started = time.perf_counter()
    for start in range(0, BIG, 1000):
        big.add_bulk([("order", {"orderId": i, "customer": f"c-{i % 97}", "items": [1, 2, 3]})
                      for i in range(start, min(BIG, start + 1000))])
    # a few hundred failed and delayed, written as a worker and a delayed add leave them
    big.add_bulk([("later", {"n": i}, {"delay": 3_600_000}) for i in range(300)])
    failed_ids = [job.id for job in big.get_jobs("waiting", 0, 299)]
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for n, job_id in enumerate(failed_ids):
        pipe.lrem(big.keys.wait, 1, job_id)
        pipe.zadd(big.keys.failed, {job_id: now + n})
        pipe.hset(big.keys.job(job_id), mapping={"failedReason": "card declined", "finishedOn": now + n,
                                                 "attemptsMade": 1, "stacktrace": "[]"})
    pipe.execute()
    for name in names[1:]:
        Queue(client, name).add_bulk([("task", {"n": i}) for i in range(5)])
    print(f"filled {BIG:,} jobs + 49 small queues in {time.perf_counter() - started:.1f} s")


def timed(url: str) -> list[float]:
    for _ in range(3):
        urllib.request.urlopen(url, timeout=60).read()
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
            assert answer.status == 200, (url, answer.status)
        times.append((time.perf_counter() - started) * 1000)
    return times


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[-1]


def start_board(names: list[str]) -> tuple[subprocess.Popen[str], str] | None:
    script = ROOT / "tests" / "interop" / "bullboard.js"
    if not NODE_MODULES.joinpath("@bull-board").exists():
        print("bull-board not installed (make node-deps): EchoMQ's figures only")
        return None
    args = [arg for name in names for arg in ("--queue", name)]
    env = {**os.environ, "REDIS_URL": URL, "NODE_PATH": str(NODE_MODULES)}
    process = subprocess.Popen(["node", str(script), "--port", "0", *args], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"bullboard.js did not start: {process.communicate(timeout=10)[1]}")
    return process, f"http://127.0.0.1:{json.loads(line)['listening']}"


def delete(client: redis.Redis, names: list[str]) -> None:
    for name in names:
        batch = []
        for key in client.scan_iter(match=f"emq:{{{name}}}:*", count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                client.unlink(*batch)
                batch = []
        if batch:
            client.unlink(*batch)


def main() -> None:
    client = redis.Redis.from_url(URL)
    run = uuid.uuid4().hex[:6]
    names = [f"bench-dash-{run}-big"] + [f"bench-dash-{run}-{n:02d}" for n in range(1, QUEUES)]
    board = None
    server = None
    try:
        fill(client, names)
        started = time.perf_counter()
        found = find_queues(client)
        print(f"discovery SCAN of the whole keyspace ({client.dbsize():,} keys, {len(found)} queues): "
              f"{(time.perf_counter() - started) * 1000:.0f} ms, once per discovery_ttl (30 s), not per page")
        server = make_server("127.0.0.1", 0, Dashboard(client, queues=names), server_class=_Server,
                             handler_class=_Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        ours = f"http://127.0.0.1:{server.server_port}"
        big = urllib.parse.quote(names[0])
        last_page = -(-(BIG - 300) // 25)
        rows = {
            "overview": (timed(f"{ours}/"), "/api/queues"),
            "list page": (timed(f"{ours}/queue?q={big}&state=waiting"),
                          "/api/queues?" + urllib.parse.urlencode({"activeQueue": "{" + names[0] + "}",
                                                                   "status": "waiting", "page": 1,
                                                                   "jobsPerPage": 25})),
            "last page": (timed(f"{ours}/queue?q={big}&state=waiting&page={last_page}"), None),
            "job page": (timed(f"{ours}/job?q={big}&id=1"), None),
        }
        board = start_board(names)
        print(f"\n{BIG:,} jobs in one queue, {QUEUES} queues; {ROUNDS} requests each; ms")
        print(f"{'page':<10} {'echomq p50':>10} {'p95':>7}   {'bull-board p50':>14} {'p95':>7}   ratio p95")
        failed_target = []
        for label, (times, board_path) in rows.items():
            line = f"{label:<10} {statistics.median(times):>10.1f} {p95(times):>7.1f}"
            if board is not None and board_path is not None:
                theirs = timed(board[1] + board_path)
                line += f"   {statistics.median(theirs):>14.1f} {p95(theirs):>7.1f}   {p95(theirs) / p95(times):>6.1f}x"
            print(line)
            if label in ("overview", "list page") and p95(times) > TARGET_MS:
                failed_target.append(label)
        print(f"target p95 <= {TARGET_MS:.0f} ms for overview and list page: "
              f"{'met' if not failed_target else 'MISSED for ' + ', '.join(failed_target)}")
    finally:
        if board is not None:
            board[0].terminate()
            board[0].wait(10)
        if server is not None:
            server.shutdown()
            server.server_close()
        delete(client, names)
        client.close()


if __name__ == "__main__":
    main()
