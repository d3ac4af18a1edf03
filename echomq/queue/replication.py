"""Waiting for replicas after an add: the one narrowing of the failover window a producer has.

Replication is asynchronous (docs/deployment.md, "What a failover can lose"): a job the master
acknowledged but had not yet sent to the replica that gets promoted is gone. ``WAIT n timeout``
blocks until ``n`` replicas have acknowledged everything the sending connection wrote, or the
timeout passes, and answers how many did.

``WAIT`` counts the writes of the connection it is sent on, and a Queue streams its adds over
whichever pool connection is free (a flow runs in a MULTI, where ``WAIT`` does not block). So
after the adds, one round trip on one connection sends a write of its own (meta ``version``,
the value the Queue already stamped there, in the queue's slot) followed by ``WAIT``. The
master replicates its writes in the order it ran them, so a replica that acknowledged that
write has every add that finished before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from ..errors import InvalidInputError, ReplicationError
from ..protocol.keys import QueueKeys
from ..transport.connection import is_fake
from ..transport.refusals import refusals


def checked_replicas(replicas: object, timeout_ms: object) -> tuple[int, int]:
    """``wait_replicas`` and ``wait_timeout_ms`` as Queue takes them: a count of at least 0
    (0: do not wait) and a timeout of at least 1 ms (``WAIT``'s 0 would block forever)."""
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise InvalidInputError(f"Queue: wait_replicas={replicas!r} must be an int, at least 0 (0: do not wait)")
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 1:
        raise InvalidInputError(f"Queue: wait_timeout_ms={timeout_ms!r} must be an int of milliseconds, at least 1")
    return replicas, timeout_ms


def confirm_replicas(client: redis.Redis, keys: QueueKeys, stamp: str, job_ids: Sequence[str],
                     replicas: int, timeout_ms: int, *, operation: str) -> None:
    """Wait until ``replicas`` replicas hold every write made before this call, or raise
    :class:`ReplicationError` naming the jobs (they are on the master: nothing is undone)."""
    if is_fake(client):
        acknowledged = 0  # fakeredis has no replicas (and no WAIT)
    else:
        with refusals(operation, [keys.meta]):
            pipe: Any = client.pipeline(transaction=False)
            pipe.hset(keys.meta, "version", stamp)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            _, acknowledged = pipe.execute()
    if int(acknowledged) < replicas:
        raise ReplicationError(operation, list(job_ids), int(acknowledged), replicas, timeout_ms)
