"""list_queues / find_queues: every queue under a prefix, found with SCAN, with its counts.

Each test works under a prefix of its own (support/prefixes.py): the shared Redis holds other
tests' queues under ``emq``, and listing a whole server must not meet them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, JobScheduler, PermissionDeniedError, Queue, QueueEvents, Worker
from echomq.queue.discovery import QueueSummary, find_queues, list_queues

from support.prefixes import delete_prefix, new_prefix, prefix_snapshot
from support.workers import Running, wait_until

NO_JOBS = {"active": 0, "completed": 0, "delayed": 0, "failed": 0, "paused": 0, "prioritized": 0, "waiting": 0,
           "waiting-children": 0}


@pytest.fixture
def prefix(connection: redis.Redis) -> Iterator[str]:
    name = new_prefix()
    yield name
    delete_prefix(connection, name)


def fail(job: Any) -> None:
    raise RuntimeError("no")


def test_every_queue_under_the_prefix_with_its_counts(connection: redis.Redis, prefix: str) -> None:
    orders = Queue(connection, "orders", prefix=prefix)
    orders.add("a", {}), orders.add("b", {}, delay=3_600_000), orders.add("c", {}, priority=3)
    orders.add_flow({"name": "parent", "data": {}}, [{"name": "child", "data": {}}])
    failing = Queue(connection, "billing", prefix=prefix)
    failing.add("charge", {}, attempts=1)
    with Running(Worker(connection, "billing", fail, prefix=prefix)):
        assert wait_until(lambda: failing.get_job_counts("failed")["failed"] == 1)
    failing.pause()
    JobScheduler(connection, "reports", prefix=prefix).upsert("nightly", {"pattern": "0 2 * * *"}, "report")
    Queue(connection, "elsewhere", prefix=prefix + "-x").add("a", {})   # a longer prefix: not ours
    Queue(connection, "other").add("a", {})                             # emq: not ours either
    try:
        found = list_queues(connection, prefix)
    finally:
        Queue(connection, "other").obliterate(force=True)
        delete_prefix(connection, prefix + "-x")
    assert [summary.name for summary in found] == ["billing", "orders", "reports"]
    billing, orders_summary, reports = found
    assert orders_summary == QueueSummary(
        name="orders", prefix=prefix, counts={**NO_JOBS, "waiting": 2, "delayed": 1, "prioritized": 1,
                                              "waiting-children": 1},
        paused=False, schedulers=0, workers=0, version=orders_summary.version)
    assert orders_summary.version is not None and orders_summary.version.startswith("echomq-python:")
    assert (billing.counts, billing.paused) == ({**NO_JOBS, "failed": 1}, True)
    assert (reports.schedulers, reports.counts["delayed"]) == (1, 1)
    assert find_queues(connection, prefix) == ["billing", "orders", "reports"]


def test_an_empty_server_lists_nothing_and_listing_writes_nothing(connection: redis.Redis, prefix: str) -> None:
    assert list_queues(connection, prefix) == [] and find_queues(connection, prefix) == []
    Queue(connection, "q", prefix=prefix).add("a", {})
    before = prefix_snapshot(connection, prefix)
    assert [s.name for s in list_queues(connection, prefix)] == ["q"]
    assert prefix_snapshot(connection, prefix) == before


def test_keys_that_are_not_an_echomq_queue_are_left_out(connection: redis.Redis, prefix: str) -> None:
    Queue(connection, "real", prefix=prefix).add("a", {})
    connection.hset(f"{prefix}:plain:meta", "version", "bullmq:6.7.0")       # BullMQ, a name without braces
    connection.hset(f"{prefix}:{{real}}:x}}:meta", "name", "a job's hash")   # not a meta key
    connection.hset(f"{prefix}:{{a:b}}:meta", "version", "x")                # a name EchoMQ cannot address
    connection.hset(f"{prefix}:{{}}:meta", "version", "x")                   # no name at all
    connection.set(f"{prefix}:{{only-wait}}:wait", "x")                      # no meta: not (yet) a queue
    assert find_queues(connection, prefix) == ["real"]


def test_a_prefix_with_glob_characters_matches_only_itself(connection: redis.Redis, prefix: str) -> None:
    starred, plain = f"{prefix}*[x]?", f"{prefix}ab-x-"
    for name in (starred, plain):
        Queue(connection, "q", prefix=name).add("a", {})
    try:
        assert [(s.name, s.prefix) for s in list_queues(connection, starred)] == [("q", starred)]
        assert [(s.name, s.prefix) for s in list_queues(connection, plain)] == [("q", plain)]
    finally:
        delete_prefix(connection, starred.replace("*", "\\*").replace("[", "\\[").replace("]", "\\]")
                      .replace("?", "\\?"))
        delete_prefix(connection, plain)


def test_a_scan_of_one_key_per_call_still_finds_every_queue(connection: redis.Redis, prefix: str) -> None:
    names = [f"q{n}" for n in range(25)]
    for name in names:
        Queue(connection, name, prefix=prefix).add("a", {})
    assert find_queues(connection, prefix, scan_count=1) == sorted(names)
    assert [s.counts["waiting"] for s in list_queues(connection, prefix, scan_count=1)] == [1] * 25


def test_workers_are_counted_per_queue_and_event_readers_are_not(connection: redis.Redis, prefix: str) -> None:
    Queue(connection, "busy", prefix=prefix).add("a", {})
    Queue(connection, "idle", prefix=prefix).add("a", {}, delay=3_600_000)
    events = QueueEvents(connection, "idle", prefix=prefix).start()
    try:
        with Running(Worker(connection, "busy", lambda job: None, prefix=prefix, name="billing-1")), \
                Running(Worker(connection, "busy", lambda job: None, prefix=prefix)):
            assert wait_until(lambda: [s.workers for s in list_queues(connection, prefix)] == [2, 0])
    finally:
        events.close()
    assert [s.workers for s in list_queues(connection, prefix)] == [0, 0]


@pytest.mark.parametrize("prefix_given,message", [("", "prefix must be a non-empty str"),
                                                  ("a{b", "must not contain braces"),
                                                  (7, "prefix must be a non-empty str")])
def test_a_bad_prefix_is_refused(connection: redis.Redis, prefix: str, prefix_given: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        list_queues(connection, prefix_given)
    with pytest.raises(InvalidInputError, match=message):
        find_queues(connection, prefix_given)


@pytest.mark.parametrize("scan_count", [0, -1, True, "10", 1.5])
def test_a_bad_scan_count_is_refused(connection: redis.Redis, prefix: str, scan_count: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"scan_count=.* must be an int >= 1"):
        list_queues(connection, prefix, scan_count=scan_count)


def test_a_url_is_opened_and_closed(server_url: str, url_connection: redis.Redis) -> None:
    prefix = new_prefix()
    try:
        Queue(url_connection, "by-url", prefix=prefix).add("a", {})
        assert [s.name for s in list_queues(server_url, prefix)] == ["by-url"]
        assert find_queues(server_url, prefix) == ["by-url"]
    finally:
        delete_prefix(url_connection, prefix)


# -- a restricted user (Redis 7 ACL, a server of the test's own) --------------------------------------

OPERATOR = "+scan +llen +zcard +hmget"


def _user(admin: redis.Redis, port: int, name: str, commands: str) -> redis.Redis:
    admin.execute_command("ACL", "SETUSER", name, "reset", "on", ">pw", "resetchannels", "-@all", "%R~*",
                          *commands.split())
    return redis.Redis(port=port, username=name, password="pw")


def test_a_read_only_operator_lists_and_a_refused_client_list_leaves_workers_unknown(
        redis_server_factory: Any) -> None:
    server = redis_server_factory(persistent=False)
    admin = redis.Redis(port=server.port)
    Queue(admin, "orders").add("a", {})
    without_clients = _user(admin, server.port, "operator", OPERATOR)
    with_clients = _user(admin, server.port, "operator2", OPERATOR + " +client|list")
    try:
        assert [(s.name, s.counts["waiting"], s.workers) for s in list_queues(without_clients)] == \
            [("orders", 1, None)]
        assert [s.workers for s in list_queues(with_clients)] == [0]
        no_scan = _user(admin, server.port, "noscan", "+llen +zcard +hmget")
        with pytest.raises(PermissionDeniedError, match=r"list_queues: the ACL refused SCAN; the role needs \+scan"):
            list_queues(no_scan)
    finally:
        for client in (admin, without_clients, with_clients):
            client.close()
