"""Bad input never reaches Redis, and nothing is half written (hardening A.2-A.5, C.14).

Every refusal here is checked against a full snapshot of the queue's keys taken before the
call: a refused call leaves them byte-identical.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from typing import Any

import pytest
import redis

from echomq import Queue, Worker
from echomq.errors import InvalidInputError, InvalidJobOptionsError, LockError
from echomq.protocol.keys import SUFFIXES, QueueKeys
from echomq.protocol.options import MAX_SAFE_INTEGER
from echomq.queue.queue import META_VERSION
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions

from support.snapshot import queue_snapshot
from support.workers import Running, events, seed_job, wait_until


def _seeded(connection: redis.Redis, queue_name: str) -> Queue:
    """A queue with a little of everything in it, so a stray write has something to change."""
    queue = Queue(connection, queue_name)
    queue.add("waiting", {"n": 1})
    queue.add("delayed", {"n": 2}, delay=60_000)
    queue.add("prioritized", {"n": 3}, priority=2, job_id="custom")
    return queue


# -- A.2: custom ids that name a queue key ----------------------------------------------------------

RESERVED_IDS = [*SUFFIXES, "de:abc:def", "metrics:completed:data", "metrics:failed:data"]


@pytest.mark.parametrize("job_id", RESERVED_IDS)
def test_a_custom_id_naming_a_queue_key_is_refused_before_anything_is_written(
        connection: redis.Redis, queue_name: str, job_id: str) -> None:
    queue = _seeded(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError, match=re.escape(f"job_id={job_id!r}: ")):
        queue.add("evil", {}, job_id=job_id)
    with pytest.raises(InvalidJobOptionsError, match="job_id="):
        queue.add_bulk([("fine", {}), ("evil", {}, {"job_id": job_id})])
    with pytest.raises(InvalidJobOptionsError, match="job_id="):
        queue.add_flow({"name": "p", "opts": {"job_id": job_id}}, [{"name": "c"}])
    assert queue_snapshot(connection, queue_name) == before
    assert queue.add("after", {}).id == "4"  # the queue still works


@pytest.mark.parametrize("job_id", ["meta", "events", "wait", "de:order-1", "metrics:completed"])
def test_an_id_naming_a_queue_key_is_never_read_as_a_job(connection: redis.Redis, queue_name: str,
                                                          job_id: str) -> None:
    queue = _seeded(connection, queue_name)
    queue.add("deduplicated", {}, deduplication={"id": "order-1"})
    assert queue.get_job(job_id) is None


@pytest.mark.parametrize("job_id", ["7", "-3", "0", "a:b", "a:b:c:d", "0:x:y"])
def test_custom_ids_bullmq_refuses_are_refused(connection: redis.Redis, queue_name: str, job_id: str) -> None:
    queue = _seeded(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError, match="job_id="):
        queue.add("x", {}, job_id=job_id)
    assert queue_snapshot(connection, queue_name) == before


def test_a_duplicate_id_refused_for_another_parent_writes_nothing(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add_flow({"name": "p1", "opts": {"job_id": "p1"}}, [{"name": "c", "opts": {"job_id": "shared"}}])
    queue.add_flow({"name": "p2", "opts": {"job_id": "p2"}}, [{"name": "other"}])
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(Exception, match="shared"):
        queue.add("c", {}, job_id="shared", parent={"id": "p2", "queue": QueueKeys(queue_name).base})
    assert queue_snapshot(connection, queue_name) == before


# -- A.3: numbers are range-checked ---------------------------------------------------------------

OUT_OF_RANGE: list[tuple[dict[str, Any], str]] = [
    ({"remove_on_complete": 2**63}, "remove_on_complete"),
    ({"remove_on_fail": {"count": 2**53}}, "remove_on_fail.count"),
    ({"remove_on_fail": {"age": 1e300}}, "remove_on_fail.age"),
    ({"attempts": 2**64}, "attempts"),
    ({"attempts": -1}, "attempts"),
    ({"delay": 2**53}, "delay"),
    ({"delay": 9_000_000_000_000_000 - 1}, "delay"),
    ({"delay": -5}, "delay"),
    ({"delay": 1.5}, "delay"),
    ({"timestamp": 8_640_000_000_000_001}, "timestamp"),
    ({"timestamp": -1}, "timestamp"),
    ({"priority": 2**21}, "priority"),
    ({"priority": 2.5}, "priority"),
    ({"backoff": 2**60}, "backoff"),
    ({"backoff": {"type": "fixed", "delay": 2**53}}, "backoff.delay"),
    ({"backoff": {"type": "fixed", "delay": float("inf")}}, "backoff.delay"),
    ({"stack_trace_limit": 2**53}, "stack_trace_limit"),
    ({"keep_logs": 2**70}, "keep_logs"),
    ({"size_limit": 0}, "size_limit"),
    ({"deduplication": {"id": "d", "ttl": 2**63}}, "deduplication.ttl"),
    ({"timestamp": 8_000_000_000_000_000, "delay": 700_000_000_000_000}, "delay"),
]


@pytest.mark.parametrize("opts,field", OUT_OF_RANGE, ids=[f"{f}={next(iter(o.values()))!r}" for o, f in OUT_OF_RANGE])
def test_numbers_out_of_range_are_refused_before_anything_is_written(
        connection: redis.Redis, queue_name: str, opts: dict[str, Any], field: str) -> None:
    queue = _seeded(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError, match=f"job option {field}="):
        queue.add("x", {}, **opts)
    assert queue_snapshot(connection, queue_name) == before


def test_the_largest_accepted_numbers_go_through_a_whole_life(connection: redis.Redis, queue_name: str) -> None:
    """At the bounds, a job is added, run, finished and its events written (before the fix a keep
    count of 2**63 was accepted and the finishing script aborted between completing the job and
    writing its ``completed`` event)."""
    queue = Queue(connection, queue_name)
    job = queue.add("big", {}, attempts=MAX_SAFE_INTEGER, remove_on_complete=MAX_SAFE_INTEGER,
                    keep_logs=MAX_SAFE_INTEGER, stack_trace_limit=MAX_SAFE_INTEGER,
                    remove_on_fail={"age": MAX_SAFE_INTEGER, "count": MAX_SAFE_INTEGER, "limit": MAX_SAFE_INTEGER})
    job.log("a line")
    k = QueueKeys(queue_name)
    with Running(Worker(connection, queue_name, lambda j: "done")):
        assert wait_until(lambda: connection.zscore(k.completed, job.id) is not None)
    assert [e["jobId"] for e in events(connection, queue_name) if e["event"] == "completed"] == [job.id]


@pytest.mark.parametrize("keep", [2**63, 1e300, -2**70, {"count": 2**64, "age": 1e40, "limit": 2**60}, 2.5])
def test_a_keep_rule_another_runtime_stored_out_of_range_keeps_the_job(
        connection: redis.Redis, queue_name: str, keep: Any) -> None:
    """Node can store any number; the finishing script must never see one it cannot use."""
    job_id = seed_job(connection, queue_name, "foreign", opts={"removeOnComplete": keep})
    k = QueueKeys(queue_name)
    with Running(Worker(connection, queue_name, lambda j: 1)):
        assert wait_until(lambda: connection.zscore(k.completed, job_id) is not None)
    assert connection.hget(k.job(job_id), "returnvalue") == b"1"
    assert [e["jobId"] for e in events(connection, queue_name) if e["event"] == "completed"] == [job_id]


def test_change_delay_out_of_range_is_refused(connection: redis.Redis, queue_name: str) -> None:
    queue = _seeded(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError, match="change_delay"):
        queue.change_delay("2", 2**62)
    assert queue_snapshot(connection, queue_name) == before


# -- scripts refuse before they write -------------------------------------------------------------

def test_finishing_a_job_that_is_not_active_is_refused_and_keeps_the_lock(
        connection: redis.Redis, queue_name: str) -> None:
    """Before: the script released the caller's lock, then answered -3 (not active)."""
    job_id = seed_job(connection, queue_name, "idle")
    k = QueueKeys(queue_name)
    connection.set(k.job_lock(job_id), "tok", px=30_000)
    before = queue_snapshot(connection, queue_name)
    transitions = Transitions(connection, k, WorkerOptions())
    for finish in (
        lambda: transitions.move_to_finished(job_id, "tok", 1, completed=True, value="1", keep=None,
                                             attempts=0, fetch_next=False),
        lambda: transitions.move_to_delayed(job_id, "tok", 1, 1000),
        lambda: transitions.retry(job_id, "tok", 1),
    ):
        with pytest.raises(Exception, match="active"):
            finish()
        assert queue_snapshot(connection, queue_name) == before
    with pytest.raises(LockError):
        transitions.move_to_finished(job_id, "other", 1, completed=True, value="1", keep=None,
                                     attempts=0, fetch_next=False)
    assert queue_snapshot(connection, queue_name) == before


