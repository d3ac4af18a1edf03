"""Every event on the wire, as BullMQ 6.7's scripts write it, with what a subscriber must see."""

from __future__ import annotations

from echomq.protocol.events import EventType

# Every event BullMQ 6.7 writes, as its scripts write it (docs/protocol.md §5.2), with the
# decoded event_data a subscriber must see.
# (wire fields in written order, expected type, expected data without event_id)
WIRE_TABLE: list[tuple[list[str], EventType, dict[str, object]]] = [
    (["event", "added", "jobId", "1", "name", "send"], EventType.ADDED, {"jobId": "1", "name": "send"}),
    (["event", "waiting", "jobId", "1"], EventType.WAITING, {"jobId": "1"}),
    (["event", "waiting", "jobId", "1", "prev", "delayed"], EventType.WAITING, {"jobId": "1", "prev": "delayed"}),
    (["event", "active", "jobId", "1", "prev", "waiting"], EventType.ACTIVE, {"jobId": "1", "prev": "waiting"}),
    (["event", "progress", "jobId", "1", "data", '{"step":2,"of":3}'], EventType.PROGRESS,
     {"jobId": "1", "data": {"step": 2, "of": 3}}),
    (["event", "progress", "jobId", "1", "data", "42"], EventType.PROGRESS, {"jobId": "1", "data": 42}),
    (["event", "completed", "jobId", "1", "returnvalue", '{"ok":true}', "prev", "active"], EventType.COMPLETED,
     {"jobId": "1", "returnvalue": {"ok": True}, "prev": "active"}),
    (["event", "completed", "jobId", "1", "returnvalue", "null", "prev", "active"], EventType.COMPLETED,
     {"jobId": "1", "returnvalue": None, "prev": "active"}),
    (["event", "failed", "jobId", "1", "failedReason", "boom", "prev", "active"], EventType.FAILED,
     {"jobId": "1", "failedReason": "boom", "prev": "active"}),
    (["event", "delayed", "jobId", "1", "delay", "1764400000000"], EventType.DELAYED,
     {"jobId": "1", "delay": 1764400000000}),
    (["event", "stalled", "jobId", "1"], EventType.STALLED, {"jobId": "1"}),
    (["event", "removed", "jobId", "1", "prev", "wait"], EventType.REMOVED, {"jobId": "1", "prev": "wait"}),
    (["event", "drained"], EventType.DRAINED, {}),
    (["event", "paused"], EventType.PAUSED, {}),
    (["event", "resumed"], EventType.RESUMED, {}),
    (["event", "duplicated", "jobId", "1"], EventType.DUPLICATED, {"jobId": "1"}),
    (["event", "deduplicated", "jobId", "1", "deduplicationId", "d", "deduplicatedJobId", "2"],
     EventType.DEDUPLICATED, {"jobId": "1", "deduplicationId": "d", "deduplicatedJobId": "2"}),
    (["event", "retries-exhausted", "jobId", "1", "attemptsMade", "3"], EventType.RETRIES_EXHAUSTED,
     {"jobId": "1", "attemptsMade": 3}),
    (["event", "waiting-children", "jobId", "1"], EventType.WAITING_CHILDREN, {"jobId": "1"}),
    (["event", "waiting-children", "jobId", "1", "prev", "active"], EventType.WAITING_CHILDREN,
     {"jobId": "1", "prev": "active"}),
    (["event", "cleaned", "count", "0"], EventType.CLEANED, {"count": 0}),
]
