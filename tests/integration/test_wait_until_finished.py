"""Job.wait_until_finished: the request/response pattern, with a QueueEvents started or not.

The wait must see a finish whenever it happens: before the call, between the call and the
subscription, or after; it must not be fooled by a reader replaying a failure a retry undid;
its timeout is a bound even when the reader blocks longer per read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from echomq import ActiveJob, Job, Queue, QueueEvents
from echomq.errors import (
    ConnectionClosedError,
    EchoMQError,
    InvalidInputError,
    JobFailedError,
    JobNotFoundError,
    JobWaitTimeoutError,
)
from echomq.protocol.events import GapNotice
from echomq.protocol.keys import QueueKeys
from echomq.types import Subscriber
from echomq.worker.worker import Worker

from support.workers import Running, wait_until


def _run(job: ActiveJob) -> Any:
    if job.data.get("fail"):
        raise ValueError(f"bad input {job.data['n']}")
    return {"doubled": job.data["n"] * 2}


def _worker(connection: redis.Redis, queue_name: str) -> Running:
    return Running(Worker(connection, queue_name, _run, drain_delay=0.2))


def _finish_now(connection: redis.Redis, queue_name: str, job: Job) -> None:
    """Let a Worker finish ``job`` for good, here and now."""
    k = QueueKeys(queue_name)
    with _worker(connection, queue_name):
        assert wait_until(lambda: not connection.exists(k.job(job.id)) or job.get_state() in ("completed", "failed"))


@pytest.fixture(params=["started", "stepped"])
def reader(request: pytest.FixtureRequest, connection: redis.Redis, queue_name: str) -> Iterator[QueueEvents]:
    """A QueueEvents with the default 5 s block: started (its own thread), or left for the wait to step."""
    events = QueueEvents(connection, queue_name)
    if request.param == "started":
        events.start()
    yield events
    events.close()


def test_returns_the_return_value_of_a_job_finished_while_waiting(connection: redis.Redis, queue_name: str,
                                                                 reader: QueueEvents) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 21})
    with _worker(connection, queue_name):
        assert job.wait_until_finished(reader, timeout=10) == {"doubled": 42}


def test_raises_the_failed_reason_of_a_job_that_failed_for_good(connection: redis.Redis, queue_name: str,
                                                                reader: QueueEvents) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 1, "fail": True}, attempts=2)
    with _worker(connection, queue_name), pytest.raises(JobFailedError) as caught:
        job.wait_until_finished(reader, timeout=10)
    assert (caught.value.job_id, caught.value.failed_reason) == (job.id, "bad input 1")
    assert isinstance(caught.value, EchoMQError) and str(caught.value) == f"job {job.id!r} failed: bad input 1"


def test_a_job_finished_before_the_call_answers_at_once(connection: redis.Redis, queue_name: str,
                                                        reader: QueueEvents) -> None:
    queue = Queue(connection, queue_name)
    done, failed = queue.add("double", {"n": 2}), queue.add("double", {"n": 3, "fail": True})
    _finish_now(connection, queue_name, done)
    _finish_now(connection, queue_name, failed)
    started = time.monotonic()
    assert done.wait_until_finished(reader, timeout=10) == {"doubled": 4}
    with pytest.raises(JobFailedError, match="bad input 3"):
        failed.wait_until_finished(reader, timeout=10)
    assert time.monotonic() - started < 1.0  # not one 5 s block of the reader


def test_the_timeout_is_a_bound_whatever_the_readers_block(connection: redis.Redis, queue_name: str,
                                                           reader: QueueEvents) -> None:
    job = Queue(connection, queue_name).add("never-run", {"n": 1})
    started = time.monotonic()
    with pytest.raises(JobWaitTimeoutError) as caught:
        job.wait_until_finished(reader, timeout=0.3)
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 1.5
    assert isinstance(caught.value, TimeoutError) and (caught.value.job_id, caught.value.timeout) == (job.id, 0.3)
    assert reader.block_ms == 5000  # as it was
    with pytest.raises(JobWaitTimeoutError):
        job.wait_until_finished(reader, timeout=0)


def test_a_job_removed_by_its_completion_while_waiting_still_answers(connection: redis.Redis, queue_name: str,
                                                                    reader: QueueEvents) -> None:
    # Delayed so that it finishes after the wait began, however fast the worker: a job removed
    # before the call is the next test's case (not found).
    job = Queue(connection, queue_name).add("double", {"n": 5}, remove_on_complete=True, delay=300)
    with _worker(connection, queue_name):
        assert job.wait_until_finished(reader, timeout=10) == {"doubled": 10}
    assert not connection.exists(QueueKeys(queue_name).job(job.id))


def test_a_job_removed_before_the_call_is_not_found(connection: redis.Redis, queue_name: str,
                                                    reader: QueueEvents) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 5}, remove_on_complete=True)
    _finish_now(connection, queue_name, job)
    with pytest.raises(JobNotFoundError, match=f"job {job.id!r} does not exist"):
        job.wait_until_finished(reader, timeout=10)


class _FinishingOnSubscribe:
    """A QueueEvents whose job finishes right as the wait subscribes: between the call and the
    wait's first look at the job, where neither the event nor the job may be missed."""

    def __init__(self, reader: QueueEvents, finish: Callable[[], None]) -> None:
        self.reader = reader
        self.finish = finish
        self.events_key = reader.events_key
        self.block_ms = reader.block_ms

    @property
    def running(self) -> bool:
        return self.reader.running

    def subscribe(self, subscriber: Subscriber) -> None:
        self.reader.subscribe(subscriber)
        self.finish()

    def unsubscribe(self, subscriber: Subscriber) -> bool:
        return self.reader.unsubscribe(subscriber)

    def run_once(self) -> int:
        self.reader.block_ms = self.block_ms
        return self.reader.run_once()


