"""eager(): jobs run the moment they are added, recorded as a worker records them, and the
Queue is itself again after the block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, Queue
from echomq.testing import FakeClock, eager

ORIGINAL = (Queue.add, Queue.add_bulk, Queue.add_flow)


def test_every_queue_is_eager_inside_the_block_and_none_after(connection: redis.Redis, queue_name: str) -> None:
    def signup_view(email: str) -> str:  # builds its own Queue, as a view does
        Queue(connection, queue_name).add("welcome", {"to": email})
        return "ok"

    with eager({"welcome": lambda job: {"sent_to": job.data["to"]}}) as session:
        assert signup_view("ada@example.com") == "ok"
        [job] = Queue(connection, queue_name).get_jobs("completed")
        assert (job.return_value, job.attempts_made, job.finished_on is not None) == (
            {"sent_to": "ada@example.com"}, 1, True)
    assert [(r.name, r.outcome.value, r.return_value) for r in session.report] == [
        ("welcome", "completed", {"sent_to": "ada@example.com"})]
    assert session.result(job.id) == {"sent_to": "ada@example.com"}
    assert (Queue.add, Queue.add_bulk, Queue.add_flow) == ORIGINAL
    signup_view("later@example.com")  # outside: just added
    assert Queue(connection, queue_name).get_job_counts("waiting", "completed") == {"waiting": 1, "completed": 1}


def test_only_the_queues_given_are_eager(connection: redis.Redis, queue_name: str,
                                         other_queue_name: Callable[[str], str]) -> None:
    eager_queue = Queue(connection, queue_name)
    plain = Queue(connection, other_queue_name("plain"))
    with eager(lambda job: job.data * 2, eager_queue) as session:
        eager_queue.add_bulk([("double", 1), ("double", 2)])
        plain.add("double", 3)
    assert [r.return_value for r in session.report] == [2, 4]
    assert plain.get_job_counts("waiting") == {"waiting": 1}
    assert "add" not in vars(eager_queue) and (Queue.add, Queue.add_bulk, Queue.add_flow) == ORIGINAL


def test_a_flow_runs_its_children_then_its_parent(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)

    def process(job: Any) -> Any:
        return sorted(job.get_children_values().values()) if job.name == "parent" else job.data

    with eager(process, queue) as session:
        parent = queue.add_flow({"name": "parent"}, [{"name": "child", "data": "b"}, {"name": "child", "data": "a"}])
    assert session.report.names() == ["child", "child", "parent"]
    assert session.result(parent.id) == ["a", "b"]


def test_jobs_added_while_running_run_in_the_same_pass_not_nested(connection: redis.Redis, queue_name: str,
                                                                 other_queue_name: Callable[[str], str]) -> None:
    orders = Queue(connection, queue_name)
    mail = Queue(connection, other_queue_name("mail"))
    order: list[str] = []

    def process(job: Any) -> None:
        order.append(f"start {job.name}")
        if job.name == "order":
            mail.add("receipt")
            orders.add("invoice")
        order.append(f"end {job.name}")

    with eager(process):
        orders.add("order")
    assert order == ["start order", "end order", "start invoice", "end invoice", "start receipt", "end receipt"]


def test_a_delayed_job_waits_for_the_clock_and_a_failure_is_recorded(connection: redis.Redis,
                                                                     queue_name: str) -> None:
    clock = FakeClock("2030-01-01T00:00:00Z")
    queue = Queue(connection, queue_name, clock=clock)

    def process(job: Any) -> None:
        raise ValueError(f"bad {job.name}")

    with eager(process, queue) as session:
        later = queue.add("later", delay=60_000)
        failing = queue.add("failing")
    assert queue.get_job(later.id).get_state() == "delayed"
    assert [(r.job_id, r.outcome.value, r.failed_reason) for r in session.report] == [
        (failing.id, "failed", "bad failing")]
    with pytest.raises(LookupError, match="did not complete"):
        session.result(failing.id)


def test_eager_refuses_what_is_not_a_queue_and_restores_after_an_error(connection: redis.Redis,
                                                                      queue_name: str) -> None:
    with pytest.raises(InvalidInputError, match="Queue objects"), eager(lambda job: None, "orders"):  # type: ignore[arg-type]
        pass
    with pytest.raises(RuntimeError, match="view broke"), eager(lambda job: None):
        raise RuntimeError("view broke")
    assert (Queue.add, Queue.add_bulk, Queue.add_flow) == ORIGINAL
