"""The command line on a Redis Cluster and under Sentinel, as an operator runs it.

``--redis`` takes the URLs of docs/deployment.md (``redis+cluster://``, ``redis+sentinel://``),
and ``--cluster`` reads a plain ``redis://`` URL as a cluster's startup node. ``echomq worker``
serves queues that live in different slots (each Worker on its slot's master); the queue
commands read each queue where it lives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import Queue, Worker, WrongClusterNodeError
from echomq.cli import main

from support.queue_keys import delete_queue_keys
from support.topologies import Cluster, SentinelSetup
from support.worker_cli import WorkerCommand, add_jobs
from support.workers import wait_until


def _completed(client: redis.Redis | RedisCluster, queue: str) -> int:
    return Queue(client, queue).get_job_counts("completed")["completed"]


@pytest.fixture
def two_slots(cluster_connection: RedisCluster, queue_name: str) -> Iterator[tuple[str, str]]:
    """Two queues whose slots are on different masters, emptied afterwards."""
    first = queue_name
    owner = cluster_connection.get_node_from_key(f"emq:{{{first}}}:meta")
    second = next(f"{first}-{n}" for n in range(100)
                  if cluster_connection.get_node_from_key(f"emq:{{{first}-{n}}}:meta") != owner)
    yield first, second
    for queue in (first, second):
        delete_queue_keys(cluster_connection, queue)


def test_worker_on_a_cluster_url_serves_queues_on_two_masters(
        redis_cluster: Cluster, cluster_connection: RedisCluster, two_slots: tuple[str, str]) -> None:
    first, second = two_slots
    add_jobs(cluster_connection, first, 12)  # type: ignore[arg-type]
    add_jobs(cluster_connection, second, 7)  # type: ignore[arg-type]
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", redis_cluster.url(), "--burst",
                        "--concurrency", "2", first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (_completed(cluster_connection, first), _completed(cluster_connection, second)) == (12, 7)
    startup = next(line for line in command.lines if "echomq worker: queues" in line)
    assert "Redis redis+cluster://" in startup


def test_cluster_flag_reads_a_redis_url_as_a_startup_node(
        redis_cluster: Cluster, cluster_connection: RedisCluster, two_slots: tuple[str, str]) -> None:
    first, second = two_slots
    add_jobs(cluster_connection, first, 3)  # type: ignore[arg-type]
    add_jobs(cluster_connection, second, 4)  # type: ignore[arg-type]
    node_url = redis_cluster.url().replace("redis+cluster://", "redis://")
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", node_url, "--cluster", "--burst",
                        first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (_completed(cluster_connection, first), _completed(cluster_connection, second)) == (3, 4)


def test_without_the_flag_a_cluster_node_url_refuses_a_queue_of_another_master(
        redis_cluster: Cluster, cluster_connection: RedisCluster, two_slots: tuple[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    # A plain redis:// URL is one server: the stats of a queue that node does not own are
    # refused with the node's MOVED, never read as an empty queue.
    first, second = two_slots
    node_url = redis_cluster.url().replace("redis+cluster://", "redis://")
    direct = redis.Redis.from_url(node_url)
    try:
        ours = first if cluster_connection.get_node_from_key(f"emq:{{{first}}}:meta").port \
            == direct.connection_pool.connection_kwargs["port"] else second
    finally:
        direct.close()
    other = second if ours == first else first
    add_jobs(cluster_connection, other, 2)  # type: ignore[arg-type]
    code = main(["queue", "stats", "--redis", node_url, "--queue", other, "--json"])
    assert code != 0
    assert "MOVED" in capsys.readouterr().err
    assert main(["queue", "stats", "--redis", node_url, "--cluster", "--queue", other, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["waiting"] == 2


def _other_node(redis_cluster: Cluster, cluster_connection: RedisCluster, queue: str) -> tuple[str, str]:
    """The URL of a master that does not serve ``queue``'s slot, and the one that does."""
    owner = cluster_connection.get_node_from_key(f"emq:{{{queue}}}:meta")
    other = next(node for node in redis_cluster.masters() if node.port != owner.port)
    return other.url, f"{owner.host}:{owner.port}"


