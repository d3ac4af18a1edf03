"""``echomq job cancel ID --queue Q`` through ``echomq.cli.main`` on each backend the CLI
connects to by URL: a job that has not started is failed at once; what cannot be cancelled
says why (status 1 for an unknown id, 2 for the rest) and writes nothing."""

from __future__ import annotations

import json

import redis

from echomq import Queue

from support.cli import one_line
from support.cli import run_main as run
from support.snapshot import queue_snapshot


def _common(queue_name: str, server_url: str, *extra: str) -> list[str]:
    return ["--queue", queue_name, "--redis", server_url, *extra]


def test_job_cancel_and_its_refusals(capsys, url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    queue = Queue(url_connection, queue_name)
    job = queue.add("report", {}, delay=60_000)
    code, out, _ = run(capsys, "job", "cancel", job.id, "--reason", "not needed", *_common(queue_name, server_url))
    assert code == 0 and out == (f"cancelled job {job.id!r} of queue {queue_name!r}: it had not started: taken out "
                                 "and failed, it will not run\n")
    assert job.reload().failed_reason == "cancelled: not needed" and job.get_state() == "failed"
    before = queue_snapshot(url_connection, queue_name)
    code, out, err = run(capsys, "job", "cancel", job.id, *_common(queue_name, server_url))
    assert code == 2 and out == "" and "not cancelled: it finished already" in one_line(err)
    code, out, err = run(capsys, "job", "cancel", "nope", *_common(queue_name, server_url, "--json"))
    assert code == 1 and out == "" and "not found" in one_line(err)
    assert queue_snapshot(url_connection, queue_name) == before
    other = queue.add("report", {})
    code, out, _ = run(capsys, "job", "cancel", other.id, *_common(queue_name, server_url, "--json"))
    assert (code, json.loads(out)) == (0, {"id": other.id, "cancelled": True, "outcome": "failed"})
    assert other.reload().failed_reason == "cancelled: no reason given"
