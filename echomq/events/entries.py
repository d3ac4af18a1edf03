"""The shapes the reader reads: stream ids (checked and parsed), entries, XINFO STREAM replies.

Shared by ``cursor`` (where the reader stands) and ``divergence`` (a replaced stream), below both.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidInputError
from ..protocol.codec import text

#: One stream entry as the reader's connection returns it: ``[id, [field, value, ...]]``.
Entry = Any

# ASCII digits only (``\d`` also takes other scripts' digits, which Redis refuses), matched as a
# whole (``$`` in a pattern would let a trailing newline through).
_STREAM_ID = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
#: The start ids that replay the whole stream.
REPLAY = ("0", "0-0")
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


#: The commands of one round trip, pipelined in order; the replies come back in a list (an
#: error reply as the exception instance, in its slot).
Reads = tuple[tuple[Any, ...], ...]
