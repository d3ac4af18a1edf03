"""QueueEvents when Redis restarts empty under it (no persistence), with its clock behind and not.

Issue 24.5: with the new server's clock an hour behind, its stream ids start below the reader's
cursor and the reader delivered 0 of 2,134 new entries, its cursor stuck; with the same clock,
the reader's count of entries added still referred to the old stream, so trims of the new one
past the reader went unannounced. Each test starts its own redis-server (support.stream_servers:
the skewed clock is a preload library the rig compiles) and checks the skew with TIME first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from echomq import GapNotice, GapReason, Queue, QueueEvents
from echomq.protocol.keys import QueueKeys

from support.stream_servers import EventLog, StreamServer, xadd_many

pytestmark = pytest.mark.real_only

QUEUE = "restarts"
KEY = QueueKeys(QUEUE).events
HOUR_MS = 3_600_000


@pytest.fixture
def server(redis_server_factory: Callable[..., Any]) -> Iterator[StreamServer]:
    """A server of this module's own (the factory's fixture: it skips or fails without a
    redis-server as the rig does, and tells the min_redis gate which version runs)."""
    started = StreamServer().start()
    try:
        yield started
    finally:
        started.cleanup()


def restart_empty(server: StreamServer, offset_ms: int) -> redis.Redis:
    server.restart_empty(offset_ms)
    skew = server.clock_offset_ms()
    assert abs(skew - offset_ms) < 1000, f"the server's clock is {skew} ms off ours, not {offset_ms}"
    return server.client(decode_responses=True)


def reader(server: StreamServer, log: EventLog, **options: Any) -> QueueEvents:
    events = QueueEvents(server.url, QUEUE, block_ms=500, **options)
    events.subscribe(log)
    return events.start()


@pytest.mark.parametrize("offset_ms", [-HOUR_MS, 0], ids=["clock-behind", "same-clock"])
def test_a_restart_empty_is_announced_and_every_new_entry_delivered(server: StreamServer, offset_ms: int) -> None:
    old = xadd_many(server.client(), KEY, 3)  # before the reader: not its business
    log = EventLog()
    events = reader(server, log)
    try:
        delivered = xadd_many(server.client(), KEY, 1000, first=3)
        log.wait_for_ids(delivered)
        cursor = events.last_event_id
        client = restart_empty(server, offset_ms)
        # the reader reconnects while these are written: through the library, as an app does
        queue = Queue(client, QUEUE)
        added = [queue.add("n", {"i": n}).id for n in range(1067)]
        new_ids = [entry_id for entry_id, _ in client.xrange(KEY)]
        assert len(new_ids) == 2134  # added + waiting per job
        log.wait_for_ids(new_ids)
        more = xadd_many(server.client(), KEY, 500, first=5000)
        log.wait_for_ids(more)
    finally:
        events.close()
    assert log.ids() == delivered + new_ids + more  # in order, none twice, none skipped
    assert not set(old) & set(log.ids())
    if offset_ms < 0:
        assert new_ids[-1] < cursor  # the new server's ids lie below the old cursor
    notices = log.notices()
    assert len(notices) == 1, notices
    notice = notices[0]
    assert notice.reason is GapReason.RESTART and notice.exact and notice.replaced
    assert [d["event_id"] for _, d in notice.retracted] == delivered
    assert notice.from_id == "0-0"
    assert "restarted" in notice.detail and str(server.port) in notice.detail
    position = log.items.index((notice, notice.as_dict()))
    assert position == len(delivered)  # the notice comes between the old stream and the new
    assert all(d["jobId"] in added for t, d in log.items[position + 1:position + 1 + len(new_ids)])


@pytest.mark.min_redis(7, 0, reason="trim notices count with XINFO STREAM entries-added")
@pytest.mark.parametrize("offset_ms", [-HOUR_MS, 0], ids=["clock-behind", "same-clock"])
def test_after_a_restart_trims_past_a_slow_reader_are_counted_on_the_new_stream(server: StreamServer,
                                                                                offset_ms: int) -> None:
    log = EventLog()
    release, hold, holding = threading.Event(), threading.Event(), threading.Event()

    def slow(event_type: Any, data: dict[str, Any]) -> None:
        if hold.is_set() and not isinstance(event_type, GapNotice) and not release.is_set():
            holding.set()
            release.wait(15)  # holds the reader while producers trim past it

    events = QueueEvents(server.url, QUEUE, block_ms=500, count=10)
    events.subscribe(log)
    events.subscribe(slow)
    events.start()
    try:
        delivered = xadd_many(server.client(), KEY, 2000)
        log.wait_for_ids(delivered)
        client = restart_empty(server, offset_ms)
        first = xadd_many(client, KEY, 5)
        log.wait_for_ids(first)
        hold.set()
        second = xadd_many(client, KEY, 1, first=5)  # the reader is held in this one's delivery
        assert holding.wait(15)
        trimmed = xadd_many(client, KEY, 3000, first=6, maxlen=100)
        release.set()
        log.wait_for_ids(trimmed[-100:])
    finally:
        release.set()
        events.close()
    notices = log.notices()
    assert [n.reason for n in notices] == [GapReason.RESTART, GapReason.TRIMMED], notices
    trim = notices[1]
    lost = trimmed[:-100]
    assert trim.from_id == second[0] and trim.to_id == trimmed[-100]
    assert trim.approx_lost == len(lost) == 2900
    assert log.ids() == delivered + first + second + trimmed[-100:]


def test_a_reader_started_from_a_saved_cursor_on_a_restarted_server_does_not_stall(server: StreamServer) -> None:
    """The cursor a previous run saved lies an hour ahead of what the restarted server writes:
    the reader says so (cursor_ahead) and reads on from the stream's end."""
    log = EventLog()
    events = reader(server, log)
    try:
        log.wait_for_ids(xadd_many(server.client(), KEY, 10))
    finally:
        events.close()
    saved = events.last_event_id
    assert saved is not None
    client = restart_empty(server, -HOUR_MS)
    before = xadd_many(client, KEY, 20)  # written while no reader ran: they may be lost, the notice says
    log = EventLog()
    events = reader(server, log, last_event_id=saved)
    try:
        after = xadd_many(client, KEY, 30, first=20)
        log.wait_for_ids(after)
    finally:
        events.close()
    assert log.ids() == after
    [notice] = log.notices()
    assert notice.reason is GapReason.CURSOR_AHEAD and not notice.exact
    assert notice.approx_lost == 20 and notice.to_id == before[-1] and notice.retracted == ()


