"""A stream replaced under the reader: which server it now reads, and what to deliver from it.

The reader's cursor is an entry id of one stream on one server. That stream can be replaced
while the reader follows the key: its connection moves to a new master (Sentinel, a cluster
failover, a node demoted to a replica and resynced), the server restarts having lost data, or
the key is deleted and written again. Stream ids are not comparable across such a change: a new
master that missed the old one's last writes, or a server whose clock is behind, writes ids
*below* the cursor, which ``XREAD`` from the cursor would never return (issue 23, 24.5).

Given what the reader delivered (its history, newest last) and the new stream read backwards
from its end, :func:`settle` decides without I/O (the unit tests drive it with replies alone)
where the two part (the newest entry both hold, identical in id and fields), which delivered
entries the new stream does not hold (the notice's ``retracted``), which entries of the new
stream at or below the cursor were never delivered (delivered now, in stream order, however
low their ids), and where to read on. It is a generator: it yields the reads it needs (tuples
of commands, pipelined by the caller on the reader's connection) and receives their replies,
so the reads are planned as data like the library's writes. Which server the new stream is on
(a failover, a restart) is ``servers``' to tell.

Beyond what the reader remembers (``QueueEvents(history=...)``), the reason decides:

- ``failover``, ``cursor_ahead``: entries of the new stream older than the history are taken
  as delivered (a new master's older entries are its copy of the old stream; a saved cursor
  says nothing of what came before it): no duplicates;
- ``replaced`` (the same server, another stream under the key): every entry not delivered is
  new, the older ones too, while the reader remembers everything it delivered; else those
  older than its memory are taken as delivered;
- ``restart``: entries written since the server started are new and delivered (the server's
  start from ``INFO server``: its time minus its uptime, in its own clock, a second of
  margin); those older were restored from disk. When Redis 7 says it loaded nothing at start
  (``rdb_last_load_keys_loaded:0`` without AOF), everything the stream holds is new.

Delivered entries older than the new stream's first entry cannot be compared: on a restart
that restored nothing, or a replaced stream, they are gone (retracted); after a failover, or
a restart that restored data, they are taken as held and trimmed since.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol.codec import text
from ..protocol.events import GapNotice, GapReason, decode_entry
from .entries import Entry, Reads, info_dict
from .entries import parse_stream_id as stream_id
from .servers import ServerIdentity

#: The most entries a settlement reads from the new stream; past it the rule of the reason
#: decides and the notice is not exact.
MAX_SCAN = 200_000


@dataclass
class Divergence:
    """What the reader knows when it finds its stream replaced: the inputs of :func:`settle`."""

    queue_name: str
    key: str
    cursor: str
    #: Delivered entries, oldest first (the newest is the cursor's, when it was delivered).
    history: Sequence[Entry]
    #: True when this reader delivered entries older than ``history[0]`` that it forgot (or
    #: started from an explicit id, after entries it never saw).
    evicted: bool
    reason: GapReason
    server: ServerIdentity | None = None
    detail: str = ""
    page: int = 1000
    #: The entry at the cursor when the reader did not deliver it (the tail ``"$"`` resolved
    #: to, where a settlement went on): it places the cursor in a stream without being an event.
    anchor: Entry | None = None
    #: Entries delivered and since retracted (id -> fields): met again (the reader went back to
    #: a server that holds them, as during a failover the sentinels answer both ways), they are
    #: not delivered twice.
    retracted_before: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Settlement:
    """What the reader does about a replaced stream."""

    notice: GapNotice | None
    #: Entries of the new stream to deliver first, oldest first (ids may lie below the cursor).
    deliver: list[Entry]
    #: Read on after this id of the new stream (``"0-0"``: from its start).
    cursor: str
    #: The entry at ``cursor`` (None for ``"0-0"``): the reader's next anchor.
    anchor: Entry | None
    #: The new stream's entries-added count up to ``cursor``, when it can be known.
    index: int | None
    #: What the reader has delivered of the new stream (or takes as delivered), oldest first:
    #: the entries kept, those met again and the entries to deliver.
    kept: list[Entry]
    #: XINFO STREAM of the new stream, as read at the settlement (None: unknown or no stream).
    info: dict[str, Any] | None
    #: The retracted entries as read (the notice holds them decoded), oldest first.
    retracted: list[Entry] = field(default_factory=list)


def _reply_entries(reply: Any) -> list[Entry]:
    if isinstance(reply, BaseException):
        raise reply
    return list(reply or [])


def _info(reply: Any) -> dict[str, Any] | None:
    """XINFO STREAM as a dict; None when there is no stream or XINFO is unavailable."""
    if isinstance(reply, BaseException) or reply is None:
        return None
    return info_dict(reply)


def _same(a: Entry, b: Entry) -> bool:
    return text(a[0]) == text(b[0]) and list(a[1] or []) == list(b[1] or [])


class _Scan:
    """The backward merge of the new stream (newest first) with what the reader delivered."""

    def __init__(self, d: Divergence) -> None:
        self.d = d
        self.cursor = stream_id(d.cursor)
        self.history = list(d.history)
        self.known = list(self.history)
        newest = stream_id(text(self.history[-1][0])) if self.history else None
        self.virtual = d.anchor is not None and (newest is None or stream_id(text(d.anchor[0])) > newest)
        if self.virtual:
            self.known.append(d.anchor)
        self.i = len(self.known) - 1  # the newest known entry not yet compared
        self.above = 0  # entries of the new stream after the cursor (left to XREAD)
        self.first_above: str | None = None  # the oldest of them
        self.retracted: list[Entry] = []  # newest first while scanning
        self.undelivered: list[Entry] = []  # newest first while scanning
        self.met_again: list[Entry] = []  # delivered, retracted, and held by this stream after all
        self.above_entries: list[Entry] = []  # the entries after the cursor, newest first
        self.read_on: Entry | None = None  # the new stream's newest entry at or below the cursor
        self.parted_at: str | None = None  # the newest entry both hold
        self.fed_at_or_below = 0  # entries at or below the cursor compared so far
        #: How many entries at or below the cursor were compared when the rest was taken as
        #: delivered without comparing (None: nothing was).
        self.unchecked_after: int | None = None
        self.restored_seen = False  # a restart's stream holds an entry older than the server's start
        self.uncertain = False  # a presumption the reader cannot check (the notice is not exact)
        self.done = False

    def _retract(self) -> None:
        if not (self.virtual and self.i == len(self.known) - 1):
            self.retracted.append(self.known[self.i])
        self.i -= 1

    def _never_delivered(self, entry: Entry) -> None:
        if self._is_met_again(entry):
            self.met_again.append(entry)
        else:
            self.undelivered.append(entry)

    def _is_met_again(self, entry: Entry) -> bool:
        fields = self.d.retracted_before.get(text(entry[0]))
        return fields is not None and list(fields) == list(entry[1] or [])

    def skip_met_again_above(self) -> None:
        """Entries after the cursor that were delivered and retracted before: XREAD would hand
        them out again, so the settlement delivers what lies among them and goes on after the
        newest one."""
        oldest_first = self.above_entries[::-1]
        last = max((n for n, entry in enumerate(oldest_first) if self._is_met_again(entry)), default=None)
        if last is None:
            return
        for entry in oldest_first[: last + 1]:
            (self.met_again if self._is_met_again(entry) else self.undelivered).insert(0, entry)
        self.read_on = oldest_first[last]
        self.above -= last + 1
        rest = oldest_first[last + 1:]
        self.first_above = text(rest[0][0]) if rest else None

    def _new_since_start(self, entry: Entry) -> bool:
        server = self.d.server
        if server is None or server.started_empty or server.started_ms is None:
            return True  # nothing restored, or unknown: deliver rather than skip
        return stream_id(text(entry[0]))[0] >= server.started_ms

    def feed(self, entry: Entry) -> None:
        """One entry of the new stream, newest first; sets ``done`` when the rest is decided."""
        entry_id = text(entry[0])
        key = stream_id(entry_id)
        if key > self.cursor:
            self.above += 1
            self.first_above = entry_id
            self.above_entries.append(entry)
            return
        if self.read_on is None:
            self.read_on = entry
        self.fed_at_or_below += 1
        while self.i >= 0 and stream_id(text(self.known[self.i][0])) > key:
            self._retract()  # delivered, and the new stream has nothing there
        if self.i >= 0 and text(self.known[self.i][0]) == entry_id:
            if _same(self.known[self.i], entry):
                self.parted_at = entry_id
                self.done = True
                return
            self._retract()  # the same id, other fields: another entry
            self._never_delivered(entry)
            return
        if self.i >= 0:
            self._never_delivered(entry)  # between two delivered entries
            return
        # Older than anything the reader remembers.
        if (self.d.reason is GapReason.RESTART and self._new_since_start(entry)) or (
                self.d.reason is GapReason.REPLACED and not self.d.evicted):
            # A restarted server wrote it since it started; a stream replaced on the same
            # server was written after the one the reader read, all of which it remembers.
            self._never_delivered(entry)
            return
        self.restored_seen = self.d.reason is GapReason.RESTART
        self.unchecked_after = self.fed_at_or_below - 1
        self.done = True


def settle(d: Divergence) -> Generator[Reads, list[Any], Settlement]:
    """Read the new stream backwards from its end, compare it with the history, and settle.

    Yields the reads it needs (first XINFO STREAM with the newest page, then older pages) and
    returns the :class:`Settlement`. An error reply to a page is raised.
    """
    page = max(1, d.page)
    replies = yield (("XINFO", "STREAM", d.key), ("XREVRANGE", d.key, "+", "-", "COUNT", page))
    info = _info(replies[0])
    missing = isinstance(replies[0], BaseException) and "no such key" in str(replies[0]).lower()
    batch = _reply_entries(replies[1])
    scan = _Scan(d)
    counted = True  # ``scan.above`` is the exact count of entries after the cursor
    scanned = 0
    exhausted = False  # the scan reached the new stream's first entry
    while True:
        for entry in batch:
            scanned += 1
            scan.feed(entry)
            if scan.done:
                break
        if scan.done:
            break
        if len(batch) < page:
            exhausted = True
            break
        if scanned >= MAX_SCAN:
            scan.uncertain = True
            scan.unchecked_after = scan.fed_at_or_below
            break
        if scan.above == scanned and scanned >= 2 * page + len(scan.known):
            # A long run of entries after the cursor: jump to the cursor rather than page
            # through them (their count, and so the index, is then unknown).
            counted = False
            replies = yield (("XREVRANGE", d.key, d.cursor, "-", "COUNT", page),)
        else:
            replies = yield (("XREVRANGE", d.key, f"({text(batch[-1][0])}", "-", "COUNT", page),)
        batch = _reply_entries(replies[0])
    if counted and d.retracted_before:
        scan.skip_met_again_above()
    return _settlement(d, scan, info, counted, exhausted, missing)


def _settlement(d: Divergence, scan: _Scan, info: dict[str, Any] | None, counted: bool,
                exhausted: bool, missing: bool) -> Settlement:
    read_on = text(scan.read_on[0]) if scan.read_on is not None else "0-0"
    if scan.parted_at is not None and scan.parted_at == d.cursor and not scan.undelivered and not scan.retracted:
        return Settlement(None, [], d.cursor, d.anchor, None, scan.history, info)
    # Delivered entries the scan did not reach lie before the new stream's first entry.
    unreached = scan.history[: scan.i + 1] if scan.parted_at is None else []
    kept = scan.history[: scan.i + 1]
    if unreached:
        gone = exhausted and (d.reason in (GapReason.REPLACED, GapReason.CURSOR_AHEAD) or (
            d.reason is GapReason.RESTART and not scan.restored_seen))
        if gone:
            scan.retracted.extend(reversed(unreached))
            kept = []
        else:
            scan.uncertain = True
    undelivered = scan.undelivered[::-1]
    retracted = scan.retracted[::-1]
    if scan.met_again or undelivered:
        kept = sorted([*kept, *scan.met_again, *undelivered], key=lambda entry: stream_id(text(entry[0])))
    index: int | None = 0 if missing else None  # a stream written from now on counts from 0
    if info is not None and counted and info.get("entries-added") is not None:
        deleted = stream_id(text(info.get("max-deleted-entry-id") or "0-0"))
        if read_on == "0-0" or deleted <= stream_id(read_on):
            after = scan.above if scan.read_on is not None else int(info.get("length") or 0)
            index = int(info["entries-added"]) - after
    if undelivered:
        to_id = text(undelivered[0][0])
    elif scan.first_above is not None:
        to_id = scan.first_above
    else:
        to_id = text((info or {}).get("last-generated-id") or read_on)
    exact = d.reason is not GapReason.CURSOR_AHEAD and not scan.uncertain \
        and not (d.evicted and scan.parted_at is None)
    skipped = None  # entries taken as delivered unchecked, when that may have skipped some
    if not exact and scan.unchecked_after is not None and info is not None and counted:
        skipped = max(0, int(info.get("length") or 0) - scan.above - scan.unchecked_after)
    events = tuple(decode_entry(text(entry[0]), entry[1]) for entry in retracted)
    notice = GapNotice(d.queue_name, scan.parted_at or "0-0", to_id, skipped, d.reason, events, exact, d.detail)
    return Settlement(notice, undelivered, read_on, scan.read_on, index, kept, info, retracted)
