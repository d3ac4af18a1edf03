"""A stream replaced under a reader, decided from replies alone (events/divergence.py, cursor.py).

The new stream is a list of entries answered to the reads ``settle`` plans (XINFO STREAM and
XREVRANGE pages); the reader's history is the entries it delivered. Every scenario runs with a
page of 1, 2, 3 and 1000 entries: paging must not change the outcome.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError
from echomq.events.cursor import DeliveredHistory, StreamCursor
from echomq.events.divergence import Divergence, Settlement, settle
from echomq.events.entries import parse_stream_id
from echomq.events.servers import (
    START_MARGIN_MS,
    Change,
    ServerIdentity,
    classify,
    identity_from,
    parse_info,
    reason_of,
)
from echomq.events.settings import MAX_HISTORY, check_history
from echomq.protocol.events import EventType, GapNotice, GapReason

KEY = "emq:{q}:events"
PAGES = [1, 2, 3, 1000]


def e(entry_id: str, job: str = "", event: str = "waiting") -> list[Any]:
    """An entry as the reader's connection returns it."""
    return [entry_id, ["event", event, "jobId", job or entry_id]]


def ids(entries: list[Any]) -> list[str]:
    return [entry[0] for entry in entries]


class FakeStream:
    """Answers the reads of a settlement from a list of entries (None: the key does not exist)."""

    def __init__(self, entries: list[Any] | None, *, added: int | None = None, xinfo: bool = True) -> None:
        self.entries = entries
        self.added = added
        self.xinfo = xinfo
        self.reads: list[tuple[Any, ...]] = []

    def info(self) -> Any:
        if self.entries is None:
            return redis.ResponseError("no such key")
        if not self.xinfo:
            return redis.ResponseError("ERR unknown subcommand")
        entries = self.entries
        reply: dict[str, Any] = {"length": len(entries), "first-entry": entries[0] if entries else None,
                                 "last-entry": entries[-1] if entries else None,
                                 "last-generated-id": entries[-1][0] if entries else "0-0"}
        if self.added is not None:
            reply.update({"entries-added": self.added, "max-deleted-entry-id": "0-0"})
        return [x for pair in reply.items() for x in pair]

    def revrange(self, high: str, low: str, count: int) -> list[Any]:
        assert low == "-"
        exclusive = high.startswith("(")
        bound = None if high == "+" else parse_stream_id(high.lstrip("("))
        def within(entry_id: str) -> bool:
            key = parse_stream_id(entry_id)
            return bound is None or key < bound or (not exclusive and key == bound)

        found = [x for x in reversed(self.entries or []) if within(x[0])]
        return found[:count]

    def answer(self, command: tuple[Any, ...]) -> Any:
        self.reads.append(command)
        if command[:2] == ("XINFO", "STREAM"):
            return self.info()
        assert command[0] == "XREVRANGE" and command[1] == KEY and command[4] == "COUNT"
        return self.revrange(command[2], command[3], command[5])


def run(d: Divergence, stream: FakeStream) -> Settlement:
    plan = settle(d)
    reads = next(plan)
    try:
        while True:
            reads = plan.send([stream.answer(command) for command in reads])
    except StopIteration as done:
        result: Settlement = done.value
        return result


def divergence(cursor: str, history: list[Any], reason: GapReason, *, page: int, evicted: bool = False,
               server: ServerIdentity | None = None, anchor: Any = None,
               retracted_before: dict[str, Any] | None = None) -> Divergence:
    return Divergence("q", KEY, cursor, history, evicted, reason, server, "detail", page, anchor,
                      retracted_before or {})


def retracted_ids(notice: GapNotice | None) -> list[str]:
    assert notice is not None
    return [data["event_id"] for _, data in notice.retracted]


# -- telling servers apart ---------------------------------------------------------------------

SERVER_INFO = "# Server\r\nredis_version:7.0.15\r\nrun_id:{run}\r\nuptime_in_seconds:{up}\r\n" \
              "server_time_usec:{now}\r\n"
REPLICATION_INFO = "# Replication\r\nrole:{role}\r\nmaster_replid:{replid}\r\nmaster_replid2:{replid2}\r\n"
PERSISTENCE_INFO = "# Persistence\r\nrdb_last_load_keys_loaded:{loaded}\r\naof_enabled:{aof}\r\n"
ZERO = "0" * 40


