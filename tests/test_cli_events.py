"""``echomq events tail`` and ``echomq demo`` (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import fakeredis
import pytest
import redis

from echomq.cli import demo, events
from echomq.events import EventType, GapNotice
from echomq.keys import QueueKeys

ROOT = Path(__file__).resolve().parent.parent


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


def test_events_tail_prints_a_replay_and_exits_at_the_limit(real_connection: redis.Redis, redis_url: str,
                                                            queue_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    key = QueueKeys(queue_name).events
    real_connection.xadd(key, {"event": "added", "jobId": "1", "name": "n"})
    real_connection.xadd(key, {"event": "retries-exhausted", "jobId": "1", "attemptsMade": "2"})
    args = parse(["events", "tail", "--queue", queue_name, "--redis", redis_url, "--from", "0", "--limit", "2"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1:3] for line in out] == [["added", "job=1"], ["retries_exhausted", "job=1"]]
    assert out[1].endswith("attemptsMade=2")


def test_demo_on_fakeredis_prints_every_event_and_closes(capsys: pytest.CaptureFixture[str]) -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    out = io.StringIO()
    assert demo.run_demo(client, "demo", out, pause_s=0) == 0
    lines = out.getvalue().splitlines()
    story = demo.lifecycle(0)
    printed = [line.split()[1] for line in lines[1:-1]]
    assert printed == [t.value for t, _ in story]
    assert lines[-1].startswith(f"{len(story)}/{len(story)} events received")
    # Written the way the scripts write them: event first, then the fields in BullMQ's order.
    entries = client.xrange(QueueKeys("demo").events)
    assert [next(iter(f)) for _, f in entries] == [b"event"] * len(story)
    assert [list(f)[1:] for _, f in entries][6] == [b"jobId", b"returnvalue", b"prev"]


def test_demo_on_a_real_server(real_connection: redis.Redis, redis_url: str, queue_name: str) -> None:
    args = parse(["demo", "--redis", redis_url, "--queue", queue_name, "--pause-ms", "0"])
    assert args.handler(args) == 0
    assert real_connection.xlen(QueueKeys(queue_name).events) == len(demo.lifecycle(0))


def test_make_demo_command_runs_with_no_server() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    done = subprocess.run([sys.executable, "-m", "echomq", "demo", "--pause-ms", "5"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "embedded fakeredis" in done.stdout
    assert "12/12 events received" in done.stdout
