"""QueueEvents across a failover: a planned Sentinel failover, kill -9 of the master, CLUSTER FAILOVER.

A producer appends to the queue's events stream as fast as it can through the topology's client
(tests/support/reader_books.py), so that the old master takes writes its replica never gets and
the new master writes ids below what the reader delivered from the old one. Issue 23 measured
a reader that then skipped 54 and 116 of the new master's entries silently. Here the books
must show: every entry the new master holds, written after the reader started, delivered once;
every delivered entry it does not hold announced in a ``failover`` GapNotice; never a
``restart``. The figures of each run are recorded as properties of the test (``--junitxml``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from echomq import GapReason, QueueEvents
from echomq.protocol.keys import QueueKeys

from support.reader_books import EntryProducer, judge, wait_quiet
from support.stream_servers import EventLog
from support.topologies import Cluster, Node, SentinelSetup
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]


def kill_ahead_of_its_replica(master: Node, replica: Node) -> None:
    """kill -9 of a master whose replica missed its last writes: the replica is stopped
    (SIGSTOP) and its link cut on the master (``CLIENT KILL TYPE replica``: nothing more is sent
    to it), the master takes 0.3 s of full-rate writes the reader delivers, then it is killed
    and the replica let go, to be promoted without them."""
    assert replica.process is not None
    os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        master.call("CLIENT", "KILL", "TYPE", "replica")
        time.sleep(0.3)
        master.kill()
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)


def stream_ids(node: Node, key: str) -> list[tuple[str, str]]:
    """The stream ``node`` holds, as (id, job id) pairs."""
    return node.use(lambda client: [(entry_id, fields.get("jobId", "")) for entry_id, fields in client.xrange(key)])


def start_reader(client: object, queue_name: str, log: EventLog, **options: object) -> QueueEvents:
    events = QueueEvents(client, queue_name, block_ms=1000, **options)  # type: ignore[arg-type]
    events.subscribe(log)
    return events.start()


@pytest.mark.parametrize("how", ["sentinel-failover", "kill-9"])
def test_a_sentinel_failover_under_a_producer_loses_nothing_silently(
        how: str, sentinel_factory: Callable[..., SentinelSetup], queue_name: str,
        record_property: Callable[[str, object], None]) -> None:
    setup = sentinel_factory()
    master = setup.master()
    key = QueueKeys(queue_name).events
    logs = [EventLog(), EventLog()]
    # two readers: the default, and one remembering little that reads in small batches
    readers = [start_reader(setup.client(), queue_name, logs[0]),
               start_reader(setup.client(), queue_name, logs[1], count=50, history=200)]
    starts = [events.last_event_id or "0-0" for events in readers]
    # up to 5,000 entries a second: a producer spinning flat out only burned the suite's CPU
    producer = EntryProducer(setup.client, key, pause_s=0.0002).start()
    # and an application that writes to the master's address, not following Sentinel: the old
    # master keeps taking its writes until the sentinels demote it
    stale = EntryProducer(master.client, key, pause_s=0.0005, tag="stale-").start()
    try:
        assert wait_until(lambda: len(logs[0].ids()) >= 2000, timeout=30), "the producer never got going"
        broke = time.monotonic()
        if how == "kill-9":
            kill_ahead_of_its_replica(master, setup.replica())
        else:
            setup.failover()
        new = setup.wait_master_change(master)
        record_property("promoted_after_s", round(time.monotonic() - broke, 3))
        # An application whose connection moved at once writes on the new master while the
        # readers still read the old one: its ids lie below what they deliver from there.
        early = EntryProducer(new.client, key, pause_s=0.001, tag="early-").start()
        if how == "sentinel-failover":
            setup.wait_demoted(master)  # until then the old master takes writes the new one lacks
            record_property("old_master_demoted_after_s", round(time.monotonic() - broke, 3))
        written_on_new = len(stream_ids(new, key))
        assert wait_until(lambda: len(stream_ids(new, key)) > written_on_new + 500, timeout=30)
    finally:
        producer.stop()
        stale.stop()
        if "early" in locals():
            early.stop()
    try:
        finals = [wait_quiet(log, lambda: stream_ids(new, key)) for log in logs]
    finally:
        for events in readers:
            events.close()
    record_property("acked", len(producer.acked))
    record_property("acked_lost", len(set(producer.acked) - {entry_id for entry_id, _ in finals[-1]}))
    for n, (log, final, start) in enumerate(zip(logs, finals, starts)):
        verdict = judge(log, final, start, GapReason.FAILOVER)
        for name, value in verdict.figures.items():
            record_property(f"reader{n}_{name}", value)
        assert verdict.problems == [], (n, verdict.problems, verdict.figures)
        if n == 0:  # the default history holds every delivery of the test: the notice lists them all
            assert all(notice.exact for notice in log.notices())
        for notice in log.notices():
            assert notice.reason is GapReason.FAILOVER and str(new.port) in notice.detail, notice
        if how == "kill-9":  # the kill parts the streams by design; a planned failover may not
            assert verdict.figures["not_held"] > 0  # (the readers may leave the old master first)


def test_a_failover_during_a_blocked_read_changes_nothing(sentinel_factory: Callable[..., SentinelSetup],
                                                          queue_name: str) -> None:
    """Nothing written around the failover: the new master holds everything delivered, so the
    reader reads on there with no notice at all."""
    setup = sentinel_factory()
    master = setup.master()
    key = QueueKeys(queue_name).events
    client = setup.client()
    log = EventLog()
    events = start_reader(setup.client(), queue_name, log)
    try:
        before = [client.xadd(key, {"event": "waiting", "jobId": str(n)}).decode() for n in range(20)]
        log.wait_for_ids(before)
        assert wait_until(lambda: master.info("replication").get("master_repl_offset")
                          == setup.replica().info("replication").get("master_repl_offset"), timeout=10)
        setup.failover()  # the reader is blocked in XREAD on the old master
        new = setup.wait_master_change(master)
        setup.wait_demoted(master)
        after = [wait_until_written(client, key, n) for n in range(20)]
        log.wait_for_ids(after, timeout=30)
    finally:
        events.close()
        client.close()
    assert log.ids() == before + after and log.notices() == []
    assert [entry_id for entry_id, _ in stream_ids(new, key)[-20:]] == after


def wait_until_written(client: object, key: str, n: int) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.xadd(key, {"event": "waiting", "jobId": f"after-{n}"}).decode()  # type: ignore[attr-defined]
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("how", ["cluster-failover", "kill-9"])
def test_a_cluster_failover_under_a_producer_loses_nothing_silently(
        how: str, cluster_factory: Callable[..., Cluster], queue_name: str,
        record_property: Callable[[str, object], None]) -> None:
    cluster = cluster_factory()
    key = QueueKeys(queue_name).events
    master = cluster.owner_of(key)
    replica = cluster.replica_of(master)
    log = EventLog()
    events = start_reader(cluster.client(), queue_name, log)
    start = events.last_event_id or "0-0"
    producer = EntryProducer(cluster.client, key).start()
    try:
        assert wait_until(lambda: len(log.ids()) >= 2000, timeout=30), "the producer never got going"
        broke = time.monotonic()
        if how == "kill-9":
            kill_ahead_of_its_replica(master, replica)
        else:
            replica.call("CLUSTER", "FAILOVER")
        assert cluster.wait_owner_change(key, master) is replica
        record_property("promoted_after_s", round(time.monotonic() - broke, 3))
        written = len(stream_ids(replica, key))
        assert wait_until(lambda: len(stream_ids(replica, key)) > written + 500, timeout=30)
    finally:
        producer.stop()
    try:
        final = wait_quiet(log, lambda: stream_ids(replica, key))
    finally:
        events.close()
    verdict = judge(log, final, start, GapReason.FAILOVER)
    for name, value in verdict.figures.items():
        record_property(name, value)
    assert verdict.problems == [], (verdict.problems, verdict.figures)
    if how == "cluster-failover":
        # a manual failover waits for the replica to catch up: nothing delivered is lost
        assert verdict.figures["not_held"] == 0
    else:
        assert verdict.figures["not_held"] > 0  # what the stopped replica missed was delivered