def identity(address: str = "h:1", run: str = "a" * 40, replid: str = "r" * 40, replid2: str = ZERO,
             role: str = "master") -> ServerIdentity:
    replies = [SERVER_INFO.format(run=run, up=10, now=1_000_000_000), REPLICATION_INFO.format(
        role=role, replid=replid, replid2=replid2), PERSISTENCE_INFO.format(loaded=0, aof=0)]
    return identity_from(address, replies)


def test_info_is_parsed_into_an_identity() -> None:
    assert parse_info("# Server\r\nrun_id:abc\r\n\r\nfoo:bar:baz\r\n") == {"run_id": "abc", "foo": "bar:baz"}
    found = identity()
    assert found == ServerIdentity("h:1", "a" * 40, "r" * 40, ZERO, "master",
                                   1_000_000 - 10_000 - START_MARGIN_MS, True)
    restored = identity_from("h:1", [SERVER_INFO.format(run="b", up=1, now=5_000_000),
                                     REPLICATION_INFO.format(role="master", replid="x", replid2=ZERO),
                                     PERSISTENCE_INFO.format(loaded=3, aof=0)])
    assert restored.started_empty is False
    with_aof = identity_from("h:1", ["run_id:b", "role:master", PERSISTENCE_INFO.format(loaded=0, aof=1)])
    assert with_aof.started_empty is False  # an AOF may have restored it
    assert with_aof.started_ms is None  # no uptime in the reply: the start is unknown


def test_servers_that_answer_no_info_are_known_by_address_only() -> None:
    refused = [redis.ResponseError("unknown command 'info'")] * 3
    found = identity_from("h:1", refused)
    assert found == ServerIdentity("h:1") and not found.known
    assert found.describe() == "h:1"
    assert identity_from(None, refused).describe() == "an unknown address"


@pytest.mark.parametrize(("before", "after", "change"), [
    (identity(), identity(), Change.SAME),
    # the same process resynced from another master (demoted, or its data set replaced)
    (identity(), identity(replid="n" * 40), Change.FAILOVER),
    (identity(), identity(role="slave"), Change.FAILOVER),
    # another process at the same address with no link to the old one's history: a restart
    (identity(), identity(run="b" * 40, replid="n" * 40), Change.RESTART),
    # ... one that took the old master's replication history over: a promoted replica
    (identity(), identity(run="b" * 40, replid="n" * 40, replid2="r" * 40), Change.FAILOVER),
    (identity(), identity("h:2", run="b" * 40, replid="n" * 40), Change.FAILOVER),
    # what the address alone tells (fakeredis, an ACL without INFO)
    (ServerIdentity("h:1"), ServerIdentity("h:1"), Change.UNKNOWN),
    (ServerIdentity("h:1"), ServerIdentity("h:2"), Change.FAILOVER),
    (None, identity(), Change.UNKNOWN),
    (identity(), None, Change.UNKNOWN),
], ids=["same", "resynced", "demoted", "restart", "promoted-replica", "other-node", "unknown", "moved",
        "first-connect", "nothing-known"])
def test_a_restart_is_never_taken_for_a_failover_nor_the_other_way(before: ServerIdentity | None,
                                                                   after: ServerIdentity | None,
                                                                   change: Change) -> None:
    assert classify(before, after) is change


def test_the_reason_follows_the_change() -> None:
    assert reason_of(Change.FAILOVER, explicit_start=True) is GapReason.FAILOVER
    assert reason_of(Change.RESTART, explicit_start=False) is GapReason.RESTART
    assert reason_of(Change.UNKNOWN, explicit_start=False) is GapReason.REPLACED
    assert reason_of(Change.UNKNOWN, explicit_start=True) is GapReason.CURSOR_AHEAD


# -- settling --------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_a_new_stream_that_holds_the_cursor_changes_nothing(page: int) -> None:
    history = [e("10-0"), e("11-0"), e("12-0")]
    stream = FakeStream([e("9-0"), *history, e("13-0"), e("14-0")], added=6)  # longer: it has more
    result = run(divergence("12-0", history, GapReason.FAILOVER, page=page), stream)
    assert result.notice is None and result.deliver == [] and result.cursor == "12-0"


@pytest.mark.parametrize("page", PAGES)
def test_failover_to_a_shorter_stream_with_lower_ids_delivers_them_and_retracts_the_rest(page: int) -> None:
    # The old master took 13..16 after the replica's last sync at 12; the new master wrote
    # 14-1, 15-1 (below the cursor 16-0) and 17-0 meanwhile (split brain).
    delivered = [e(f"{n}-0") for n in range(10, 17)]
    stream = FakeStream([e("9-0"), *delivered[:3], e("14-1"), e("15-1"), e("17-0")], added=7)
    result = run(divergence("16-0", delivered, GapReason.FAILOVER, page=page), stream)
    assert result.notice is not None
    assert result.notice.reason is GapReason.FAILOVER and result.notice.exact
    assert result.notice.from_id == "12-0" and result.notice.to_id == "14-1"
    assert retracted_ids(result.notice) == ["13-0", "14-0", "15-0", "16-0"]
    assert result.notice.retracted[0][0] is EventType.WAITING  # decoded as delivered
    assert ids(result.deliver) == ["14-1", "15-1"]
    assert result.cursor == "15-1"  # XREAD from here reads 17-0 next
    assert result.index == 7 - 1  # entries-added up to 15-1: all but 17-0
    assert ids(result.kept) == ["10-0", "11-0", "12-0", "14-1", "15-1"]


@pytest.mark.parametrize("page", PAGES)
def test_failover_to_a_stream_of_equal_length_with_other_ids(page: int) -> None:
    delivered = [e("10-0"), e("11-0"), e("12-0"), e("13-0")]
    stream = FakeStream([e("10-0"), e("11-0"), e("12-5"), e("13-5")], added=4)
    result = run(divergence("13-0", delivered, GapReason.FAILOVER, page=page), stream)
    assert retracted_ids(result.notice) == ["12-0", "13-0"]
    assert ids(result.deliver) == ["12-5"] and result.cursor == "12-5"  # 13-5 comes by XREAD
    assert result.notice is not None and result.notice.from_id == "11-0" and result.notice.to_id == "12-5"


@pytest.mark.parametrize("page", PAGES)
def test_the_same_id_with_other_fields_is_another_entry(page: int) -> None:
    delivered = [e("10-0"), e("11-0", job="old")]
    stream = FakeStream([e("10-0"), e("11-0", job="new")], added=2)
    result = run(divergence("11-0", delivered, GapReason.FAILOVER, page=page), stream)
    assert result.notice is not None and result.notice.from_id == "10-0"
    assert [d["jobId"] for _, d in result.notice.retracted] == ["old"]
    assert [x[1][3] for x in result.deliver] == ["new"]


@pytest.mark.parametrize("page", PAGES)
def test_a_restart_empty_with_the_clock_behind_delivers_everything_the_new_server_wrote(page: int) -> None:
    delivered = [e(f"{n}-0") for n in range(5000, 5005)]
    new = [e(f"{n}-0") for n in range(1000, 1010)]  # all below the cursor
    server = ServerIdentity("h:1", "b", started_ms=900, started_empty=True)
    result = run(divergence("5004-0", delivered, GapReason.RESTART, page=page, server=server),
                 FakeStream(new, added=10))
    assert result.notice is not None and result.notice.reason is GapReason.RESTART and result.notice.exact
    assert retracted_ids(result.notice) == ids(delivered)
    assert result.notice.from_id == "0-0" and result.notice.to_id == "1000-0"
    assert ids(result.deliver) == ids(new) and result.cursor == "1009-0" and result.index == 10


@pytest.mark.parametrize("page", PAGES)
def test_a_restart_empty_with_the_same_clock_reads_the_new_stream_from_its_start(page: int) -> None:
    delivered = [e(f"{n}-0") for n in range(10, 15)]
    new = [e(f"{n}-0") for n in range(20, 26)]  # all above the cursor: XREAD reads them
    server = ServerIdentity("h:1", "b", started_ms=19, started_empty=True)
    result = run(divergence("14-0", delivered, GapReason.RESTART, page=page, server=server),
                 FakeStream(new, added=6))
    assert retracted_ids(result.notice) == ids(delivered)
    assert result.deliver == [] and result.cursor == "0-0" and result.index == 0
    assert result.notice is not None and result.notice.to_id == "20-0"
    # an empty new stream: the same, with its last id (none yet) as where it goes on
    empty = run(divergence("14-0", delivered, GapReason.RESTART, page=page, server=server), FakeStream([], added=0))
    assert empty.cursor == "0-0" and empty.notice is not None and empty.notice.to_id == "0-0"


