"""``echomq queues`` and ``list_queues`` on a Redis Cluster: every master is scanned, so a queue
is listed whichever master serves its slot; and the bulk commands act on the queue's master.

On the session's shared cluster (3 masters, 1 replica each), under a prefix of the test's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from echomq import Queue, Worker
from echomq.cli import main
from echomq.queue.discovery import find_queues, list_queues

from support.prefixes import delete_prefix, new_prefix
from support.topologies import Cluster
from support.workers import Running, wait_until

HOUR_MS = 3_600_000


@pytest.fixture
def prefix(cluster_connection: RedisCluster) -> Iterator[str]:
    name = new_prefix()
    yield name
    delete_prefix(cluster_connection, name)


def queues_on_every_master(cluster: Cluster, prefix: str, per_master: int = 2) -> dict[int, list[str]]:
    """Queue names, ``per_master`` of them on each master: master port -> names."""
    by_port: dict[int, list[str]] = {node.port: [] for node in cluster.masters()}
    n = 0
    while any(len(names) < per_master for names in by_port.values()):
        name = f"q{n}"
        owner = cluster.owner_of(f"{prefix}:{{{name}}}:meta").port
        if len(by_port[owner]) < per_master:
            by_port[owner].append(name)
        n += 1
    return by_port


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_master_is_scanned(redis_cluster: Cluster, cluster_connection: RedisCluster, prefix: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    by_port = queues_on_every_master(redis_cluster, prefix)
    names = sorted(name for group in by_port.values() for name in group)
    for count, name in enumerate(names, start=1):
        queue = Queue(cluster_connection, name, prefix=prefix)
        queue.add_bulk([("job", {"n": n}) for n in range(count)])
        queue.add("later", {}, delay=HOUR_MS)
    busy = names[0]
    with Running(Worker(cluster_connection, busy, lambda job: None, prefix=prefix, name="on-cluster")):
        assert wait_until(lambda: [s.workers for s in list_queues(cluster_connection, prefix)
                                   if s.name == busy] == [1], timeout=20)
        found = {s.name: s for s in list_queues(cluster_connection, prefix)}
    assert sorted(found) == names and find_queues(cluster_connection, prefix) == names
    assert {name: found[name].counts["delayed"] for name in names} == dict.fromkeys(names, 1)
    # the busy queue's job may be running as the list is read
    assert [sum(found[name].counts[state] for state in ("waiting", "active", "completed")) for name in names] == \
        list(range(1, len(names) + 1))
    assert [found[name].workers for name in names] == [1] + [0] * (len(names) - 1)

    code, out, err = run(capsys, "queues", "--redis", redis_cluster.url(), "--prefix", prefix, "--json")
    assert (code, err) == (0, "") and [q["queue"] for q in json.loads(out)] == names
    node_url = redis_cluster.url().replace("redis+cluster://", "redis://")
    code, out, _ = run(capsys, "queues", "--redis", node_url, "--cluster", "--prefix", prefix, "--json")
    assert code == 0 and [q["queue"] for q in json.loads(out)] == names

    # A plain URL of one node is that one server: its own queues only, each read where it lives.
    for master in redis_cluster.masters():
        code, out, _ = run(capsys, "queues", "--redis", f"redis://127.0.0.1:{master.port}/0", "--prefix", prefix,
                           "--json")
        assert code == 0 and [q["queue"] for q in json.loads(out)] == sorted(by_port[master.port])


def test_the_bulk_commands_act_on_the_queues_master(redis_cluster: Cluster, cluster_connection: RedisCluster,
                                                    prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    by_port = queues_on_every_master(redis_cluster, prefix, per_master=1)
    for name in (names[0] for names in by_port.values()):
        queue = Queue(cluster_connection, name, prefix=prefix)
        for n in range(3):
            queue.add("later", {"n": n}, delay=HOUR_MS)
        code, out, err = run(capsys, "jobs", "promote", "--queue", name, "--prefix", prefix,
                             "--redis", redis_cluster.url(), "--batch", "2", "--json")
        assert (code, err) == (0, "")
        assert json.loads(out) == {"queue": name, "limit": None, "promoted": 3, "left": 0}
        assert queue.get_job_counts("waiting", "delayed") == {"waiting": 3, "delayed": 0}
