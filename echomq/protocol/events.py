"""The events stream contract: event types, wire names, field decoding and the gap notice.

Every transition script XADDs one entry onto ``<prefix>:{<queue>}:events`` whose first field is
``event`` (docs/protocol.md §5.1). Values on the wire are strings; this module turns an
entry into ``(event_type, event_data)`` the way users want to consume it:

- ``event_type`` is an :class:`EventType` for the 17 protocol events, or the plain wire string
  for anything else (BullMQ 5's ``debounced``, a custom event): unknown names are never dropped.
- ``event_data`` holds the other fields, with ``completed.returnvalue`` and ``progress.data``
  decoded from JSON, ``delayed.delay`` (the absolute due time in ms),
  ``retries_exhausted.attemptsMade`` and ``cleaned.count`` as ``int``; a malformed value stays
  the raw string, so a bad producer never stops the reader. ``event_id`` is the entry id.

A :class:`GapNotice` is not an event: it reports entries trimmed before we could read them, or
a stream replaced under the reader (a failover, a restart), with the reason (:class:`GapReason`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .codec import int_or_text, json_or_text, text


class EventType(str, Enum):
    """The 17 events BullMQ 6.7 writes, valued with Python names (``-`` becomes ``_``).

    The value is what ``Handler`` dispatches on (``on_<value>``); :attr:`wire_name` is what the
    scripts write.
    """

    ADDED = "added"
    WAITING = "waiting"
    ACTIVE = "active"
    PROGRESS = "progress"
    COMPLETED = "completed"
    FAILED = "failed"
    DELAYED = "delayed"
    STALLED = "stalled"
    REMOVED = "removed"
    DRAINED = "drained"
    PAUSED = "paused"
    RESUMED = "resumed"
    DUPLICATED = "duplicated"
    DEDUPLICATED = "deduplicated"
    RETRIES_EXHAUSTED = "retries_exhausted"
    WAITING_CHILDREN = "waiting_children"
    CLEANED = "cleaned"

    @property
    def wire_name(self) -> str:
        """The ``event`` field as the scripts write it (``retries-exhausted``)."""
        return _WIRE_BY_TYPE[self]

    # A str Enum prints as ``EventType.ADDED`` by default on 3.11+; users format these into
    # log lines and handler names, where the plain value is what they mean.
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


_WIRE_BY_TYPE: dict[EventType, str] = {t: t.value.replace("_", "-") for t in EventType}
_TYPE_BY_WIRE: dict[str, EventType] = {wire: t for t, wire in _WIRE_BY_TYPE.items()}

#: What a subscriber sees as ``event_type``: a known type, or the wire name as it came.
EventName = EventType | str

#: The decoded fields per event: ``returnvalue`` and ``data`` are JSON text (docs/protocol.md
#: §5.2), ``delayed.delay`` is an absolute timestamp in ms. Every other field stays a str.
DECODED_FIELDS: dict[EventType, tuple[tuple[str, Callable[[str], Any]], ...]] = {
    EventType.COMPLETED: (("returnvalue", json_or_text),),
    EventType.PROGRESS: (("data", json_or_text),),
    EventType.DELAYED: (("delay", int_or_text),),
    EventType.RETRIES_EXHAUSTED: (("attemptsMade", int_or_text),),
    EventType.CLEANED: (("count", int_or_text),),
}


#: wire name -> (type, the one field it decodes or None, that field's decoder or None): a
#: single lookup per entry on the reader's hot path (no event decodes more than one field).
DECODING_BY_WIRE: dict[str, tuple[EventType, str | None, Callable[[str], Any] | None]] = {
    wire: (t, *(DECODED_FIELDS[t][0] if t in DECODED_FIELDS else (None, None))) for t, wire in _WIRE_BY_TYPE.items()
}
assert all(len(fields) == 1 for fields in DECODED_FIELDS.values())


def parse_event_type(wire_name: str | bytes) -> EventName:
    """Map a wire name onto its :class:`EventType`; anything else comes back as the plain str."""
    name = text(wire_name)
    return _TYPE_BY_WIRE.get(name, name)


def decode_entry(entry_id: str | bytes, fields: Any) -> tuple[EventName, dict[str, Any]]:
    """One stream entry (flat ``[k, v, ...]`` list or a mapping, bytes or str) as ``(type, data)``.

    This runs once per event on the reader's hot path, hence the plain loops. An entry without
    ``event`` (written by something that is not a protocol producer) comes through with the
    empty string as its type rather than being dropped.
    """
    if isinstance(fields, (list, tuple)):
        if fields and type(fields[0]) is bytes:
            fields = [text(f) for f in fields]
        it = iter(fields)
        data: dict[str, Any] = dict(zip(it, it))
    else:
        data = {text(k): text(v) for k, v in fields.items()}
    wire = data.pop("event", "")
    event_type = _TYPE_BY_WIRE.get(wire, wire)
    # A custom name equal to one of our values ("retries_exhausted") is not that event: a str
    # Enum hashes like its value, so look up only what the wire table recognised.
    decoders = None if event_type is wire else DECODED_FIELDS.get(event_type)
    if decoders is not None:
        for name, decode in decoders:
            raw = data.get(name)
            if raw is not None:
                data[name] = decode(raw)
    data["event_id"] = text(entry_id)
    return event_type, data


class GapReason(str, Enum):
    """Why a :class:`GapNotice` was given: what happened to the stream the reader follows.

    ``TRIMMED`` and ``DELETED``: producers removed entries of the stream after the reader's
    cursor before it read them (``XADD MAXLEN``/``XTRIM``, ``XDEL``). The others say the stream
    itself was replaced by one that does not hold what the reader delivered:
    ``FAILOVER`` (the reader's connection moved to a new master: Sentinel, a Redis Cluster
    failover, a node demoted to a replica), ``RESTART`` (the server restarted and lost data),
    ``REPLACED`` (the same server, or one the reader cannot identify, now holds another stream
    under the key: deleted and written again, flushed), ``CURSOR_AHEAD`` (a reader started
    from a saved id finds a stream that ends before that id: not the stream the id came from).
    """

    TRIMMED = "trimmed"
    DELETED = "deleted"
    FAILOVER = "failover"
    RESTART = "restart"
    REPLACED = "replaced"
    CURSOR_AHEAD = "cursor_ahead"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: The reasons that mean the stream was replaced (rather than trimmed in place).
SWITCH_REASONS = frozenset({GapReason.FAILOVER, GapReason.RESTART, GapReason.REPLACED, GapReason.CURSOR_AHEAD})


@dataclass(frozen=True)
class GapNotice:
    """Events this reader will never get, or got from a stream that no longer holds them.

    Not an event: subscribers get it instead of an ``event_type`` (see QueueEvents), and it is
    never a ``str``, so it cannot be confused with an event name. ``reason`` (a
    :class:`GapReason`) says what happened:

    - ``trimmed`` / ``deleted``: entries after ``from_id`` and before ``to_id`` were removed
      before the reader saw them; ``approx_lost`` is estimated from XINFO STREAM (entries added
      minus length, minus what lay at or before the cursor): exact when the reader knows its
      position in the stream's history, an upper bound when it started from an explicit id,
      ``None`` for XDEL (the count is unknown).
    - ``failover`` / ``restart`` / ``replaced`` / ``cursor_ahead``: the stream was replaced.
      ``from_id`` is the newest entry the reader delivered that the new stream holds too
      (``"0-0"``: none), ``to_id`` the next entry it delivers (or the new stream's last id when
      it holds none yet); ``retracted`` the events it delivered that the new stream does not
      hold, oldest first, as ``(event_type, event_data)`` pairs (decoded as they were
      delivered): what they announced may not have happened, or was lost with the old server.
      ``approx_lost``: how many entries of the new stream the reader took as delivered without
      comparing them (when the notice is not exact: a ``cursor_ahead``, a divergence beyond
      what the reader remembers), else None; what the old stream received after the reader's
      last read is unknown.
      ``exact`` is False when the reader could not find where the streams part within what it
      remembers (``QueueEvents(history=...)``), and decided the rest by the rule of the reason
      (docs/events.md). ``detail`` names the servers (address, run id) in words.
    """

    queue_name: str
    from_id: str
    to_id: str
    approx_lost: int | None
    reason: GapReason = GapReason.TRIMMED
    retracted: tuple[tuple[EventName, dict[str, Any]], ...] = ()
    exact: bool = True
    detail: str = ""

    def __repr__(self) -> str:  # the retracted events by count: a restart can retract thousands
        return (f"GapNotice(queue_name={self.queue_name!r}, from_id={self.from_id!r}, to_id={self.to_id!r}, "
                f"approx_lost={self.approx_lost!r}, reason={self.reason.value!r}, "
                f"retracted=<{len(self.retracted)} events>, exact={self.exact!r}, detail={self.detail!r})")

    @property
    def replaced(self) -> bool:
        """True when the stream was replaced (a failover, a restart ...), not trimmed in place."""
        return self.reason in SWITCH_REASONS

    def as_dict(self) -> dict[str, Any]:
        return {"queue_name": self.queue_name, "from_id": self.from_id, "to_id": self.to_id,
                "approx_lost": self.approx_lost, "reason": self.reason.value,
                "retracted": [{"event_type": str(t), "event_data": d} for t, d in self.retracted],
                "exact": self.exact, "detail": self.detail}

    def __str__(self) -> str:
        if not self.replaced:
            lost = "an unknown number of" if self.approx_lost is None else f"about {self.approx_lost}"
            return (f"{self.reason} gap in {self.queue_name!r}: {lost} entries after {self.from_id} and "
                    f"before {self.to_id} are gone")
        said = f"{self.reason} of the events stream of {self.queue_name!r}"
        if self.detail:
            said += f" ({self.detail})"
        said += f": the new stream parts from what was delivered after {self.from_id}, reading on at {self.to_id}"
        if self.retracted:
            said += f"; {len(self.retracted)} delivered events are not in it"
        if self.approx_lost:
            said += f"; {self.approx_lost} of its entries skipped"
        if not self.exact:
            said += "; not exact (docs/events.md)"
        return said
