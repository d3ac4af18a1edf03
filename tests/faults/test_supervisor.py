"""``echomq worker`` when its processes are killed or its stop is cut short: nothing is lost.

A worker process killed with SIGKILL is replaced, after a backoff that grows with each death in
a row; a stop whose jobs outlast ``--shutdown-timeout``, or one forced by a second signal, leaves
those jobs active, and the stalled check of another worker (a short ``--lock-duration`` so the
test need not wait 30 s) runs them again. Real subprocesses, on a real Redis and on fakeredis
served over TCP.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import redis

from echomq import Queue, Worker
from echomq.processes.signals import REPEAT_WINDOW_S

from support.sample_jobs import record
from support.worker_cli import WorkerCommand, add_jobs, traces, wait_until

#: Short locks and stalled checks, so a job left behind is taken back within seconds.
QUICK_RECOVERY = ["--lock-duration", "1000", "--stalled-interval", "500"]


def counts(client: redis.Redis, queue: str) -> dict[str, int]:
    return Queue(client, queue).get_job_counts("wait", "active", "completed", "failed")


def alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


def recover_with_another_worker(client: redis.Redis, queue: str) -> None:
    """What another worker on the queue does: its stalled check hands the abandoned jobs out
    again once their locks expired, and it runs them (``record``: quick)."""
    worker = Worker(client, queue, record, lock_duration=1000, stalled_interval=300).start()
    try:
        assert wait_until(lambda: counts(client, queue)["active"] == 0 and counts(client, queue)["wait"] == 0, 20)
    finally:
        worker.close(5)


def test_a_killed_child_is_replaced_with_growing_backoff_and_jobs_keep_completing(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        *QUICK_RECOVERY, queue_name]) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        first = command.children()
        assert len(first) == 2
        os.kill(first[0], signal.SIGKILL)
        assert command.wait_for_line(f"worker process {first[0]} was killed by SIGKILL"), command.stderr
        assert "starting another in 1.0 s" in command.stderr
        assert wait_until(lambda: len(command.children()) == 2 and command.children() != first, 10)
        replacement = next(pid for pid in command.children() if pid not in first)
        assert command.wait_for_line(f"worker process {replacement} started"), command.stderr
        os.kill(replacement, signal.SIGKILL)  # dies again at once: the wait doubles
        assert command.wait_for_line(f"worker process {replacement} was killed by SIGKILL"), command.stderr
        assert "starting another in 2.0 s" in command.stderr
        assert wait_until(lambda: len(command.children()) == 2, 10)
        add_jobs(url_connection, queue_name, 20, seconds=0.02)
        assert wait_until(lambda: counts(url_connection, queue_name)["completed"] == 20, 30), command.stderr
        assert len({t["pid"] for t in traces(url_connection, queue_name)}) == 2
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr


def test_a_child_killed_mid_job_loses_nothing(url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        *QUICK_RECOVERY, queue_name]) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        add_jobs(url_connection, queue_name, 1, seconds=2, started=started)
        assert wait_until(lambda: url_connection.llen(started) == 1), command.stderr
        os.kill(json.loads(url_connection.lindex(started, 0))["pid"], signal.SIGKILL)
        # The surviving (or the replacement) process's stalled check takes the job back and runs it.
        assert wait_until(lambda: counts(url_connection, queue_name)["completed"] == 1, 30), command.stderr
        assert url_connection.llen(started) == 2  # it ran twice: at least once, as promised
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr


@pytest.mark.parametrize("processes", [1, 2])
def test_a_job_longer_than_the_shutdown_timeout_is_left_to_the_stalled_check(
        url_connection: redis.Redis, server_url: str, queue_name: str, processes: int) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes",
                        str(processes), "--shutdown-timeout", "0.5", *QUICK_RECOVERY, queue_name]) as command:
        add_jobs(url_connection, queue_name, 1, seconds=60, started=started)
        assert wait_until(lambda: url_connection.llen(started) == 1), command.stderr
        began = time.monotonic()
        command.signal(signal.SIGTERM)
        assert command.wait(20) == 0, command.stderr  # a graceful stop, bounded by the timeout
        assert time.monotonic() - began < 0.5 + 5, command.stderr  # close's bound, plus the process exit
    assert "1 job(s) still running" in command.stderr  # the Worker says what it left behind
    assert counts(url_connection, queue_name)["active"] == 1
    recover_with_another_worker(url_connection, queue_name)
    assert counts(url_connection, queue_name)["completed"] == 1
    assert [t["pid"] for t in traces(url_connection, queue_name)] == [os.getpid()]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_second_sigint_stops_at_once_and_the_stalled_check_recovers_the_job(
        url_connection: redis.Redis, server_url: str, queue_name: str, processes: int) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes",
                        str(processes), "--shutdown-timeout", "60", *QUICK_RECOVERY, queue_name]) as command:
        if processes > 1:
            assert command.wait_for_line("started: queues", count=processes), command.stderr
        children = command.children()
        add_jobs(url_connection, queue_name, 1, seconds=60, started=started)
        assert wait_until(lambda: url_connection.llen(started) == 1), command.stderr
        command.signal(signal.SIGINT)
        assert command.wait_for_line("stopping"), command.stderr
        time.sleep(REPEAT_WINDOW_S + 0.2)  # deliberate: not the same stop delivered twice
        began = time.monotonic()
        command.signal(signal.SIGINT)
        assert command.wait(10) == 1, command.stderr
        assert time.monotonic() - began < 5  # not the 60 s the job would take
    assert "second stop signal (SIGINT" in command.stderr and "at once" in command.stderr
    assert wait_until(lambda: not any(alive(pid) for pid in children), 5)  # no child left running the job
    assert counts(url_connection, queue_name)["active"] == 1
    recover_with_another_worker(url_connection, queue_name)
    assert counts(url_connection, queue_name)["completed"] == 1


def test_a_job_past_its_hard_time_limit_fails_and_a_fresh_child_takes_its_place(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    """The child's watchdog fails the job at ``--time-limit-ms`` (its reason names the limit,
    no retry left); the thread still stuck in it cannot be stopped, so the child recycles
    itself and the supervisor starts a fresh one at once, which runs the next jobs."""
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        "--time-limit-ms", "300", *QUICK_RECOVERY, queue_name]) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        first = command.children()
        stuck = add_jobs(url_connection, queue_name, 1, name="sleepy", seconds=60)[0]
        assert command.wait_for_line("was recycled; starting a new one"), command.stderr
        job = Queue(url_connection, queue_name).get_job(stuck)
        assert job is not None and job.get_state() == "failed"
        assert job.failed_reason == "hard time limit of 300 ms exceeded"
        assert "ran past its hard time limit of 300 ms" in command.stderr
        assert wait_until(lambda: len(command.children()) == 2 and command.children() != first, 10)
        add_jobs(url_connection, queue_name, 6, name="sleepy", seconds=0.01)
        assert wait_until(lambda: counts(url_connection, queue_name)["completed"] == 6, 20), command.stderr
        assert counts(url_connection, queue_name)["failed"] == 1  # the stuck job failed once, ran once
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr


def test_a_child_that_cannot_fail_its_job_at_the_hard_limit_is_killed_and_the_job_is_not_lost(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    """A child frozen in a job (SIGSTOP: no thread of it runs, as with the GIL held by C code)
    cannot fail the job at its limit: the supervisor, told the limit beforehand, sends SIGTERM
    past it, SIGKILL after the grace, and starts a new child at once. The job's lock expires and
    the stalled check hands it out again (at least once); the next run fails at the limit."""
    started = f"emq:{{{queue_name}}}:test-started"
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        "--time-limit-ms", "1000", *QUICK_RECOVERY, queue_name]) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        job_id = add_jobs(url_connection, queue_name, 1, name="sleepy", seconds=60, started=started)[0]
        assert wait_until(lambda: url_connection.llen(started) == 1, 10), command.stderr
        frozen = json.loads(url_connection.lindex(started, 0))["pid"]
        time.sleep(0.7)  # its main thread reports the limit within half a second
        os.kill(frozen, signal.SIGSTOP)
        assert command.wait_for_line(f"worker process {frozen} is still running a job past its hard time limit"), \
            command.stderr
        assert command.wait_for_line(f"worker process {frozen} did not end after SIGTERM: SIGKILL"), command.stderr
        assert command.wait_for_line(f"worker process {frozen} was killed by SIGKILL; starting a new one"), \
            command.stderr
        job = Queue(url_connection, queue_name).get_job(job_id)
        assert job is not None
        assert wait_until(lambda: job.reload().get_state() == "failed", 20), command.stderr
        job.reload()  # the state was read after the hash: read it again
        assert job.failed_reason == "hard time limit of 1000 ms exceeded"
        runs = [json.loads(raw)["pid"] for raw in url_connection.lrange(started, 0, -1)]
        assert len(runs) == 2 and runs[0] == frozen != runs[1]  # taken back once, by another process
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr
