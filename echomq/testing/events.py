"""Capturing a queue's events without a thread: what the stream received since the recorder began.

``record_events(conn, queue)`` notes where the events stream ends; ``recorder.events`` reads
what was written after that point (XRANGE: no blocking read, no thread), decoded exactly as
QueueEvents decodes it. As a context manager it stops at the end of the block, so a test asserts
on what one step wrote. The stream is capped (``Queue.set_events_max_len``, 10,000 by default):
a recorder that falls behind the cap raises rather than report a shortened history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import EchoMQError, InvalidInputError
from ..protocol.codec import text
from ..protocol.events import EventName, EventType, decode_entry
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys
from ..queue.queue import Queue
from ..transport.connection import Connection, Connections

#: What ``assert_sequence`` takes per expected event: a type (``EventType.COMPLETED``,
#: ``"completed"``, ``"retries-exhausted"`` or ``"retries_exhausted"``), or ``(type, job_id)``.
Expected = EventName | tuple[EventName, str]


def _wire(event_type: EventName) -> str:
    if isinstance(event_type, EventType):
        return event_type.wire_name
    known = {t.value: t.wire_name for t in EventType}
    return known.get(event_type, event_type)


@dataclass(frozen=True)
class RecordedEvent:
    """One entry of the events stream: its type, its fields (decoded as QueueEvents decodes them),
    and its stream id."""

    type: EventName
    data: dict[str, Any]
    id: str

    @property
    def name(self) -> str:
        """The wire name (``"retries-exhausted"``), as BullMQ and the stream spell it."""
        return _wire(self.type)

    @property
    def job_id(self) -> str | None:
        value = self.data.get("jobId")
        return None if value is None else str(value)

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v!r:.40}" for k, v in self.data.items() if k != "jobId")
        return f"{self.name}({self.job_id or '-'}{': ' + shown if shown else ''})"


class TrimmedEventsError(EchoMQError):
    """Entries the recorder had not read yet were trimmed from the stream (it is capped)."""


class EventRecorder:
    """The events written to one queue's stream since this recorder was created (see module doc)."""

    def __init__(self, connection: Connection, queue: Queue | str, *, prefix: str = DEFAULT_PREFIX) -> None:
        if isinstance(queue, Queue):
            keys = queue.keys
        elif isinstance(queue, str):
            keys = QueueKeys(queue, prefix)
        else:
            raise InvalidInputError(f"record_events: queue={queue!r:.80} must be a Queue or a queue name")
        self._connections = Connections(connection, route_key=keys.meta)
        self.client = self._connections.client
        self.key = keys.events
        self.queue_name = keys.queue_name
        newest = self.client.xrevrange(self.key, "+", "-", count=1)
        self._start = text(newest[0][0]) if newest else "0-0"
        self._cursor = self._start
        self._stopped = False
        self._seen: list[RecordedEvent] = []

    def __enter__(self) -> EventRecorder:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Read what is there now and record nothing more (the end of a ``with`` block)."""
        if not self._stopped:
            self._read()
            self._stopped = True
            self._connections.close()

    def _read(self) -> None:
        if self._stopped:
            return
        while True:
            entries = self.client.xrange(self.key, f"({self._cursor}", "+", count=1000)
            if not entries:
                return
            if self._cursor != "0-0":
                self._check_not_trimmed()
            for entry_id, fields in entries:
                event_type, data = decode_entry(text(entry_id), fields)
                event_id = data.pop("event_id")
                self._seen.append(RecordedEvent(event_type, data, event_id))
                self._cursor = event_id

    def _check_not_trimmed(self) -> None:
        """The entry last read must still be there, or entries after it may be gone unread."""
        if not self.client.xrange(self.key, self._cursor, self._cursor):
            raise TrimmedEventsError(
                f"record_events({self.queue_name!r}): the events stream lost entries after {self._cursor} before "
                "they were read (trimmed by its cap, or the queue obliterated); raise Queue.set_events_max_len or "
                "read the recorder more often")

    @property
    def events(self) -> list[RecordedEvent]:
        """Every event recorded so far, oldest first (reads what is new)."""
        self._read()
        return list(self._seen)

    def __iter__(self) -> Iterator[RecordedEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def of(self, job_id: str) -> list[RecordedEvent]:
        """The events of one job."""
        return [event for event in self.events if event.job_id == job_id]

    def names(self, job_id: str | None = None) -> list[str]:
        """The wire names of the events (of one job, when given), oldest first."""
        return [e.name for e in self.events if job_id is None or e.job_id == job_id]

    def assert_sequence(self, expected: Iterable[Expected], *, job_id: str | None = None, exact: bool = False) -> None:
        """Assert that these events were recorded in this order (others may come between them,
        unless ``exact``): each item a type or ``(type, job_id)``; ``job_id`` keeps only that
        job's events. Raises AssertionError showing what was recorded."""
        wanted = [(_wire(item[0]), item[1]) if isinstance(item, tuple) else (_wire(item), None) for item in expected]
        recorded = [e for e in self.events if job_id is None or e.job_id == job_id]
        if exact:
            matched = len(wanted) == len(recorded) and all(
                name == e.name and (jid is None or jid == e.job_id) for (name, jid), e in zip(wanted, recorded))
        else:
            position = 0
            for event in recorded:
                if position < len(wanted):
                    name, jid = wanted[position]
                    if name == event.name and (jid is None or jid == event.job_id):
                        position += 1
            matched = position == len(wanted)
        if not matched:
            shown = "\n  ".join(str(e) for e in recorded) or "(none)"
            want = ", ".join(n if j is None else f"{n}({j})" for n, j in wanted)
            raise AssertionError(f"events of queue {self.queue_name!r}{'' if job_id is None else f' (job {job_id})'}: "
                                 f"expected {'exactly ' if exact else ''}[{want}] in order; recorded:\n  {shown}")


def record_events(connection: Connection, queue: Queue | str, *, prefix: str = DEFAULT_PREFIX) -> EventRecorder:
    """Start recording the events of ``queue`` (a Queue, or a name under ``prefix``) from now on."""
    return EventRecorder(connection, queue, prefix=prefix)
