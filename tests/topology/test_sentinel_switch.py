"""After ``SENTINEL FAILOVER``, writes go to the new master within the check interval, not
when the sentinels get round to demoting the old one (seconds later; until then it is still a
master and what it takes is lost when it resyncs)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from echomq import Queue
from echomq.transport.sentinel import MASTER_CHECK_INTERVAL_S

from support.topologies import SentinelSetup


def test_adds_move_to_the_promoted_master_before_the_old_one_is_demoted(
        sentinel_factory: Callable[..., SentinelSetup], queue_name: str) -> None:
    setup = sentinel_factory()
    old = setup.master()
    client = setup.client()
    queue = Queue(client, queue_name)
    try:
        queue.add("before")
        setup.failover()
        new = setup.wait_master_change(old)
        time.sleep(MASTER_CHECK_INTERVAL_S * 1.2)
        assert old.info("replication").get("role") == "master", "the rig demoted the old master too soon to tell"
        added = []
        for n in range(3):  # the first send may be the one that finds out, and raise
            try:
                added.append(queue.add("after", {"n": n}).id)
            except redis.ConnectionError:
                continue
        assert added, "no add went through after the switch"
        on_new = redis.Redis(host="127.0.0.1", port=new.port)
        on_old = redis.Redis(host="127.0.0.1", port=old.port)
        try:
            for job_id in added:
                assert on_new.hget(f"emq:{{{queue_name}}}:{job_id}", "name") == b"after"
                assert on_old.exists(f"emq:{{{queue_name}}}:{job_id}") == 0
            assert old.info("replication").get("role") == "master"  # still: the writes went elsewhere on purpose
        finally:
            on_new.close()
            on_old.close()
    finally:
        queue.close()
        client.close()
