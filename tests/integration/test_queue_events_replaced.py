"""QueueEvents when the stream under it is replaced on the same server, on real Redis and fakeredis.

The stream deleted and written again (a flush, an obliteration, a restore of an older copy), and
a reader started from a saved cursor on a stream that is not the one the cursor came from: the
reader says so with one GapNotice (``replaced`` / ``cursor_ahead``), delivers every entry of the
new stream written after what it delivered, whatever its id, and none twice. The reader is
stepped with ``run_once`` so each read is where the test puts it.
"""

from __future__ import annotations

import redis

from echomq import GapNotice, GapReason, QueueEvents
from echomq.protocol.keys import QueueKeys

from support.stream_servers import EventLog


def xadd(client: redis.Redis, key: str, n: int, entry_id: str = "*") -> str:
    added = client.xadd(key, {"event": "waiting", "jobId": str(n)}, id=entry_id)
    return added.decode() if isinstance(added, bytes) else str(added)


def step_until(events: QueueEvents, log: EventLog, wanted: list[str], steps: int = 20) -> None:
    for _ in range(steps):
        if set(wanted) <= set(log.ids()):
            return
        events.run_once()
    raise AssertionError(f"delivered {log.ids()}, wanted {wanted}; notices {log.notices()}")


def reader(connection: redis.Redis, queue_name: str, **options: object) -> tuple[QueueEvents, EventLog]:
    events = QueueEvents(connection, queue_name, block_ms=50, **options)  # type: ignore[arg-type]
    log = EventLog()
    events.subscribe(log)
    return events, log


def test_a_stream_deleted_and_rewritten_lower_is_announced_and_read(connection: redis.Redis,
                                                                    queue_name: str) -> None:
    key = QueueKeys(queue_name).events
    events, log = reader(connection, queue_name)
    try:
        events.run_once()  # resolves "$"
        delivered = [xadd(connection, key, n) for n in range(5)]
        step_until(events, log, delivered)
        connection.delete(key)
        # an older copy put back (ids below the cursor), then written on with automatic ids
        restored = [xadd(connection, key, 100 + n, f"{n + 1}-0") for n in range(3)]
        later = [xadd(connection, key, 200)]
        step_until(events, log, restored + later)
        more = [xadd(connection, key, 300 + n) for n in range(2)]
        step_until(events, log, more)
    finally:
        events.close()
    assert log.ids() == delivered + restored + later + more
    [notice] = log.notices()
    assert notice.reason is GapReason.REPLACED and notice.replaced
    assert [d["event_id"] for _, d in notice.retracted] == delivered
    assert notice.from_id == "0-0" and notice.to_id == restored[0]
    assert events.last_event_id == more[-1]


def test_a_stream_deleted_and_written_again_at_higher_ids(connection: redis.Redis, queue_name: str) -> None:
    """The same clock: the new stream's ids lie above the cursor, XREAD alone would read them,
    but the delivered events it no longer holds are told."""
    key = QueueKeys(queue_name).events
    events, log = reader(connection, queue_name)
    try:
        events.run_once()
        delivered = [xadd(connection, key, n) for n in range(3)]
        step_until(events, log, delivered)
        connection.delete(key)
        events.run_once()  # reads the missing key
        new = [xadd(connection, key, 10 + n) for n in range(3)]
        step_until(events, log, new)
    finally:
        events.close()
    assert log.ids() == delivered + new
    [notice] = log.notices()
    assert notice.reason is GapReason.REPLACED
    assert [d["event_id"] for _, d in notice.retracted] == delivered
    assert log.items.index((notice, notice.as_dict())) == 3


def test_a_saved_cursor_ahead_of_the_stream_goes_on_from_its_end(connection: redis.Redis, queue_name: str) -> None:
    key = QueueKeys(queue_name).events
    older = [xadd(connection, key, n, f"{n + 1}-0") for n in range(4)]
    events, log = reader(connection, queue_name, last_event_id="9000000000000-0")
    try:
        events.start()  # the stream's end is taken before start() returns ...
        after = [xadd(connection, key, 10 + n) for n in range(3)]  # ... so these are delivered
        log.wait_for_ids(after, timeout=10)
    finally:
        events.close()
    assert log.ids() == after
    [notice] = log.notices()
    assert notice.reason is GapReason.CURSOR_AHEAD and not notice.exact
    assert notice.approx_lost == len(older) and notice.to_id == older[-1]
    assert "ends before the cursor" in notice.detail


def test_a_saved_cursor_on_a_stream_that_does_not_exist(connection: redis.Redis, queue_name: str) -> None:
    key = QueueKeys(queue_name).events
    events, log = reader(connection, queue_name, last_event_id="9000000000000-0")
    try:
        events.start()
        after = [xadd(connection, key, n, f"{n + 1}-0") for n in range(3)]  # far below the saved id
        log.wait_for_ids(after, timeout=10)
    finally:
        events.close()
    assert log.ids() == after
    [notice] = log.notices()
    assert notice.reason is GapReason.CURSOR_AHEAD and notice.approx_lost is None and notice.to_id == "0-0"


def test_a_saved_cursor_the_stream_holds_changes_nothing(connection: redis.Redis, queue_name: str) -> None:
    key = QueueKeys(queue_name).events
    ids = [xadd(connection, key, n) for n in range(4)]
    events, log = reader(connection, queue_name, last_event_id=ids[1])
    try:
        step_until(events, log, ids[2:])
        assert events.run_once() == 0
    finally:
        events.close()
    assert log.ids() == ids[2:] and log.notices() == []


def test_the_notice_reaches_every_kind_of_subscriber(connection: redis.Redis, queue_name: str) -> None:
    import queue as queues

    from echomq import Handler

    class Gaps(Handler):
        def __init__(self) -> None:
            self.gaps: list[GapNotice] = []

        def handle_gap(self, notice: GapNotice) -> None:
            self.gaps.append(notice)

    key = QueueKeys(queue_name).events
    handler = Gaps()
    inbox: queues.Queue[tuple[object, ...]] = queues.Queue()
    events, log = reader(connection, queue_name, handler=handler)
    events.subscribe(inbox)
    try:
        events.run_once()
        step_until(events, log, [xadd(connection, key, 0)])
        connection.delete(key)
        step_until(events, log, [xadd(connection, key, 1, "1-0")])
    finally:
        events.close()
    [notice] = handler.gaps
    tags = [inbox.get_nowait() for _ in range(inbox.qsize())]
    gap = [t for t in tags if t[0] == "echomq_gap"]
    assert len(gap) == 1 and gap[0][1] == notice
    as_dict = gap[0][2]
    assert as_dict["reason"] == "replaced" and as_dict["retracted"][0]["event_type"] == "waiting"  # type: ignore[index]
