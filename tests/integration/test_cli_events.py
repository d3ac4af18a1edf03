"""``echomq events tail`` and ``echomq demo`` (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import fakeredis
import pytest
import redis

from echomq.cli import demo, events
from echomq.protocol.events import EventType, GapNotice, GapReason
from echomq.protocol.keys import QueueKeys

ROOT = Path(__file__).resolve().parents[2]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    events.register(subparsers)
    demo.register(subparsers)
    return parser.parse_args(argv)


def test_format_event_lines() -> None:
    line = events.format_event(EventType.COMPLETED, {"jobId": "7", "returnvalue": {"ok": True}, "prev": "active",
                                                     "event_id": "1-0"})
    assert line.split() == ["1-0", "completed", "job=7", 'returnvalue={"ok":', "true}", 'prev="active"']
    assert "(custom)" in events.format_event("custom-thing", {"event_id": "2-0", "foo": "bar"})
    assert events.format_event(EventType.DRAINED, {"event_id": "3-0"}).endswith("drained")
    gap = events.format_event(GapNotice("q", "1-0", "9-0", 12), {})
    assert "gap" in gap and "1-0" in gap and "9-0" in gap and "12" in gap
    deleted = events.format_event(GapNotice("q", "1-0", "9-0", None, GapReason.DELETED), {})
    assert "were deleted" in deleted and "about None" in deleted
    moved = GapNotice("q", "3-0", "2-5", None, GapReason.FAILOVER, ((EventType.ADDED, {"jobId": "7"}),), False,
                      "the reader moved from h:1 to h:2")
    line = events.format_event(moved, {})
    assert line.startswith("!! failover of the events stream of 'q' (the reader moved from h:1 to h:2)")
    assert "after 3-0" in line and "at 2-5" in line and "1 delivered events" in line and "not exact" in line
    assert "\n" not in line


def test_events_tail_prints_a_replay_and_exits_at_the_limit(url_connection: redis.Redis, server_url: str,
                                                            queue_name: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    key = QueueKeys(queue_name).events
    url_connection.xadd(key, {"event": "added", "jobId": "1", "name": "n"})
    url_connection.xadd(key, {"event": "retries-exhausted", "jobId": "1", "attemptsMade": "2"})
    args = parse(["events", "tail", "--queue", queue_name, "--redis", server_url, "--from", "0", "--limit", "2"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1:3] for line in out] == [["added", "job=1"], ["retries_exhausted", "job=1"]]
    assert out[1].endswith("attemptsMade=2")


def test_demo_on_fakeredis_tells_the_whole_story_and_closes() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    out = io.StringIO()
    assert demo.run_demo(client, "demo", out, seconds=2.2, every_ms=250, retry_delay_ms=100) == 0
    lines = out.getvalue().splitlines()
    kinds = [line.split()[1] for line in lines[2:-1] if not line.lstrip().startswith("(")]
    assert {"added", "waiting", "delayed", "active", "completed", "removed"} <= set(kinds)
    completed = [line for line in lines if " completed " in line]
    assert len(completed) >= 6  # about one per 250 ms
    assert any('"iteration": 3, "attempt": 2' in line for line in completed)  # failed once, retried
    assert "raises; it retries in 100 ms" in out.getvalue()
    assert lines[-1].endswith("ms") and "failed once and were retried" in lines[-1]
    assert not client.exists("emq:{demo}:repeat")  # the scheduler was removed at the end


def test_demo_on_a_server_given_by_url(url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    args = parse(["demo", "--redis", server_url, "--queue", queue_name, "--seconds", "1.2", "--every-ms", "200"])
    assert args.handler(args) == 0
    keys = QueueKeys(queue_name)
    events = [(f[b"event"], f.get(b"jobId")) for _, f in url_connection.xrange(keys.events)]
    assert [kind for kind, _ in events].count(b"completed") >= 4
    # The scheduler is removed at the end with its pending iteration ("removed"), unless that
    # iteration was becoming active just then: it ran, and produced no next one.
    assert not url_connection.exists(keys.repeat)
    last_iteration = [job for kind, job in events if kind == b"added"][-1]
    assert (b"removed", last_iteration) in events or (b"active", last_iteration) in events, events


def test_make_demo_command_runs_with_no_server() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    done = subprocess.run([sys.executable, "-m", "echomq", "demo", "--seconds", "2", "--every-ms", "300"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "embedded fakeredis" in done.stdout
    assert " completed " in done.stdout and "Worker closed in" in done.stdout


def test_events_tail_limit_stops_inside_a_batch(url_connection: redis.Redis, server_url: str, queue_name: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # One read hands the reader all ten entries at once; --limit 2 still prints two.
    key = QueueKeys(queue_name).events
    ids = [url_connection.xadd(key, {"event": "waiting", "jobId": str(n)}).decode() for n in range(10)]
    args = parse(["events", "tail", "--queue", queue_name, "--redis", server_url, "--from", "0", "--limit", "2"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ids[:2]


def test_events_tail_limit_counts_live_events_too(url_connection: redis.Redis, server_url: str, queue_name: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    key = QueueKeys(queue_name).events
    url_connection.xadd(key, {"event": "paused"})  # before the tail: "$" skips it
    args = parse(["events", "tail", "--queue", queue_name, "--redis", server_url, "--limit", "3"])
    done: list[int] = []
    runner = threading.Thread(target=lambda: done.append(args.handler(args)), daemon=True)
    runner.start()
    # The tail resolves "$" at start; keep writing batches of 5 until it has had enough.
    deadline = time.monotonic() + 10
    written: list[str] = []
    while runner.is_alive() and time.monotonic() < deadline:
        with url_connection.pipeline(transaction=False) as pipe:
            for n in range(5):
                pipe.xadd(key, {"event": "waiting", "jobId": f"{len(written)}-{n}"})
            written += [i.decode() for i in pipe.execute()]
        runner.join(0.1)
    assert not runner.is_alive() and done == [0]
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and [line.split()[0] for line in out] == written[written.index(out[0].split()[0]):][:3]