def test_several_readers_each_settle_on_their_own(server: StreamServer) -> None:
    logs = [EventLog() for _ in range(3)]
    readers = [reader(server, logs[0]), reader(server, logs[1], count=7, history=50),
               reader(server, logs[2], history=0)]
    try:
        delivered = xadd_many(server.client(), KEY, 300)
        for log in logs:
            log.wait_for_ids(delivered)
        client = restart_empty(server, -HOUR_MS)
        new = xadd_many(client, KEY, 400)
        for log in logs:
            log.wait_for_ids(new)
    finally:
        for events in readers:
            events.close()
    for log in logs:
        assert log.ids() == delivered + new
        [notice] = log.notices()
        assert notice.reason is GapReason.RESTART
    assert len(logs[0].notices()[0].retracted) == 300 and logs[0].notices()[0].exact
    # the readers that remember less retract what they remember, and say the notice is not exact
    assert 50 <= len(logs[1].notices()[0].retracted) < 300 and not logs[1].notices()[0].exact
    assert logs[2].notices()[0].retracted == () and not logs[2].notices()[0].exact


def _restarts(server: StreamServer, rounds: int, offsets: Callable[[int], int]) -> tuple[list[str], EventLog]:
    log = EventLog()
    events = reader(server, log)
    written: list[str] = []
    try:
        for round_no in range(rounds):
            batch = xadd_many(server.client(), KEY, 50, first=round_no * 50)
            written += batch
            log.wait_for_ids(batch)
            restart_empty(server, offsets(round_no))
        batch = xadd_many(server.client(), KEY, 50, first=rounds * 50)
        written += batch
        log.wait_for_ids(batch)
    finally:
        events.close()
    return written, log


def test_restarts_back_and_forth_in_time(server: StreamServer) -> None:
    """Each restart moves the clock: an hour back, then forward again, then back."""
    written, log = _restarts(server, 3, lambda n: -HOUR_MS if n % 2 == 0 else 0)
    assert log.ids() == written
    assert [n.reason for n in log.notices()] == [GapReason.RESTART] * 3
    assert [len(n.retracted) for n in log.notices()] == [50, 50, 50]
