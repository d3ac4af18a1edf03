"""The operator's commands that act on many: ``echomq queues``, ``echomq jobs retry`` and
``echomq jobs promote``, on each backend the CLI connects to by URL.

Run through ``echomq.cli.main`` (argument parsing, the handler, errors turned into one line), and
as a subprocess where the point is what a user at a shell gets. ``echomq queues`` lists a whole
server, so its tests work under a prefix of their own (support/prefixes.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import JobScheduler, Queue, Worker
from echomq.protocol.keys import QueueKeys

from support.cli import echomq, one_line
from support.cli import run_main as run
from support.prefixes import delete_prefix, new_prefix, prefix_snapshot
from support.queues import queue_keys, read_events
from support.servers import free_port
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

HOUR_MS = 3_600_000


def fail(job: Any) -> None:
    raise RuntimeError("card declined")


def failed_jobs(connection: redis.Redis, queue_name: str, count: int, prefix: str = "emq") -> list[str]:
    """``count`` jobs a real worker failed, oldest first."""
    queue = Queue(connection, queue_name, prefix=prefix)
    for n in range(count):
        queue.add("charge", {"n": n}, attempts=1)
    with Running(Worker(connection, queue_name, fail, prefix=prefix)):
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == count)
    return [j.decode() for j in connection.zrange(QueueKeys(queue_name, prefix).failed, 0, -1)]


def moved_back(connection: redis.Redis, queue_name: str, prev: str) -> list[str]:
    return [data["jobId"] for event, data in read_events(connection, queue_name)
            if event == "waiting" and data.get("prev") == prev]


@pytest.fixture
def prefix(url_connection: redis.Redis) -> Iterator[str]:
    name = new_prefix()
    yield name
    delete_prefix(url_connection, name)


# -- echomq queues ---------------------------------------------------------------------------------

def test_queues_lists_every_queue_under_the_prefix(capsys, url_connection, server_url, prefix):
    orders = Queue(url_connection, "orders", prefix=prefix)
    orders.add("a", {}), orders.add("b", {}, delay=HOUR_MS), orders.add("c", {}, priority=2)
    failed_jobs(url_connection, "billing", 2, prefix)
    Queue(url_connection, "billing", prefix=prefix).pause()
    JobScheduler(url_connection, "reports", prefix=prefix).upsert("nightly", {"pattern": "0 2 * * *"}, "report")
    code, out, err = run(capsys, "queues", "--redis", server_url, "--prefix", prefix, "--json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [(q["queue"], q["prefix"], q["paused"], q["schedulers"], q["workers"]) for q in listed] == [
        ("billing", prefix, True, 0, 0), ("orders", prefix, False, 0, 0), ("reports", prefix, False, 1, 0)]
    assert all(list(q) == ["queue", "prefix", "paused", "counts", "schedulers", "workers", "version"]
               for q in listed)
    assert listed[1]["counts"] == {"active": 0, "completed": 0, "delayed": 1, "failed": 0, "paused": 0,
                                   "prioritized": 1, "waiting": 1, "waiting-children": 0}
    assert listed[0]["counts"]["failed"] == 2 and listed[1]["version"].startswith("echomq-python:")

    code, out, _ = run(capsys, "queues", "--redis", server_url, "--prefix", prefix)
    assert code == 0
    header, *rows = [line.split() for line in out.splitlines()]
    assert header == ["QUEUE", "PAUSED", "WAITING", "ACTIVE", "DELAYED", "PRIORITIZED", "WAITING-CHILDREN",
                      "COMPLETED", "FAILED", "SCHEDULERS", "WORKERS"]
    assert rows == [["billing", "yes", "0", "0", "0", "0", "0", "0", "2", "0", "0"],
                    ["orders", "no", "1", "0", "1", "1", "0", "0", "0", "0", "0"],
                    ["reports", "no", "0", "0", "1", "0", "0", "0", "0", "1", "0"]]


def test_queues_on_an_empty_prefix_is_an_empty_list_and_writes_nothing(capsys, url_connection, server_url,
                                                                      prefix):
    code, out, err = run(capsys, "queues", "--redis", server_url, "--prefix", prefix, "--json")
    assert (code, out, err) == (0, "[]\n", "")
    code, out, _ = run(capsys, "queues", "--redis", server_url, "--prefix", prefix)
    assert code == 0 and out.split() == ["QUEUE", "PAUSED", "WAITING", "ACTIVE", "DELAYED", "PRIORITIZED",
                                         "WAITING-CHILDREN", "COMPLETED", "FAILED", "SCHEDULERS", "WORKERS"]
    assert prefix_snapshot(url_connection, prefix) == {}


def test_queues_counts_connected_workers_and_escapes_names(capsys, url_connection, server_url, prefix):
    Queue(url_connection, "busy", prefix=prefix).add("a", {}, delay=HOUR_MS)
    with Running(Worker(url_connection, "busy", lambda job: None, prefix=prefix, name="w1")):
        assert wait_until(lambda: len(Queue(url_connection, "busy", prefix=prefix).get_workers()) == 1)
        code, out, _ = run(capsys, "queues", "--redis", server_url, "--prefix", prefix, "--json")
    assert code == 0 and [q["workers"] for q in json.loads(out)] == [1]
    Queue(url_connection, "\x1b[2Jwipe", prefix=prefix).add("a", {})
    code, out, _ = run(capsys, "queues", "--redis", server_url, "--prefix", prefix)
    assert "\x1b" not in out and '"\\u001b[2Jwipe"' in out


@pytest.mark.parametrize("argv,names", [
    (["queues", "--prefix", "a{b"], "prefix"),
    (["queues", "--prefix", ""], "prefix"),
    (["queues", "--redis", "http://127.0.0.1:6379"], "--redis"),
    (["queues", "--queue", "orders"], "--queue"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_queues_refuses_a_bad_argument_before_connecting(capsys, argv, names):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and names in one_line(err)


def test_queues_against_a_redis_that_is_not_there_is_one_line():
    port = free_port()
    done = echomq("queues", "--redis", f"redis://ops:s3cret@127.0.0.1:{port}/0")
    assert done.returncode == 1 and done.stdout == ""
    assert one_line(done.stderr).startswith(f"echomq queues: cannot reach Redis at redis://ops:***@127.0.0.1:{port}/0")


# -- echomq jobs retry ------------------------------------------------------------------------------

def common(queue_name: str, server_url: str, *more: str) -> tuple[str, ...]:
    return ("--queue", queue_name, "--redis", server_url, *more)


def test_jobs_retry_moves_every_failed_job_back_and_says_how_many(capsys, url_connection, server_url, queue_name):
    ids = failed_jobs(url_connection, queue_name, 5)
    code, out, err = run(capsys, "jobs", "retry", *common(queue_name, server_url))
    assert (code, err) == (0, "")
    assert out == f"retried 5 jobs (failed) of queue {queue_name!r}: they wait for a worker now; 0 still failed\n"
    assert moved_back(url_connection, queue_name, "failed") == ids
    assert Queue(url_connection, queue_name).get_job_counts("waiting", "failed") == {"waiting": 5, "failed": 0}
    code, out, _ = run(capsys, "jobs", "retry", *common(queue_name, server_url, "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "state": "failed", "limit": None, "retried": 0,
                                           "left": 0})


@pytest.mark.parametrize("batch", ["1", "2", "100"])
def test_jobs_retry_with_a_limit_takes_the_oldest(capsys, url_connection, server_url, queue_name, batch):
    ids = failed_jobs(url_connection, queue_name, 5)
    code, out, _ = run(capsys, "jobs", "retry", *common(queue_name, server_url, "--limit", "3", "--batch", batch,
                                                        "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "state": "failed", "limit": 3, "retried": 3,
                                           "left": 2})
    assert moved_back(url_connection, queue_name, "failed") == ids[:3]
    code, out, _ = run(capsys, "jobs", "retry", *common(queue_name, server_url, "--limit", "1", "--batch", batch))
    assert code == 0 and out.startswith("retried 1 job (failed)") and out.endswith("1 still failed\n")


def test_jobs_retry_of_completed_jobs(capsys, url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    done = [queue.add("email", {"n": n}).id for n in range(3)]
    with Running(Worker(url_connection, queue_name, lambda job: "sent")):
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 3)
    failed = failed_jobs(url_connection, queue_name, 1)
    code, out, _ = run(capsys, "jobs", "retry", *common(queue_name, server_url, "--state", "completed", "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "state": "completed", "limit": None, "retried": 3,
                                           "left": 0})
    assert sorted(moved_back(url_connection, queue_name, "completed")) == sorted(done)
    assert queue.get_job_counts("failed") == {"failed": 1} and queue.get_job(failed[0]).get_state() == "failed"


def test_jobs_retry_while_a_worker_works_retries_each_job_once(capsys, url_connection, server_url, queue_name):
    # A worker runs what the command puts back and fails it again at once, while the command
    # pages one job per call: the command ends, having retried each job that was failed when
    # it began exactly once.
    ids = failed_jobs(url_connection, queue_name, 40)
    queue = Queue(url_connection, queue_name)
    with Running(Worker(url_connection, queue_name, fail, concurrency=4)):
        code, out, _ = run(capsys, "jobs", "retry", *common(queue_name, server_url, "--batch", "1", "--json"))
        assert code == 0 and json.loads(out)["retried"] == 40
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == 40)
    assert sorted(moved_back(url_connection, queue_name, "failed")) == sorted(ids)


# -- echomq jobs promote ---------------------------------------------------------------------------

def test_jobs_promote_runs_every_delayed_job_now(capsys, url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    later = [queue.add("reminder", {"n": n}, delay=HOUR_MS * (n + 1)).id for n in range(4)]
    queue.add("vip", {}, delay=HOUR_MS * 9, priority=1)
    code, out, _ = run(capsys, "jobs", "promote", *common(queue_name, server_url, "--limit", "2", "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "limit": 2, "promoted": 2, "left": 3})
    assert moved_back(url_connection, queue_name, "delayed") == later[:2]   # the earliest due first
    code, out, err = run(capsys, "jobs", "promote", *common(queue_name, server_url))
    assert (code, err) == (0, "")
    assert out == f"promoted 3 jobs of queue {queue_name!r}: they wait for a worker now; 0 still delayed\n"
    assert queue.get_job_counts("delayed", "waiting", "prioritized") == {"delayed": 0, "waiting": 4,
                                                                         "prioritized": 1}


def test_jobs_promote_while_a_worker_puts_jobs_back_ends(capsys, url_connection, server_url, queue_name):
    # Each promoted job fails and goes back to delayed (an hour's backoff), due before the jobs
    # still waiting their turn: the command stops after as many as were delayed when it began.
    queue = Queue(url_connection, queue_name)
    for n in range(100):
        queue.add("flaky", {"n": n}, delay=2 * HOUR_MS, attempts=20, backoff={"type": "fixed", "delay": HOUR_MS})
    with Running(Worker(url_connection, queue_name, fail, concurrency=4)):
        code, out, _ = run(capsys, "jobs", "promote", *common(queue_name, server_url, "--batch", "1", "--json"))
    assert code == 0 and json.loads(out)["promoted"] == 100
    assert len(moved_back(url_connection, queue_name, "delayed")) == 100


# -- refusals: nothing is written -------------------------------------------------------------------

@pytest.mark.parametrize("argv,names", [
    (["jobs", "retry", "--state", "waiting"], "--state"),
    (["jobs", "retry", "--state", "active"], "--state"),
    (["jobs", "retry", "--limit", "0"], "--limit"),
    (["jobs", "retry", "--limit", "-5"], "--limit"),
    (["jobs", "retry", "--limit", "some"], "--limit"),
    (["jobs", "retry", "--batch", "0"], "--batch"),
    (["jobs", "promote", "--limit", "0"], "--limit"),
    (["jobs", "promote", "--limit", "-1"], "--limit"),
    (["jobs", "promote", "--batch", "-2"], "--batch"),
    (["jobs", "promote", "--state", "failed"], "--state"),
    (["jobs", "promote", "--queue", "a:b"], "queue"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_bad_argument_is_one_line_status_2_and_writes_nothing(capsys, url_connection, server_url, queue_name,
                                                                 argv, names):
    failed_jobs(url_connection, queue_name, 2)
    Queue(url_connection, queue_name).add("later", {}, delay=HOUR_MS)
    before = queue_snapshot(url_connection, queue_name)
    if "--queue" not in argv:
        argv = [*argv, "--queue", queue_name]
    code, out, err = run(capsys, *argv, "--redis", server_url)
    assert code == 2 and out == ""
    line = one_line(err)
    assert names in line and line.startswith("echomq") and ": error: " in line
    assert queue_snapshot(url_connection, queue_name) == before


@pytest.mark.parametrize("argv", [["jobs", "retry"], ["jobs", "retry", "--state", "completed"],
                                  ["jobs", "promote"], ["jobs", "promote", "--limit", "3"]], ids=" ".join)
def test_an_unknown_queue_is_not_found_and_not_created(capsys, url_connection, server_url, queue_name, argv):
    code, out, err = run(capsys, *argv, *common(queue_name, server_url))
    assert code == 1 and out == ""
    assert one_line(err).startswith(f"echomq {argv[0]} {argv[1]}: not found: no queue {queue_name!r}")
    assert queue_keys(url_connection, queue_name) == set()


def test_nothing_to_move_writes_nothing(capsys, url_connection, server_url, queue_name):
    Queue(url_connection, queue_name).add("now", {})
    before = queue_snapshot(url_connection, queue_name)
    for argv in (["jobs", "retry"], ["jobs", "retry", "--state", "completed"], ["jobs", "promote"]):
        code, out, _ = run(capsys, *argv, *common(queue_name, server_url, "--json"))
        assert code == 0 and json.loads(out)[argv[1] + "d" if argv[1] == "promote" else "retried"] == 0
    assert queue_snapshot(url_connection, queue_name) == before


def test_from_a_shell(url_connection, server_url, queue_name):
    failed_jobs(url_connection, queue_name, 2)
    done = echomq("jobs", "retry", "--queue", queue_name, "--redis", server_url, "--json")
    assert (done.returncode, done.stderr) == (0, ""), done
    assert json.loads(done.stdout)["retried"] == 2
    bad = echomq("jobs", "retry", "--queue", queue_name, "--redis", server_url, "--limit", "0")
    assert bad.returncode == 2 and bad.stdout == "" and "--limit" in one_line(bad.stderr)
