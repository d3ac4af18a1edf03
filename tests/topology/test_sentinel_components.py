"""Every component on a master watched by Sentinel: ``Sentinel(...).master_for()`` clients and
``redis+sentinel://`` URLs; dedicated blocking connections ask the sentinels too, so after
SENTINEL FAILOVER the Worker and QueueEvents carry on against the new master, and the old
master's READONLY makes them re-resolve instead of retrying it forever."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from echomq import EventType, JobScheduler, Queue, QueueEvents, Worker
from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import PinnedConnection
from echomq.transport.connection import Connections, dedicated_client
from echomq.transport.scripts import script

from support.queue_keys import delete_queue_keys
from support.sockets import open_sockets_to
from support.topologies import SentinelSetup
from support.workers import wait_until

pytestmark = pytest.mark.real_only


def test_a_dedicated_client_of_a_master_for_client_follows_the_same_service(
        sentinel_connection: redis.Redis, redis_sentinel: SentinelSetup) -> None:
    blocking = dedicated_client(sentinel_connection, socket_timeout=15.0, client_name="emq:probe")
    try:
        assert blocking.connection_pool.service_name == redis_sentinel.service  # type: ignore[attr-defined]
        assert blocking.ping()
        assert redis_sentinel.master().use(lambda c: [x for x in c.client_list() if x["name"] == "emq:probe"])
    finally:
        blocking.close()
        blocking.connection_pool.disconnect()


def test_worker_events_and_scheduler_run_on_a_master_for_client(sentinel_connection: redis.Redis,
                                                                 queue_name: str) -> None:
    seen: list[str] = []
    events = QueueEvents(sentinel_connection, queue_name, block_ms=300)
    events.subscribe(lambda kind, data: seen.append(data["jobId"]) if kind is EventType.COMPLETED else None)
    events.start()  # raised TypeError before: the dedicated client lost the Sentinel pool's arguments
    queue = Queue(sentinel_connection, queue_name)
    schedules = JobScheduler(sentinel_connection, queue_name)
    worker = Worker(sentinel_connection, queue_name, lambda job: "ok", drain_delay=0.3).start()
    try:
        assert wait_until(lambda: events.running)
        jobs = [queue.add("x") for _ in range(10)]
        schedules.upsert("s", {"every": 60_000})
        assert wait_until(lambda: worker.processed >= 11, timeout=20)
        assert wait_until(lambda: {job.id for job in jobs} <= set(seen))
    finally:
        worker.close()
        events.close()
        schedules.close()
        queue.close()
        delete_queue_keys(sentinel_connection, queue_name)


def test_a_sentinel_url_is_owned_and_close_leaves_no_socket_open(redis_sentinel: SentinelSetup,
                                                                 queue_name: str) -> None:
    ports = {n.port for n in redis_sentinel.data} | {n.port for n in redis_sentinel.sentinels}
    baseline = open_sockets_to(ports)
    url = redis_sentinel.url()
    done = threading.Event()
    queue = Queue(url, queue_name)
    worker = Worker(url, queue_name, lambda job: done.set(), drain_delay=0.3).start()
    events = QueueEvents(url, queue_name, block_ms=300).start()
    try:
        queue.add("x")
        assert done.wait(10)
        assert open_sockets_to(ports) > baseline
    finally:
        for component in (worker, events, queue):
            component.close()
    assert wait_until(lambda: open_sockets_to(ports) <= baseline, timeout=5), open_sockets_to(ports)
    client = redis_sentinel.client()
    try:
        delete_queue_keys(client, queue_name)
    finally:
        client.close()


def test_a_pinned_script_reconnects_to_the_new_master_after_a_failover(
        sentinel_factory: Callable[..., SentinelSetup], queue_name: str) -> None:
    setup = sentinel_factory()
    client = setup.client()
    connections = Connections(client, route_key=QueueKeys(queue_name).meta)
    keys = QueueKeys(queue_name)
    pause = script("pause")
    pause_keys = pause.keys_for(keys, source="wait", target="paused")
    pinned = PinnedConnection(connections.client)  # as a worker thread pins its socket
    try:
        pinned(pause, pause_keys, ["paused", "1"])
        old = setup.master()
        setup.failover()
        new = setup.wait_master_change(old)
        assert wait_until(lambda: old.info("replication").get("role") == "slave", timeout=30)
        with pytest.raises(redis.ConnectionError):  # Sentinel closed the socket (or READONLY said so)
            pinned(pause, pause_keys, ["paused", "1"])
        pinned(pause, pause_keys, ["paused", "1"])  # the same PinnedConnection, on the new master
        assert pinned.conn.port == new.port != old.port
    finally:
        pinned.release()
        connections.close()
        client.close()


def test_worker_and_events_carry_on_after_sentinel_failover(sentinel_factory: Callable[..., SentinelSetup],
                                                            queue_name: str) -> None:
    setup = sentinel_factory()
    client = setup.client()
    completed: set[str] = set()
    seen: set[str] = set()
    events = QueueEvents(client, queue_name, block_ms=300)
    events.subscribe(lambda kind, data: seen.add(data["jobId"]) if kind is EventType.COMPLETED else None)
    events.start()
    queue = Queue(client, queue_name)
    worker = Worker(client, queue_name, lambda job: completed.add(str(job.id)), concurrency=2,
                    drain_delay=0.3).start()
    added: list[str] = []

    def add(count: int) -> None:
        for _ in range(count):
            try:
                added.append(str(queue.add("x").id))
            except redis.ConnectionError:  # the add in flight as the master changes: the host retries
                added.append(str(queue.add("x").id))

    try:
        add(10)
        assert wait_until(lambda: set(added) <= completed and set(added) <= seen, timeout=20)
        old = setup.master()
        began = time.monotonic()
        setup.failover()
        new = setup.wait_master_change(old)
        # Until the sentinels turn the old master into a replica (they close its clients then),
        # it still takes writes that its resync will drop: the loss window of docs/deployment.md.
        assert wait_until(lambda: old.info("replication").get("role") == "slave", timeout=30)
        demoted = time.monotonic() - began
        add(10)
        assert wait_until(lambda: set(added) <= completed and set(added) <= seen, timeout=30), \
            (len(added), len(completed), len(seen))
        recovered = time.monotonic() - began
        assert set(new.call("ZRANGE", QueueKeys(queue_name).completed, 0, -1)) == set(added)
        print(f"sentinel failover: old master demoted {demoted:.2f}s, every job completed and seen "
              f"{recovered:.2f}s after SENTINEL FAILOVER")
    finally:
        worker.close()
        events.close()
        queue.close()
        client.close()