def test_a_worker_on_a_plain_client_to_another_node_stops_saying_so(
        redis_cluster: Cluster, cluster_connection: RedisCluster, queue_name: str) -> None:
    """MOVED on one server's client is a misconfiguration: run() raises it once, by name, and
    does not retry it forever (it did before issue 23's second round)."""
    url, owner = _other_node(redis_cluster, cluster_connection, queue_name)
    client = redis.Redis.from_url(url)
    worker = Worker(client, queue_name, lambda job: None, drain_delay=0.5)
    try:
        worker.start()
        assert wait_until(lambda: worker.failure is not None, timeout=10), "the worker retries MOVED forever"
        assert isinstance(worker.failure, WrongClusterNodeError)
        message = str(worker.failure)
        node = url.removeprefix("redis://")
        assert f"Redis at {node} is a node of a Redis Cluster" in message
        assert f"served by {owner} (MOVED)" in message and "redis+cluster://" in message and "--cluster" in message
        assert (worker.failure.node, worker.failure.owner) == (node, owner)
    finally:
        worker.close(5)
        client.close()


def test_the_worker_command_on_another_node_exits_with_one_line(
        redis_cluster: Cluster, cluster_connection: RedisCluster, queue_name: str) -> None:
    url, owner = _other_node(redis_cluster, cluster_connection, queue_name)
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", url, queue_name]) as command:
        assert command.wait(20) == 1, "the worker command did not stop"
    said = [line for line in command.lines if "MOVED" in line]
    assert len(said) == 1, command.stderr
    assert f"served by {owner}" in said[0] and "--cluster" in said[0]


def test_queue_stats_on_a_cluster_url(redis_cluster: Cluster, cluster_connection: RedisCluster,
                                      two_slots: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    first, second = two_slots
    add_jobs(cluster_connection, first, 5)  # type: ignore[arg-type]
    add_jobs(cluster_connection, second, 1)  # type: ignore[arg-type]
    for queue, waiting in ((first, 5), (second, 1)):
        assert main(["queue", "stats", "--redis", redis_cluster.url(), "--queue", queue, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["counts"]["waiting"] == waiting


def test_worker_on_a_sentinel_url(redis_sentinel: SentinelSetup, sentinel_connection: redis.Redis,
                                  queue_name: str) -> None:
    add_jobs(sentinel_connection, queue_name, 9)
    try:
        with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", redis_sentinel.url(), "--burst",
                            queue_name]) as command:
            assert command.wait(60) == 0, command.stderr
        assert _completed(sentinel_connection, queue_name) == 9
    finally:
        delete_queue_keys(sentinel_connection, queue_name)


def test_worker_on_an_unreachable_cluster_says_so_in_one_line() -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", "redis+cluster://127.0.0.1:1",
                        "--burst", "q"]) as command:
        assert command.wait(30) == 1
    lines = [line for line in command.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot reach Redis at redis+cluster://127.0.0.1:1" in lines[0], command.stderr


def test_worker_app_on_a_cluster_url_routes_by_name_on_two_masters(
        redis_cluster: Cluster, cluster_connection: RedisCluster, two_slots: tuple[str, str]) -> None:
    first, second = two_slots
    add_jobs(cluster_connection, first, 4, name="record")  # type: ignore[arg-type]
    add_jobs(cluster_connection, second, 2, name="record")  # type: ignore[arg-type]
    with WorkerCommand(["--app", "support.sample_jobs:registry", "--redis", redis_cluster.url(), "--burst"],
                       queues=[first, second]) as command:
        assert command.wait(60) == 0, command.stderr
    assert (_completed(cluster_connection, first), _completed(cluster_connection, second)) == (4, 2)
    startup = next(line for line in command.lines if "echomq worker: queues" in line)
    assert "Redis the Redis Cluster of 127.0.0.1:" in startup
