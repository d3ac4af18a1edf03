"""Every component on a real Redis Cluster (tests/support/topologies.py): each talks to the master
of its queue's slot, with its fast paths; a flow across slots is refused before anything is
written; a component built from a cluster URL closes every socket it opened."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from redis.cluster import RedisCluster

from echomq import EventType, JobScheduler, Queue, QueueEvents, Worker
from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys

from support.queue_keys import delete_queue_keys
from support.sockets import open_sockets_to
from support.topologies import Cluster
from support.workers import wait_until

pytestmark = pytest.mark.real_only


def names_on(node: Any) -> list[str]:
    return [str(c.get("name", "")) for c in node.use(lambda client: client.client_list())]


def test_queue_worker_scheduler_and_events_run_on_the_master_of_the_queues_slot(
        cluster_connection: RedisCluster, redis_cluster: Cluster, queue_name: str) -> None:
    keys = QueueKeys(queue_name)
    owner = redis_cluster.owner_of(keys.meta)
    seen: list[str] = []
    events = QueueEvents(cluster_connection, queue_name, block_ms=500)
    events.subscribe(lambda kind, data: seen.append(data["jobId"]) if kind is EventType.COMPLETED else None)
    events.start()
    queue = Queue(cluster_connection, queue_name)
    schedules = JobScheduler(cluster_connection, queue_name)
    worker = Worker(cluster_connection, queue_name, lambda job: job.data["n"] * 2, concurrency=2,
                    drain_delay=0.5, name="cw").start()
    try:
        assert wait_until(lambda: events.running)
        jobs = [queue.add("double", {"n": n}) for n in range(20)]
        schedules.upsert("tick", {"every": 60_000}, "double", {"n": 0})
        assert wait_until(lambda: worker.processed >= 21, timeout=20)
        assert [queue.get_job(job.id).return_value for job in jobs] == [n * 2 for n in range(20)]  # type: ignore[union-attr]
        assert wait_until(lambda: {job.id for job in jobs} <= set(seen))
        assert schedules.count() == 1
        # The worker's blocking connection and the queue's keys are on the slot's master only.
        assert any(name.endswith(":w:cw") for name in names_on(owner)), names_on(owner)
        others = [m for m in redis_cluster.masters() if m is not owner]
        assert not any(name.endswith(":w:cw") for m in others for name in names_on(m))
        assert owner.call("HEXISTS", keys.meta, "version") == 1
        assert [w["name"] for w in queue.get_workers()] == ["cw"]  # CLIENT LIST of the slot's master
    finally:
        worker.close()
        events.close()
        schedules.close()
        queue.close()


def test_a_flow_in_one_queue_is_atomic_and_a_flow_across_slots_is_refused_before_any_write(
        cluster_connection: RedisCluster, queue_name: str) -> None:
    queue = Queue(cluster_connection, queue_name)
    other = f"{queue_name}-other"
    try:
        parent = queue.add_flow({"name": "parent"}, [{"name": "a"}, {"name": "b"}])
        assert queue.get_job_counts("waiting-children", "wait") == {"waiting-children": 1, "wait": 2}
        slot_of = cluster_connection.keyslot
        assert slot_of(QueueKeys(other).meta) != slot_of(QueueKeys(queue_name).meta)
        with pytest.raises(InvalidInputError) as refused:
            queue.add_flow({"name": "p2"}, [{"name": "c", "queue": other}])
        message = str(refused.value)
        assert repr(queue_name) in message and repr(other) in message and "slot" in message
        assert queue.get_job_counts("waiting-children", "wait") == {"waiting-children": 1, "wait": 2}
        assert not cluster_connection.exists(QueueKeys(other).wait)
        assert parent.id is not None
    finally:
        queue.close()
        delete_queue_keys(cluster_connection, other)


def test_a_cluster_url_builds_everything_it_needs_and_close_leaves_no_socket_open(
        redis_cluster: Cluster, queue_name: str) -> None:
    ports = {node.port for node in redis_cluster.nodes}
    baseline = open_sockets_to(ports)
    url = redis_cluster.url()
    queue = Queue(url, queue_name)
    done = threading.Event()
    worker = Worker(url, queue_name, lambda job: done.set(), drain_delay=0.3).start()
    events = QueueEvents(url, queue_name, block_ms=300).start()
    schedules = JobScheduler(url, queue_name)
    try:
        queue.add("x")
        assert done.wait(10)
        schedules.upsert("s", {"every": 60_000})
        assert open_sockets_to(ports) > baseline
    finally:
        for component in (worker, events, schedules, queue):
            component.close()
    assert wait_until(lambda: open_sockets_to(ports) <= baseline, timeout=5), open_sockets_to(ports)
    cleanup = redis_cluster.client()
    try:
        delete_queue_keys(cleanup, queue_name)
    finally:
        cleanup.close()


def test_the_metrics_collector_and_schedules_sync_route_each_queue_to_its_own_slot(
        cluster_connection: RedisCluster, queue_name: str) -> None:
    prometheus = pytest.importorskip("prometheus_client")
    from echomq.contrib.prometheus import QueueStateCollector
    from echomq.contrib.schedules_sync import sync_schedules

    names = [f"{queue_name}-{i}" for i in range(4)]
    assert len({cluster_connection.keyslot(QueueKeys(n).meta) for n in names}) > 1
    try:
        for index, name in enumerate(names):
            with Queue(cluster_connection, name) as queue:
                for _ in range(index + 1):
                    queue.add("x")
        collector = QueueStateCollector(cluster_connection, names)
        try:
            registry = prometheus.CollectorRegistry()
            registry.register(collector)
            for index, name in enumerate(names):
                assert registry.get_sample_value("echomq_queue_jobs", {"queue": name, "state": "waiting"}) == index + 1
                assert registry.get_sample_value("echomq_queue_up", {"queue": name}) == 1
        finally:
            collector.close()
        declared = {f"s{i}": {"queue": name, "every": 60_000, "job": "x"} for i, name in enumerate(names)}
        changes = sync_schedules(cluster_connection, "emq", declared, prune=False, dry_run=False)
        assert len(changes) == len(names)
        for name in names:
            with JobScheduler(cluster_connection, name) as schedules:
                assert schedules.count() == 1
    finally:
        for name in names:
            delete_queue_keys(cluster_connection, name)
