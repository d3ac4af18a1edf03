"""Queue.add and friends: where each job lands, what its hash holds, what the stream says."""

from __future__ import annotations

import json
import time

import pytest
import redis

from echomq import Queue
from echomq.errors import InvalidInputError, InvalidJobOptionsError
from echomq.protocol.keys import QueueKeys

from support.queues import queue_keys, raw_events, read_events


def test_plain_add_goes_to_wait_with_the_protocol_hash(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    before = int(time.time() * 1000)
    job = queue.add("email", {"to": "a@example.com"})
    k = QueueKeys(queue_name)
    assert job.id == "1"
    assert connection.lrange(k.wait, 0, -1) == [b"1"]
    stored = {key.decode(): value.decode() for key, value in connection.hgetall(k.job("1")).items()}
    assert set(stored) == {"name", "data", "opts", "timestamp", "delay", "priority"}
    assert stored["name"] == "email"
    assert json.loads(stored["data"]) == {"to": "a@example.com"}
    assert json.loads(stored["opts"]) == {"attempts": 0}
    assert before <= int(stored["timestamp"]) <= int(time.time() * 1000)
    assert (stored["delay"], stored["priority"]) == ("0", "0")
    assert connection.zrange(k.marker, 0, -1, withscores=True) == [(b"0", 0.0)]
    assert connection.hget(k.meta, "opts.maxLenEvents") == b"10000"
    assert raw_events(connection, queue_name) == [
        ["event", "added", "jobId", "1", "name", "email"], ["event", "waiting", "jobId", "1"]]


def test_fifo_and_lifo_order_in_wait(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("a")
    queue.add("b")
    queue.add("c", lifo=True)
    # Workers pop from the right: c (lifo) first, then a, then b.
    assert connection.lrange(QueueKeys(queue_name).wait, 0, -1) == [b"2", b"1", b"3"]


def test_delayed_add_scores_due_times_4096_with_fifo_sequence(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    first = queue.add("later", delay=60_000, timestamp=1_900_000_000_000)
    second = queue.add("later", delay=60_000, timestamp=1_900_000_000_000)
    due = 1_900_000_060_000
    assert connection.zrange(k.delayed, 0, -1, withscores=True) == [
        (first.id.encode(), float(due * 4096)), (second.id.encode(), float(due * 4096 + 1))]
    assert connection.zrange(k.marker, 0, -1, withscores=True) == [(b"1", float(due))]
    assert connection.hget(k.job(first.id), "delay") == b"60000"
    assert json.loads(connection.hget(k.job(first.id), "opts")) == {
        "attempts": 0, "delay": 60000, "timestamp": 1_900_000_000_000}
    assert read_events(connection, queue_name)[:2] == [
        ("added", {"jobId": first.id, "name": "later"}), ("delayed", {"jobId": first.id, "delay": due})]
    assert first.get_state() == "delayed"


def test_prioritized_add_uses_the_priority_counter(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    a = queue.add("p", priority=5)
    b = queue.add("p", priority=5)
    c = queue.add("p", priority=1)
    assert connection.zrange(k.prioritized, 0, -1, withscores=True) == [
        (c.id.encode(), float(1 * 2**32 + 3)), (a.id.encode(), float(5 * 2**32 + 1)),
        (b.id.encode(), float(5 * 2**32 + 2))]
    assert connection.get(k.pc) == b"3"
    assert connection.llen(k.wait) == 0
    assert connection.hget(k.job(a.id), "priority") == b"5"
    assert [e for e, _ in read_events(connection, queue_name)] == ["added", "waiting"] * 3


def test_delayed_job_with_priority_waits_in_delayed(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("p", priority=2, delay=1000)
    assert job.get_state() == "delayed"
    assert connection.hget(QueueKeys(queue_name).job(job.id), "priority") == b"2"


def test_existing_custom_id_is_duplicated_and_nothing_changes(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    first = queue.add("n", {"v": 1}, job_id="order-1")
    again = queue.add("n", {"v": 2}, job_id="order-1")
    assert first.id == again.id == "order-1"
    assert queue.get_job("order-1").data == {"v": 1}
    assert connection.llen(QueueKeys(queue_name).wait) == 1
    # The id counter moves on every add, as BullMQ's does.
    assert connection.get(QueueKeys(queue_name).id) == b"2"
    assert read_events(connection, queue_name)[-1] == ("duplicated", {"jobId": "order-1"})


def test_simple_deduplication_keeps_the_first_job(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    first = queue.add("d", 1, deduplication={"id": "sku-9"})
    second = queue.add("d", 2, deduplication={"id": "sku-9"})
    assert second.id == first.id == "1"
    assert connection.get(k.deduplication("sku-9")) == b"1"
    assert connection.pttl(k.deduplication("sku-9")) == -1
    assert connection.hget(k.job("1"), "deid") == b"sku-9"
    assert not connection.exists(k.job("2"))
    assert read_events(connection, queue_name)[-1] == (
        "deduplicated", {"jobId": "1", "deduplicationId": "sku-9", "deduplicatedJobId": "2"})
    # Removing the owner frees the id.
    queue.remove("1")
    assert not connection.exists(k.deduplication("sku-9"))
    assert queue.add("d", 3, deduplication={"id": "sku-9"}).id == "3"


def test_ttl_deduplication_expires_and_extend_restarts_the_window(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    queue.add("d", deduplication={"id": "t", "ttl": 5000})
    assert 0 < connection.pttl(k.deduplication("t")) <= 5000
    queue.add("d", deduplication={"id": "e", "ttl": 200, "extend": True})
    connection.pexpire(k.deduplication("e"), 50)
    assert queue.add("d", deduplication={"id": "e", "ttl": 200, "extend": True}).id == "2"
    assert connection.pttl(k.deduplication("e")) > 100
    connection.delete(k.deduplication("t"))  # as if the ttl had run out
    assert queue.add("d", deduplication={"id": "t", "ttl": 5000}).id == "4"


def test_replace_deduplication_swaps_a_delayed_job(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    old = queue.add("d", {"v": 1}, delay=10_000, deduplication={"id": "r", "ttl": 60_000, "replace": True})
    new = queue.add("d", {"v": 2}, delay=10_000, deduplication={"id": "r", "ttl": 60_000, "replace": True})
    assert new.id != old.id
    assert not connection.exists(k.job(old.id))
    assert connection.zrange(k.delayed, 0, -1) == [new.id.encode()]
    assert connection.get(k.deduplication("r")) == new.id.encode()
    assert list(read_events(connection, queue_name)[2:]) == [
        ("removed", {"jobId": old.id, "prev": "delayed"}),
        ("deduplicated", {"jobId": new.id, "deduplicationId": "r", "deduplicatedJobId": old.id}),
        ("added", {"jobId": new.id, "name": "d"}),
        ("delayed", {"jobId": new.id, "delay": new.timestamp + 10_000})]


def test_add_while_paused_stays_in_wait_without_marker(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.pause()
    job = queue.add("x")
    assert job.get_state() == "waiting"
    assert not connection.exists(QueueKeys(queue_name).marker)
    assert not connection.exists(QueueKeys(queue_name).paused)


def test_add_bulk_pipelines_and_returns_jobs_in_order(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    jobs = queue.add_bulk([("a", 1), {"name": "b", "data": 2, "opts": {"priority": 4}}, ("c", 3, {"delay": 500})])
    assert [j.id for j in jobs] == ["1", "2", "3"]
    assert [j.get_state() for j in jobs] == ["waiting", "prioritized", "delayed"]
    assert queue.get_job_counts("waiting", "prioritized", "delayed") == {"waiting": 1, "prioritized": 1, "delayed": 1}


def test_a_mixed_bulk_keeps_its_order_after_the_script_cache_is_flushed(connection: redis.Redis,
                                                                      queue_name: str) -> None:
    # A restarted server (or a fresh cluster node) caches only what ran since: here the
    # standard add's script, not the prioritized or delayed one. A bulk mixing them must still
    # number its jobs in its own order.
    queue = Queue(connection, queue_name)
    connection.script_flush()
    queue.add("after-the-flush")
    jobs = queue.add_bulk([("a", 1), {"name": "b", "data": 2, "opts": {"priority": 4}}, ("c", 3, {"delay": 500}),
                           ("d", 4)])
    assert [(j.id, j.name) for j in jobs] == [("2", "a"), ("3", "b"), ("4", "c"), ("5", "d")]
    assert [queue.get_job(j.id).name for j in jobs] == ["a", "b", "c", "d"]


def test_default_job_options_apply_and_can_be_overridden(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, default_job_options={"attempts": 3, "remove_on_complete": True})
    job = queue.add("x", attempts=5)
    assert queue.get_job(job.id).opts == {"attempts": 5, "remove_on_complete": True}


def test_flow_parent_waits_for_children(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    parent = queue.add_flow({"name": "report", "data": {"r": 1}},
                            [{"name": "part", "data": {"n": 1}}, {"name": "part", "data": {"n": 2}}])
    assert parent.get_state() == "waiting-children"
    deps = {d.decode() for d in connection.smembers(k.job_dependencies(parent.id))}
    children = list(queue.get_jobs("waiting"))
    assert deps == {k.job(c.id) for c in children} and len(children) == 2
    for child in children:
        assert child.parent_key == k.job(parent.id)
        assert child.parent == {"id": parent.id, "queueKey": k.base}
        assert child.opts["parent"] == {"id": parent.id, "queue": k.base}
    assert connection.get(k.id) == b"3"
    assert read_events(connection, queue_name)[:2] == [
        ("added", {"jobId": parent.id, "name": "report"}), ("waiting-children", {"jobId": parent.id})]


def test_child_naming_a_missing_parent_is_refused(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    with pytest.raises(LookupError, match="parent"):
        queue.add("orphan", parent={"id": "nope", "queue": QueueKeys(queue_name).base})
    assert queue_keys(connection, queue_name) <= {QueueKeys(queue_name).id, QueueKeys(queue_name).meta}


@pytest.mark.parametrize("call", [
    lambda q: q.add("x", delay=-1),
    lambda q: q.add("x", priority=2**21),
    lambda q: q.add("x", job_id="123"),
    lambda q: q.add("x", {"when": object()}),
    lambda q: q.add("x", float("nan")),
    lambda q: q.add(42),
    lambda q: q.add("x", colour="red"),
    lambda q: q.add("x", {"blob": "y" * 100}, size_limit=50),
    lambda q: q.add_bulk([("ok", 1), ("bad", 2, {"delay": -5})]),
    lambda q: q.add_bulk([{"name": "a", "dat": 1}]),
    lambda q: q.add_flow({"name": "p"}, [{"name": "c", "opts": {"priority": -1}}]),
    lambda q: q.add_flow({"name": "p"}, []),
])
def test_bad_input_raises_and_writes_nothing(connection: redis.Redis, queue_name: str, call) -> None:  # type: ignore[no-untyped-def]
    queue = Queue(connection, queue_name)
    with pytest.raises(InvalidInputError):
        call(queue)
    assert queue_keys(connection, queue_name) == set()


def test_bad_job_option_error_names_field_value_and_reason(connection: redis.Redis, queue_name: str) -> None:
    with pytest.raises(InvalidJobOptionsError, match=r"job option delay=-1: must be >= 0"):
        Queue(connection, queue_name).add("x", delay=-1)


def test_queue_accepts_a_url_and_decoded_clients(server_url: str, queue_name: str) -> None:
    with Queue(server_url, queue_name) as queue:
        job = queue.add("x", {"a": 1})
        assert queue.get_job(job.id).data == {"a": 1}
    text_client = redis.Redis.from_url(server_url, decode_responses=True)
    try:
        queue = Queue(text_client, queue_name)
        assert queue.add("y").id == "2"
        assert queue.get_job("2").name == "y"
        assert queue.get_jobs("waiting")[0].id == "2"
    finally:
        redis.Redis.from_url(server_url).delete(*queue_keys(text_client, queue_name))
        text_client.close()


def test_every_producer_and_operator_event_reaches_queue_events(connection: redis.Redis, queue_name: str) -> None:
    from echomq import EventType, Handler, QueueEvents

    seen: list[tuple[str, dict]] = []

    class Recorder(Handler):
        def handle_event(self, event_type, event_data) -> None:  # type: ignore[no-untyped-def]
            seen.append((str(event_type), event_data))

    queue = Queue(connection, queue_name)
    with QueueEvents(connection, queue_name, handler=Recorder(), block_ms=200):
        job = queue.add("a", job_id="one")
        queue.add("a", job_id="one")
        queue.add("b", deduplication={"id": "d"})
        queue.add("b", deduplication={"id": "d"})
        queue.add("c", delay=5000)
        queue.add_flow({"name": "p"}, [{"name": "c"}])
        job.update_progress(7)
        queue.pause()
        queue.resume()
        queue.remove("one")
        queue.clean(0, 0, "completed")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(t == "cleaned" for t, _ in seen):
            time.sleep(0.02)
    types = {t for t, _ in seen}
    expected = {EventType.ADDED, EventType.WAITING, EventType.DELAYED, EventType.DUPLICATED,
                EventType.DEDUPLICATED, EventType.WAITING_CHILDREN, EventType.REMOVED, EventType.PAUSED,
                EventType.RESUMED, EventType.CLEANED, EventType.PROGRESS}
    assert {str(e) for e in expected} <= types
    data = dict(seen)
    assert data["progress"]["data"] == 7 and data["cleaned"]["count"] == 0
    assert data["removed"]["prev"] == "wait" and data["duplicated"]["jobId"] == "one"


def test_flow_whose_children_already_completed_releases_the_parent(connection: redis.Redis,
                                                                   queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    done = queue.add("c", {"n": 1}, job_id="child-1")
    connection.lrem(k.wait, 1, done.id)
    connection.zadd(k.completed, {done.id: 1})
    connection.hset(k.job(done.id), "returnvalue", "7")
    parent = queue.add_flow({"name": "p"}, [{"name": "c", "opts": {"job_id": "child-1"}}])
    assert parent.get_state() == "waiting"
    assert connection.hgetall(k.job_processed(parent.id)) == {k.job("child-1").encode(): b"7"}
    events = read_events(connection, queue_name)
    assert ("duplicated", {"jobId": "child-1"}) in events
    assert events[-1] == ("waiting", {"jobId": parent.id, "prev": "waiting-children"})


def test_the_queue_argument_is_queue_name_as_in_every_constructor(connection: redis.Redis, queue_name: str) -> None:
    assert Queue(connection, queue_name=queue_name).name == queue_name
    with pytest.warns(DeprecationWarning, match="queue_name"):
        old = Queue(connection, name=queue_name)
    assert old.queue_name == queue_name and old.add("x").id == "1"
    with pytest.raises(InvalidInputError, match="give queue_name only"):
        Queue(connection, queue_name, name=queue_name)
    with pytest.raises(InvalidInputError, match="queue_name is required"):
        Queue(connection)