@pytest.mark.parametrize("remove_on_complete", [False, True])
def test_a_finish_between_the_call_and_the_subscription_is_not_missed(
        connection: redis.Redis, queue_name: str, reader: QueueEvents, remove_on_complete: bool) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 8}, remove_on_complete=remove_on_complete)
    racing = _FinishingOnSubscribe(reader, lambda: _finish_now(connection, queue_name, job))
    started = time.monotonic()
    assert job.wait_until_finished(racing, timeout=10) == {"doubled": 16}
    assert time.monotonic() - started < 4.0


def test_a_replayed_failure_that_a_retry_undid_is_not_the_answer(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("double", {"n": 4, "fail": True})
    _finish_now(connection, queue_name, job)
    connection.hset(QueueKeys(queue_name).job(job.id), "data", '{"n": 4}')
    job.retry()
    replaying = QueueEvents(connection, queue_name, last_event_id="0", block_ms=200)  # will see the old failure

    def later() -> None:
        time.sleep(0.3)
        _finish_now(connection, queue_name, job)

    worker = threading.Thread(target=later)
    worker.start()
    try:
        assert job.wait_until_finished(replaying, timeout=10) == {"doubled": 8}
    finally:
        worker.join()
        replaying.close()


class _Silent:
    """A reader that delivers no event, only, when told, a gap notice: the finish it lost."""

    def __init__(self, events_key: str) -> None:
        self.events_key = events_key
        self.block_ms = 100
        self.running = True
        self.subscribed: list[Any] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribed.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> bool:
        self.subscribed.remove(subscriber)
        return True

    def run_once(self) -> int:
        raise AssertionError("a running reader is not stepped")


def test_a_gap_notice_makes_the_wait_look_at_the_job_again(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 6})
    silent = _Silent(QueueKeys(queue_name).events)

    def lose_the_event() -> None:
        assert wait_until(lambda: silent.subscribed)
        _finish_now(connection, queue_name, job)
        notice = GapNotice(queue_name, "0-0", "9-9", 1)
        silent.subscribed[0](notice, notice.as_dict())

    helper = threading.Thread(target=lose_the_event)
    helper.start()
    try:
        assert job.wait_until_finished(silent, timeout=10) == {"doubled": 12}
    finally:
        helper.join()
    assert silent.subscribed == []  # the wait unsubscribed


def test_bad_arguments_are_refused(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 1})
    elsewhere = QueueEvents(connection, queue_name + "-other")
    with pytest.raises(InvalidInputError, match="does not read the events of queue"):
        job.wait_until_finished(elsewhere)
    for timeout in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(InvalidInputError, match="timeout="):
            job.wait_until_finished(QueueEvents(connection, queue_name), timeout=timeout)  # type: ignore[arg-type]


def test_a_closed_reader_is_refused(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("double", {"n": 1})
    closed = QueueEvents(connection, queue_name)
    closed.close()
    with pytest.raises(ConnectionClosedError):
        job.wait_until_finished(closed, timeout=1)
