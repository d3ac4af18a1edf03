"""``echomq worker --listener`` and ``--name`` as an operator uses them, and the ``listeners=`` /
``name=`` a framework's command passes in: real subprocesses on a real Redis and on fakeredis
served over TCP, with the sample application (tests/support/sample_jobs.py).

A listener is an instance (each process has its copy), a class or a factory (called once per
worker process); a bad one is one line and status 2, before any worker starts. Each worker
process's Workers are named (``{host}:{pid}`` by default) and listed by ``Queue.get_workers()``
from their start, even when every slot is busy with a job that began at once.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import Queue

from support.queue_keys import SCAN_COUNT
from support.sample_jobs import listened_key
from support.servers import free_port
from support.worker_cli import WorkerCommand, add_jobs, wait_until

LISTENERS = ["--listener", "support.sample_jobs:LISTENER", "--listener", "support.sample_jobs:RecordingListener",
             "--listener", "support.sample_jobs:listener_factory"]

FRAMEWORK = ["-c", "import sys; from support.sample_jobs import framework_command; "
                   "sys.exit(framework_command(sys.argv[1:]))"]


def listened(client: redis.Redis, queue: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in client.lrange(listened_key(queue), 0, -1)]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def worker_names(client: redis.Redis, queue: str) -> set[str]:
    return {worker["name"] for worker in Queue(client, queue).get_workers()}


@pytest.mark.parametrize("processes", [1, 2])
def test_every_kind_of_listener_is_told_in_every_process(url_connection: redis.Redis, server_url: str,
                                                         queue_name: str, processes: int) -> None:
    add_jobs(url_connection, queue_name, 30, name="sleepy", seconds=0.02)
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--burst", "--processes",
                        str(processes), *LISTENERS, queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    told = listened(url_connection, queue_name)
    assert Counter(entry["tag"] for entry in told) == {"instance": 30, "class": 30, "factory": 30}
    for tag in ("instance", "class", "factory"):  # one listener of each kind per worker process
        per_pid = {(entry["pid"], entry["instance"]) for entry in told if entry["tag"] == tag}
        assert len(per_pid) == len({pid for pid, _ in per_pid}), (tag, per_pid)
    assert len({entry["pid"] for entry in told}) == processes


@pytest.mark.parametrize("processes", [1, 2])
def test_a_hosts_listeners_and_name_come_with_the_command_lines(url_connection: redis.Redis, server_url: str,
                                                                 queue_name: str, processes: int) -> None:
    add_jobs(url_connection, queue_name, 2 * processes, name="sleepy", seconds=0.6)
    env = {"REDIS_URL": server_url, "SAMPLE_HOST_LISTENER": "1", "SAMPLE_WORKER_NAME": "host-{process}",
           "SAMPLE_SETUP_LOG": os.devnull}
    argv = ["--processes", str(processes), "--listener", "support.sample_jobs:listener_factory", queue_name]
    with WorkerCommand(argv, program=FRAMEWORK, queues=[queue_name], env=env) as command:
        expected = {f"host-{n}" for n in range(1, processes + 1)}
        assert wait_until(lambda: worker_names(url_connection, queue_name) == expected), (
            worker_names(url_connection, queue_name), command.stderr)
        told = 2 * processes  # two listeners for each process's first job
        assert wait_until(lambda: len(listened(url_connection, queue_name)) >= told, 30), command.stderr
        command.signal()
        assert command.wait(30) == 0, command.stderr
    assert {entry["tag"] for entry in listened(url_connection, queue_name)} == {"host", "factory"}
    add_jobs(url_connection, queue_name, 1, name="sleepy", seconds=0.6)  # for the next run to be seen at
    with WorkerCommand(["--name", "cli-wins", "--burst", queue_name], program=FRAMEWORK, queues=[queue_name],
                       env=env) as command:
        assert wait_until(lambda: worker_names(url_connection, queue_name) == {"cli-wins"}), command.stderr
        assert command.wait(60) == 0, command.stderr


@pytest.mark.parametrize("argv, names", [
    (["--listener", "support.no_such_module:X"], "--listener 'support.no_such_module:X': no module named"),
    (["--listener", "support.sample_jobs:missing"], "--listener 'support.sample_jobs:missing': support.sample_jobs "
                                                    "has no 'missing'"),
    (["--listener", "support.sample_jobs"], "--listener 'support.sample_jobs': give MODULE:NAME"),
    (["--listener", "support.sample_jobs:NOT_A_FUNCTION"], "--listener 'support.sample_jobs:NOT_A_FUNCTION' is not "
                                                           "a WorkerListener, a WorkerListener class or a function"),
    (["--listener", "support.sample_jobs:NotAListener"], "is a class but not a WorkerListener subclass"),
    (["--name", "two words"], "Redis refuses [' '] in a client name"),
    (["--name", "w-{nope}"], "unknown field(s) 'nope'"),
    (["--name", "w-{"], "write a brace as"),
    (["--name", ""], "worker name: empty"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_listener_or_name_is_one_line_and_status_2(argv: list[str], names: str) -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", f"redis://127.0.0.1:{free_port()}/0",
                        *argv, "q"]) as command:
        assert command.wait(30) == 2
    assert names in one_line(command.stderr), command.stderr


@pytest.mark.parametrize("processes", [1, 2])
def test_a_factory_that_returns_no_listener_starts_no_worker(url_connection: redis.Redis, server_url: str,
                                                             queue_name: str, processes: int) -> None:
    add_jobs(url_connection, queue_name, 3)
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", server_url, "--processes",
                        str(processes), "--listener", "support.sample_jobs:not_a_listener_factory",
                        queue_name]) as command:
        assert command.wait(30) == (2 if processes == 1 else 1), command.stderr
    shown = "--listener 'support.sample_jobs:not_a_listener_factory' returned 42, not a WorkerListener"
    assert shown in command.stderr
    assert Queue(url_connection, queue_name).get_job_counts("wait")["wait"] == 3  # nothing ran
    if processes == 1:
        assert shown in one_line(command.stderr.split("\n", 1)[1])  # after the start-up line: one line


@pytest.mark.parametrize("processes", [1, 2])
def test_workers_busy_from_their_start_are_listed_under_their_names(
        url_connection: redis.Redis, server_url: str, queue_name: str, processes: int) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    add_jobs(url_connection, queue_name, processes * 2, name="sleepy", seconds=3, started=started)  # before the start
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes",
                        str(processes), "--name", "mail-{process}@{host}.{pid}", queue_name]) as command:
        assert wait_until(lambda: url_connection.llen(started) == processes), command.stderr
        pids = sorted(json.loads(raw)["pid"] for raw in url_connection.lrange(started, 0, -1))
        host = socket.gethostname()
        listed = worker_names(url_connection, queue_name)
        slots = {name.split("@")[0] for name in listed}
        assert slots == {f"mail-{n}" for n in range(1, processes + 1)}, listed  # while every slot is busy
        assert {int(name.rpartition(".")[2]) for name in listed} == set(pids)
        assert all(f"@{host}." in name for name in listed)
        command.signal()
        assert command.wait(30) == 0, command.stderr


def test_the_default_name_is_host_and_pid(url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", server_url, queue_name]) as command:
        expected = {f"{socket.gethostname()}:{command.pid}"}
        assert wait_until(lambda: worker_names(url_connection, queue_name) == expected), (
            worker_names(url_connection, queue_name), command.stderr)
        command.signal()
        assert command.wait(30) == 0, command.stderr


@pytest.mark.real_only
def test_a_busy_worker_whose_connection_is_killed_is_listed_again(real_connection: redis.Redis, redis_url: str,
                                                                  queue_name: str) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    add_jobs(real_connection, queue_name, 1, name="sleepy", seconds=3, started=started)
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", redis_url, "--name", "kept",
                        queue_name]) as command:
        assert wait_until(lambda: real_connection.llen(started) == 1), command.stderr
        assert wait_until(lambda: worker_names(real_connection, queue_name) == {"kept"}), command.stderr
        [listed] = Queue(real_connection, queue_name).get_workers()
        real_connection.execute_command("CLIENT", "KILL", "ID", listed["id"])
        killed = time.monotonic()
        assert wait_until(lambda: {w["id"] for w in Queue(real_connection, queue_name).get_workers()} - {listed["id"]},
                          5), command.stderr
        assert time.monotonic() - killed < 2.0  # the job still runs: the fetcher looks every half second
        assert real_connection.llen(started) == 1
        command.signal()
        assert command.wait(30) == 0, command.stderr


@pytest.mark.parametrize("framework", ["django", "flask"])
def test_the_framework_commands_take_listeners(url_connection: redis.Redis, server_url: str, framework: str,
                                               tmp_path: Path) -> None:
    """``manage.py echomq_worker`` and ``flask echomq worker`` take ``--listener`` as ``echomq
    worker`` does (the same parser: echomq.processes), with the project's own jobs."""
    prefix = f"fw{uuid.uuid4().hex[:8]}"
    tests = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith(("FLASK_", "SHOP_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tests), env.get("PYTHONPATH")]))
    options = ["--burst", "--listener", "support.sample_jobs:listener_factory"]
    if framework == "django":
        queue, job = "orders", "sweep_carts"
        env.update(SHOP_REDIS_URL=server_url, SHOP_ECHOMQ_PREFIX=prefix, SHOP_DB=str(tmp_path / "shop.sqlite3"))
        argv, cwd = [sys.executable, "manage.py", "echomq_worker", queue, *options], tests / "django_project"
    else:
        queue, job = "reports", "build_report"
        env.update(FLASK_ECHOMQ_URL=server_url, FLASK_ECHOMQ_PREFIX=prefix)
        argv, cwd = [sys.executable, "-m", "flask", "--app", "flask_app", "echomq", "worker", queue, *options], tests
    Queue(url_connection, queue, prefix=prefix).add(job, {})
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        told = [json.loads(raw) for raw in url_connection.lrange(listened_key(queue, prefix), 0, -1)]
        assert [entry["tag"] for entry in told] == ["factory"], done.stderr
    finally:
        for key in url_connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT):
            url_connection.delete(key)
