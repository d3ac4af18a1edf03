"""Nothing a refused call touches is written: flows are written whole or not at all, every
string is checked before the first call is sent, and a bulk the server refused in part says
which of its jobs were written (issue 24, points 3 and 4).

Each refusal compares a dump of every key of the queues involved before and after the call.
The faults a production Redis delivers part-way (out of memory, a lost connection between two
windows, a killed script) are in tests/faults/test_partial_writes.py, on private servers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot as crc_slot

from echomq import Queue, Worker
from echomq.errors import (
    BulkWriteError,
    InvalidInputError,
    InvalidJobOptionsError,
    InvalidQueueNameError,
    InvalidStateError,
    NotFoundError,
)
from echomq.protocol.keys import QueueKeys
from echomq.queue import flows
from echomq.schedule.scheduler import JobScheduler

from support.queue_keys import delete_queue_keys
from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

LONE = "caf\udce9"  # what surrogateescape leaves of Latin-1 bytes read as UTF-8


def dump(client: redis.Redis, *queues: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in queues:
        out.update(queue_snapshot(client, name))
    return out


@contextlib.contextmanager
def writes_nothing(client: redis.Redis, *queues: str) -> Iterator[None]:
    before = dump(client, *queues)
    yield
    after = dump(client, *queues)
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    assert changed == [], f"a refused call wrote {changed}"


def key_slot(key: str) -> int:
    return int(crc_slot(key.encode()))


def same_slot_name(queue_name: str) -> str:
    """Another queue name in the slot of ``queue_name``, so a flow over both runs on a cluster too."""
    home = key_slot(QueueKeys(queue_name).meta)
    return next(name for name in (f"{queue_name}-b{i}" for i in range(1_000_000))
                if key_slot(QueueKeys(name).meta) == home)


@pytest.fixture
def other_queue(connection: redis.Redis, queue_name: str) -> Iterator[str]:
    name = same_slot_name(queue_name)
    yield name
    with contextlib.suppress(redis.RedisError):
        delete_queue_keys(connection, name)


def owned_child(queue: Queue, job_id: str) -> Queue:
    """A job ``job_id`` that is the child of a live parent (``owner``)."""
    queue.add_flow({"name": "owner", "opts": {"job_id": "owner"}}, [{"name": "c", "opts": {"job_id": job_id}}])
    return queue


# -- flows: refused by the server, nothing written ------------------------------------------------

def test_a_flow_whose_second_child_reuses_a_job_of_another_parent_writes_nothing(connection: redis.Redis,
                                                                                  queue_name: str) -> None:
    """The issue's case: the parent and the first child stayed written, and a Worker ran both."""
    queue = owned_child(Queue(connection, queue_name), "taken")
    counts = queue.get_job_counts()
    with (writes_nothing(connection, queue_name),
          pytest.raises(InvalidStateError, match=r"add_flow: children\[1\]: add 'c2': parent job of 'taken' "
                                                 r"cannot be replaced; nothing of the flow was written")):
        queue.add_flow({"name": "p1"}, [{"name": "c1"}, {"name": "c2", "opts": {"job_id": "taken"}}])
    ran: list[str] = []
    with Running(Worker(connection, queue_name, lambda job: ran.append(job.name))):
        assert wait_until(lambda: queue.get_job("owner").get_state() == "completed")
    assert ran == ["c", "owner"]  # the first flow only: nothing of the refused one is left to run
    assert counts["waiting-children"] == 1 and queue.get_job_counts("completed")["completed"] == 2
    assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 0, "waiting-children": 0}


def test_a_refused_node_deep_in_the_tree_is_named_by_its_path(connection: redis.Redis, queue_name: str,
                                                              other_queue: str) -> None:
    queue = owned_child(Queue(connection, queue_name), "taken")
    tree = [{"name": "a", "children": [{"name": "a1"}, {"name": "a2", "queue": other_queue}]},
            {"name": "b", "children": [{"name": "b1", "children": [{"name": "deep", "opts": {"job_id": "taken"}}]}]}]
    with (writes_nothing(connection, queue_name, other_queue),
          pytest.raises(InvalidStateError, match=r"children\[1\]\.children\[0\]\.children\[0\]: add 'deep'")):
        queue.add_flow({"name": "root"}, tree)


