"""When the queue's slot moves (a resharding with CLUSTER SETSLOT / MIGRATE, a CLUSTER FAILOVER
that promotes the replica), the Worker, its marker wait and QueueEvents follow it to the new
master by themselves: MOVED (or a refused connection) re-resolves the owner, nothing is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import EventType, Queue, QueueEvents, Worker
from echomq.protocol.keys import QueueKeys

from support.topologies import Cluster, Node
from support.workers import wait_until

pytestmark = pytest.mark.real_only


def migrate_slot(cluster: Cluster, slot: int, source: Node, target: Node) -> None:
    """Move ``slot`` and its keys from ``source`` to ``target``, as ``redis-cli --cluster reshard`` does."""
    source_id, target_id = source.call("CLUSTER", "MYID"), target.call("CLUSTER", "MYID")
    target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    while True:
        keys = source.call("CLUSTER", "GETKEYSINSLOT", slot, 100)
        if not keys:
            break
        source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "REPLACE", "KEYS", *keys)
    for node in cluster.masters():
        node.call("CLUSTER", "SETSLOT", slot, "NODE", target_id)


class Running:
    """A worker and a QueueEvents on one queue, counting what completes and what is seen."""

    def __init__(self, connection: Any, queue_name: str) -> None:
        self.queue = Queue(connection, queue_name)
        self.completed: set[str] = set()
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        self.events = QueueEvents(connection, queue_name, block_ms=300)
        self.events.subscribe(self._on_event)
        self.events.start()
        self.worker = Worker(connection, queue_name, self._process, concurrency=2, drain_delay=0.3).start()
        self.added: list[str] = []
        self.retried = 0

    def _process(self, job: Any) -> None:
        with self._lock:
            self.completed.add(job.id)

    def _on_event(self, kind: EventType, data: dict[str, Any]) -> None:
        if kind is EventType.COMPLETED:
            self.seen.add(data["jobId"])

    def add(self, count: int) -> None:
        """Add ``count`` jobs. An add in flight as the slot moves raises ConnectionError once, as
        a lost connection would (docs/deployment.md); the host retries it, and that one goes to
        the new owner."""
        for i in range(count):
            try:
                job = self.queue.add("x", {"i": i})
            except redis.ConnectionError:
                self.retried += 1
                job = self.queue.add("x", {"i": i})
            self.added.append(str(job.id))

    def all_done(self, timeout: float = 30) -> float:
        """Seconds until every job added has completed and its event was seen."""
        began = time.monotonic()
        assert wait_until(lambda: set(self.added) <= self.completed and set(self.added) <= self.seen,
                          timeout=timeout), (len(self.added), len(self.completed), len(self.seen))
        return time.monotonic() - began

    def close(self) -> None:
        self.worker.close()
        self.events.close()
        self.queue.close()


def _follows(cluster: Cluster, queue_name: str, move: Callable[[Node], Node]) -> None:
    key = QueueKeys(queue_name).meta
    before = cluster.owner_of(key)
    client = cluster.client()
    running = Running(client, queue_name)
    try:
        running.add(20)
        running.all_done()
        after = move(before)
        assert cluster.owner_of(key).port == after.port != before.port
        running.add(20)  # through the Queue's own client: it follows the slot too
        running.all_done()
        assert running.retried <= 1
        assert after.call("ZCARD", QueueKeys(queue_name).completed) == 40  # on the new owner
    finally:
        running.close()
        client.close()


def test_the_components_follow_a_resharded_slot(cluster_factory: Callable[..., Cluster], queue_name: str) -> None:
    cluster = cluster_factory()
    slot = cluster.client().keyslot(QueueKeys(queue_name).meta)

    def reshard(owner: Node) -> Node:
        target = next(m for m in cluster.masters() if m.port != owner.port)
        migrate_slot(cluster, slot, owner, target)
        return target

    _follows(cluster, queue_name, reshard)


def test_the_components_follow_a_cluster_failover_to_the_replica(cluster_factory: Callable[..., Cluster],
                                                                 queue_name: str) -> None:
    cluster = cluster_factory()

    def failover(owner: Node) -> Node:
        replica = cluster.replica_of(owner)
        replica.call("CLUSTER", "FAILOVER")
        return cluster.wait_owner_change(QueueKeys(queue_name).meta, owner)

    _follows(cluster, queue_name, failover)


def test_a_worker_settling_on_the_old_master_after_a_cluster_failover_finds_the_new_one(
        cluster_factory: Callable[..., Cluster], queue_name: str) -> None:
    # CLUSTER FAILOVER leaves the old master up, as a replica. A worker that lost a connection
    # settles first (it asks the server who it is, INFO, before any script): INFO has no key,
    # so no MOVED tells the worker's slot router the owner changed. That answer must send it
    # to the new master; before, every settle asked the old one again and the worker took no
    # job until restarted (seen under full load: 30 s of "the new master is not reached yet").
    cluster = cluster_factory()
    key = QueueKeys(queue_name).meta
    owner = cluster.owner_of(key)
    client = cluster.client()
    done: list[str] = []
    worker = Worker(client, queue_name, lambda job: done.append(job.id), drain_delay=0.3)
    try:
        moves = worker.transitions.moves
        moves.settle(force=True)  # who the server is, with a socket to it now in the pool
        cluster.replica_of(owner).call("CLUSTER", "FAILOVER")
        new = cluster.wait_owner_change(key, owner)
        moves.suspect = True  # as a lost connection leaves it
        with pytest.raises(redis.ConnectionError, match="the server is a replica now"):
            moves.settle()  # the pooled socket still reaches the old master
        assert wait_until(lambda: _settles(moves), timeout=5), "the worker kept asking the old master"
        worker.start()
        job = Queue(client, queue_name).add("after", {})
        assert wait_until(lambda: done == [job.id], timeout=10)
        assert new.call("ZCARD", QueueKeys(queue_name).completed) == 1
    finally:
        worker.close(5)
        client.close()


def _settles(moves: Any) -> bool:
    try:
        moves.settle()
    except redis.ConnectionError:
        return False
    return True