@pytest.mark.parametrize("page", PAGES)
def test_a_restart_that_restored_a_snapshot_parts_where_the_snapshot_ends(page: int) -> None:
    delivered = [e(f"{n}-0") for n in range(10, 20)]
    snapshot = delivered[:6]  # up to 15-0
    new = [e("16-3"), e("17-3"), e("30-0")]
    server = ServerIdentity("h:1", "b", started_ms=16, started_empty=False)
    result = run(divergence("19-0", delivered, GapReason.RESTART, page=page, server=server),
                 FakeStream([*snapshot, *new], added=9))
    assert result.notice is not None and result.notice.from_id == "15-0"
    assert retracted_ids(result.notice) == ["16-0", "17-0", "18-0", "19-0"]
    assert ids(result.deliver) == ["16-3", "17-3"] and result.cursor == "17-3"


@pytest.mark.parametrize("page", PAGES)
def test_a_restart_beyond_the_history_goes_by_the_servers_start(page: int) -> None:
    """Without a common entry in memory, entries written since the server started are new and
    those before were restored (Redis 6.2 does not say whether it loaded anything)."""
    delivered = [e(f"{n}-0") for n in range(100, 105)]
    restored = [e("50-0"), e("60-0")]  # from an old snapshot, older than anything remembered
    new = [e("70-0"), e("80-0")]  # the server started at 65 in its own clock, behind ours
    server = ServerIdentity("h:1", "b", started_ms=65, started_empty=None)
    result = run(divergence("104-0", delivered, GapReason.RESTART, page=page, server=server, evicted=True),
                 FakeStream([*restored, *new], added=4))
    assert ids(result.deliver) == ["70-0", "80-0"] and result.cursor == "80-0"
    assert retracted_ids(result.notice) == ids(delivered)
    assert result.notice is not None and not result.notice.exact  # the reader forgot older deliveries
    assert result.notice.approx_lost == 2  # the restored ones, taken as delivered


@pytest.mark.parametrize("page", PAGES)
def test_a_failover_beyond_the_history_takes_the_older_entries_as_delivered(page: int) -> None:
    delivered = [e(f"{n}-0") for n in range(100, 105)]
    copy = [e(f"{n}-0") for n in range(80, 95)]  # the new master's copy, older than memory
    stream = FakeStream([*copy, e("101-5")], added=16)
    evicted = run(divergence("104-0", delivered, GapReason.FAILOVER, page=page, evicted=True), stream)
    assert ids(evicted.deliver) == ["101-5"] and evicted.cursor == "101-5"
    assert retracted_ids(evicted.notice) == ids(delivered)
    assert evicted.notice is not None and not evicted.notice.exact
    assert evicted.notice.approx_lost == 15  # the new master's older entries, taken as delivered unchecked
    # a reader that remembers everything it delivered (started from "$" at 95): exact
    complete = run(divergence("104-0", delivered, GapReason.FAILOVER, page=page), FakeStream(stream.entries, added=16))
    assert complete.notice is not None and complete.notice.exact and ids(complete.deliver) == ["101-5"]
    assert complete.notice.approx_lost is None  # older than the reader's start: not its business


@pytest.mark.parametrize("page", PAGES)
def test_a_new_master_trimmed_past_the_history_keeps_it(page: int) -> None:
    delivered = [e(f"{n}-0") for n in range(10, 15)]
    stream = FakeStream([e(f"{n}-0") for n in range(40, 45)], added=40)  # MAXLEN ~ trimmed all older
    result = run(divergence("14-0", delivered, GapReason.FAILOVER, page=page), stream)
    assert result.notice is not None and result.notice.retracted == () and not result.notice.exact
    assert result.cursor == "0-0" and result.deliver == [] and result.index == 35
    assert ids(result.kept) == ids(delivered)


