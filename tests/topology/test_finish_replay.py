"""Each job runs once across a failover that loses the worker's last writes, when the worker
survives it (echomq/worker/master_moves.py): the finishes the new master lacks are sent again
before the worker takes new work, and a job whose take was lost is held again.

tests/support/lost_finishes.py makes the loss certain: the replicas are stopped and the master's
links to them cut, then the worker completes ``j`` (whose fetch-next takes ``n``), fails
``f`` for good, fails ``d`` with a retry and completes the scheduler's iteration ``tick``, and
the master is killed (-9): the promoted replica has ``j``, ``f``, ``d`` and ``tick`` still active
under the worker's locks, and ``n`` still waiting. Without the re-sending (the code before
issue 23's second round) the stalled check hands ``j``, ``f``, ``d`` and ``tick`` out again once
their locks expire and ``n`` is taken a second time at once: each of them runs twice.

A planned failover (``SENTINEL FAILOVER``, ``CLUSTER FAILOVER``) loses nothing: the finishes are
sent again all the same and refused, quietly. On one Redis restarted from a snapshot taken
before those writes (the run id changed), the same as after a kill -9.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq.protocol.keys import QueueKeys

from support.lost_finishes import LostFinishes, moves_of
from support.servers import RedisServer
from support.topologies import Cluster, SentinelSetup, wait_for

pytestmark = [pytest.mark.real_only, pytest.mark.slow]

#: What the new master must hold at the end, by job name, and how often each ran.
FINAL = {"a": "completed", "a2": "completed", "r": "completed", "j": "completed", "n": "completed",
         "f": "failed", "d": "completed", "tick": "completed"}
RUNS = {"a": 1, "a2": 1, "r": 1, "j": 1, "n": 1, "f": 1, "d": 2, "tick": 1}


def _assert_once(scenario: LostFinishes, states: dict[str, str], reader: Any, *, lost: bool) -> None:
    assert dict(scenario.runs) == RUNS, "a job ran twice (or never)"
    assert states == FINAL
    k = scenario.keys
    for name in ("j", "f", "d", "tick", "n"):
        fields = reader.hgetall(k.job(scenario.ids[name]))
        assert b"stc" not in fields, f"{name} was handed out again by the stalled check"
    assert reader.hget(k.job(scenario.ids["d"]), "atm") == b"2"  # both attempts recorded, neither lost
    assert reader.hget(k.job(scenario.ids["j"]), "returnvalue") == b'"j"'
    assert reader.hget(k.job(scenario.ids["f"]), "failedReason") == b"f fails for good"
    moves = moves_of(scenario.worker)
    assert moves is not None and moves.settled >= 1
    # every settling (a cluster may count more than one move: each refused connect, each MOVED)
    resent = {job_id for settling in moves.settlings for job_id in settling.resent}
    reclaimed = {job_id for settling in moves.settlings for job_id in settling.reclaimed}
    refused = {job_id for settling in moves.settlings for job_id in settling.refused}
    if lost:
        assert resent == {scenario.ids[n] for n in ("j", "f", "d", "tick")}
        assert scenario.ids["n"] in reclaimed
    else:
        assert resent == set() and reclaimed == set()
    assert scenario.ids["a"] in refused  # the new master had it: refused, quietly


def test_a_sentinel_kill_9_that_loses_the_last_finishes(sentinel_factory: Callable[..., SentinelSetup],
                                                         queue_name: str) -> None:
    setup = sentinel_factory()
    master, replica = setup.master(), setup.replica()
    scenario = LostFinishes(setup.client, queue_name)
    reader = None
    try:
        scenario.start(master)
        scenario.lose_from_here(master, [replica])
        scenario.finish_some()
        master.kill()
        replica.resume()
        new = setup.wait_master_change(master)
        reader = new.client(decode_responses=False)
        states = scenario.finish_all(reader)
        _assert_once(scenario, states, reader, lost=True)
    finally:
        replica.resume()
        scenario.close()
        if reader is not None:
            reader.close()


def test_a_planned_sentinel_failover_loses_nothing_and_the_checks_are_quiet(
        sentinel_factory: Callable[..., SentinelSetup], queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    setup = sentinel_factory()
    master = setup.master()
    scenario = LostFinishes(setup.client, queue_name)
    try:
        scenario.start(master)
        scenario.finish_some()
        setup.sentinels[0].call("SENTINEL", "FAILOVER", setup.service)
        new = setup.wait_master_change(master)
        reader = new.client(decode_responses=False)
        try:
            states = scenario.finish_all(reader)
            _assert_once(scenario, states, reader, lost=False)
        finally:
            reader.close()
    finally:
        scenario.close()
    assert not [r for r in caplog.records if "master_moves" in r.pathname and r.levelname == "WARNING"]


@pytest.mark.parametrize("how", ["kill-9", "cluster-failover"])
def test_a_slot_failover(how: str, cluster_factory: Callable[..., Cluster], queue_name: str) -> None:
    cluster = cluster_factory()
    slot_key = QueueKeys(queue_name).meta
    master = cluster.owner_of(slot_key)
    replica = wait_for("the master's replica", lambda: cluster.replica_of(master))
    scenario = LostFinishes(cluster.client, queue_name)
    try:
        scenario.start(master)
        if how == "kill-9":
            scenario.lose_from_here(master, [replica])
        scenario.finish_some()
        if how == "kill-9":
            master.kill()
            replica.resume()
        else:
            replica.call("CLUSTER", "FAILOVER")
        assert cluster.wait_owner_change(slot_key, master) is replica
        reader = replica.client(decode_responses=False)
        try:
            states = scenario.finish_all(reader)
            _assert_once(scenario, states, reader, lost=how == "kill-9")
        finally:
            reader.close()
    finally:
        replica.resume()
        scenario.close()


def test_one_redis_restarted_from_an_older_snapshot(redis_server_factory: Callable[..., RedisServer],
                                                    queue_name: str) -> None:
    """No Sentinel, no cluster: the worker tells the restart by the server's new run id."""
    server = redis_server_factory(persistent=False)
    admin = redis.Redis.from_url(server.url)
    scenario = LostFinishes(lambda: redis.Redis.from_url(server.url), queue_name)
    try:
        scenario.start(_NoReplica(admin))
        admin.save()  # what the restart comes back with
        scenario.finish_some()
        server.kill()
        server.start()
        states = scenario.finish_all(admin)
        _assert_once(scenario, states, admin, lost=True)
    finally:
        scenario.close()
        admin.close()


class _NoReplica:
    """A master without replicas for LostFinishes.start: its WAIT is answered as if one had."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def call(self, *args: Any) -> Any:
        return 1 if args[0] == "WAIT" else self.client.execute_command(*args)

