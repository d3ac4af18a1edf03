"""A graceful stop is graceful however its signal arrives, and a deliberate second one still
forces it; no worker process outlives its supervisor.

Real ``echomq worker`` processes in a session and process group of their own, as systemd and a
container runtime start them, signalled as those do: ``os.killpg`` of the whole group
(systemd's default ``KillMode=control-group``, ``kill -TERM -PGID``), the supervisor alone
(``KillMode=mixed``, ``docker stop``), the same sender twice at once (``timeout``, which
signals its command and then the command's group: a real ``timeout`` runs it here), an
operator's second signal later, SIGQUIT; and the supervisor killed with SIGKILL, its children
left behind. Jobs run in every process when the signal comes; a graceful stop finishes them. On real Redis
only: what a signal means does not depend on the server (tests/faults/test_supervisor.py runs
the stops on fakeredis too).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import redis

from echomq import Queue
from echomq.processes.signals import REPEAT_WINDOW_S

from support.worker_cli import WorkerCommand, add_jobs, traces, wait_until

pytestmark = [pytest.mark.real_only]

#: Short locks and stalled checks, so a job a forced stop left behind is taken back in seconds.
QUICK_RECOVERY = ["--lock-duration", "1000", "--stalled-interval", "500"]

#: How long each job runs: long enough that every signal lands while the jobs run.
JOB_S = 2.0


def counts(client: redis.Redis, queue: str) -> dict[str, int]:
    return Queue(client, queue).get_job_counts("wait", "active", "completed")


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


def pool(redis_url: str, queue: str, processes: int, *extra: str, prefix: tuple[str, ...] = ()) -> WorkerCommand:
    """``echomq worker`` with two jobs' worth of slots: two processes of one, or one of two."""
    concurrency = "1" if processes > 1 else "2"
    return WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", redis_url, "--processes",
                          str(processes), "--concurrency", concurrency, "--shutdown-timeout", "30", *QUICK_RECOVERY,
                          *extra, queue], new_session=True, prefix=prefix)


def started(client: redis.Redis, key: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in client.lrange(key, 0, -1)]


def two_jobs_running(client: redis.Redis, queue: str, command: WorkerCommand) -> str:
    key = f"emq:{{{queue}}}:test-started"
    add_jobs(client, queue, 2, seconds=JOB_S, started=key)
    assert wait_until(lambda: client.llen(key) == 2), command.stderr
    return key