@pytest.mark.parametrize("page", PAGES)
def test_a_cursor_from_before_on_a_stream_that_ends_below_it(page: int) -> None:
    stream = FakeStream([e("1-0"), e("2-0"), e("3-0")], added=3)
    result = run(divergence("9000-0", [], GapReason.CURSOR_AHEAD, page=page, evicted=True), stream)
    assert result.notice is not None and result.notice.reason is GapReason.CURSOR_AHEAD
    assert result.notice.approx_lost == 3 and not result.notice.exact
    assert result.deliver == [] and result.cursor == "3-0" and result.notice.to_id == "3-0"


@pytest.mark.parametrize("page", PAGES)
def test_a_deleted_stream_retracts_everything_and_reads_the_next_from_its_start(page: int) -> None:
    delivered = [e("10-0"), e("11-0")]
    result = run(divergence("11-0", delivered, GapReason.REPLACED, page=page), FakeStream(None))
    assert retracted_ids(result.notice) == ["10-0", "11-0"]
    assert result.cursor == "0-0" and result.index == 0 and result.info is None


@pytest.mark.parametrize("page", PAGES)
def test_the_anchor_places_a_reader_that_delivered_nothing_yet(page: int) -> None:
    anchor = e("20-0")
    same = run(divergence("20-0", [], GapReason.FAILOVER, page=page, anchor=anchor),
               FakeStream([e("19-0"), anchor, e("21-0")], added=3))
    assert same.notice is None
    lost = run(divergence("20-0", [], GapReason.FAILOVER, page=page, anchor=anchor),
               FakeStream([e("19-0"), e("19-5")], added=2))
    assert lost.notice is not None and lost.notice.retracted == ()  # the anchor was never an event
    assert ids(lost.deliver) == [] and lost.cursor == "19-5"  # 19-5 lies before the reader's start


@pytest.mark.parametrize("page", PAGES)
def test_entries_met_again_are_not_delivered_twice(page: int) -> None:
    """Back on the old master (the sentinels answered both ways): what it delivered from there
    and retracted on the new master is not delivered again; what the new one gave is retracted."""
    common = [e("10-0"), e("11-0")]
    old_only = [e("12-0"), e("13-0"), e("15-0")]
    new_only = [e("12-7")]
    result = run(divergence("12-7", [*common, *new_only], GapReason.FAILOVER, page=page,
                            retracted_before={x[0]: x[1] for x in old_only}),
                 FakeStream([*common, *old_only[:2], e("14-0"), old_only[2], e("16-0")], added=7))
    assert retracted_ids(result.notice) == ["12-7"]
    # 14-0 was never delivered: it comes now; 16-0 by XREAD, after the newest entry met again
    assert ids(result.deliver) == ["14-0"] and result.cursor == "15-0"
    assert ids(result.kept) == ["10-0", "11-0", "12-0", "13-0", "14-0", "15-0"]
    assert result.notice is not None and result.notice.to_id == "14-0" and result.index == 6


def test_a_long_run_after_the_cursor_is_jumped_over() -> None:
    delivered = [e("10-0"), e("11-0")]
    stream = FakeStream([e("9-0"), e("10-5"), *[e(f"{n}-0") for n in range(20, 40)]], added=22)
    result = run(divergence("11-0", delivered, GapReason.FAILOVER, page=2), stream)
    assert retracted_ids(result.notice) == ["10-0", "11-0"]
    assert result.cursor == "10-5" and result.index is None  # the entries after it were not counted
    assert any(read[2] == "11-0" for read in stream.reads if read[0] == "XREVRANGE")


def test_without_xinfo_the_index_is_unknown() -> None:
    delivered = [e("10-0"), e("11-0")]
    result = run(divergence("11-0", delivered, GapReason.FAILOVER, page=10),
                 FakeStream([e("10-0"), e("10-5")], xinfo=False))
    assert ids(result.deliver) == ["10-5"] and result.index is None and result.info is None


# -- the cursor: noticing a replaced stream, remembering deliveries --------------------------


def xinfo(last: str, added: int | None = None, first: str | None = None, deleted: str = "0-0") -> dict[str, Any]:
    found: dict[str, Any] = {"last-generated-id": last, "length": 1, "first-entry": [first, []] if first else None}
    if added is not None:
        found.update({"entries-added": added, "max-deleted-entry-id": deleted})
    return found


