"""Waiting for replicas after an add: the one narrowing of the failover window a producer has.

Replication is asynchronous (docs/deployment.md, "What a failover can lose"): a job the master
acknowledged but had not yet sent to the replica that gets promoted is gone. ``WAIT n timeout``
blocks until ``n`` replicas have acknowledged everything the sending connection wrote, or the
timeout passes, and answers how many did.

``WAIT`` counts the writes of the connection it is sent on, and a Queue streams its adds over
whichever pool connection is free (a flow runs in a MULTI, where ``WAIT`` does not block). So
after the adds, one connection sends a write of its own (meta ``version``, the value the Queue
already stamped there, in the queue's slot) and ``ROLE`` (the master's replication offset after
it, and its replicas), then ``WAIT`` and ``ROLE`` again (each replica's acknowledged offset).
The master replicates its writes in the order it ran them, so a replica whose acknowledged
offset reached that write has every add that finished before it.

``WAIT``'s own count is not trusted alone: during a Sentinel failover a replica that is not
promoted keeps following the old master and acknowledges writes the promoted one never gets.
Only replicas the sentinels would promote count (following this master, up, priority above 0),
and none while the sentinels are demoting the master or name another (the connection's
SentinelWatch). ``wait_replicas="all"`` waits for every replica the master lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ..errors import InvalidInputError, ReplicationError
from ..protocol.codec import text
from ..protocol.keys import QueueKeys
from ..transport.connection import checkout, is_fake
from ..transport.refusals import refusals
from ..transport.sentinel import watch_for

#: ``wait_replicas="all"``: every replica the master has when the add is confirmed.
ALL = "all"


def checked_replicas(replicas: object, timeout_ms: object) -> tuple[int | str, int]:
    """``wait_replicas`` and ``wait_timeout_ms`` as Queue takes them: a count of at least 0
    (0: do not wait) or ``"all"``, and a timeout of at least 1 ms (``WAIT``'s 0 would block
    forever)."""
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 1:
        raise InvalidInputError(f"Queue: wait_timeout_ms={timeout_ms!r} must be an int of milliseconds, at least 1")
    if replicas == ALL:
        return ALL, timeout_ms
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise InvalidInputError(f"Queue: wait_replicas={replicas!r} must be an int, at least 0 (0: do not wait), "
                                "or \"all\"")
    return replicas, timeout_ms


def confirm_replicas(client: redis.Redis, keys: QueueKeys, stamp: str, job_ids: Sequence[str],
                     replicas: int | str, timeout_ms: int, *, operation: str) -> None:
    """Wait until ``replicas`` replicas that could be promoted hold every write made before this
    call, or raise :class:`ReplicationError` naming the jobs and how many did (they are on the
    master: nothing is undone). A confirmation that could not be asked (the connection failed)
    is a ReplicationError too, with 0 confirmed: the adds were acknowledged, not confirmed."""
    if is_fake(client):  # fakeredis has no replicas (and no WAIT)
        raise ReplicationError(operation, list(job_ids), 0, 1 if replicas == ALL else int(replicas), timeout_ms)
    try:
        with refusals(operation, [keys.meta]):
            required, confirmed = _ask_replicas(client, keys, stamp, replicas, timeout_ms)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ReplicationError(operation, list(job_ids), 0, 1 if replicas == ALL else int(replicas), timeout_ms,
                               why=f"the confirmation failed: {exc}") from exc
    if confirmed < required:
        raise ReplicationError(operation, list(job_ids), confirmed, required, timeout_ms)


def _ask_replicas(client: redis.Redis, keys: QueueKeys, stamp: str, replicas: int | str,
                  timeout_ms: int) -> tuple[int, int]:
    """(how many were required, how many promotable replicas hold the write), on one connection."""
    pool = client.connection_pool
    conn = checkout(pool)
    try:
        conn.send_packed_command(conn.pack_commands([("HSET", keys.meta, "version", stamp), ("ROLE",)]))
        conn.read_response()
        offset, listed = _role(conn.read_response())
        required = max(1, len(listed)) if replicas == ALL else int(replicas)
        conn.send_packed_command(conn.pack_commands([("WAIT", required, timeout_ms), ("ROLE",)]))
        conn.read_response()
        _, acked = _role(conn.read_response())
        where = (str(conn.host), int(conn.port))
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
    holding = {address for address, acked_offset in acked.items() if acked_offset >= offset}
    watch = watch_for(client)
    if watch is not None:
        if watch.master != where or watch.demoting is not None:
            return required, 0  # a failover began: whatever follows this node may be thrown away
        promotable = watch.promotable_replicas()
        if promotable is not None:
            holding &= promotable
    return required, len(holding)


def _role(reply: Any) -> tuple[int, dict[tuple[str, int], int]]:
    """A master's ROLE: its replication offset and each replica's acknowledged offset."""
    offset = int(reply[1])
    replicas = {}
    for entry in reply[2]:
        host, port, acked = (text(part) for part in entry)
        replicas[(host, int(port))] = int(acked)
    return offset, replicas
