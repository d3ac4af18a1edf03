"""Where a stream reader stands, what it delivered, and what producers trimmed ahead of it.

The cursor is the id of the last entry delivered. Next to it we keep the cursor's *index*: how
many entries the stream had ever received up to it, when we can know (a ``"$"`` start reads it
from XINFO STREAM ``entries-added``; a ``"0"`` start begins at 0). Redis 7's XINFO STREAM then
tells us, before each read, whether entries after the cursor vanished:

- trimming (``XADD MAXLEN``/``XTRIM``) moves ``first-entry`` past the cursor and shows in
  ``entries-added - length``; it does not move ``max-deleted-entry-id``;
- XDEL moves ``max-deleted-entry-id``.

With a known index a trim's loss is ``entries-added - index - length``, exact up to producers
racing the check; from an explicit start id the index is unknown and the estimate is an upper
bound. How many an XDEL removed after the cursor is not known (``approx_lost`` is None).

The same XINFO tells when the stream is no longer the one the cursor is in (:meth:`replaced`):
a stream's ``last-generated-id``, ``entries-added``, ``first-entry`` and ``max-deleted-entry-id``
never decrease, and its key never vanishes but by DEL (a restart without persistence, a flush,
an obliteration). The cursor also keeps the entries it delivered (:class:`DeliveredHistory`,
the newest ``history`` of them) for the reader to compare with a stream that replaced the one
it read (``divergence``), and the identity of the server they came from.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from ..protocol.codec import text
from ..protocol.events import GapNotice, GapReason
from .divergence import Settlement
from .entries import REPLAY, Entry, info_dict, parse_stream_id, validate_start_id
from .servers import ServerIdentity

__all__ = ["DeliveredHistory", "Entry", "StreamCursor", "info_dict", "parse_stream_id", "validate_start_id"]

class DeliveredHistory:
    """The newest delivered entries (at least ``capacity`` of them), oldest first.

    Kept as the batches the reads returned, so delivering an entry costs nothing here: one
    append per read, and whole batches are dropped from the front once the rest holds
    ``capacity`` entries. ``evicted`` is True once the reader delivered entries it no longer
    remembers (or started after entries it never saw: an explicit start id).
    """

    def __init__(self, capacity: int, *, evicted: bool = False) -> None:
        self.capacity = capacity
        self.evicted = evicted
        self._batches: deque[list[Entry]] = deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, entries: list[Entry]) -> None:
        if not entries:
            return
        if self.capacity == 0:
            self.evicted = True
            return
        self._batches.append(entries)
        self._count += len(entries)
        while self._count - len(self._batches[0]) >= self.capacity:
            self._count -= len(self._batches.popleft())
            self.evicted = True

    def entries(self) -> list[Entry]:
        return [entry for batch in self._batches for entry in batch]

    def newest(self) -> Entry | None:
        return self._batches[-1][-1] if self._batches else None

    def replace(self, kept: list[Entry]) -> None:
        """What a settlement kept: the entries the new stream holds (``divergence``)."""
        self._batches = deque([kept]) if kept else deque()
        self._count = len(kept)


class StreamCursor:
    """The reader's position: ``id`` (None until ``"$"`` is resolved), its index, what it
    delivered (``history``) and the server it read from (``server``)."""

    def __init__(self, start: str, history: int = 10_000) -> None:
        validate_start_id(start)
        self.id: str | None = None if start == "$" else start
        self.index: int | None = 0 if start in REPLAY else None
        # "0" asks for whatever the stream holds now: what was trimmed before is not a gap.
        self._replaying_from_start = start in REPLAY
        self._reported_deleted = (0, 0)
        #: The cursor came from the caller (a saved id): entries before it were never seen here.
        self.explicit_start = start not in (*REPLAY, "$")
        self.history = DeliveredHistory(history, evicted=self.explicit_start)
        #: The entry at the cursor when the reader did not deliver it (the resolved "$", the
        #: place a settlement went on from): compared like a delivered one, never retracted.
        self.anchor: Entry | None = None
        #: Who served the stream the cursor is in (None: not known yet, or not knowable).
        self.server: ServerIdentity | None = None
        #: Settled entries not yet delivered (a close() cut the delivery short).
        self.pending: list[Entry] = []
        #: Delivered entries a settlement retracted (id -> fields), the newest ``history``.
        self.retracted: OrderedDict[str, Any] = OrderedDict()
        # The stream's monotone counters, last read: entries-added, first entry, max deleted id.
        self._seen: tuple[int | None, tuple[int, int] | None, tuple[int, int]] | None = None
        self._stream_seen = False  # the stream existed since the cursor was placed in it

    def resolve_tail(self, info: dict[str, Any] | None) -> None:
        """Fix ``"$"`` to the stream's last generated id (``0-0`` when it does not exist yet)."""
        if info is None:
            self.id, self.index = "0-0", 0
            return
        added = info.get("entries-added")
        self.id = text(info["last-generated-id"])
        self.index = None if added is None else int(added)
        last = info.get("last-entry")
        self.anchor = [text(last[0]), last[1]] if last else None
        self._note(info)

    def advance(self, entry_id: str, delivered: int, entries: list[Entry] | None = None) -> None:
        """Past ``delivered`` entries up to ``entry_id``; ``entries`` (the read's) are remembered
        (None: already remembered, as a settlement's are)."""
        self.id = entry_id
        if self.index is not None:
            self.index += delivered
        if delivered:
            self.explicit_start = False
        if entries is not None:
            self.history.add(entries if delivered == len(entries) else entries[:delivered])

    # -- is this still the stream the cursor is in? ------------------------------------------

    def _note(self, info: dict[str, Any]) -> None:
        first = info.get("first-entry")
        self._seen = (_counter(info.get("entries-added")), parse_stream_id(text(first[0])) if first else None,
                      parse_stream_id(text(info.get("max-deleted-entry-id") or "0-0")))
        self._stream_seen = True

    def replaced(self, info: dict[str, Any] | None, *, missing: bool) -> bool:
        """True when the stream XINFO describes (``missing``: the key does not exist) cannot be
        the one the cursor is in; else notes its counters for the next look."""
        if missing:
            return self._stream_seen
        if info is None or self.id is None:
            return False
        if parse_stream_id(text(info.get("last-generated-id") or "0-0")) < parse_stream_id(self.id):
            return True  # ids only grow: this stream never had the cursor
        before = self._seen
        self._note(info)
        if before is None:
            return False
        now = self._seen
        assert now is not None
        added_before, first_before, deleted_before = before
        added, first, deleted = now
        return bool((added is not None and added_before is not None and added < added_before)
                    or (first is not None and first_before is not None and first < first_before)
                    or deleted < deleted_before)

    def apply(self, settlement: Settlement) -> None:
        """Move the cursor into the stream a settlement read (``divergence.settle``); its
        entries to deliver are left in ``pending`` for the reader."""
        self.id = settlement.cursor
        self.index = settlement.index
        self.anchor = settlement.anchor
        self.history.replace(settlement.kept)
        self.pending = list(settlement.deliver)
        self.explicit_start = False
        if settlement.notice is not None:
            for entry in settlement.retracted:
                self.retracted[text(entry[0])] = entry[1]
            while len(self.retracted) > max(self.history.capacity, 1):
                self.retracted.popitem(last=False)
        self._replaying_from_start = False
        self._reported_deleted = (0, 0)
        self._seen = None
        self._stream_seen = False
        if settlement.info is not None:
            self._note(settlement.info)

    # -- trimmed ahead of the cursor ---------------------------------------------------------

    def check_gap(self, info: dict[str, Any], next_id: str | None, queue_name: str) -> GapNotice | None:
        """A GapNotice if entries after the cursor vanished before the read that ``info`` preceded.

        ``next_id`` is the first entry that read returned, if any (the gap's far end).
        """
        added, length = info.get("entries-added"), info.get("length")
        if added is None or length is None or self.id is None:
            return None  # Redis < 7 does not report the counters
        added, length = int(added), int(length)
        trimmed = added - length
        if self._replaying_from_start:
            self._replaying_from_start = False
            self.index = trimmed
            return None
        cursor = parse_stream_id(self.id)
        first = info.get("first-entry")
        front = text(first[0]) if first else text(info.get("last-generated-id") or "0-0")
        passed = parse_stream_id(front) > cursor
        deleted = parse_stream_id(text(info.get("max-deleted-entry-id") or "0-0"))
        lost: int | None
        if passed:
            # Everything up to the cursor is gone too, so the stream's length counts only
            # entries after it.
            lost = trimmed if self.index is None else added - self.index - length
            if lost <= 0:
                return None  # only entries up to the cursor were trimmed
            self.index = trimmed
        elif deleted > cursor and deleted > self._reported_deleted:
            lost = None  # XDEL of entries after the cursor: how many is unknown
        else:
            return None
        self._reported_deleted = max(deleted, self._reported_deleted)
        reason = GapReason.TRIMMED if passed else GapReason.DELETED
        return GapNotice(queue_name, self.id, next_id or front, lost, reason)


def _counter(value: Any) -> int | None:
    return None if value is None else int(value)
