"""The operator's commands: ``echomq queue ...``, ``echomq workers``, ``echomq jobs list``,
``echomq job show|retry|remove|promote``, on each backend the CLI connects to by URL.

Each command is run through ``echomq.cli.main`` (the same path as the installed command: argument
parsing, the handler, errors turned into one line), or as a subprocess where the point is what a
user at a shell gets. Jobs are put into their states by a real EchoMQ Worker.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import Queue, Worker

from support.cli import echomq, one_line
from support.cli import run_main as run
from support.queues import queue_keys
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

HOUR_MS = 3_600_000


def send(job: Any) -> dict[str, str]:
    if job.name == "charge":
        raise RuntimeError("card declined")
    return {"sent": job.data["to"]}


@pytest.fixture
def jobs(url_connection: redis.Redis, queue_name: str) -> Iterator[dict[str, str]]:
    """One job in each of completed, failed, waiting, delayed and prioritized: their ids."""
    queue = Queue(url_connection, queue_name)
    done = queue.add("email", {"to": "a@example.com"})
    failed = queue.add("charge", {"to": "b@example.com"}, attempts=1)
    with Running(Worker(url_connection, queue_name, send)):
        assert wait_until(lambda: queue.get_job_counts("completed", "failed") == {"completed": 1, "failed": 1})
    ids = {"completed": done.id, "failed": failed.id,
           "waiting": queue.add("email", {"to": "c@example.com"}).id,
           "delayed": queue.add("reminder", {"to": "d@example.com"}, delay=HOUR_MS).id,
           "prioritized": queue.add("urgent", {"to": "e@example.com"}, priority=5).id}
    yield ids


def common(queue_name: str, server_url: str, *more: str) -> tuple[str, ...]:
    return ("--queue", queue_name, "--redis", server_url, *more)


# -- queue stats, pause, resume ---------------------------------------------------------------------

def test_stats_counts_each_state_and_tells_paused_workers_and_events(capsys, url_connection, server_url, queue_name,
                                                                    jobs):
    code, out, err = run(capsys, "queue", "stats", *common(queue_name, server_url, "--json"))
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats["counts"] == {"active": 0, "completed": 1, "delayed": 1, "failed": 1, "paused": 0,
                               "prioritized": 1, "waiting": 1, "waiting-children": 0}
    assert stats["paused"] is False and stats["workers"] == 0 and stats["queue"] == queue_name
    assert stats["events"] > 5 and stats["events_max_len"] == 10000

    code, out, _ = run(capsys, "queue", "stats", *common(queue_name, server_url))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["queue", queue_name] and lines[2].split() == ["paused", "no"]
    assert lines[3].split() == ["workers", "0"] and lines[4].split()[:2] == ["events", str(stats["events"])]
    table = dict(line.split() for line in lines[lines.index("STATE             JOBS") + 1:])
    assert table == {state: str(count) for state, count in stats["counts"].items()}


def test_pause_and_resume(capsys, url_connection, server_url, queue_name, jobs):
    queue = Queue(url_connection, queue_name)
    code, out, _ = run(capsys, "queue", "pause", *common(queue_name, server_url))
    assert code == 0 and f"paused queue {queue_name!r}" in out and queue.is_paused()
    code, out, _ = run(capsys, "queue", "stats", *common(queue_name, server_url, "--json"))
    assert json.loads(out)["paused"] is True
    code, out, _ = run(capsys, "queue", "resume", *common(queue_name, server_url, "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "paused": False}) and not queue.is_paused()
    code, out, _ = run(capsys, "queue", "pause", *common(queue_name, server_url, "--json"))
    assert json.loads(out) == {"queue": queue_name, "paused": True} and queue.is_paused()


@pytest.mark.parametrize("argv", [["queue", "stats"], ["queue", "pause"], ["queue", "resume"],
                                  ["jobs", "list"], ["workers"], ["queue", "drain", "--yes"],
                                  ["queue", "clean", "--grace", "0", "--yes"], ["queue", "obliterate", "--yes"]],
                         ids=" ".join)
def test_an_unknown_queue_is_not_found_and_not_created(capsys, url_connection, server_url, queue_name, argv):
    code, out, err = run(capsys, *argv, *common(queue_name, server_url))
    assert code == 1 and out == ""
    command = "echomq " + " ".join(arg for arg in argv[:2] if not arg.startswith("--"))
    line = one_line(err)
    assert line.startswith(f"{command}: not found: no queue {queue_name!r}")
    assert queue_keys(url_connection, queue_name) == set()


# -- clean, drain, obliterate -----------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["queue", "clean", "--grace", "0"], ["queue", "clean", "--grace", "0", "--state", "failed"],
    ["queue", "drain"], ["queue", "drain", "--delayed"], ["queue", "obliterate"],
    ["queue", "obliterate", "--force"], ["job", "remove", "ID"],
], ids=" ".join)
def test_a_destructive_command_without_yes_refuses_and_writes_nothing(capsys, url_connection, server_url,
                                                                      queue_name, jobs, argv):
    argv = [jobs["failed"] if arg == "ID" else arg for arg in argv]
    before = queue_snapshot(url_connection, queue_name)
    code, out, err = run(capsys, *argv, *common(queue_name, server_url))
    assert code == 2 and out == ""
    assert "refusing without --yes" in one_line(err)
    assert queue_snapshot(url_connection, queue_name) == before


@pytest.mark.parametrize("grace,ms", [("500", 500), ("30s", 30_000), ("5m", 300_000), ("1h30m", 5_400_000),
                                      ("2d", 172_800_000), ("250ms", 250)])
def test_grace_is_milliseconds_or_a_duration_and_the_refusal_comes_before_connecting(capsys, grace, ms):
    # Nothing listens on port 1: the refusal names the grace it read without reaching for Redis.
    code, out, err = run(capsys, "queue", "clean", "--queue", "orders", "--redis", "redis://127.0.0.1:1/0",
                         "--grace", grace)
    assert code == 2 and out == ""
    assert f"more than {ms} ms ago from queue 'orders'" in one_line(err)


def test_clean_deletes_by_state_grace_and_limit(capsys, url_connection, server_url, queue_name, jobs):
    queue = Queue(url_connection, queue_name)
    code, out, _ = run(capsys, "queue", "clean", *common(queue_name, server_url, "--grace", "1h", "--yes"))
    assert code == 0 and out.startswith("removed 0 completed jobs")  # finished just now: within the grace
    code, out, _ = run(capsys, "queue", "clean",
                       *common(queue_name, server_url, "--grace", "0", "--state", "failed", "--yes", "--json"))
    assert code == 0
    assert json.loads(out) == {"queue": queue_name, "state": "failed", "grace_ms": 0, "limit": 0, "count": 1,
                               "removed": [jobs["failed"]]}
    assert queue.get_job(jobs["failed"]) is None and queue.get_job(jobs["completed"]) is not None
    queue.add("email", {"to": "f@example.com"})
    code, out, _ = run(capsys, "queue", "clean",
                       *common(queue_name, server_url, "--grace", "0", "--state", "wait", "--limit", "1", "--yes"))
    assert code == 0 and out.startswith(f"removed 1 waiting job from queue {queue_name!r}")
    assert queue.get_job_counts("waiting") == {"waiting": 1}


def test_drain_deletes_waiting_jobs_and_delayed_ones_on_request(capsys, url_connection, server_url, queue_name,
                                                                jobs):
    queue = Queue(url_connection, queue_name)
    code, out, _ = run(capsys, "queue", "drain", *common(queue_name, server_url, "--yes", "--json"))
    assert code == 0 and json.loads(out)["include_delayed"] is False
    assert queue.get_job_counts("waiting", "prioritized", "delayed") == {"waiting": 0, "prioritized": 0,
                                                                         "delayed": 1}
    code, out, _ = run(capsys, "queue", "drain", *common(queue_name, server_url, "--delayed", "--yes"))
    assert code == 0 and out.startswith("removed 1 waiting and delayed job")
    assert queue.get_job_counts("delayed") == {"delayed": 0}
    assert queue.get_job_counts("completed", "failed") == {"completed": 1, "failed": 1}


def test_obliterate_deletes_every_key_of_the_queue(capsys, url_connection, server_url, queue_name, jobs):
    code, out, _ = run(capsys, "queue", "obliterate", *common(queue_name, server_url, "--yes", "--json"))
    assert (code, json.loads(out)) == (0, {"queue": queue_name, "obliterated": True})
    assert queue_keys(url_connection, queue_name) == set()


def test_obliterate_with_an_active_job_wants_force(capsys, url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    queue.add("slow", {})
    release = threading.Event()
    with Running(Worker(url_connection, queue_name, lambda job: release.wait(10))):
        assert wait_until(lambda: queue.get_job_counts("active") == {"active": 1})
        code, out, err = run(capsys, "queue", "obliterate", *common(queue_name, server_url, "--yes"))
        assert code == 2 and out == ""
        line = one_line(err)
        assert "has active jobs" in line and "--force" in line and "left paused" in line
        assert queue.get_job_counts("active") == {"active": 1} and queue.is_paused()
        release.set()


# -- workers ---------------------------------------------------------------------------------------

def test_workers_lists_each_connected_worker_by_name(capsys, url_connection, server_url, queue_name, jobs):
    with Running(Worker(url_connection, queue_name, send, name="billing-1")):
        assert wait_until(lambda: len(Queue(url_connection, queue_name).get_workers()) == 1)
        code, out, _ = run(capsys, "workers", *common(queue_name, server_url, "--json"))
        assert code == 0
        [worker] = json.loads(out)
        assert set(worker) == {"name", "addr", "age", "idle", "rawname"}
        assert worker["name"] == "billing-1" and worker["rawname"].endswith(":w:billing-1")
        [listed] = Queue(url_connection, queue_name).get_workers()
        assert isinstance(worker["age"], int) and worker["addr"] == listed["addr"] != ""
        code, out, _ = run(capsys, "workers", *common(queue_name, server_url))
        header, row = out.splitlines()
        assert header.split() == ["NAME", "ADDR", "AGE", "(s)", "IDLE", "(s)"]
        assert row.startswith(f"billing-1  {worker['addr']}  ")
        code, out, _ = run(capsys, "queue", "stats", *common(queue_name, server_url, "--json"))
        assert json.loads(out)["workers"] == 1
    code, out, _ = run(capsys, "workers", *common(queue_name, server_url))
    assert (code, out.split()) == (0, ["NAME", "ADDR", "AGE", "(s)", "IDLE", "(s)"])


# -- jobs list ---------------------------------------------------------------------------------------

def test_jobs_list_shows_one_state_with_what_matters_in_it(capsys, url_connection, server_url, queue_name, jobs):
    code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--state", "failed"))
    header, row = out.splitlines()
    assert header.split()[:3] == ["ID", "NAME", "ATTEMPTS"] and header.rstrip().endswith("DETAIL")
    assert row.split()[:3] == [jobs["failed"], "charge", "1"] and row.endswith("card declined")
    code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--state", "completed"))
    assert out.splitlines()[1].endswith('{"sent": "a@example.com"}')
    code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--state", "delayed"))
    assert " due 20" in out.splitlines()[1]
    code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--state", "prioritized"))
    assert out.splitlines()[1].endswith("priority 5")

    code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--state", "failed", "--json"))
    assert code == 0
    [record] = json.loads(out)
    assert record["id"] == jobs["failed"] and record["state"] == "failed"
    assert record["failed_reason"] == "card declined" and record["attempts_made"] == 1
    assert record["data"] == {"to": "b@example.com"} and "RuntimeError: card declined" in record["stacktrace"][0]
    assert record["finished_on_iso"].endswith("Z") and isinstance(record["finished_on"], int)


def test_jobs_list_pages_with_limit_offset_and_asc(capsys, url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    ids = [queue.add("n", {"i": i}).id for i in range(5)]

    def listed(*more: str) -> list[str]:
        code, out, _ = run(capsys, "jobs", "list", *common(queue_name, server_url, "--json", *more))
        assert code == 0
        return [record["id"] for record in json.loads(out)]

    assert listed() == ids[::-1]  # waiting is the default state, newest first
    assert listed("--limit", "2") == ids[::-1][:2]
    assert listed("--limit", "2", "--offset", "2") == ids[::-1][2:4]
    assert listed("--limit", "2", "--asc") == ids[:2]
    assert listed("--state", "failed") == []


# -- job show, promote, remove ---------------------------------------------------------------------------

def test_job_show_tells_every_field(capsys, url_connection, server_url, queue_name, jobs):
    queue = Queue(url_connection, queue_name)
    queue.log(jobs["failed"], "charging b@example.com")
    queue.log(jobs["failed"], "gateway said no")
    code, out, _ = run(capsys, "job", "show", jobs["failed"], *common(queue_name, server_url, "--json"))
    assert code == 0
    record = json.loads(out)
    job = queue.get_job(jobs["failed"])
    assert job is not None and job.finished_on is not None
    assert record["state"] == "failed" and record["logs_count"] == 2 and record["name"] == "charge"
    assert record["timestamp"] == job.timestamp and record["finished_on"] == job.finished_on
    assert record["opts"] == {"attempts": 1}

    code, out, _ = run(capsys, "job", "show", jobs["failed"], *common(queue_name, server_url))
    fields = {line[:15].strip(): line[15:] for line in out.splitlines() if line[:15].strip()}
    assert fields["state"] == "failed" and fields["attempts"] == "1 made, 1 started, 0 stalled"
    assert fields["failed reason"] == "card declined" and fields["logs"] == "2 lines"
    assert fields["data"] == '{"to": "b@example.com"}' and fields["stack trace"] == "1 entry"
    assert fields["finished"].endswith(f"Z  ({job.finished_on})")
    assert "  RuntimeError: card declined" in out  # the trace's lines, each on its own line

    code, out, _ = run(capsys, "job", "show", jobs["completed"], *common(queue_name, server_url, "--json"))
    assert json.loads(out)["return_value"] == {"sent": "a@example.com"}


def test_control_characters_in_a_job_do_not_reach_the_terminal(capsys, url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    job = queue.add("\x1b[2Jwipe", {"note": "line\nbreak\x07", "\x1b[31m": "red"})
    outputs = []
    for argv in (["jobs", "list"], ["job", "show", job.id]):
        code, out, _ = run(capsys, *argv, *common(queue_name, server_url))
        assert code == 0
        outputs.append(out)
        assert "\x1b" not in out and "\x07" not in out
        assert "\\u001b[2Jwipe" in out
    assert len(outputs[0].splitlines()) == 2  # the newline in the data did not add a row
    code, out, _ = run(capsys, "job", "show", job.id, *common(queue_name, server_url, "--json"))
    assert "\x1b" not in out
    record = json.loads(out)
    assert record["name"] == "\x1b[2Jwipe" and record["data"] == {"note": "line\nbreak\x07", "\x1b[31m": "red"}


def test_job_promote_and_its_refusals(capsys, url_connection, server_url, queue_name, jobs):
    queue = Queue(url_connection, queue_name)
    code, out, _ = run(capsys, "job", "promote", jobs["delayed"], *common(queue_name, server_url, "--json"))
    assert (code, json.loads(out)) == (0, {"id": jobs["delayed"], "promoted": True})
    job = queue.get_job(jobs["delayed"])
    assert job is not None and job.get_state() == "waiting"
    before = queue_snapshot(url_connection, queue_name)
    code, out, err = run(capsys, "job", "promote", jobs["waiting"], *common(queue_name, server_url))
    assert code == 2 and out == "" and "not in the delayed state" in one_line(err)
    assert queue_snapshot(url_connection, queue_name) == before


def test_job_remove(capsys, url_connection, server_url, queue_name, jobs):
    queue = Queue(url_connection, queue_name)
    code, out, _ = run(capsys, "job", "remove", jobs["completed"], *common(queue_name, server_url, "--yes"))
    assert code == 0 and out == f"removed job {jobs['completed']!r} from queue {queue_name!r}\n"
    assert queue.get_job(jobs["completed"]) is None
    code, out, _ = run(capsys, "job", "remove", jobs["waiting"], *common(queue_name, server_url, "--yes", "--json"))
    assert (code, json.loads(out)) == (0, {"id": jobs["waiting"], "removed": True})


@pytest.mark.parametrize("argv", [["job", "show"], ["job", "promote"], ["job", "retry"], ["job", "remove", "--yes"]],
                         ids=" ".join)
def test_an_unknown_job_is_not_found(capsys, url_connection, server_url, queue_name, jobs, argv):
    before = queue_snapshot(url_connection, queue_name)
    code, out, err = run(capsys, *argv[:2], "404", *argv[2:], *common(queue_name, server_url))
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith(f"echomq {argv[0]} {argv[1]}: not found") and "'404'" in line
    assert queue_snapshot(url_connection, queue_name) == before


@pytest.mark.parametrize("argv,names", [
    (["queue", "clean", "--grace", "soon", "--yes"], "--grace"),
    (["queue", "clean", "--grace", "1h", "--state", "sleeping", "--yes"], "--state"),
    (["queue", "clean", "--grace", "1h", "--limit", "-1", "--yes"], "--limit"),
    (["queue", "clean", "--yes"], "--grace"),
    (["queue"], "SUBCOMMAND"),
    (["jobs", "list", "--state", "lost"], "--state"),
    (["jobs", "list", "--limit", "0"], "--limit"),
    (["jobs", "list", "--offset", "-3"], "--offset"),
    (["job", "show"], "id"),
    (["job", "retry", "1", "--state", "waiting"], "--state"),
    (["job", "show", "meta"], "meta"),
    (["workers", "--queue", "a:b"], "queue"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_bad_argument_is_one_line_and_status_2(capsys, url_connection, server_url, queue_name, argv, names):
    if "--queue" not in argv:
        argv = [*argv, "--queue", queue_name]
    code, out, err = run(capsys, *argv, "--redis", server_url)
    assert code == 2 and out == ""
    assert names in one_line(err)


# -- the done criterion: a failed job retried from the command line completes ---------------------------

def test_a_job_failed_for_good_retried_from_the_command_line_completes(url_connection, server_url, queue_name):
    queue = Queue(url_connection, queue_name)
    calls: list[int] = []

    def flaky(job: Any) -> dict[str, Any]:
        calls.append(job.attempts_made)
        if len(calls) == 1:
            raise RuntimeError("gateway down")
        return {"charged": job.data["amount"]}

    job = queue.add("charge", {"amount": 42}, attempts=1)
    with Running(Worker(url_connection, queue_name, flaky)):
        assert wait_until(lambda: job.get_state() == "failed")
        assert job.reload().failed_reason == "gateway down"

    done = echomq("job", "retry", job.id, "--queue", queue_name, "--redis", server_url)
    assert (done.returncode, done.stderr) == (0, ""), done
    assert job.get_state() == "waiting"

    with Running(Worker(url_connection, queue_name, flaky)):
        assert wait_until(lambda: job.get_state() == "completed")
    job.reload()
    assert job.return_value == {"charged": 42} and len(calls) == 2

    # A completed job is not failed: retrying it as failed is refused, with nothing written.
    before = queue_snapshot(url_connection, queue_name)
    again = echomq("job", "retry", job.id, "--queue", queue_name, "--redis", server_url)
    assert again.returncode == 2 and again.stdout == "" and "Traceback" not in again.stderr
    assert queue_snapshot(url_connection, queue_name) == before
