"""The Worker's log lines, as an operator reads them: a job's start at DEBUG, its success at INFO
with how long it ran, a failure at WARNING when a retry is ahead and at ERROR when it is final,
both with the traceback; the job's name quoted, never its data."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import pytest
import redis

from echomq import Queue, Worker
from echomq.protocol.keys import QueueKeys

from support.workers import Running, wait_until

PROCESSING_LOG = "echomq.worker.processing"
SECRET = "4111-1111-1111-1111"


def _lines(caplog: pytest.LogCaptureFixture, job_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == PROCESSING_LOG and f"job {job_id} " in r.getMessage()]


def test_a_job_that_succeeds_logs_its_start_at_debug_and_its_duration_at_info(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    job = Queue(connection, queue_name).add("email", {"card": SECRET}, attempts=3)

    def send(job: Any) -> str:
        time.sleep(0.05)
        return "sent"

    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(Worker(connection, queue_name, send)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 1)
    start, done = _lines(caplog, job.id)
    assert start.levelno == logging.DEBUG
    assert start.getMessage() == f"worker {queue_name}: job {job.id} ('email') started, attempt 1 of 3"
    assert done.levelno == logging.INFO and done.exc_info is None
    found = re.fullmatch(rf"worker {queue_name}: job {job.id} \('email'\) completed in ([0-9.]+) ms", done.getMessage())
    assert found is not None and 50 <= float(found[1]) < 5000
    assert SECRET not in caplog.text


def test_a_failure_logs_a_warning_with_a_retry_ahead_and_an_error_when_final_both_with_the_traceback(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    job = Queue(connection, queue_name).add("charge", {"card": SECRET}, attempts=2, backoff=10)

    def charge_the_card(job: Any) -> None:
        raise ValueError(f"card declined on attempt {job.attempts_made + 1}")

    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(Worker(connection, queue_name, charge_the_card)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).failed) == 1)
    failures = [r for r in _lines(caplog, job.id) if r.levelno >= logging.WARNING]
    assert [r.levelno for r in failures] == [logging.WARNING, logging.ERROR]
    retried, final = failures
    assert retried.getMessage() == (f"worker {queue_name}: job {job.id} ('charge') failed on attempt 1 of 2: "
                                    "ValueError: card declined on attempt 1; retrying in 10 ms")
    assert final.getMessage() == (f"worker {queue_name}: job {job.id} ('charge') failed on attempt 2 of 2: "
                                  "ValueError: card declined on attempt 2; no retry: the job failed")
    for record, attempt in ((retried, 1), (final, 2)):
        assert record.exc_info is not None and record.exc_info[0] is ValueError
        assert str(record.exc_info[1]) == f"card declined on attempt {attempt}"
    assert "in charge_the_card" in caplog.text  # the traceback reaches the processor's frame
    assert SECRET not in caplog.text


def test_with_logging_left_at_warning_a_success_leaves_no_line(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(connection, queue_name)
    ok = queue.add("email")
    broken = queue.add("report")

    def process(job: Any) -> None:
        if job.name == "report":
            raise RuntimeError("no data")

    with caplog.at_level(logging.WARNING, logger="echomq"), Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 1
                          and connection.zcard(QueueKeys(queue_name).failed) == 1)
    assert _lines(caplog, ok.id) == []
    [line] = _lines(caplog, broken.id)
    assert line.levelno == logging.ERROR and "RuntimeError: no data" in line.getMessage()


def test_a_job_that_never_ran_logs_its_failure_without_a_traceback(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    job = Queue(connection, queue_name).add("import", {"rows": "x" * 2000})
    ran: list[str] = []
    worker = Worker(connection, queue_name, lambda job: ran.append(job.id), max_data_bytes=1000)
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(worker):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).failed) == 1)
    assert ran == []
    [line] = [r for r in _lines(caplog, job.id) if r.levelno >= logging.WARNING]
    assert line.levelno == logging.ERROR and line.exc_info is None  # our refusal: no traceback to show
    assert "1000" in line.getMessage() and "no retry" in line.getMessage()


def test_a_long_or_multiline_job_name_is_quoted_and_shortened(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    name = "evil\nINFO worker: all good " + "z" * 200
    job = Queue(connection, queue_name).add(name)
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(Worker(connection, queue_name, lambda job: None)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 1)
    lines = _lines(caplog, job.id)
    assert len(lines) == 2
    for line in lines:
        message = line.getMessage()
        assert "\n" not in message and "'evil\\nINFO worker: all good " in message
        assert "z" * 100 not in message and "..." in message
