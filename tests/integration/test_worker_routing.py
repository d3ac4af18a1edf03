"""A Worker whose processor is a mapping of job name -> function: each job runs its name's
function; a job whose name nothing handles fails for good, saying so, and leaves a log line."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, Queue, Worker
from echomq.protocol.keys import QueueKeys

from support.workers import Running, wait_until


def test_each_job_runs_the_function_of_its_name(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    email = queue.add("email", {"to": "a@b.c"})
    report = queue.add("report", {"rows": 2})
    worker = Worker(connection, queue_name, {"email": lambda job: f"sent to {job.data['to']}",
                                             "report": lambda job: job.data["rows"] * 10}, drain_delay=0.2)
    with Running(worker):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 2)
    assert queue.get_job(email.id).return_value == "sent to a@b.c"  # type: ignore[union-attr]
    assert queue.get_job(report.id).return_value == 20  # type: ignore[union-attr]


def test_a_job_no_function_handles_fails_at_once_naming_its_name_and_the_names_handled(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(connection, queue_name)
    stray = queue.add("invoice", {"n": 1}, attempts=3, backoff=10)  # retries would not help: none is made
    forged = queue.add("x'\nERROR forged line " + "y" * 300)
    worker = Worker(connection, queue_name, {"report": lambda job: None, "email": lambda job: None},
                    drain_delay=0.2)
    with caplog.at_level(logging.WARNING, logger="echomq"), Running(worker):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).failed) == 2)
    failed = queue.get_job(stray.id)
    assert failed is not None and failed.attempts_made == 1
    assert failed.failed_reason == (f"no processor for job name 'invoice' in queue {queue_name!r} "
                                    "(handled: email, report)")
    reason = queue.get_job(forged.id).failed_reason  # type: ignore[union-attr]
    assert reason is not None and "\n" not in reason and reason.startswith(r"""no processor for job name "x'\nERROR""")
    assert "y" * 101 not in reason and "...in queue" not in reason and "... in queue" in reason
    lines = [r for r in caplog.records if f"job {stray.id} " in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR
    assert lines[0].exc_info is None  # no function of the user's ran: no traceback to show
    assert "no processor for job name 'invoice'" in lines[0].getMessage() and "no retry" in lines[0].getMessage()


@pytest.mark.parametrize(("processor", "message"), [
    ({}, "map at least one job name"),
    ({"email": "send_email"}, "each must map to a callable.*'email'"),
    ({1: lambda job: None}, "job names must be str.*bad entries: {1:"),
    ("send_email", "must be callable, or a mapping"),
])
def test_a_processor_mapping_is_checked_when_the_worker_is_built(connection: redis.Redis, queue_name: str,
                                                                 processor: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Worker(connection, queue_name, processor)


def test_a_mapping_is_copied_when_the_worker_is_built(connection: redis.Redis, queue_name: str) -> None:
    routes = {"email": lambda job: "first"}
    worker = Worker(connection, queue_name, routes, drain_delay=0.2)
    routes["email"] = lambda job: "changed later"
    job = Queue(connection, queue_name).add("email")
    with Running(worker):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 1)
    assert Queue(connection, queue_name).get_job(job.id).return_value == "first"  # type: ignore[union-attr]
