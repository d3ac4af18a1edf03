"""bull-board, the Node dashboard, over EchoMQ's data: what it shows and what its actions do.

EchoMQ writes the jobs (an EchoMQ Worker completes and fails them); bull-board runs as a real
express server (tests/interop/bullboard.js) over BullMQ 6.7's Queue('{name}', {prefix: 'emq'})
and is driven through its JSON API, as its web page drives it. What bull-board reports must be
what EchoMQ reads, and what it changes must be what EchoMQ then sees and runs.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import Queue, Worker, system_clock

from support.workers import Running, wait_until

HERE = Path(__file__).resolve().parent
HOUR_MS = 3_600_000
#: The job counts bull-board shows for a BullMQ queue (its statuses, "latest" aside).
BOARD_STATES = ("active", "completed", "delayed", "failed", "prioritized", "waiting", "waiting-children")


@dataclass
class Board:
    """A running bull-board: its base URL and the name it knows the queue by."""

    url: str
    queue: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        return status, json.loads(raw) if raw.strip() else None

    def queue_path(self, *parts: str) -> str:
        return "/api/queues/" + "/".join(urllib.parse.quote(part, safe="") for part in (self.queue, *parts))

    def listing(self, status: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"activeQueue": self.queue, "status": status, "jobsPerPage": 50})
        code, body = self.call("GET", f"/api/queues?{query}")
        assert code == 200, body
        [queue] = [q for q in body["queues"] if q["name"] == self.queue]
        return dict(queue)


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


@pytest.fixture
def board(bullmq_peer: Any, queue_name: str) -> Iterator[Board]:
    """bull-board on a port the system picks, serving the test's queue; stopped afterwards."""
    process = subprocess.Popen(["node", str(HERE / "bullboard.js"), "--port", "0", "--queue", queue_name],
                               env=bullmq_peer.env, cwd=HERE, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = _read_line(process, 30)
        if not line:
            process.kill()
            raise AssertionError(f"bullboard.js did not start: {process.communicate(timeout=10)[1]}")
        port = json.loads(line)["listening"]
        yield Board(f"http://127.0.0.1:{port}", "{" + queue_name + "}")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _process(job: Any) -> dict[str, Any]:
    if job.name == "charge" and not job.data.get("fixed"):
        raise RuntimeError("card declined")
    return {"done": job.name, "data": job.data}


@pytest.fixture
def jobs(connection: redis.Redis, queue_name: str) -> dict[str, str]:
    """EchoMQ's jobs in completed, failed, waiting, delayed and prioritized: their ids."""
    queue = Queue(connection, queue_name)
    completed = queue.add("email", {"to": "a@example.com"})
    failed = queue.add("charge", {"amount": 42}, attempts=1)
    with Running(Worker(connection, queue_name, _process)):
        assert wait_until(lambda: queue.get_job_counts("completed", "failed") == {"completed": 1, "failed": 1})
    return {"completed": completed.id, "failed": failed.id,
            "waiting": queue.add("email", {"to": "c@example.com"}).id,
            "delayed": queue.add("reminder", {"to": "d@example.com"}, delay=HOUR_MS).id,
            "prioritized": queue.add("urgent", {"to": "e@example.com"}, priority=7).id}


def test_the_board_shows_echomqs_counts_and_jobs(connection, queue_name, jobs, board):
    queue = Queue(connection, queue_name)
    failed = board.listing("failed")
    assert failed["counts"] == queue.get_job_counts(*BOARD_STATES)
    assert failed["counts"]["failed"] == failed["counts"]["completed"] == 1 and failed["isPaused"] is False
    [job] = failed["jobs"]
    assert job["id"] == jobs["failed"] and job["name"] == "charge" and job["data"] == {"amount": 42}
    assert job["failedReason"] == "card declined" and job["attempts"] == 1 and job["isFailed"] is True
    assert "RuntimeError: card declined" in job["stacktrace"][0]

    [job] = board.listing("completed")["jobs"]
    assert job["id"] == jobs["completed"] and job["returnValue"] == {"done": "email", "data": {"to": "a@example.com"}}
    assert job["finishedOn"] == queue.get_job(jobs["completed"]).finished_on  # type: ignore[union-attr]
    [job] = board.listing("delayed")["jobs"]
    assert job["id"] == jobs["delayed"] and job["delay"] == HOUR_MS
    [job] = board.listing("prioritized")["jobs"]
    assert job["id"] == jobs["prioritized"] and job["opts"]["priority"] == 7
    assert [j["id"] for j in board.listing("waiting")["jobs"]] == [jobs["waiting"]]
    latest = {j["id"] for j in board.listing("latest")["jobs"]}
    assert latest == set(jobs.values())

    code, body = board.call("GET", board.queue_path(jobs["failed"]))
    assert code == 200 and body["status"] == "failed" and body["job"]["failedReason"] == "card declined"


def test_a_retry_through_the_board_is_run_by_an_echomq_worker(connection, queue_name, jobs, board):
    queue = Queue(connection, queue_name)
    # Fix what made it fail (bull-board's "edit data"), then retry it from the board.
    code, _ = board.call("PATCH", board.queue_path(jobs["failed"], "update-data"),
                         {"jobData": {"amount": 42, "fixed": True}})
    assert code == 200
    code, _ = board.call("PUT", board.queue_path(jobs["failed"], "retry"))
    assert code == 204
    job = queue.get_job(jobs["failed"])
    assert job is not None and job.get_state() == "waiting" and job.data == {"amount": 42, "fixed": True}
    with Running(Worker(connection, queue_name, _process)):
        assert wait_until(lambda: job.get_state() == "completed")
    job.reload()
    assert job.return_value == {"done": "charge", "data": {"amount": 42, "fixed": True}}
    assert job.failed_reason is None or job.failed_reason == ""
    assert board.listing("completed")["counts"]["failed"] == 0


def test_pause_resume_and_promote_through_the_board(connection, queue_name, jobs, board):
    queue = Queue(connection, queue_name)
    code, _ = board.call("PUT", board.queue_path("pause"))
    assert code == 200 and queue.is_paused()
    assert board.listing("waiting")["isPaused"] is True
    code, _ = board.call("PUT", board.queue_path("resume"))
    assert code == 200 and not queue.is_paused()

    code, _ = board.call("PUT", board.queue_path(jobs["delayed"], "promote"))
    assert code == 204
    promoted = queue.get_job(jobs["delayed"])
    assert promoted is not None and promoted.get_state() == "waiting"
    with Running(Worker(connection, queue_name, _process)):
        assert wait_until(lambda: promoted.get_state() == "completed")


def test_remove_priority_and_delay_through_the_board(connection, queue_name, jobs, board):
    queue = Queue(connection, queue_name)
    code, _ = board.call("PUT", board.queue_path(jobs["completed"], "clean"))
    assert code == 204 and queue.get_job(jobs["completed"]) is None

    code, _ = board.call("PATCH", board.queue_path(jobs["waiting"], "priority"), {"priority": 3})
    assert code == 200
    job = queue.get_job(jobs["waiting"])
    assert job is not None and job.priority == 3 and job.get_state() == "prioritized"

    run_at = int(time.time() * 1000) + 2 * HOUR_MS
    code, _ = board.call("PATCH", board.queue_path(jobs["delayed"], "delay"), {"runAt": run_at})
    assert code == 200
    delayed = queue.get_job(jobs["delayed"])
    assert delayed is not None and delayed.get_state() == "delayed"
    assert abs(delayed.timestamp + delayed.delay - run_at) < 60_000

    # bull-board's "clean all" keeps what finished in the last 5 s: a job that failed ten
    # minutes ago (by its worker's clock) goes, the one that failed just now stays.
    old = queue.add("charge", {"amount": 1}, attempts=1)
    with Running(Worker(connection, queue_name, _process, clock=lambda: system_clock() - 600_000)):
        assert wait_until(lambda: old.get_state() == "failed")
    code, _ = board.call("PUT", board.queue_path("clean", "failed"))
    assert code == 200 and queue.get_job(old.id) is None
    assert [job.id for job in queue.get_jobs("failed")] == [jobs["failed"]]


def test_a_paused_schedule_on_the_board(connection, queue_name, board):
    """A paused EchoMQ schedule (docs/protocol.md §4.6): its parked iteration is in no state the
    board lists or counts; after resume it is delayed again, at its slot."""
    from echomq import JobScheduler

    sched = JobScheduler(connection, queue_name)
    it = sched.upsert("hourly", {"every": HOUR_MS, "start_date": system_clock() + HOUR_MS}, "sync")
    assert it is not None and sched.pause("hourly") is True
    delayed = board.listing("delayed")
    assert sum(delayed["counts"].values()) == 0 and delayed["jobs"] == []
    assert board.listing("latest")["jobs"] == []
    assert sched.resume("hourly") is True
    [job] = board.listing("delayed")["jobs"]
    assert job["id"] == it.job_id and board.listing("delayed")["counts"]["delayed"] == 1