def test_a_stream_whose_counters_go_back_is_another_stream() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(xinfo("10-0", 10, "1-0"))
    assert not cursor.replaced(xinfo("12-0", 12, "1-0"), missing=False)
    assert cursor.replaced(xinfo("9-0", 12, "1-0"), missing=False)  # ends before the cursor
    assert cursor.replaced(xinfo("30-0", 5, "1-0"), missing=False)  # fewer entries ever added
    assert not cursor.replaced(xinfo("30-0", 30, "5-0"), missing=False)  # trimmed: the front moves on
    assert cursor.replaced(xinfo("31-0", 31, "2-0"), missing=False)  # the front moved back
    assert cursor.replaced(None, missing=True)  # the key vanished after it existed
    on_62 = StreamCursor("$")
    on_62.resolve_tail(xinfo("10-0", None, "1-0"))  # Redis 6.2: no counters, the ids still tell
    assert not on_62.replaced(xinfo("11-0", None, "1-0"), missing=False)
    assert on_62.replaced(xinfo("5-0", None, "1-0"), missing=False)


def test_a_stream_that_never_existed_is_not_replaced() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(None)
    assert not cursor.replaced(None, missing=True)
    assert not cursor.replaced(xinfo("1-0", 1, "1-0"), missing=False)
    assert cursor.replaced(None, missing=True)  # it existed since


def test_the_history_keeps_the_newest_deliveries_by_batch() -> None:
    history = DeliveredHistory(4)
    history.add([e("1-0"), e("2-0")])
    history.add([e("3-0"), e("4-0"), e("5-0")])
    assert ids(history.entries()) == ["1-0", "2-0", "3-0", "4-0", "5-0"] and not history.evicted
    history.add([e("6-0")])
    assert ids(history.entries()) == ["3-0", "4-0", "5-0", "6-0"] and history.evicted and len(history) == 4
    assert history.newest() == e("6-0")
    none = DeliveredHistory(0)
    none.add([e("1-0")])
    assert none.entries() == [] and none.evicted
    cursor = StreamCursor("$", history=10)
    cursor.resolve_tail(xinfo("1-0", 1))
    cursor.advance("3-0", 1, [e("2-0"), e("3-0")])  # a close() after the first: only it is remembered
    assert ids(cursor.history.entries()) == ["2-0"]


def test_a_saved_start_id_is_the_callers_until_something_is_delivered() -> None:
    cursor = StreamCursor("5-0")
    assert cursor.explicit_start and cursor.history.evicted
    cursor.advance("6-0", 1, [e("6-0")])
    assert not cursor.explicit_start


@pytest.mark.parametrize("bad", [-1, MAX_HISTORY + 1, 1.5, True, "10", None])
def test_history_is_checked(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="history"):
        check_history(bad)
    assert check_history(0) == 0 and check_history(MAX_HISTORY) == MAX_HISTORY


@pytest.mark.parametrize("page", PAGES)
def test_a_replaced_stream_is_read_whole_while_the_reader_remembers_all_it_delivered(page: int) -> None:
    delivered = [e("100-0"), e("101-0")]
    complete = run(divergence("101-0", delivered, GapReason.REPLACED, page=page),
                   FakeStream([e("1-0"), e("2-0")], added=2))
    assert ids(complete.deliver) == ["1-0", "2-0"] and complete.notice is not None and complete.notice.exact
    forgot = run(divergence("101-0", delivered, GapReason.REPLACED, page=page, evicted=True),
                 FakeStream([e("1-0"), e("2-0")], added=2))
    assert forgot.deliver == [] and forgot.cursor == "2-0"
    assert forgot.notice is not None and not forgot.notice.exact


def test_a_replica_whose_link_is_not_up_is_syncing() -> None:
    def replica(link: str, in_progress: str = "0") -> ServerIdentity:
        return identity_from("h:1", ["run_id:a", f"role:slave\r\nmaster_link_status:{link}\r\n"
                                                f"master_sync_in_progress:{in_progress}\r\n", ""])
    assert replica("down").syncing and replica("up", "1").syncing
    assert not replica("up").syncing and not identity().syncing
