"""The reader's two reads of the events stream: resolving ``"$"``, and each XINFO + XREAD.

Each read is ``XREAD COUNT <n> BLOCK <ms> STREAMS <events> <cursor>`` pipelined behind an
``XINFO STREAM`` (one round trip), so the XINFO describes the stream as it was just before the
read: what the trimmed-gap check and the replaced-stream check (``cursor``) need. Where the ACL
refuses XINFO, the reader warns once and reads without it (no gap notices, and a replaced
stream is noticed at reconnects only); ``"$"`` is then resolved from the newest entry.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.exceptions import NoPermissionError

from ..transport.blocking import BlockingConnection
from ..transport.refusals import refusal
from .cursor import StreamCursor, info_dict

log = logging.getLogger(__name__)


class StreamReads:
    """One reader's reads of ``events_key`` (and whether its ACL lets it ask XINFO)."""

    def __init__(self, queue_name: str, events_key: str) -> None:
        self.queue_name = queue_name
        self.events_key = events_key
        self.xinfo_refused = False  # the ACL refuses XINFO STREAM: read without it, no gap notices

    def resolve_tail(self, blocking: BlockingConnection, position: StreamCursor) -> None:
        """Fix ``"$"`` from XINFO STREAM; where ACLs refuse XINFO, from the newest entry."""
        conn = blocking.conn
        if not self.xinfo_refused:
            conn.send_command("XINFO", "STREAM", self.events_key)
            try:
                position.resolve_tail(info_dict(conn.read_response()))
                return
            except redis.ResponseError as exc:
                if "no such key" in str(exc).lower():
                    position.resolve_tail(None)
                    return
                if not isinstance(exc, NoPermissionError):
                    log.warning("QueueEvents %r: XINFO STREAM failed (%s): no gap notices", self.queue_name, exc)
                elif not self._without_xinfo(exc):
                    raise refusal(exc, "xinfo|stream", [self.events_key]) or exc from None
        newest = blocking.call("XREVRANGE", self.events_key, "+", "-", "COUNT", 1)
        position.resolve_tail({"last-generated-id": newest[0][0], "last-entry": newest[0]} if newest else None)

    def info(self, conn: Any) -> tuple[dict[str, Any] | None, bool]:
        """XINFO STREAM alone: the dict (None where refused or absent) and whether the key is missing."""
        if self.xinfo_refused:
            return None, False
        conn.send_command("XINFO", "STREAM", self.events_key)
        try:
            return info_dict(conn.read_response()), False
        except redis.ResponseError as exc:
            if isinstance(exc, NoPermissionError):
                if not self._without_xinfo(exc):
                    raise refusal(exc, "xinfo|stream", [self.events_key]) or exc from None
                return None, False
            return None, "no such key" in str(exc).lower()

    def _without_xinfo(self, exc: BaseException) -> bool:
        """When the ACL refuses the XINFO command (not the key: then XREAD is refused too), stop
        asking, with one WARNING; True if so."""
        if "xinfo" not in str(exc).lower():
            return False
        if not self.xinfo_refused:
            self.xinfo_refused = True
            log.warning("QueueEvents %r: the ACL refuses XINFO STREAM (%s): reading without it, so trimmed "
                        "entries are not reported as gap notices; grant +xinfo|stream for them",
                        self.queue_name, exc)
        return True

    def read(self, conn: Any, cursor: str, count: int, block_ms: int) -> tuple[dict[str, Any] | None, bool, list[Any]]:
        """XINFO STREAM then XREAD after ``cursor``, pipelined. Returns the XINFO (None where
        there is none), whether it said the key does not exist, and the entries read."""
        read = ("XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS", self.events_key, cursor)
        info: dict[str, Any] | None = None
        missing = False
        if self.xinfo_refused:
            conn.send_command(*read)
        else:
            conn.send_packed_command(conn.pack_commands([("XINFO", "STREAM", self.events_key), read]))
            try:
                info = info_dict(conn.read_response())
            except redis.ResponseError as exc:
                if isinstance(exc, NoPermissionError):
                    self._without_xinfo(exc)  # or the key is refused: so is the XREAD, told below
                else:
                    missing = "no such key" in str(exc).lower()
        try:
            reply = conn.read_response()
        except NoPermissionError as exc:
            raise refusal(exc, "xread", [self.events_key]) or exc from None
        if not reply:
            return info, missing, []
        if isinstance(reply, dict):
            return info, missing, next(iter(reply.values()))
        return info, missing, reply[0][1]
