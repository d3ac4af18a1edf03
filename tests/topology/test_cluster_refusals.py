"""A cluster that refuses a command before running it (CLUSTERDOWN while a slot is not served,
TRYAGAIN while the queue's slot is half migrated): ``Queue.add`` sends the add again until the
cluster takes it, and it is added once. Before issue 23 the add raised at the first refusal,
and on redis-py 5.0 (whose parser turns those replies into ClusterDownError and TryAgainError
with the code stripped from the message) it raised those instead of the documented
``redis.ConnectionError``; run on redis-py 5.0.4 too (tests/matrix, the lowest cell).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from redis.crc import key_slot

from echomq import Queue
from echomq.protocol.keys import QueueKeys
from echomq.queue.add_book import MIN_MARGIN

from support.topologies import Cluster, Node, wait_for

pytestmark = [pytest.mark.real_only, pytest.mark.slow]


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    yield cluster_factory(masters=3, replicas=0)


def _later(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def _state(node: Node) -> str:
    info = node.call("CLUSTER", "INFO")
    return next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("cluster_state:"))


def test_an_add_meeting_clusterdown_is_sent_again_once_the_cluster_is_up(cluster: Cluster, queue_name: str) -> None:
    client = cluster.client()
    queue = Queue(client, queue_name)
    queue.add("before")
    owner = cluster.owner_of(QueueKeys(queue_name).meta)
    other = next(node for node in cluster.masters() if node is not owner)
    slot = next(low for entry in cluster.view(other) if entry["port"] == other.port for low, _ in entry["slots"])
    for node in cluster.masters():
        node.call("CLUSTER", "DELSLOTS", slot)  # a slot nobody serves: the whole cluster is down
    wait_for("the cluster to be down", lambda: all(_state(node) == "fail" for node in cluster.nodes))
    timer = _later(0.5, lambda: other.call("CLUSTER", "ADDSLOTS", slot))
    try:
        job = queue.add("during", {"n": 1})  # CLUSTERDOWN first, then taken
        assert job.id == "2"
        assert queue.get_job_counts("waiting")["waiting"] == 2
    finally:
        timer.join()
        queue.close()
        client.close()


def test_an_add_meeting_tryagain_during_a_migration_is_sent_again(cluster: Cluster, queue_name: str) -> None:
    keys = QueueKeys(queue_name)
    client = cluster.client()
    queue = Queue(client, queue_name)
    queue.add("before")
    source = cluster.owner_of(keys.meta)
    target = next(node for node in cluster.masters() if node is not source)
    slot = key_slot(keys.meta.encode())
    source_id, target_id = source.call("CLUSTER", "MYID"), target.call("CLUSTER", "MYID")
    target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", keys.id)  # half the queue moved

    def finish_migration() -> None:
        while moving := source.call("CLUSTER", "GETKEYSINSLOT", slot, 100):
            source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "REPLACE", "KEYS", *moving)
        for node in cluster.masters():
            node.call("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    timer = _later(0.5, finish_migration)
    try:
        job = queue.add("during")  # TRYAGAIN (some of its keys moved, some not), then MOVED, then taken
        # MOVED may mean a failover: the first add past it moves the id counter by the margin
        assert job.id == str(2 + MIN_MARGIN)  # INCR gave 2, moved to max(2, 1) + the margin
        assert queue.get_job_counts("waiting")["waiting"] == 2
        assert cluster.owner_of(keys.meta) is target
    finally:
        timer.join()
        queue.close()
        client.close()
