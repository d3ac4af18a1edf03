"""The rig is what the cluster and Sentinel tests take it to be (tests/support/topologies.py).
Start-up times are recorded as properties of the tests (``--junitxml`` shows them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis.cluster import RedisCluster

from support.redis_versions import binary_version, parse_version
from support.topologies import Cluster, SentinelSetup
from support.workers import wait_until

pytestmark = pytest.mark.real_only


def test_the_shared_cluster_has_three_masters_each_with_a_replica_and_every_slot(
        redis_cluster: Cluster, record_property: Callable[[str, object], None]) -> None:
    record_property("startup_s", round(redis_cluster.startup_seconds, 3))
    masters = redis_cluster.masters()
    assert len(masters) == 3 and len(redis_cluster.replicas()) == 3
    assert {redis_cluster.replica_of(master).port for master in masters} == {r.port for r in redis_cluster.replicas()}
    slots = sorted(slot for e in redis_cluster.view() if "master" in e["flags"] for slot in e["slots"])
    covered = [s for low, high in slots for s in range(low, high + 1)]
    assert covered == list(range(16384))
    info = masters[0].call("CLUSTER", "INFO")
    assert "cluster_state:ok" in info and "cluster_known_nodes:6" in info


def test_a_cluster_client_reaches_every_master(cluster_connection: RedisCluster, redis_cluster: Cluster) -> None:
    keys = [f"emq:{{rig-{i}}}:probe" for i in range(30)]
    try:
        for key in keys:
            cluster_connection.set(key, "1")
        owners = {redis_cluster.owner_of(key).port for key in keys}
        assert owners == {m.port for m in redis_cluster.masters()}  # 30 tags land on all 3 masters
        for key in keys:
            assert redis_cluster.owner_of(key).call("GET", key) == "1"
    finally:
        for key in keys:
            cluster_connection.delete(key)


def test_the_shared_sentinel_setup_sees_its_master_replica_and_sentinels(
        redis_sentinel: SentinelSetup, sentinel_connection: Any,
        record_property: Callable[[str, object], None]) -> None:
    record_property("startup_s", round(redis_sentinel.startup_seconds, 3))
    master, replica = redis_sentinel.master(), redis_sentinel.replica()
    assert master.info("replication")["role"] == "master"
    assert replica.info("replication")["master_port"] == master.port
    for sentinel in redis_sentinel.sentinels:
        state = sentinel.use(lambda client: client.sentinel_master(redis_sentinel.service))
        assert (state["port"], state["num-slaves"], state["num-other-sentinels"]) == (master.port, 1, 2)
    sentinel_connection.set("rig-probe", "1")
    try:
        assert master.call("GET", "rig-probe") == "1"
    finally:
        sentinel_connection.delete("rig-probe")


def test_a_killed_cluster_master_is_replaced_by_its_replica_and_rejoins_as_one(cluster_factory: Any) -> None:
    cluster = cluster_factory()
    key = "emq:{rig}:wait"
    master = cluster.owner_of(key)
    replica = cluster.replica_of(master)
    master.kill()
    assert cluster.wait_owner_change(key, master) is replica
    cluster.restart(master)

    def rejoined() -> bool:  # the restarted node follows the new master once the gossip reaches it
        try:
            return cluster.replica_of(replica) is master
        except LookupError:
            return False

    assert wait_until(rejoined, timeout=30, interval=0.1)


def test_the_cluster_runs_on_the_path_s_redis_server_whatever_its_version(redis_cluster: Cluster) -> None:
    """The matrix's redis-6.2 cell puts 6.2's binaries first on PATH: the rig starts a 6.2
    cluster there (6.2 has no ``cluster-port`` directive: the bus is the port + 10000)."""
    versions = {node.info("server")["redis_version"] for node in redis_cluster.nodes}
    assert {parse_version(v) for v in versions} == {binary_version()}
