"""Running the reader's settlements with a replaced stream on its own connection.

``divergence`` decides, from replies alone, what a replaced stream means for the reader; this
module sends the reads it plans on the reader's socket, where they follow the reader's own
commands: once per connect it asks who the server is (``IDENTITY_READS``) and, when that is not
the server the cursor's stream came from (a failover, a restart), settles; after a read whose
XINFO shows the stream replaced in place (``StreamCursor.replaced``), it settles too. A
settlement moves the cursor into the new stream, hands the subscribers one GapNotice, and leaves
the entries to deliver pending: the reader delivers them before its next read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import NoPermissionError

from ..protocol.events import GapReason
from .cursor import Entry, StreamCursor
from .divergence import Divergence, settle
from .entries import REPLAY, Reads
from .servers import IDENTITY_READS, Change, ServerIdentity, classify, describe_change, identity_from, reason_of
from .subscribers import Subscribers

log = logging.getLogger(__name__)


class StreamSwitches:
    """One reader's watch on the stream it follows (see module doc)."""

    def __init__(self, queue_name: str, events_key: str, position: StreamCursor, subscribers: Subscribers, *,
                 page: int) -> None:
        self.queue_name = queue_name
        self.events_key = events_key
        self.position = position
        self.subscribers = subscribers
        self.page = page
        # INFO is refused (the ACL) or unknown (fakeredis): servers are told apart by address
        # only, and INFO is not asked again.
        self.info_unavailable = False
        self._resume_at: tuple[str, int | None] | None = None  # where a settlement goes on, once delivered

    def identify(self, conn: Any) -> None:
        """Who serves the stream now; when it is another server than the one the cursor's
        stream came from (a failover, a restart), settle with the stream it holds."""
        if self.info_unavailable:
            identity = ServerIdentity(address_of(conn))
        else:
            identity = identity_from(address_of(conn), run_reads(conn, IDENTITY_READS, refused=self._info_refusal))
        before = self.position.server
        if identity.syncing and before is not None:
            # Demoted and resyncing (or cut from its master): what it holds now may be replaced
            # by the sync. Read it once the sync is done (the reader's loop backs off).
            raise redis.ConnectionError(f"{identity.describe()} is a replica whose link to its master is not up: "
                                        "reading it once it is in sync")
        change = classify(before, identity)
        if change in (Change.FAILOVER, Change.RESTART):
            reason = reason_of(change, explicit_start=False)
            self.settle(conn, reason, describe_change(reason, before, identity), identity)
        self.position.server = identity  # once settled: a failed settlement is tried again

    def check_start(self, conn: Any, info: dict[str, Any] | None, missing: bool) -> None:
        """For a cursor the caller gave, with the stream's XINFO: settle now, before ``start()``
        returns, if the stream ends before it or does not exist (entries written after the
        start must not be taken as delivered, whatever their ids)."""
        if (missing and self.position.id not in REPLAY) or self.position.replaced(info, missing=False):
            self.replaced_in_place(conn)

    def replaced_in_place(self, conn: Any) -> None:
        """The same server (or one we cannot tell from it) holds another stream under the key."""
        reason = reason_of(Change.UNKNOWN, explicit_start=self.position.explicit_start)
        server = self.position.server
        self.settle(conn, reason, describe_change(reason, server, server), server)

    def _info_refusal(self, exc: BaseException) -> None:
        if self.info_unavailable:
            return
        if "unknown command" in str(exc).lower():
            self.info_unavailable = True
        elif isinstance(exc, NoPermissionError):
            self.info_unavailable = True
            log.warning("QueueEvents %r: the ACL refuses INFO (%s): a failover or a restart under the reader is "
                        "told by the server's address only; grant +info to tell them apart by run id",
                        self.queue_name, exc)

    def settle(self, conn: Any, reason: GapReason, detail: str, server: ServerIdentity | None) -> None:
        """Compare the new stream with what was delivered (``divergence.settle``), move the
        cursor into it, tell the subscribers, and leave the entries to deliver pending."""
        position = self.position
        assert position.id is not None
        divergence = Divergence(self.queue_name, self.events_key, position.id, position.history.entries(),
                                position.history.evicted, reason, server, detail, self.page, position.anchor,
                                position.retracted)
        plan = settle(divergence)
        try:
            reads = next(plan)
            while True:
                reads = plan.send(run_reads(conn, reads))
        except StopIteration as done:
            settlement = done.value
        if settlement.notice is None:
            return  # the new stream holds everything delivered, up to the cursor
        position.apply(settlement)
        self._resume_at = (settlement.cursor, settlement.index)
        log.warning("QueueEvents %r: %s", self.queue_name, settlement.notice)
        self.subscribers.deliver_gap(settlement.notice)

    def deliver_pending(self, deliver: Callable[[list[Entry]], int]) -> int:
        """Deliver what a settlement left to deliver, then stand where it said to go on."""
        position = self.position
        entries = position.pending
        delivered = deliver(entries)
        position.pending = entries[delivered:]
        if not position.pending and self._resume_at is not None:
            position.id, position.index = self._resume_at  # delivering entries below it moved nothing
            self._resume_at = None
        elif position.pending:
            position.index = None  # cut short by close(): where the new stream's count stands is unknown
        return delivered


def run_reads(conn: Any, reads: Reads, refused: Callable[[BaseException], None] | None = None) -> list[Any]:
    """Send ``reads`` pipelined on ``conn``; the replies in order, an error reply as its
    exception (``refused(exc)`` is told of each)."""
    conn.send_packed_command(conn.pack_commands(list(reads)))
    replies: list[Any] = []
    for _ in reads:
        try:
            replies.append(conn.read_response())
        except redis.ResponseError as exc:
            if refused is not None:
                refused(exc)
            replies.append(exc)
    return replies


def address_of(conn: Any) -> str | None:
    """``host:port`` (or the socket path) the reader's connection went to, when it says."""
    host, port = getattr(conn, "host", None), getattr(conn, "port", None)
    if host is not None and port is not None:
        return f"{host}:{port}"
    path = getattr(conn, "path", None)
    return str(path) if path else None
