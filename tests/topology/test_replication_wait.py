"""``Queue(wait_replicas=n)`` against a real master with a replica (the shared Sentinel rig).

An add returns once the replica holds the job; asking for more replicas than there are raises
ReplicationError after the timeout, with the job kept on the master.
"""

from __future__ import annotations

import time

import pytest
import redis

from echomq import Queue, ReplicationError

from support.queue_keys import delete_queue_keys
from support.topologies import SentinelSetup


def _replica_client(setup: SentinelSetup) -> redis.Redis:
    replica = setup.replica()
    return redis.Redis(host="127.0.0.1", port=replica.port)


def test_every_add_is_on_the_replica_when_it_returns(redis_sentinel: SentinelSetup, sentinel_connection: redis.Redis,
                                                     queue_name: str) -> None:
    queue = Queue(sentinel_connection, queue_name, wait_replicas=1, wait_timeout_ms=2000)
    replica = _replica_client(redis_sentinel)
    try:
        job = queue.add("email", {"n": 1})
        # No sleep, no retry: WAIT returned, so the replica already has it.
        assert replica.hget(f"emq:{{{queue_name}}}:{job.id}", "name") == b"email"
        bulk = queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(50)])
        assert replica.exists(*(f"emq:{{{queue_name}}}:{j.id}" for j in bulk)) == 50
        root = queue.add_flow({"name": "parent"}, [{"name": "child"}])
        assert replica.hget(f"emq:{{{queue_name}}}:{root.id}", "name") == b"parent"
    finally:
        replica.close()
        delete_queue_keys(sentinel_connection, queue_name)


def test_more_replicas_than_exist_times_out_with_the_job_kept(sentinel_connection: redis.Redis,
                                                              queue_name: str) -> None:
    queue = Queue(sentinel_connection, queue_name, wait_replicas=2, wait_timeout_ms=200)
    try:
        began = time.monotonic()
        with pytest.raises(ReplicationError) as caught:
            queue.add("email", job_id="only-one-copy")
        assert time.monotonic() - began >= 0.19
        assert (caught.value.acknowledged, caught.value.required) == (1, 2)
        assert queue.get_job("only-one-copy") is not None
    finally:
        delete_queue_keys(sentinel_connection, queue_name)
