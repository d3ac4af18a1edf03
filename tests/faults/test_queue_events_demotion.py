"""QueueEvents on a plain connection to a master that is demoted under it (``REPLICAOF``).

No Sentinel and no cluster: a reader given the URL of one node, and that node made a replica of
another (what an operator does by hand, or a failover manager that keeps the address). Redis
answers the reader's blocked XREAD with ``UNBLOCKED`` and resyncs the node from its new master:
the stream under the same address is now another's. The reader must reconnect, see the same
process with another replication id and role, and settle as after a failover.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from echomq import GapReason, QueueEvents
from echomq.protocol.keys import QueueKeys

from support.stream_servers import EventLog, StreamServer, xadd_many
from support.workers import wait_until

pytestmark = pytest.mark.real_only

KEY = QueueKeys("demoted").events


@pytest.fixture
def pair(redis_server_factory: object) -> Iterator[tuple[StreamServer, StreamServer]]:
    first, second = StreamServer().start(), StreamServer().start()
    try:
        yield first, second
    finally:
        first.cleanup()
        second.cleanup()


def test_a_master_demoted_under_the_reader_is_a_failover(pair: tuple[StreamServer, StreamServer]) -> None:
    old, new = pair
    old_client, new_client = old.client(decode_responses=True), new.client(decode_responses=True)
    new_client.replicaof("127.0.0.1", old.port)
    log = EventLog()
    events = QueueEvents(old.url, "demoted", block_ms=1000)
    events.subscribe(log)
    events.start()
    try:
        common = xadd_many(old_client, KEY, 50)
        log.wait_for_ids(common)
        assert wait_until(lambda: new_client.xlen(KEY) == 50, timeout=10)
        new_client.replicaof("NO", "ONE")  # promoted: the two now take writes apart
        only_old = xadd_many(old_client, KEY, 20, first=100)
        only_new = xadd_many(new_client, KEY, 30, first=200)
        log.wait_for_ids(only_old)
        time.sleep(0.2)  # the reader blocks in XREAD on the old master
        old_client.replicaof("127.0.0.1", new.port)  # demoted: resynced from the new master
        assert wait_until(lambda: old_client.info("replication")["master_link_status"] == "up", timeout=15)
        log.wait_for_ids(only_new)
        later = xadd_many(new_client, KEY, 10, first=300)
        log.wait_for_ids(later)  # written on the new master, read on the old node, now its replica
    finally:
        events.close()
        old_client.close()
        new_client.close()
    assert log.ids() == common + only_old + only_new + later
    [notice] = log.notices()
    assert notice.reason is GapReason.FAILOVER and notice.exact
    assert notice.from_id == common[-1]
    assert [d["event_id"] for _, d in notice.retracted] == only_old
    assert "a replica" in notice.detail
