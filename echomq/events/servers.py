"""Which server a reader reads: telling a failover from a restart (for ``divergence``).

At every connect the reader asks :data:`IDENTITY_READS` and compares the answer with the server
the cursor's stream came from (:func:`classify`): ``INFO server`` (``run_id``, uptime, the
server's time), ``INFO replication`` (``role``, ``master_replid``, ``master_replid2``: a promoted
replica keeps its old master's replication id as ``replid2``) and ``INFO persistence`` (whether
a restarted Redis 7 loaded anything), and the address of the socket. A restart is the same
address with another run id and no replication link to the old one; a failover is another
node, or one that took the old master's history over, or the same process now a replica of
someone else. Where INFO is not answered (fakeredis, an ACL without ``+info``) the address alone
tells a failover; nothing tells a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..protocol.codec import text
from ..protocol.events import GapReason
from .entries import Reads

#: How much earlier than ``now - uptime`` a restarted server may have started: INFO gives
#: the uptime in whole seconds.
START_MARGIN_MS = 1000

_ZERO_REPLID = "0" * 40


def parse_info(reply: Any) -> dict[str, str]:
    """``INFO <section>`` text as a dict (``# Section`` lines and blank lines skipped)."""
    found: dict[str, str] = {}
    for line in text(reply).splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, _, value = line.partition(":")
            found[key.strip()] = value.strip()
    return found


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class ServerIdentity:
    """What tells one server process, and the data set it holds, from another."""

    address: str | None
    run_id: str | None = None
    replid: str | None = None
    replid2: str | None = None
    role: str | None = None
    #: When the process started, in ms of its own clock (``server_time_usec`` - uptime).
    started_ms: int | None = None
    #: True when Redis 7 says it restored nothing at start (no AOF, 0 keys loaded from RDB).
    started_empty: bool | None = None
    #: A replica whose link to its master is not up: a sync may replace its data any moment.
    syncing: bool = False

    @property
    def known(self) -> bool:
        return self.run_id is not None

    def describe(self) -> str:
        where = self.address or "an unknown address"
        if self.run_id:
            where += f" (run id {self.run_id[:8]}"
            where += ", a replica)" if self.role == "slave" else ")"
        return where


#: What the reader asks a server it connected to (the address it knows from the socket).
IDENTITY_READS: Reads = (("INFO", "server"), ("INFO", "replication"), ("INFO", "persistence"))


def identity_from(address: str | None, replies: Sequence[Any]) -> ServerIdentity:
    """The identity from the replies to :data:`IDENTITY_READS` (an error reply: that part unknown;
    fakeredis has no INFO, and an ACL may refuse it: then the address alone)."""
    server, replication, persistence = (parse_info(r) if isinstance(r, (str, bytes)) else {} for r in replies)
    started_ms = None
    now_us, uptime_s = _int(server.get("server_time_usec")), _int(server.get("uptime_in_seconds"))
    if now_us is not None and uptime_s is not None:
        started_ms = now_us // 1000 - uptime_s * 1000 - START_MARGIN_MS
    started_empty = None
    loaded, aof = _int(persistence.get("rdb_last_load_keys_loaded")), persistence.get("aof_enabled")
    if loaded is not None and aof is not None:
        started_empty = loaded == 0 and aof == "0"
    role = replication.get("role") or None
    syncing = role == "slave" and (replication.get("master_link_status") != "up"
                                   or replication.get("master_sync_in_progress") == "1")
    return ServerIdentity(address, server.get("run_id") or None, replication.get("master_replid") or None,
                          replication.get("master_replid2") or None, role, started_ms, started_empty, syncing)


class Change(Enum):
    """How the server a reader reconnected to relates to the one it read before."""

    SAME = "same"  # the same process and data set: the stream changed only by commands, if at all
    FAILOVER = "failover"
    RESTART = "restart"
    UNKNOWN = "unknown"  # neither run ids nor addresses tell (fakeredis, an ACL without INFO)


def classify(before: ServerIdentity | None, after: ServerIdentity | None) -> Change:
    """SAME, FAILOVER, RESTART, or UNKNOWN when the identities cannot tell."""
    if before is None or after is None:
        return Change.UNKNOWN
    moved = before.address is not None and after.address is not None and before.address != after.address
    if not (before.known and after.known):
        return Change.FAILOVER if moved else Change.UNKNOWN
    demoted = before.role == "master" and after.role == "slave"
    if after.run_id == before.run_id:
        # The same process: a new replication id means its data set was replaced by a resync
        # (it became a replica of a new master); else nothing but commands changed it.
        return Change.SAME if after.replid == before.replid and not demoted else Change.FAILOVER
    took_over = before.replid not in (None, _ZERO_REPLID) and after.replid2 == before.replid
    if moved or demoted or took_over:
        return Change.FAILOVER
    return Change.RESTART


def reason_of(change: Change, *, explicit_start: bool) -> GapReason:
    """The notice's reason for a stream found replaced after ``change``."""
    if change is Change.FAILOVER:
        return GapReason.FAILOVER
    if change is Change.RESTART:
        return GapReason.RESTART
    return GapReason.CURSOR_AHEAD if explicit_start else GapReason.REPLACED


def describe_change(reason: GapReason, before: ServerIdentity | None, after: ServerIdentity | None) -> str:
    """The notice's ``detail``: the servers, in words."""
    old = before.describe() if before is not None else "an unknown server"
    new = after.describe() if after is not None else "an unknown server"
    if reason is GapReason.FAILOVER:
        return f"the reader moved from {old} to {new}"
    if reason is GapReason.RESTART:
        return f"{old} restarted as {new}" if before is not None and before.run_id else f"{new} restarted"
    if reason is GapReason.CURSOR_AHEAD:
        return f"the stream on {new} ends before the cursor the reader started from"
    return f"the stream on {new} is not the one the reader read"
