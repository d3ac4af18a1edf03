"""Changing a job in place: change_priority, update_data, get_job_logs, deduplication ids.

Each refusal is checked to leave the queue's keys byte-identical; each change is checked the way
a user sees it: the job's state and fields, the events (none of these operations writes one),
and the order in which a Worker then runs the jobs.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from echomq import Queue, Worker
from echomq.errors import InvalidInputError, InvalidJobOptionsError, JobNotFoundError
from echomq.protocol.keys import QueueKeys

from support.queues import read_events
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

SHIFT = 2**32  # a prioritized score is priority * 2^32 + the pc counter


def _run_all(connection: redis.Redis, queue_name: str, count: int) -> list[str]:
    """Names of the jobs in the order one Worker (concurrency 1) runs them."""
    order: list[str] = []
    with Running(Worker(connection, queue_name, lambda job: order.append(job.name))):
        assert wait_until(lambda: len(order) == count), order
    return order


# -- change_priority --------------------------------------------------------------------------

def test_a_waiting_job_moves_to_prioritized_and_back(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("a")
    events_before = read_events(connection, queue_name)
    job.change_priority(5)
    assert job.priority == 5 and job.get_state() == "prioritized"
    assert connection.zscore(k.prioritized, job.id) == 5 * SHIFT + 1
    assert connection.get(k.pc) == b"1"
    assert queue.get_job(job.id).priority == 5
    job.change_priority(0)
    assert job.priority == 0 and job.get_state() == "waiting"
    assert connection.zcard(k.prioritized) == 0
    assert connection.hget(k.job(job.id), "priority") == b"0"
    assert read_events(connection, queue_name) == events_before  # BullMQ writes no event either


def test_new_priorities_decide_the_order_a_worker_runs_jobs(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    plain_1, plain_2 = queue.add("plain-1"), queue.add("plain-2")
    urgent, late = queue.add("urgent", priority=9), queue.add("late", priority=2)
    queue.add("middle", priority=5)
    urgent.change_priority(1)                      # prioritized -> first of the prioritized
    late.change_priority(7)                        # prioritized -> after middle
    queue.change_priority(plain_1.id, 6)           # wait -> prioritized, between middle and late
    plain_2.change_priority(None)                  # None is 0: back to wait, behind nothing
    assert _run_all(connection, queue_name, 5) == ["plain-2", "urgent", "middle", "plain-1", "late"]


def test_lifo_puts_the_job_ahead_of_its_peers(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    for name in ("w1", "w2", "w3"):
        queue.add(name)
    for name in ("p1", "p2"):
        queue.add(name, priority=4)
    last_waiting = queue.add("w4")
    last_waiting.change_priority(0, lifo=True)     # wait -> RPUSH: the next job taken
    pc_before = connection.get(k.pc)
    queue.change_priority("5", 4, lifo=True)       # p2 goes ahead of p1, no pc counter used
    assert connection.zscore(k.prioritized, "5") == 4 * SHIFT
    assert connection.get(k.pc) == pc_before
    assert _run_all(connection, queue_name, 6) == ["w4", "w1", "w2", "w3", "p2", "p1"]


def test_paused_queue_moves_the_job_without_waking_workers(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    first, second = queue.add("first", priority=3), queue.add("second", priority=8)
    queue.pause()
    second.change_priority(1)
    queue.change_priority(first.id, 0, lifo=True)
    assert connection.exists(k.marker) == 0        # the marker stays gone while paused
    assert connection.lrange(k.wait, 0, -1) == [b"1"] and connection.zrange(k.prioritized, 0, -1) == [b"2"]
    queue.resume()
    assert _run_all(connection, queue_name, 2) == ["first", "second"]


def test_a_delayed_job_keeps_its_place_and_takes_the_priority_at_promotion(connection: redis.Redis,
                                                                           queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("later", delay=60_000, priority=2)
    score = connection.zscore(k.delayed, job.id)
    job.change_priority(0)
    assert job.get_state() == "delayed" and connection.zscore(k.delayed, job.id) == score
    assert connection.hget(k.job(job.id), "priority") == b"0"
    job.promote()
    assert job.get_state() == "waiting"
    other = queue.add("other-later", delay=60_000)
    other.change_priority(6)
    other.promote()
    assert other.get_state() == "prioritized"
    assert connection.zscore(k.prioritized, other.id) == 6 * SHIFT + 1


def test_an_active_job_runs_on_and_keeps_the_new_priority(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("running", priority=3)
    states: list[str] = []

    def process(active: Any) -> str:
        active.change_priority(7)
        states.append(active.get_state())
        return "done"

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: job.get_state() == "completed")
    assert states == ["active"]
    assert connection.hget(k.job(job.id), "priority") == b"7"
    assert connection.zcard(k.prioritized) == 0


def test_a_finished_job_only_has_its_field_changed(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x")
    with Running(Worker(connection, queue_name, lambda j: None)):
        assert wait_until(lambda: job.get_state() == "completed")
    job.change_priority(4)
    assert job.get_state() == "completed" and queue.get_job(job.id).priority == 4


@pytest.mark.parametrize("priority", [-1, 2**21, 2**63, 2.0, True, False, "3"])
def test_a_bad_priority_is_refused_and_nothing_written(connection: redis.Redis, queue_name: str,
                                                       priority: Any) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x", priority=2)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match="priority"):
        job.change_priority(priority)
    with pytest.raises(InvalidInputError, match="priority"):
        queue.change_priority(job.id, priority)
    assert job.priority == 2
    assert queue_snapshot(connection, queue_name) == before


def test_the_highest_priority_is_accepted(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x")
    job.change_priority(2**21 - 1)
    assert connection.zscore(QueueKeys(queue_name).prioritized, job.id) == (2**21 - 1) * SHIFT + 1


def test_change_priority_refuses_a_missing_job_and_a_bad_flag(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x")
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(JobNotFoundError, match=r"change_priority: job 'ghost'"):
        queue.change_priority("ghost", 1)
    with pytest.raises(InvalidInputError, match="lifo"):
        job.change_priority(1, lifo="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="job_id"):
        queue.change_priority(None, 1)  # type: ignore[arg-type]
    assert queue_snapshot(connection, queue_name) == before


# -- update_data ------------------------------------------------------------------------------

def test_update_data_replaces_the_data_in_any_state(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x", {"v": 1})
    delayed = queue.add("y", {"v": 2}, delay=60_000)
    events_before = read_events(connection, queue_name)
    job.update_data({"v": [1, "é", None]})
    assert job.data == {"v": [1, "é", None]}
    assert queue.get_job(job.id).data == {"v": [1, "é", None]}
    queue.update_data(delayed.id, "text")
    assert queue.get_job(delayed.id).data == "text" and delayed.get_state() == "delayed"
    job.update_data(None)  # stored as add stores None
    assert job.data == {} and queue.get_job(job.id).data == {}
    assert read_events(connection, queue_name) == events_before


def test_a_processor_updates_its_own_job_and_a_retry_sees_it(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("steps", {"done": []}, attempts=2)
    seen: list[Any] = []

    def process(active: Any) -> Any:
        seen.append(active.data)
        active.update_data({"done": [*active.data["done"], len(seen)]})
        if len(seen) == 1:
            raise RuntimeError("first attempt fails after saving its progress")
        return active.data

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: job.get_state() == "completed")
    assert seen == [{"done": []}, {"done": [1]}]
    stored = queue.get_job(job.id)
    assert stored.data == {"done": [1, 2]} and stored.return_value == {"done": [1, 2]}


def test_a_processor_updating_its_data_is_bounded_by_the_workers_limits(connection: redis.Redis,
                                                                         queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("grow", {"n": 1})

    def process(active: Any) -> Any:
        active.update_data({"blob": "x" * 500})
        return "not reached"

    with Running(Worker(connection, queue_name, process, max_data_bytes=200)):
        assert wait_until(lambda: job.get_state() == "failed")
    stored = queue.get_job(job.id)
    assert "max_data_bytes=200" in stored.failed_reason
    assert stored.data == {"n": 1}


@pytest.mark.parametrize("data,message", [
    (object(), "not JSON-serialisable"),
    ({"x": float("nan")}, "not JSON-serialisable"),
    ("x" * 200, "max_data_bytes=100"),
    ([[[[1]]]], "max_data_depth=3"),
])
def test_bad_data_is_refused_before_anything_is_written(connection: redis.Redis, queue_name: str,
                                                        data: Any, message: str) -> None:
    queue = Queue(connection, queue_name, max_data_bytes=100, max_data_depth=3)
    added = queue.add("x", {"ok": 1})
    fetched = queue.get_job(added.id)
    [listed] = queue.get_jobs("waiting")
    before = queue_snapshot(connection, queue_name)
    for updater in (added.update_data, fetched.update_data, listed.update_data,
                    lambda d: queue.update_data(added.id, d)):
        with pytest.raises(InvalidJobOptionsError, match=message):
            updater(data)
    assert added.data == {"ok": 1}
    assert queue_snapshot(connection, queue_name) == before


def test_update_data_refuses_a_missing_job(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x", {"v": 1})
    connection.delete(job.key)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(JobNotFoundError, match="update_data"):
        job.update_data({"v": 2})
    with pytest.raises(JobNotFoundError, match="update_data"):
        queue.update_data("ghost", {"v": 2})
    assert job.data == {"v": 1}
    assert queue_snapshot(connection, queue_name) == before


# -- get_job_logs -----------------------------------------------------------------------------

def test_get_job_logs_reads_ranges_both_ways(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x")
    for n in range(5):
        job.log(f"line {n}")
    lines = [f"line {n}" for n in range(5)]
    assert queue.get_job_logs(job.id) == {"logs": lines, "count": 5}
    assert queue.get_job_logs(job.id, 1, 2) == {"logs": ["line 1", "line 2"], "count": 5}
    assert queue.get_job_logs(job.id, asc=False) == {"logs": lines[::-1], "count": 5}
    assert queue.get_job_logs(job.id, 0, 1, asc=False) == {"logs": ["line 4", "line 3"], "count": 5}
    assert queue.get_job_logs(job.id, 3, 10, asc=False) == {"logs": ["line 1", "line 0"], "count": 5}
    assert job.get_logs(0, 1, asc=False) == ["line 4", "line 3"]
    assert job.get_logs(-2) == ["line 3", "line 4"]
    assert queue.get_job_logs("no-such-job") == {"logs": [], "count": 0}


@pytest.mark.parametrize("args,field", [
    (("1.5", 2, True), "start"), ((True, 2, True), "start"), ((0, None, True), "end"), ((0, -1, "no"), "asc"),
])
def test_get_job_logs_refuses_bad_ranges(connection: redis.Redis, queue_name: str, args: tuple[Any, ...],
                                         field: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x")
    with pytest.raises(InvalidInputError, match=f"{field}="):
        queue.get_job_logs(job.id, *args)
    with pytest.raises(InvalidInputError, match=f"{field}="):
        job.get_logs(args[0], args[1], asc=args[2])
    with pytest.raises(InvalidInputError, match="job_id"):
        queue.get_job_logs("")


# -- deduplication ids ------------------------------------------------------------------------

def test_the_owner_of_a_deduplication_id_and_freeing_it(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    first = queue.add("sync", {"n": 1}, deduplication={"id": "sku-3"})
    assert queue.get_deduplication_job_id("sku-3") == first.id
    assert queue.get_deduplication_job_id("sku-4") is None
    assert queue.add("sync", {"n": 2}, deduplication={"id": "sku-3"}).id == first.id  # a hit
    assert queue.remove_deduplication_key("sku-3") == 1
    assert queue.remove_deduplication_key("sku-3") == 0
    assert queue.get_deduplication_job_id("sku-3") is None
    second = queue.add("sync", {"n": 3}, deduplication={"id": "sku-3"})
    assert second.id != first.id and queue.get_deduplication_job_id("sku-3") == second.id
    assert queue.get_job_counts("waiting") == {"waiting": 2}


def test_a_job_frees_its_deduplication_id_only_while_it_owns_it(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    first = queue.add("sync", deduplication={"id": "d"})
    assert first.deduplication_id == "d"
    queue.remove_deduplication_key("d")
    second = queue.add("sync", deduplication={"id": "d"})
    before = queue_snapshot(connection, queue_name)
    assert first.remove_deduplication_key() is False      # second owns it now
    assert queue.get_job(first.id).remove_deduplication_key() is False
    assert queue_snapshot(connection, queue_name) == before
    assert queue.get_job(second.id).remove_deduplication_key() is True
    assert connection.exists(k.deduplication("d")) == 0
    assert second.remove_deduplication_key() is False
    assert queue.add("plain").remove_deduplication_key() is False


def test_a_processor_frees_its_deduplication_id_early(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("sync", deduplication={"id": "d"})
    freed: list[bool] = []
    release = threading.Event()

    def process(active: Any) -> None:
        freed.append(active.remove_deduplication_key())
        release.wait(10)

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: len(freed) == 1)
        newer = queue.add("sync", deduplication={"id": "d"})  # while the first still runs
        assert newer.id != job.id
        release.set()
        assert wait_until(lambda: newer.get_state() == "completed")
    assert job.get_state() == "completed"
    assert freed == [True, True]  # each run freed the id it owned


@pytest.mark.parametrize("dedup_id", ["", None, 7, b"d", ["d"]])
def test_a_bad_deduplication_id_is_refused(connection: redis.Redis, queue_name: str, dedup_id: Any) -> None:
    queue = Queue(connection, queue_name)
    queue.add("sync", deduplication={"id": "d"})
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match="dedup_id"):
        queue.get_deduplication_job_id(dedup_id)
    with pytest.raises(InvalidInputError, match="dedup_id"):
        queue.remove_deduplication_key(dedup_id)
    assert queue_snapshot(connection, queue_name) == before