def test_a_flow_under_a_parent_that_does_not_exist_writes_nothing(connection: redis.Redis,
                                                                   queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    missing = {"id": "gone", "queue": queue.keys.base}
    with (writes_nothing(connection, queue_name),  # meta version included: a refused first call stamps nothing
          pytest.raises(NotFoundError, match=r"add_flow: parent: add 'root': parent job of '.*' does not exist")):
        queue.add_flow({"name": "root", "opts": {"parent": missing}}, [{"name": "c"}])
    assert connection.exists(queue.keys.meta) == 0


def test_a_flow_root_that_reuses_a_job_of_another_parent_writes_nothing(connection: redis.Redis,
                                                                         queue_name: str) -> None:
    queue = owned_child(Queue(connection, queue_name), "taken")
    queue.add("holder", job_id="holder")
    holder = {"id": "holder", "queue": queue.keys.base}
    with (writes_nothing(connection, queue_name),
          pytest.raises(InvalidStateError, match=r"add_flow: parent: add 'root'")):
        queue.add_flow({"name": "root", "opts": {"job_id": "taken", "parent": holder}}, [{"name": "c"}])


def test_a_node_reusing_the_job_of_a_parent_an_earlier_node_stores_is_refused(connection: redis.Redis,
                                                                              queue_name: str) -> None:
    """The checks see the flow as its adds will: a job whose old parent is gone now, but that an
    earlier node of the same flow creates again, belongs to that node by the time it is added."""
    queue = Queue(connection, queue_name)
    queue.add_flow({"name": "old", "opts": {"job_id": "p"}}, [{"name": "c", "opts": {"job_id": "orphan"}}])
    connection.delete(queue.keys.job("p"))  # its parent is gone: the job may be attached elsewhere
    with writes_nothing(connection, queue_name), pytest.raises(InvalidStateError, match=r"children\[1\]: add 'c'"):
        queue.add_flow({"name": "root"}, [{"name": "again", "opts": {"job_id": "p"}, "children": [{"name": "x"}]},
                                          {"name": "c", "opts": {"job_id": "orphan"}}])
    root = queue.add_flow({"name": "root"}, [{"name": "c", "opts": {"job_id": "orphan"}}])  # gone parent: attached
    assert queue.get_job("orphan").parent_key == root.key


def test_a_child_that_finished_already_counts_as_done_and_the_parent_moves_on(connection: redis.Redis,
                                                                               queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    with Running(Worker(connection, queue_name, lambda job: f"done {job.name}")):
        queue.add("earlier", job_id="done-1")
        assert wait_until(lambda: queue.get_job("done-1").get_state() == "completed")
    parent = queue.add_flow({"name": "p"}, [{"name": "again", "opts": {"job_id": "done-1"}}])
    assert parent.get_state() == "waiting"  # released in the same call: nothing left to wait for
    assert parent.get_children_values() == {queue.keys.job("done-1"): "done earlier"}
    assert parent.get_pending_dependencies() == []


def test_a_child_that_failed_already_is_a_pending_dependency(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)

    def fail(job: Any) -> None:
        raise RuntimeError("no")

    with Running(Worker(connection, queue_name, fail)):
        queue.add("earlier", job_id="failed-1")
        assert wait_until(lambda: queue.get_job("failed-1").get_state() == "failed")
    parent = queue.add_flow({"name": "p"}, [{"name": "again", "opts": {"job_id": "failed-1"}}])
    assert parent.get_state() == "waiting-children"
    assert parent.get_pending_dependencies() == [queue.keys.job("failed-1")]


# -- flows: refused before anything is sent ----------------------------------------------------------

@pytest.mark.parametrize(("bad_child", "error", "message"), [
    ({"name": "c", "opts": {"delay": -1}}, InvalidJobOptionsError, r"children\[1\]: job option delay=-1"),
    ({"name": "c", "opts": {"priority": 2**21}}, InvalidJobOptionsError, r"children\[1\]: job option priority"),
    ({"name": "c", "opts": {"job_id": "12"}}, InvalidJobOptionsError, r"children\[1\]: job option job_id='12'"),
    ({"name": "c", "opts": {"deduplication": {"id": "d"}}}, InvalidJobOptionsError,
     r"children\[1\]: job option deduplication=.* cannot be used together with parent"),
    ({"name": "c", "opts": {"parent": {"id": "x", "queue": "emq:{x}"}}}, InvalidInputError,
     r"children\[1\]: node 'c' must not set parent"),
    ({"name": "c", "opts": {"size_limit": 5}, "data": {"long": "x" * 10}}, InvalidJobOptionsError,
     r"children\[1\]: job option size_limit=5"),
    ({"name": 7}, InvalidJobOptionsError, r"children\[1\]: job name 7: must be a str"),
    ({"name": LONE}, InvalidJobOptionsError, r"children\[1\]: job name 'caf\\udce9': holds a lone surrogate"),
    ({"name": "c", "opts": {"job_id": LONE}}, InvalidJobOptionsError, r"children\[1\]: job option job_id='caf"),
    ({"name": "c", "queue": "a:b"}, InvalidQueueNameError, r"children\[1\]: queue name 'a:b'"),
    ({"name": "c", "queue": LONE}, InvalidQueueNameError, r"children\[1\]: queue name 'caf\\udce9': holds"),
    ({"name": "c", "nodes": []}, InvalidInputError, r"children\[1\]: job .*needs 'name' and takes only"),
    ("c", InvalidInputError, r"children\[1\]: 'c' must be a job mapping"),
    ({"name": "c", "children": "x"}, InvalidInputError, r"children\[1\]: children='x' must be a list"),
    ({"name": "c", "children": [{"name": "cc", "data": float("nan")}]}, InvalidJobOptionsError,
     r"children\[1\]\.children\[0\]: job data .*not JSON-serialisable"),
])
def test_a_bad_node_refuses_the_flow_naming_it(connection: redis.Redis, queue_name: str, bad_child: Any,
                                               error: type[Exception], message: str) -> None:
    queue = Queue(connection, queue_name)
    with writes_nothing(connection, queue_name), pytest.raises(error, match=message):
        queue.add_flow({"name": "p"}, [{"name": "fine"}, bad_child])


def test_data_over_the_queue_limits_refuses_the_flow(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, max_data_bytes=1000, max_data_depth=4)
    with writes_nothing(connection, queue_name):
        with pytest.raises(InvalidJobOptionsError, match=r"children\[0\]: job 'c': its data is .* over max_data_bytes"):
            queue.add_flow({"name": "p"}, [{"name": "c", "data": {"s": "x" * 2000}}])
        with pytest.raises(InvalidJobOptionsError, match=r"parent: job 'p': its data is nested deeper"):
            queue.add_flow({"name": "p", "data": [[[[[1]]]]]}, [{"name": "c"}])


def test_an_id_used_twice_in_one_flow_is_refused_naming_both_nodes(connection: redis.Redis,
                                                                    queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    with writes_nothing(connection, queue_name):
        with pytest.raises(InvalidInputError, match=r"children\[0\]\.children\[0\]: job_id 'same' is also the id of "
                                                    r"parent"):
            queue.add_flow({"name": "p", "opts": {"job_id": "same"}},
                           [{"name": "c", "children": [{"name": "cc", "opts": {"job_id": "same"}}]}])
        with pytest.raises(InvalidInputError, match=r"children\[1\]: job_id 'twin' is also the id of children\[0\]"):
            queue.add_flow({"name": "p"}, [{"name": "a", "opts": {"job_id": "twin"}},
                                           {"name": "b", "opts": {"job_id": "twin"}}])


def test_the_same_id_in_two_queues_is_two_jobs(connection: redis.Redis, queue_name: str, other_queue: str) -> None:
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "p"}, [{"name": "a", "opts": {"job_id": "twin"}},
                                            {"name": "b", "opts": {"job_id": "twin"}, "queue": other_queue}])
    assert sorted(parent.get_pending_dependencies()) == sorted(
        [queue.keys.job("twin"), QueueKeys(other_queue).job("twin")])


def test_the_node_count_limit_at_its_edge(connection: redis.Redis, queue_name: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flows, "MAX_FLOW_NODES", 20)
    queue = Queue(connection, queue_name)
    with (writes_nothing(connection, queue_name),
          pytest.raises(InvalidInputError, match="the flow has more than 20 nodes")):
        queue.add_flow({"name": "p"}, [{"name": "c"}] * 20)
    parent = queue.add_flow({"name": "p"}, [{"name": "c"}] * 19)
    assert len(parent.get_pending_dependencies()) == 19


def test_the_flow_size_limit_at_its_edge(connection: redis.Redis, queue_name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(connection, queue_name)
    root, child = {"name": "p", "opts": {"job_id": "p"}}, {"name": "c", "opts": {"job_id": "c"}, "data": "x" * 500}
    exact = sum(len(arg) for node in flows._plan(root, [child], queue._planner, queue._adder._planner_for)
                for arg in node.call.args)
    monkeypatch.setattr(flows, "MAX_FLOW_BYTES", exact - 1)
    with writes_nothing(connection, queue_name), pytest.raises(InvalidInputError, match=f"more than {exact - 1} bytes"):
        queue.add_flow(root, [child])
    monkeypatch.setattr(flows, "MAX_FLOW_BYTES", exact)
    assert queue.add_flow(root, [child]).id == "p"


def test_a_flow_deeper_than_pythons_recursion_limit_is_written_whole(connection: redis.Redis, queue_name: str,
                                                                       backend: str) -> None:
    depth = 1200 if backend != "fake" else 1050  # planned without recursion (it raised RecursionError)
    node: dict[str, Any] = {"name": "leaf", "opts": {"job_id": "leaf"}}
    for level in range(depth):
        node = {"name": f"n{level}", "children": [node]}
    queue = Queue(connection, queue_name)
    root = queue.add_flow({"name": "root"}, [node])
    counts = queue.get_job_counts("waiting-children", "waiting")
    assert counts == {"waiting-children": depth + 1, "waiting": 1}
    assert root.get_state() == "waiting-children" and queue.get_job("leaf").get_state() == "waiting"
    assert root.remove() is True
    assert queue.get_job_counts("waiting-children", "waiting") == {"waiting-children": 0, "waiting": 0}


# -- flows: deduplication ---------------------------------------------------------------------------

def test_a_flow_whose_root_is_deduplicated_adds_none_of_its_nodes(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    first = queue.add_flow({"name": "p", "opts": {"deduplication": {"id": "once"}}}, [{"name": "c"}])
    before = dump(connection, queue_name)
    second = queue.add_flow({"name": "p", "opts": {"deduplication": {"id": "once"}}}, [{"name": "c2"}, {"name": "c3"}])
    assert second.id == first.id
    after = dump(connection, queue_name)
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    assert changed == [queue.keys.events, queue.keys.id]  # the add's own: the counter and "deduplicated"
    last = connection.xrevrange(queue.keys.events, count=1)[0][1]
    assert last[b"event"] == b"deduplicated" and last[b"jobId"] == first.id.encode()
    assert queue.get_job_counts("waiting", "waiting-children") == {"waiting": 1, "waiting-children": 1}


def test_a_deduplicated_root_with_a_refused_child_is_refused(connection: redis.Redis, queue_name: str) -> None:
    queue = owned_child(Queue(connection, queue_name), "taken")
    queue.add_flow({"name": "p", "opts": {"deduplication": {"id": "once"}}}, [{"name": "c"}])
    with writes_nothing(connection, queue_name), pytest.raises(InvalidStateError, match=r"children\[0\]"):
        queue.add_flow({"name": "p", "opts": {"deduplication": {"id": "once"}}},
                       [{"name": "c", "opts": {"job_id": "taken"}}])


# -- flows: what stays as it was ----------------------------------------------------------------------

def test_a_flow_again_with_the_same_ids_adds_nothing_new(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    tree = [{"name": "a", "opts": {"job_id": "a"}}, {"name": "b", "opts": {"job_id": "b", "delay": 60_000}},
            {"name": "c", "opts": {"job_id": "c", "priority": 3}}]
    first = queue.add_flow({"name": "p", "opts": {"job_id": "p"}}, tree)
    jobs_before = {key: value for key, value in dump(connection, queue_name).items()
                   if key not in (queue.keys.events, queue.keys.id)}
    again = queue.add_flow({"name": "p", "opts": {"job_id": "p"}}, tree)
    assert again.id == first.id == "p"
    jobs_after = {key: value for key, value in dump(connection, queue_name).items()
                  if key not in (queue.keys.events, queue.keys.id)}
    assert jobs_after == jobs_before
    kinds = [fields[b"event"] for _id, fields in connection.xrange(queue.keys.events)]
    assert kinds[-4:] == [b"duplicated"] * 4


def test_a_flow_on_every_add_script_runs_to_the_end(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    parent = queue.add_flow({"name": "sum"}, [
        {"name": "n", "data": {"n": 1}}, {"name": "n", "data": {"n": 2}, "opts": {"priority": 2}},
        {"name": "n", "data": {"n": 3}, "opts": {"delay": 50}},
        {"name": "mid", "children": [{"name": "n", "data": {"n": 4}, "opts": {"lifo": True}}]}])
    assert queue.get_job_counts("waiting", "prioritized", "delayed", "waiting-children") == {
        "waiting": 2, "prioritized": 1, "delayed": 1, "waiting-children": 2}

    def process(job: Any) -> int:
        return sum(job.get_children_values().values()) if job.name in ("sum", "mid") else int(job.data["n"])

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: parent.get_state() == "completed")
    assert parent.reload().return_value == 10


# -- lone surrogates and other strings Redis cannot take --------------------------------------------

def test_a_lone_surrogate_anywhere_in_a_bulk_writes_none_of_it(connection: redis.Redis, queue_name: str) -> None:
    """The issue's case: 602 to 749 of 2,000 jobs were written before a raw UnicodeEncodeError."""
    queue = Queue(connection, queue_name)
    for bad, field in (((LONE, {}), "job name"), (("ok", {}, {"job_id": LONE}), "job option job_id"),
                       (("ok", {}, {"deduplication": {"id": LONE}}), "job option deduplication.id"),
                       (("ok", {}, {"parent": {"id": LONE, "queue": queue.keys.base}}), "job option parent.id"),
                       (("ok", {}, {"repeat_job_key": LONE}), "job option repeat_job_key"),
                       (("ok", {}, {"telemetry": {"metadata": LONE}}), "job option telemetry"),
                       (("ok", {}, {"backoff": {"type": LONE, "delay": 5}}), "job option backoff")):
        jobs = [("ok", {"i": i}) for i in range(1000)] + [bad] + [("ok", {"i": i}) for i in range(999)]
        with writes_nothing(connection, queue_name), pytest.raises(InvalidJobOptionsError) as caught:
            queue.add_bulk(jobs)
        message = str(caught.value)
        assert message.startswith(f"add_bulk: jobs[1000]: {field}")
        assert "'caf\\udce9'" in message and "lone surrogate '\\udce9'" in message


def test_a_long_bad_value_is_shown_shortened(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError) as caught:
        queue.add("x" * 5000 + "\udc80")
    assert len(str(caught.value)) < 400 and "at index 5000" in str(caught.value)


def test_lone_surrogates_are_refused_on_every_door(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("kept", job_id="kept")
    scheduler = JobScheduler(connection, queue_name)
    with writes_nothing(connection, queue_name):
        with pytest.raises(InvalidJobOptionsError, match="job name 'caf"):
            queue.add(LONE)
        with pytest.raises(InvalidQueueNameError, match="lone surrogate"):
            Queue(connection, LONE)
        with pytest.raises(InvalidInputError, match="prefix 'caf"):
            Queue(connection, queue_name, prefix=LONE)
        with pytest.raises(InvalidInputError, match="log line 'caf"):
            job.log(LONE)
        for call in (queue.get_job, queue.remove, queue.promote, lambda job_id: queue.update_data(job_id, {}),
                     lambda job_id: queue.log(job_id, "line")):
            with pytest.raises(InvalidJobOptionsError, match="job_id='caf"):
                call(LONE)
        with pytest.raises(InvalidInputError, match="dedup_id='caf"):
            queue.remove_deduplication_key(LONE)
        with pytest.raises(InvalidInputError, match="scheduler id 'caf"):
            scheduler.upsert(LONE, {"every": 1000})
        with pytest.raises(InvalidJobOptionsError, match="job name 'caf"):
            scheduler.upsert("s", {"every": 1000}, LONE)
        with pytest.raises(InvalidJobOptionsError, match=r"job option backoff=.*lone surrogate"):
            scheduler.upsert("s", {"every": 1000}, "n", {}, {"backoff": {"type": LONE}})
        with pytest.raises(InvalidJobOptionsError, match=r"job option telemetry=.*lone surrogate"):
            queue.add("x", telemetry={"metadata": LONE})  # the scripts read options back: cjson refuses it
        with pytest.raises(InvalidInputError, match="scheduler_id 'caf"):
            scheduler.remove(LONE)


def test_data_with_lone_surrogates_is_still_stored_and_read_back(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    [job] = queue.add_bulk([("ok", {"path": LONE})])
    parent = queue.add_flow({"name": "p", "data": [LONE]}, [{"name": "c", "data": LONE}])
    assert queue.get_job(job.id).data == {"path": LONE} and queue.get_job(parent.id).data == [LONE]


# -- bulks the server refuses in part -------------------------------------------------------------------

def test_a_bulk_with_refused_jobs_says_which_were_written(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add_flow({"name": "owner", "opts": {"job_id": "owner"}}, [{"name": "c", "opts": {"job_id": "taken"}}])
    gone = {"id": "gone", "queue": queue.keys.base}
    jobs: list[Any] = [("ok", {"i": i}, {"job_id": f"ok-{i}"}) for i in range(600)]
    jobs[3] = ("orphan", {}, {"parent": gone})
    jobs[400] = ("thief", {}, {"job_id": "taken", "parent": {"id": "ok-0", "queue": queue.keys.base}})
    with pytest.raises(BulkWriteError) as caught:
        queue.add_bulk(jobs)
    error = caught.value
    assert sorted(error.refused) == [3, 400]
    assert isinstance(error.refused[3], NotFoundError) and isinstance(error.refused[400], InvalidStateError)
    assert sorted(error.written) == [i for i in range(600) if i not in (3, 400)]
    assert error.unknown == () and error.not_sent == ()
    assert error.job_ids == [f"ok-{i}" for i in range(600) if i not in (3, 400)]
    assert all(queue.get_job(job_id) is not None for job_id in error.job_ids)
    assert str(error).startswith("add_bulk: 598 of 600 jobs written (jobs 0-2, 4-399, 401-599), 2 refused "
                                 "(jobs 3, 400; jobs[3]: NotFoundError: ")
    assert isinstance(error.__cause__, NotFoundError)


def test_a_bulk_refused_whole_raises_its_first_refusal(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    gone = {"id": "gone", "queue": queue.keys.base}
    with (writes_nothing(connection, queue_name),
          pytest.raises(NotFoundError, match=r"parent job of '.*' does not exist")):
        queue.add_bulk([("a", {}, {"parent": gone}), ("b", {}, {"parent": gone})])


def test_on_a_cluster_a_flow_under_a_parent_in_another_slot_is_refused(cluster_connection: Any,
                                                                       queue_name: str) -> None:
    elsewhere = next(f"{queue_name}-x{i}" for i in range(1000)
                     if key_slot(QueueKeys(f"{queue_name}-x{i}").meta) != key_slot(QueueKeys(queue_name).meta))
    holder = Queue(cluster_connection, elsewhere).add("holder", job_id="holder")
    queue = Queue(cluster_connection, queue_name)
    try:
        with pytest.raises(InvalidInputError, match=r"all its queues must share one slot; this flow spans queue "
                                                    r"'.*' \(slot \d+\), the root's parent 'emq:\{.*-x\d+\}:holder'"):
            queue.add_flow({"name": "p", "opts": {"parent": {"id": holder.id, "queue": QueueKeys(elsewhere).base}}},
                           [{"name": "c"}])
        assert queue_snapshot(queue.client, queue_name) == {}
    finally:
        delete_queue_keys(Queue(cluster_connection, elsewhere).client, elsewhere)


# -- a stored events cap that is not a count ---------------------------------------------------------

def test_an_events_cap_that_is_not_a_count_fails_no_script_half_way(connection: redis.Redis, queue_name: str) -> None:
    """Each of these scripts wrote first and then failed on XADD MAXLEN ~ <not a number> (an add
    left its job in wait, its hash and its events, and raised): now the cap trims nothing."""
    queue = Queue(connection, queue_name)

    def fail(job: Any) -> None:
        raise RuntimeError("no")

    with Running(Worker(connection, queue_name, fail)):
        failed = queue.add("fails", job_id="failed-1")
        assert wait_until(lambda: failed.get_state() == "failed")
    connection.hset(queue.keys.meta, "opts.maxLenEvents", "many")  # written by someone else
    job = queue.add("plain")
    parent = queue.add_flow({"name": "p"}, [{"name": "c", "opts": {"delay": 60_000}}])
    later = queue.add("later", delay=60_000)
    later.change_delay(120_000)
    job.update_progress(50)
    failed.retry()
    assert queue.promote_jobs() == 2
    assert queue.get_job_counts("waiting", "waiting-children", "delayed", "failed") == {
        "waiting": 4, "waiting-children": 1, "delayed": 0, "failed": 0}
    assert queue.get_job(job.id).progress == 50 and parent.get_state() == "waiting-children"
    assert connection.hget(queue.keys.meta, "opts.maxLenEvents") == b"many"  # left as it is
