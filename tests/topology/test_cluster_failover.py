"""The master of a queue's slot fails over under issue 23's load (tests/support/failover_load.py:
a producer at full rate in a process of its own, on a queue whose slot that master serves too,
a worker, a started QueueEvents and an ``every: 500`` schedule): by ``CLUSTER FAILOVER`` on its
replica (planned: the master hands over, nothing may be lost, and no add raises: a ``MOVED``
reply means the script did not run, and the Queue sends it again) and by kill -9 (the cluster
promotes the replica after its node timeout). One failover per test, every assertion on it (the
books of tests/topology/test_sentinel_failover.py). On the code before issue 23 the planned one
fails (adds raise MOVED), and so does the kill -9 one (a job runs twice, or adds are lost silently).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest

from echomq.protocol.keys import QueueKeys

from support.failover_load import FailoverLoad, assert_books
from support.topologies import Cluster, Node, wait_for
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]


def _queue_on(cluster: Cluster, master: Node, stem: str) -> str:
    """A queue name whose slot ``master`` serves."""
    return next(name for name in (f"{stem}-adds-{n}" for n in itertools.count())
                if cluster.owner_of(QueueKeys(name).meta) is master)


@pytest.mark.parametrize("how", ["cluster-failover", "kill-9"])
def test_a_slot_failover_under_full_load(how: str, cluster_factory: Callable[..., Cluster], queue_name: str,
                                         record_property: Callable[[str, object], None]) -> None:
    cluster = cluster_factory()
    slot_key = QueueKeys(queue_name).meta
    master = cluster.owner_of(slot_key)
    survivor = wait_for("the master's replica", lambda: cluster.replica_of(master))
    load = FailoverLoad(cluster.client, cluster.url(), queue_name, adds_queue=_queue_on(cluster, master, queue_name))
    try:
        load.start()
        assert wait_until(load.going, timeout=30), "the load never got going"
        load.mark_break()
        if how == "kill-9":
            replicas = [survivor]
            load.lose_the_lag(master, replicas)
            master.kill()
            for replica in replicas:
                replica.resume()
        else:
            survivor.call("CLUSTER", "FAILOVER")
        assert cluster.wait_owner_change(slot_key, master) is survivor
        load.mark_promoted()
        assert wait_until(load.completed_since_break, timeout=30), "no job completed after the failover"
        assert wait_until(load.delivered_since_break, timeout=30), "QueueEvents delivered nothing after the failover"
        wait_until(lambda: time.monotonic() >= load.promoted_at + 1.0, timeout=2)  # adds on the new master too
        outcome = load.finish()
    finally:
        load.close()
    for name, value in outcome.metrics.items():
        record_property(name, value)
    print(f"\n{how}: {outcome.metrics}")
    assert_books(outcome, load, none_lost=how == "cluster-failover")
    if how == "cluster-failover":
        assert outcome.add_errors == 0, "an add raised although MOVED means it did not run"
