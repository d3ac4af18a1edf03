"""``echomq demo`` (``make demo``): the README's main story, runnable with no server at all.

A job scheduler fires every second; a Worker runs each iteration (every third fails once and
is retried after a short backoff); a QueueEvents thread prints the whole lifecycle as the
scripts write it onto ``emq:{demo}:events``. After about ten seconds the scheduler is removed
and the Worker and QueueEvents close, each reporting how long that took.

Without ``REDIS_URL`` (or ``--redis``) it runs on an embedded fakeredis server. fakeredis is
not an install requirement (production never needs it): it comes with the ``testing`` extra,
and without it the command says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any, TextIO

import redis

from ..errors import InvalidInputError
from ..events import QueueEvents
from ..schedule import JobScheduler
from ..transport.connection import redact_url, resolve_connection
from ..worker import Worker
from .events import EventPrinter

SCHEDULER_ID = "heartbeat"


#: What ``echomq demo`` says when it needs the embedded server and fakeredis is not installed.
MISSING_FAKEREDIS = ("echomq demo: the embedded server needs fakeredis, which is not installed: "
                     "pip install 'echomq[testing]' (or give a real Redis with --redis URL or REDIS_URL)")


class MissingFakeRedisError(ImportError):
    """fakeredis is not installed, and no URL was given: nothing to run the demo on."""


def open_connection(url: str | None) -> tuple[redis.Redis, str]:
    """A client on ``url``, or on a fresh embedded fakeredis server; with a label for output
    (the URL without its password). :class:`MissingFakeRedisError` without a URL and without
    fakeredis."""
    if url:
        return resolve_connection(url), redact_url(url)
    try:
        import fakeredis
    except ImportError as exc:  # the testing extra is not installed
        raise MissingFakeRedisError(MISSING_FAKEREDIS) from exc

    return fakeredis.FakeRedis(server=fakeredis.FakeServer()), "embedded fakeredis (set REDIS_URL for a real server)"


class Heartbeat:
    """The demo's processor: every third iteration fails on its first attempt (the stream only
    says ``delayed`` for a retry, so the processor says why)."""

    def __init__(self, out: TextIO, retry_delay_ms: int) -> None:
        self.out = out
        self.retry_delay_ms = retry_delay_ms
        self.runs = 0
        self.failures = 0
        self._lock = threading.Lock()

    def __call__(self, job: Any) -> dict[str, Any]:
        iteration = int((job.raw_opts.get("repeat") or {}).get("count") or 0)
        with self._lock:
            self.runs += 1
            fail = iteration % 3 == 0 and job.attempts_made == 0
            if fail:
                self.failures += 1
                self.out.write(f"{'':>17}  (processor: iteration {iteration} raises; it retries in "
                               f"{self.retry_delay_ms} ms)\n")
                self.out.flush()
        if fail:
            raise RuntimeError(f"iteration {iteration} fails once")
        return {"iteration": iteration, "attempt": job.attempts_made + 1}


def run_demo(client: redis.Redis, queue_name: str, out: TextIO, *, seconds: float = 10.0,
             every_ms: int = 1000, retry_delay_ms: int = 300) -> int:
    if seconds <= 0 or every_ms <= 0 or retry_delay_ms <= 0:
        raise InvalidInputError(f"demo: seconds={seconds}, every_ms={every_ms} and "
                                f"retry_delay_ms={retry_delay_ms} must be > 0")
    printer = EventPrinter(out)
    events = QueueEvents(client, queue_name, block_ms=1000)
    events.subscribe(printer)
    scheduler = JobScheduler(client, queue_name)
    heartbeat = Heartbeat(out, retry_delay_ms)
    worker = Worker(client, queue_name, heartbeat, name="demo", drain_delay=1.0)
    out.write(f"scheduler {SCHEDULER_ID!r} every {every_ms} ms on queue {queue_name!r}; a Worker runs each "
              f"iteration (every third fails once, retried after {retry_delay_ms} ms);\n"
              f"QueueEvents prints the lifecycle as it happens, for {seconds:g} s:\n")
    out.flush()
    events.start()
    try:
        worker.start()
        scheduler.upsert(SCHEDULER_ID, {"every": every_ms}, "heartbeat", {"source": "echomq demo"},
                         {"attempts": 2, "backoff": {"type": "fixed", "delay": retry_delay_ms}})
        time.sleep(seconds)
        scheduler.remove(SCHEDULER_ID)
    finally:
        started = time.perf_counter()
        worker.close(timeout=5)
        worker_ms = (time.perf_counter() - started) * 1000
        time.sleep(0.2)  # let the reader print the last entries before it closes
        started = time.perf_counter()
        events.close(timeout=2)
        events_ms = (time.perf_counter() - started) * 1000
    out.write(f"{heartbeat.runs} runs ({heartbeat.failures} failed once and were retried), "
              f"{printer.printed} events printed; Worker closed in {worker_ms:.0f} ms, "
              f"QueueEvents in {events_ms:.0f} ms\n")
    out.flush()
    return 0 if not worker.running and not events.running and heartbeat.runs > 0 else 1


def main(args: argparse.Namespace) -> int:
    try:
        client, label = open_connection(args.redis)
    except MissingFakeRedisError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    sys.stdout.write(f"echomq demo on {label}\n")
    # The story's one failure is planned and told by the processor itself; the worker's WARNING
    # for it (a traceback) would only break up the event lines. ``echomq -v demo`` shows it.
    processing_log = logging.getLogger("echomq.worker.processing")
    level = processing_log.level
    if not getattr(args, "verbose", False):
        processing_log.setLevel(logging.ERROR)
    try:
        return run_demo(client, args.queue, sys.stdout, seconds=args.seconds, every_ms=args.every_ms)
    finally:
        processing_log.setLevel(level)
        client.close()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="run the demo (fakeredis unless REDIS_URL is set)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL"),
                        help="Redis URL (default: $REDIS_URL, else fakeredis)")
    parser.add_argument("--queue", default="demo", help="queue name (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the story runs (default: %(default)s)")
    parser.add_argument("--every-ms", type=int, default=1000, help="the scheduler's interval (default: %(default)s)")
    parser.set_defaults(handler=main)
