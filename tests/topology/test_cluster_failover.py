"""kill -9 of the master that owns a queue's slot, under a worker at 200 jobs/s, a started
QueueEvents and an ``every: 500`` schedule (tests/support/failover_load.py): the cluster
promotes the master's replica, and EchoMQ carries on there without losing anything the new
master holds. The killed node is started again and rejoins as the new master's replica while
the load goes on.

The measured pauses are recorded as properties of the test (``--junitxml`` shows them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from echomq.protocol.keys import QueueKeys

from support.failover_load import FailoverLoad
from support.topologies import Cluster
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]


def test_the_queue_carries_on_after_its_slots_master_is_killed(cluster_factory: Callable[..., Cluster],
                                                                queue_name: str,
                                                                record_property: Callable[[str, object], None]) -> None:
    cluster = cluster_factory()
    slot_key = QueueKeys(queue_name).meta
    master = cluster.owner_of(slot_key)
    survivor = cluster.replica_of(master)
    load = FailoverLoad(cluster.client, survivor, queue_name, survivor_readonly=True)
    try:
        load.start()
        assert wait_until(lambda: load.completed_count() >= 400, timeout=30), "the load never got going"
        load.mark_break()
        master.kill()
        assert cluster.wait_owner_change(slot_key, master) is survivor
        load.mark_promoted()
        assert wait_until(load.completed_since_break, timeout=30), "no job completed after the failover"
        assert wait_until(load.delivered_since_break, timeout=30), "QueueEvents delivered nothing after the failover"
        cluster.restart(master)  # back as the survivor's replica, under the load
        assert cluster.replica_of(survivor) is master
        time.sleep(1.0)
        outcome = load.finish()
    finally:
        load.close()
    for name, value in outcome.metrics.items():
        record_property(name, value)
    assert outcome.problems(load.kill_wall_ms, (load.kill_at, load.kill_at)) == []  # a dead master takes nothing
    assert len(outcome.present & outcome.completed) >= 600  # ~3 s of 200/s, all of it done