# -- A.4: workers are named as BullMQ names them --------------------------------------------------

def test_get_workers_lists_named_and_unnamed_workers_under_bullmqs_names(
        connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    base64_of_braced = QueueKeys(queue_name).client_name()
    assert base64_of_braced == "emq:" + base64.b64encode(("{" + queue_name + "}").encode()).decode()
    with Running(Worker(connection, queue_name, lambda j: None, name="billing-1")), \
         Running(Worker(connection, queue_name, lambda j: None)):
        assert wait_until(lambda: len(queue.get_workers()) == 2)
        workers = sorted(queue.get_workers(), key=lambda w: w["name"])
        assert [w["name"] for w in workers] == ["", "billing-1"]
        assert workers[1]["rawname"] == f"{base64_of_braced}:w:billing-1"
        assert all("addr" in w and "age" in w for w in workers)
    assert wait_until(lambda: queue.get_workers() == [])


def test_workers_of_another_queue_are_not_listed(connection: redis.Redis, queue_name: str) -> None:
    with Running(Worker(connection, queue_name + "-other", lambda j: None, name="w")):
        assert wait_until(lambda: any(c.get("name", "").endswith(":w:w") for c in connection.client_list()))
        assert Queue(connection, queue_name).get_workers() == []


# -- A.5: meta version ------------------------------------------------------------------------------

def test_the_first_add_stamps_meta_version_and_a_refused_one_does_not(connection: redis.Redis,
                                                                      queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    with pytest.raises(InvalidJobOptionsError):
        queue.add("bad", {}, delay=-1)
    assert connection.hget(k.meta, "version") is None
    queue.add("good")
    assert connection.hget(k.meta, "version") == META_VERSION.encode()
    assert META_VERSION.startswith("echomq-python:")
    connection.hset(k.meta, "version", "bullmq:6.7.0")  # a BullMQ Queue wrote since
    Queue(connection, queue_name).add_bulk([("again", {})])
    assert connection.hget(k.meta, "version") == META_VERSION.encode()


def test_constructing_a_queue_writes_nothing(connection: redis.Redis, queue_name: str) -> None:
    Queue(connection, queue_name)
    assert queue_snapshot(connection, queue_name) == {}


# -- C.14: wrong types get EchoMQ's error naming the argument -------------------------------------

def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


WRONG: list[tuple[str, Any]] = [
    ("remove(None)", lambda q: q.remove(None)),
    ("get_job(None)", lambda q: q.get_job(None)),
    ("get_job('')", lambda q: q.get_job("")),
    ("promote(None)", lambda q: q.promote(None)),
    ("remove(remove_children='no')", lambda q: q.remove("1", remove_children="no")),
    ("get_jobs(start='a')", lambda q: q.get_jobs("waiting", start="a")),
    ("get_jobs(end=None)", lambda q: q.get_jobs("waiting", end=None)),
    ("get_jobs(states=5)", lambda q: q.get_jobs(5)),
    ("get_jobs(asc='yes')", lambda q: q.get_jobs("waiting", asc="yes")),
    ("get_job_counts(5)", lambda q: q.get_job_counts(5)),
    ("add_bulk(None)", lambda q: q.add_bulk(None)),
    ("add_bulk('ab')", lambda q: q.add_bulk("ab")),
    ("add_bulk([5])", lambda q: q.add_bulk([5])),
    ("add(opts not a mapping)", lambda q: q.add_bulk([("n", {}, [1])])),
    ("add_flow(children=None)", lambda q: q.add_flow({"name": "p"}, None)),
    ("add_flow(parent='p')", lambda q: q.add_flow("p", [{"name": "c"}])),
    ("add(name=None)", lambda q: q.add(None)),
    ("data nested 100,000 deep", lambda q: q.add("deep", _deep(100_000))),
    ("drain('yes')", lambda q: q.drain("yes")),
    ("obliterate(force=1)", lambda q: q.obliterate(force=1)),
    ("clean(grace_ms='1')", lambda q: q.clean("1")),
    ("update_progress(None, 1)", lambda q: q.update_progress(None, 1)),
    ("log('1', 5)", lambda q: q.log("1", 5)),
]


@pytest.mark.parametrize("call", [c for _n, c in WRONG], ids=[n for n, _c in WRONG])
def test_wrong_types_get_echomqs_error_and_write_nothing(connection: redis.Redis, queue_name: str, call: Any) -> None:
    queue = _seeded(connection, queue_name)
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidInputError):
        call(queue)
    assert queue_snapshot(connection, queue_name) == before


def test_remove_of_a_missing_job_is_false(connection: redis.Redis, queue_name: str) -> None:
    assert _seeded(connection, queue_name).remove("missing") is False


def test_default_job_options_that_are_not_a_mapping_are_refused(connection: redis.Redis, queue_name: str) -> None:
    with pytest.raises(InvalidJobOptionsError, match="default_job_options"):
        Queue(connection, queue_name, default_job_options=[1])  # type: ignore[arg-type]


def test_lone_surrogates_in_data_are_stored_and_read_back(connection: redis.Redis, queue_name: str) -> None:
    """What ``surrogateescape`` leaves in a str is not UTF-8: it is stored as JSON escapes, which
    both runtimes decode back to the same string."""
    queue = Queue(connection, queue_name)
    data = {"path": "caf\udce9", "ok": "é"}
    job = queue.add("s", data)
    raw = connection.hget(QueueKeys(queue_name).job(job.id), "data")
    assert json.loads(raw) == data
    fetched = queue.get_job(job.id)
    assert fetched is not None and fetched.data == data


def test_queue_calls_from_many_threads_write_meta_once_and_lose_nothing(connection: redis.Redis,
                                                                         queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    threads = [threading.Thread(target=lambda: [queue.add("t") for _ in range(20)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert connection.llen(QueueKeys(queue_name).wait) == 80
    assert connection.hget(QueueKeys(queue_name).meta, "version") == META_VERSION.encode()
