"""Every component on a master watched by Sentinel: ``Sentinel(...).master_for()`` clients and
``redis+sentinel://`` URLs; dedicated blocking connections ask the sentinels too, so after
SENTINEL FAILOVER the Worker and QueueEvents carry on against the new master, and the old
master's READONLY makes them re-resolve instead of retrying it forever."""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable

import pytest
import redis

from echomq import EventType, JobScheduler, Queue, QueueEvents, Worker
from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import PinnedConnection
from echomq.transport.connection import Connections, dedicated_client
from echomq.transport.scripts import script
from echomq.transport.sentinel import watch_for

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


def _watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "echomq-sentinel-watch" and t.is_alive()]


def test_the_watch_thread_lives_while_a_component_is_open_and_goes_with_the_last(
        redis_sentinel: SentinelSetup, queue_name: str) -> None:
    """One watch per Sentinel object and service: every component on it shares its thread, which
    stops (joined) when the last of them closes, whatever the order."""
    baseline = len(_watch_threads())
    client = redis_sentinel.client()
    queue = Queue(client, queue_name)
    schedules = JobScheduler(client, queue_name)
    events = QueueEvents(client, queue_name, block_ms=300).start()
    worker = Worker(client, queue_name, lambda job: "ok", drain_delay=0.3).start()
    components: list[Queue | JobScheduler | QueueEvents | Worker] = [worker, queue, events, schedules]
    try:
        queue.add("x")
        schedules.upsert("s", {"every": 60_000})
        assert wait_until(lambda: worker.processed >= 2, timeout=20)
        assert len(_watch_threads()) == baseline + 1
        while components:
            components.pop(0).close()
            if components:
                assert len(_watch_threads()) == baseline + 1, "the watch stopped while a component was open"
        assert len(_watch_threads()) == baseline, "the watch thread outlived every component"
    finally:
        for component in components:
            component.close()
        delete_queue_keys(client, queue_name)
        client.close()
    # URLs: each component builds its own Sentinel object, hence its own watch
    url = redis_sentinel.url()
    owned = [Queue(url, queue_name), QueueEvents(url, queue_name, block_ms=300).start()]
    try:
        owned[0].add("y")  # type: ignore[union-attr]
        assert wait_until(lambda: len(_watch_threads()) == baseline + 2)
    finally:
        for component in owned:
            component.close()
    assert len(_watch_threads()) == baseline


def test_a_forked_child_does_not_inherit_the_watch_and_starts_its_own(
        redis_sentinel: SentinelSetup, queue_name: str) -> None:
    client = redis_sentinel.client()
    queue = Queue(client, queue_name)
    try:
        queue.add("parent")
        watch = watch_for(queue.client)
        assert watch is not None and watch.running
        parent_thread = watch._thread
        reading, writing = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: what gunicorn does
            pid = os.fork()
        if pid == 0:  # the child: report, never return into pytest
            try:
                seen = {"running_at_fork": watch.running, "thread_at_fork": watch._thread is not None,
                        "sockets_at_fork": len(watch._sentinel_conns) + len(watch._node_conns),
                        "threads_at_fork": len(_watch_threads())}
                seen["added"] = queue.add("child").id
                seen["running_after"] = watch.running
                seen["threads_after"] = len(_watch_threads())
                seen["own_thread"] = watch._thread is not None and watch._thread is not parent_thread
                queue.close()
                seen["threads_after_close"] = len(_watch_threads())
                os.write(writing, json.dumps(seen).encode())
            finally:
                os._exit(0)
        os.close(writing)
        with os.fdopen(reading) as pipe:
            child = json.loads(pipe.read() or "{}")
        os.waitpid(pid, 0)
        assert child == {"running_at_fork": False, "thread_at_fork": False, "sockets_at_fork": 0,
                         "threads_at_fork": 0, "added": child.get("added"), "running_after": True,
                         "threads_after": 1, "own_thread": True, "threads_after_close": 0}
        assert child["added"] and int(child["added"]) > 1
        # the parent's watch went on untouched: the child closed none of its sockets
        assert watch.running and watch._thread is parent_thread
        assert queue.add("parent again").id
        assert queue.get_job_counts("waiting")["waiting"] == 3
    finally:
        queue.close()
        delete_queue_keys(client, queue_name)
        client.close()