#: Between the two deliveries of one stop: well inside REPEAT_WINDOW_S, and long enough for each
#: process to take the first before the second comes (two at the same instant merge into one).
TWICE_APART_S = 0.1


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("how", ["group", "supervisor", "twice", "group-twice"])
def test_a_stop_signal_stops_gracefully_however_it_arrives(
        real_connection: redis.Redis, redis_url: str, queue_name: str, processes: int, how: str) -> None:
    with pool(redis_url, queue_name, processes) as command:
        two_jobs_running(real_connection, queue_name, command)
        began = time.monotonic()
        deliver = command.killpg if how.startswith("group") else command.signal
        deliver(signal.SIGTERM)  # the group: each process gets it, and a supervisor's stop on top
        if how.endswith("twice"):  # one sender, twice at once
            time.sleep(TWICE_APART_S)
            deliver(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr
        took = time.monotonic() - began
    assert counts(real_connection, queue_name) == {"wait": 0, "active": 0, "completed": 2}, command.stderr
    assert len(traces(real_connection, queue_name)) == 2
    assert took < JOB_S + 5, command.stderr
    assert "stopping at once" not in command.stderr and "killing" not in command.stderr
    assert "still running" not in command.stderr


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("second", ["group", "supervisor"])
def test_a_deliberate_second_signal_stops_at_once(
        real_connection: redis.Redis, redis_url: str, queue_name: str, processes: int, second: str) -> None:
    with pool(redis_url, queue_name, processes, "--shutdown-timeout", "60") as command:
        two_jobs_running(real_connection, queue_name, command)
        children = command.children()
        command.killpg(signal.SIGTERM)
        assert command.wait_for_line("stopping"), command.stderr
        time.sleep(REPEAT_WINDOW_S + 0.2)  # an operator's second, not the first one delivered twice
        began = time.monotonic()
        command.killpg(signal.SIGTERM) if second == "group" else command.signal(signal.SIGTERM)
        assert command.wait(10) == 1, command.stderr
        assert time.monotonic() - began < 5, command.stderr  # not the jobs' time
        assert wait_until(lambda: not any(alive(pid) for pid in children), 5)
    assert "second stop signal (SIGTERM" in command.stderr, command.stderr
    assert counts(real_connection, queue_name)["completed"] == 0  # left active, to the stalled check


@pytest.mark.parametrize("processes", [1, 2])
def test_sigquit_stops_at_once(real_connection: redis.Redis, redis_url: str, queue_name: str, processes: int) -> None:
    with pool(redis_url, queue_name, processes, "--shutdown-timeout", "60") as command:
        two_jobs_running(real_connection, queue_name, command)
        command.signal(signal.SIGQUIT)
        assert command.wait(10) == 1, command.stderr
    assert "SIGQUIT" in command.stderr and "at once" in command.stderr
    assert counts(real_connection, queue_name)["active"] == 2


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
@pytest.mark.parametrize("processes", [1, 2])
def test_under_timeout_the_jobs_finish(real_connection: redis.Redis, redis_url: str, queue_name: str,
                                       processes: int) -> None:
    """``timeout`` sends its signal to the command, then to the command's process group (the
    supervisor gets it twice, from one sender, at once); ``--preserve-status`` gives back the
    command's own exit status."""
    key = f"emq:{{{queue_name}}}:test-started"
    add_jobs(real_connection, queue_name, 2, seconds=JOB_S + 1, started=key)
    with pool(redis_url, queue_name, processes, prefix=("timeout", "--preserve-status", "-s", "TERM",
                                                          str(JOB_S))) as command:
        assert wait_until(lambda: real_connection.llen(key) == 2, 10), command.stderr
        assert command.wait(30) == 0, command.stderr
    assert counts(real_connection, queue_name) == {"wait": 0, "active": 0, "completed": 2}, command.stderr
    assert "stopping" in command.stderr and "stopping at once" not in command.stderr and "killing" not in command.stderr


@pytest.mark.parametrize("running", [False, True], ids=["idle", "running-a-job"])
def test_no_worker_process_outlives_a_killed_supervisor(real_connection: redis.Redis, redis_url: str,
                                                        queue_name: str, running: bool) -> None:
    """Idle, each process exits within 2 s of its supervisor's SIGKILL; one running a job stops
    taking jobs at once, finishes that one, and exits."""
    with pool(redis_url, queue_name, 2) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        children = command.children()
        assert len(children) == 2
        key = f"emq:{{{queue_name}}}:test-started"
        if running:
            add_jobs(real_connection, queue_name, 1, seconds=JOB_S, started=key)
            assert wait_until(lambda: real_connection.llen(key) == 1), command.stderr
        os.kill(command.pid, signal.SIGKILL)
        killed = time.monotonic()
        command.wait(10)
        if running:
            add_jobs(real_connection, queue_name, 4, seconds=0.1, started=key)  # nobody may take these
        busy = [entry["pid"] for entry in started(real_connection, key)][:1]
        idle = [pid for pid in children if pid not in busy]
        assert wait_until(lambda: not any(alive(pid) for pid in idle), 5)
        assert time.monotonic() - killed < 2.0 + 0.5, "an idle process outlived its supervisor by over 2 s"
        assert wait_until(lambda: not any(alive(pid) for pid in children), JOB_S + 5)
    if running:
        assert counts(real_connection, queue_name) == {"wait": 4, "active": 0, "completed": 1}
        assert real_connection.llen(key) == 1  # no job started after the supervisor died
    assert "is gone" in command.stderr, command.stderr
