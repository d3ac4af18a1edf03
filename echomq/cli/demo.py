"""``echomq demo`` (``make demo``): the README's main story, runnable with no server at all.

Today it shows the events half: a fixed lifecycle of two jobs is written onto
``emq:{demo}:events`` exactly as the transition scripts write it (BullMQ 6.7's fields, in its
order), while a QueueEvents thread prints each event as it arrives; then everything closes.
The setup (:func:`open_connection`), the story (:func:`lifecycle`, :func:`write_story`) and the
printing subscriber (:class:`~echomq.cli.events.EventPrinter`) are separate so that the Worker issue
can replace the hand-written story with a real scheduler and worker.

Without ``REDIS_URL`` (or ``--redis``) it runs on an embedded fakeredis server.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

import redis

from ..events import EventType, encode_event
from ..keys import QueueKeys
from ..queue_events import QueueEvents
from .events import EventPrinter

Story = Sequence[tuple[EventType, dict[str, Any]]]


def open_connection(url: str | None) -> tuple[redis.Redis, str]:
    """A client on ``url``, or on a fresh embedded fakeredis server; with a label for output."""
    if url:
        return redis.Redis.from_url(url), url
    import fakeredis

    return fakeredis.FakeRedis(server=fakeredis.FakeServer()), "embedded fakeredis (set REDIS_URL for a real server)"


def lifecycle(now_ms: int) -> Story:
    """Two jobs' lives as the scripts record them: one completes, one is delayed and fails."""
    return [
        (EventType.ADDED, {"jobId": "1", "name": "send-welcome-email"}),
        (EventType.WAITING, {"jobId": "1"}),
        (EventType.ADDED, {"jobId": "2", "name": "resize-avatar"}),
        (EventType.DELAYED, {"jobId": "2", "delay": str(now_ms + 1000)}),
        (EventType.ACTIVE, {"jobId": "1", "prev": "waiting"}),
        (EventType.PROGRESS, {"jobId": "1", "data": '{"percent":50}'}),
        (EventType.COMPLETED, {"jobId": "1", "returnvalue": '{"sent":true}', "prev": "active"}),
        (EventType.WAITING, {"jobId": "2", "prev": "delayed"}),
        (EventType.ACTIVE, {"jobId": "2", "prev": "waiting"}),
        (EventType.FAILED, {"jobId": "2", "failedReason": "image too large", "prev": "active"}),
        (EventType.RETRIES_EXHAUSTED, {"jobId": "2", "attemptsMade": "1"}),
        (EventType.DRAINED, {}),
    ]


def write_story(client: redis.Redis, keys: QueueKeys, story: Story, pause_s: float) -> None:
    for event_type, fields in story:
        entry: dict[Any, Any] = encode_event(event_type, fields)
        client.xadd(keys.events, entry)
        if pause_s:
            time.sleep(pause_s)


def run_demo(client: redis.Redis, queue_name: str, out: TextIO, pause_s: float = 0.05) -> int:
    keys = QueueKeys(queue_name)
    story = lifecycle(int(time.time() * 1000))
    printer = EventPrinter(out, limit=len(story))
    out.write(f"QueueEvents on {keys.events}: printing each event as it arrives\n")
    events = QueueEvents(client, queue_name, block_ms=2000)
    events.subscribe(printer)
    events.start()
    writer = threading.Thread(target=write_story, args=(client, keys, story, pause_s), name="echomq-demo-producer")
    writer.start()
    received = printer.enough.wait(10)
    writer.join()
    started = time.perf_counter()
    events.close(timeout=2)
    closed_ms = (time.perf_counter() - started) * 1000
    out.write(f"{printer.printed}/{len(story)} events received; QueueEvents closed in {closed_ms:.1f} ms\n")
    out.flush()
    return 0 if received and not events.running else 1


def main(args: argparse.Namespace) -> int:
    client, label = open_connection(args.redis)
    sys.stdout.write(f"echomq demo on {label}\n")
    try:
        return run_demo(client, args.queue, sys.stdout, pause_s=args.pause_ms / 1000)
    finally:
        client.close()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="run the demo (fakeredis unless REDIS_URL is set)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL"), help="Redis URL (default: $REDIS_URL, else fakeredis)")
    parser.add_argument("--queue", default="demo", help="queue name (default: %(default)s)")
    parser.add_argument("--pause-ms", type=float, default=50.0, help="pause between events (default: %(default)s)")
    parser.set_defaults(handler=main)
