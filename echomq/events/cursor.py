"""Where a stream reader stands, and what producers trimmed ahead of it.

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
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.events import GapNotice

# ASCII digits only (``\d`` also takes other scripts' digits, which Redis refuses), matched as a
# whole (``$`` in a pattern would let a trailing newline through).
_STREAM_ID = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
_REPLAY = ("0", "0-0")
#: Both parts of a stream id are unsigned 64-bit integers in Redis.
_MAX_ID_PART = 2**64 - 1


def validate_start_id(value: Any) -> str:
    """``"$"``, or an id Redis would take in XREAD: ``<ms>`` or ``<ms>-<seq>`` (``"0"`` replays).

    ``">"`` is not one: it means "never delivered to this group" and only exists for consumer
    groups, which QueueEvents does not use (docs/protocol.md §5.3).
    """
    if isinstance(value, str):
        match = _STREAM_ID.fullmatch(value)
        if value == "$" or (match and all(int(part) <= _MAX_ID_PART for part in match.groups() if part)):
            return value
    raise InvalidInputError(f"last_event_id {value!r} must be '$', '0' or a stream id like '1700000000000-0'")


def parse_stream_id(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def info_dict(reply: Any) -> dict[str, Any]:
    """An XINFO STREAM reply (flat list in RESP2, map in RESP3) as a dict with str keys."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    items = list(reply)
    return {text(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)}


class StreamCursor:
    """The reader's position: ``id`` (None until ``"$"`` is resolved) and its index."""

    def __init__(self, start: str) -> None:
        validate_start_id(start)
        self.id: str | None = None if start == "$" else start
        self.index: int | None = 0 if start in _REPLAY else None
        # "0" asks for whatever the stream holds now: what was trimmed before is not a gap.
        self._replaying_from_start = start in _REPLAY
        self._reported_deleted = (0, 0)

    def resolve_tail(self, info: dict[str, Any] | None) -> None:
        """Fix ``"$"`` to the stream's last generated id (``0-0`` when it does not exist yet)."""
        if info is None:
            self.id, self.index = "0-0", 0
            return
        added = info.get("entries-added")
        self.id = text(info["last-generated-id"])
        self.index = None if added is None else int(added)

    def advance(self, entry_id: str, delivered: int) -> None:
        self.id = entry_id
        if self.index is not None:
            self.index += delivered

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
        return GapNotice(queue_name, self.id, next_id or front, lost)
