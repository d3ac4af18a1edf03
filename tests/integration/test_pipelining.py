"""Streamed pipelining: replies in order across windows, error replies in their slot, NOSCRIPT."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ResponseError

from echomq import Queue
from echomq.protocol.keys import QueueKeys
from echomq.transport.scripts import script
from echomq.transport.stream_calls import WINDOW, run_calls

from support.queue_keys import SCAN_COUNT


def test_replies_come_back_in_order_across_windows(connection: redis.Redis, queue_name: str) -> None:
    jobs = Queue(connection, queue_name).add_bulk([("x", n) for n in range(2 * WINDOW + 7)])
    assert [j.id for j in jobs] == [str(n) for n in range(1, 2 * WINDOW + 8)]
    assert connection.llen(QueueKeys(queue_name).wait) == 2 * WINDOW + 7


def test_an_error_reply_stays_in_its_slot(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    a, b = queue.add("a"), queue.add("b")
    connection.set(k.job_logs(a.id), "not a list")
    add_log = script("addLog")
    replies = run_calls(connection, [(add_log, [k.job(b.id), k.job_logs(b.id)], [b.id, "1", ""]),
                                     (add_log, [k.job(a.id), k.job_logs(a.id)], [a.id, "x", ""]),
                                     (add_log, [k.job(b.id), k.job_logs(b.id)], [b.id, "2", ""])])
    assert replies[0] == 1 and replies[2] == 2
    assert isinstance(replies[1], ResponseError)
    # The connection is still in step: the next command gets its own reply.
    assert queue.add("c").id == "3"


def test_a_flushed_script_cache_is_reloaded(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("first")
    connection.script_flush()
    assert [j.id for j in queue.add_bulk([("x", 1), ("y", 2)])] == ["2", "3"]
    connection.script_flush()
    assert queue.add("z").id == "4"


@pytest.mark.parametrize("decode", [False, True])
def test_works_with_either_decode_setting(server_url: str, queue_name: str, decode: bool) -> None:
    client = redis.Redis.from_url(server_url, decode_responses=decode)
    try:
        jobs = Queue(client, queue_name).add_bulk([("x", 1), ("y", 2)])
        assert [j.id for j in jobs] == ["1", "2"]
    finally:
        client.delete(*client.scan_iter(match=QueueKeys(queue_name).all_keys_pattern(), count=SCAN_COUNT))
        client.close()
