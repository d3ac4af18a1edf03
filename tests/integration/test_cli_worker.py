"""``echomq worker`` as an operator runs it: a real subprocess on a real Redis and on fakeredis
served over TCP, with the sample application of tests/support/sample_jobs.py.

What a user checks: the jobs are done (the queue's counts, and the trace each job leaves with the
pid that ran it), the exit status, and the lines on stderr. The kills and forced stops are in
tests/faults/test_supervisor.py.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from echomq import Queue

from support.queue_keys import SCAN_COUNT
from support.servers import free_port
from support.worker_cli import WorkerCommand, add_jobs, traces, wait_until


def completed(client: redis.Redis, queue: str) -> int:
    return Queue(client, queue).get_job_counts("completed")["completed"]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_processor_on_several_queues_in_burst_does_every_job_and_exits_0(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    first, second = queue_name, f"{queue_name}-b"
    add_jobs(url_connection, first, 30)
    add_jobs(url_connection, second, 10)
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", server_url, "--burst",
                        "--concurrency", "3", first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (completed(url_connection, first), completed(url_connection, second)) == (30, 10)
    assert {t["pid"] for t in traces(url_connection, first) + traces(url_connection, second)} == {command.pid}
    startup = next(line for line in command.lines if "echomq worker: queues" in line)
    assert f"queues {first}, {second}; concurrency 3 per queue; processes 1; burst" in startup
    assert f"pid {command.pid}" in startup
    for key in url_connection.scan_iter(f"emq:{{{second}}}:*", count=SCAN_COUNT):
        url_connection.delete(key)


def test_app_runs_the_registry_queues_routed_by_name(url_connection: redis.Redis, server_url: str,
                                                     queue_name: str) -> None:
    first, second = queue_name, f"{queue_name}-b"
    add_jobs(url_connection, first, 5, name="record")
    add_jobs(url_connection, second, 3, name="sleepy", seconds=0.01)
    only_first = ["--app", "support.sample_jobs:registry", "--redis", server_url, "--burst", first]
    with WorkerCommand(only_first, queues=[first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (completed(url_connection, first), completed(url_connection, second)) == (5, 0)  # only the one named
    with WorkerCommand(["--app", "support.sample_jobs:registry", "--redis", server_url, "--burst"],
                       queues=[first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert completed(url_connection, second) == 3
    assert {t["name"] for t in traces(url_connection, second)} == {"sleepy"}
    for key in url_connection.scan_iter(f"emq:{{{second}}}:*", count=SCAN_COUNT):
        url_connection.delete(key)


def test_a_job_added_by_a_job_to_a_queue_already_idle_is_still_done_in_burst(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    # The sleepy job keeps the first queue busy while the second goes idle; it then adds a job
    # there (through the sample app's "chain" datum): the burst runs another round for it.
    first, second = queue_name, f"{queue_name}-b"
    add_jobs(url_connection, first, 1, name="sleepy", seconds=0.5, chain=second)
    with WorkerCommand(["--app", "support.sample_jobs:registry", "--redis", server_url, "--burst"],
                       queues=[first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (completed(url_connection, first), completed(url_connection, second)) == (1, 1)
    for key in url_connection.scan_iter(f"emq:{{{second}}}:*", count=SCAN_COUNT):
        url_connection.delete(key)


def test_two_processes_both_take_jobs_and_stop_on_sigterm(url_connection: redis.Redis, server_url: str,
                                                          queue_name: str) -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        queue_name]) as command:
        assert command.wait_for_line("started: queues", count=2), command.stderr
        add_jobs(url_connection, queue_name, 20, seconds=0.05)
        assert wait_until(lambda: completed(url_connection, queue_name) == 20, 60), command.stderr
        pids = Counter(t["pid"] for t in traces(url_connection, queue_name))
        assert len(pids) == 2 and command.pid not in pids, pids  # the supervisor runs no job itself
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr
    assert not any(" died " in line or "killed" in line for line in command.lines), command.stderr


def test_burst_with_two_processes_exits_0_once_every_child_found_the_queue_idle(
        url_connection: redis.Redis, server_url: str, queue_name: str) -> None:
    add_jobs(url_connection, queue_name, 40, name="sleepy", seconds=0.02)
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes", "2",
                        "--burst", queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    assert completed(url_connection, queue_name) == 40
    assert len({t["pid"] for t in traces(url_connection, queue_name)}) == 2
    assert command.stderr.count("finished: its queues are idle") == 2
    assert "starting another" not in command.stderr  # a child done with its burst is not replaced


@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_lets_the_running_jobs_finish_within_the_shutdown_timeout(
        url_connection: redis.Redis, server_url: str, queue_name: str, processes: int) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--processes",
                        str(processes), "--shutdown-timeout", "10", queue_name]) as command:
        add_jobs(url_connection, queue_name, processes, seconds=1.5, started=started)  # one per process
        assert wait_until(lambda: url_connection.llen(started) == processes), command.stderr
        add_jobs(url_connection, queue_name, 3)  # waiting behind them: not taken once the stop began
        began = time.monotonic()
        command.signal(signal.SIGTERM)
        assert command.wait(15) == 0, command.stderr
        took = time.monotonic() - began
    assert took < 10, took
    assert completed(url_connection, queue_name) == processes  # the running jobs finished ...
    assert Queue(url_connection, queue_name).get_job_counts("wait")["wait"] == 3  # ... and no other began


def test_max_jobs_per_child_recycles_the_process(url_connection: redis.Redis, server_url: str,
                                                 queue_name: str) -> None:
    add_jobs(url_connection, queue_name, 24, name="sleepy", seconds=0.01)
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", server_url, "--max-jobs-per-child",
                        "5", "--burst", queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    assert completed(url_connection, queue_name) == 24
    per_pid = Counter(t["pid"] for t in traces(url_connection, queue_name))
    assert len(per_pid) >= 3 and max(per_pid.values()) <= 8, per_pid  # 5, and a fetch-next or two may overlap
    assert command.stderr.count("was recycled; starting a new one") >= len(per_pid) - 1
    assert "starting another in" not in command.stderr  # a recycle is not a death: no backoff


def test_max_memory_per_child_recycles_a_leaking_process(url_connection: redis.Redis, server_url: str,
                                                         queue_name: str) -> None:
    add_jobs(url_connection, queue_name, 12, name="leaky", mib=24, seconds=0.05)
    with WorkerCommand(["--processor", "support.sample_jobs:leaky", "--redis", server_url, "--max-memory-per-child",
                        "110", "--burst", queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    assert completed(url_connection, queue_name) == 12
    assert len({t["pid"] for t in traces(url_connection, queue_name)}) >= 3
    assert re.search(r"uses \d+ MiB, over --max-memory-per-child 110: recycling", command.stderr), command.stderr


def test_json_log_lines_parse_and_carry_the_job_lines(url_connection: redis.Redis, server_url: str,
                                                      queue_name: str) -> None:
    add_jobs(url_connection, queue_name, 1, name="record")
    add_jobs(url_connection, queue_name, 1, name="boom")
    with WorkerCommand(["--app", "support.sample_jobs:registry", "--redis", server_url, "--burst", "--log-format",
                        "json", "--log-level", "debug"], queues=[queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    entries = [json.loads(line) for line in command.lines]
    assert all({"time", "level", "logger", "pid", "message"} <= set(entry) for entry in entries)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]) for entry in entries)
    ours = [e for e in entries if e["logger"].startswith("echomq.worker")]
    started = [e for e in ours if e["level"] == "DEBUG" and "started" in e["message"]]
    done = [e for e in ours if e["level"] == "INFO" and re.search(r"job 1 \('record'\) completed in [\d.]+ ms",
                                                                  e["message"])]
    failed = [e for e in ours if e["level"] == "ERROR" and "job 2 ('boom') failed" in e["message"]]
    assert len(started) == 2 and len(done) == 1 and len(failed) == 1, entries
    assert "ValueError: boom in job 2" in failed[0]["exc_info"] and failed[0]["pid"] == command.pid


def test_text_log_lines_carry_time_level_logger_and_pid(url_connection: redis.Redis, server_url: str,
                                                        queue_name: str) -> None:
    add_jobs(url_connection, queue_name, 1)
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", server_url, "--burst",
                        queue_name]) as command:
        assert command.wait(60) == 0, command.stderr
    line = next(line for line in command.lines if "completed in" in line)
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT[\d:.]+Z INFO echomq\.worker\.processing \[{command.pid}\] worker "
                        rf"{re.escape(queue_name)}: job 1 \('record'\) completed in [\d.]+ ms", line), line
    assert not any("DEBUG" in line for line in command.lines)  # INFO by default


@pytest.mark.real_only  # fakeredis accepts any login
def test_a_refused_login_is_one_line_and_status_1_without_the_password(redis_url: str, queue_name: str) -> None:
    # The test server has no user "nobody": AUTH is refused before anything starts.
    url = redis_url.replace("redis://", "redis://nobody:s3cret@")
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", url, queue_name]) as command:
        assert command.wait(30) == 1
    line = one_line(command.stderr)
    assert line.startswith("echomq worker: Redis at redis://nobody:***@") and "refused the login" in line, line
    assert "s3cret" not in command.stderr


@pytest.mark.parametrize("processes", [1, 2])
def test_a_framework_command_reuses_the_options_with_its_registry_and_child_setup(
        url_connection: redis.Redis, server_url: str, queue_name: str, processes: int, tmp_path: Path) -> None:
    # What the Django and Flask commands build on: add_worker_arguments(app_option=False) and
    # run_worker(registry=..., child_setup=...); the setup runs in every process that runs jobs.
    setups = tmp_path / "setups"
    add_jobs(url_connection, queue_name, 20, name="sleepy", seconds=0.02)
    program = ["-c", "import sys; from support.sample_jobs import framework_command; "
                     "sys.exit(framework_command(sys.argv[1:]))"]
    with WorkerCommand(["--processes", str(processes), "--burst", queue_name], program=program, queues=[queue_name],
                       env={"REDIS_URL": server_url, "SAMPLE_SETUP_LOG": str(setups)}) as command:
        assert command.wait(60) == 0, command.stderr
    assert completed(url_connection, queue_name) == 20
    setup_pids = [int(pid) for pid in setups.read_text().split()]
    assert sorted(setup_pids) == sorted({t["pid"] for t in traces(url_connection, queue_name)})
    assert len(setup_pids) == processes and (command.pid in setup_pids) == (processes == 1)


# -- refusals: one line, nothing started ----------------------------------------------------------------

@pytest.mark.parametrize("argv, names", [
    (["--processor", "support.no_such_module:record", "q"], "no module named 'support.no_such_module'"),
    (["--processor", "support.sample_jobs:missing", "q"], "has no 'missing'"),
    (["--processor", "support.sample_jobs:NOT_A_FUNCTION", "q"], "is not callable (it is 42)"),
    (["--processor", "support.sample_jobs", "q"], "give MODULE:NAME"),
    (["--processor", "support.sample_jobs:record"], "needs at least one QUEUE"),
    (["--app", "support.sample_jobs:record"], "not an echomq JobRegistry"),
    (["--app", "support.sample_jobs:registry", "not-in-registry"], "'not-in-registry' have no job in the registry"),
    (["--app", "support.sample_jobs:registry", "--processor", "support.sample_jobs:record"], "not allowed with"),
    (["q"], "one of the arguments --processor --app is required"),
    (["--processor", "support.sample_jobs:record", "--concurrency", "0", "q"], "--concurrency"),
    (["--processor", "support.sample_jobs:record", "--processes", "two", "q"], "--processes"),
    (["--processor", "support.sample_jobs:record", "--shutdown-timeout", "-1", "q"], "--shutdown-timeout"),
    (["--processor", "support.sample_jobs:record", "--log-format", "xml", "q"], "--log-format"),
    (["--processor", "support.sample_jobs:record", "--log-level", "loud", "q"], "--log-level"),
    (["--processor", "support.sample_jobs:record", "a:b"], "queue"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_argument_or_spec_is_one_line_and_status_2(argv: list[str], names: str) -> None:
    # Redis is never reached: each is refused before the command connects.
    with WorkerCommand(["--redis", f"redis://127.0.0.1:{free_port()}/0", *argv], queues=["sample-orders"]) as command:
        assert command.wait(30) == 2
    assert names in one_line(command.stderr), command.stderr


@pytest.mark.parametrize("source", [["--processor", "support.sample_jobs:record", "orders"],
                                    ["--app", "support.sample_jobs:registry"]], ids=["processor", "app"])
@pytest.mark.parametrize("processes", ["1", "2"])
def test_an_unreachable_redis_at_start_is_one_line_and_status_1(source: list[str], processes: str) -> None:
    port = free_port()
    with WorkerCommand([*source, "--redis", f"redis://app:s3cret@127.0.0.1:{port}/0", "--processes", processes],
                       queues=["orders"]) as command:
        assert command.wait(30) == 1
    line = one_line(command.stderr)
    assert line.startswith("echomq worker: cannot reach Redis at") and f"127.0.0.1:{port}" in line, line
    assert "s3cret" not in command.stderr
