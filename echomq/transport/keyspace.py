"""Reading across the keyspace: SCAN on every master, and batches of plain commands.

What spans queues (``echomq queues``, a dashboard's list of queues) cannot name its keys in
advance, and cannot ask one queue's slot: it walks the keyspace. :func:`scan_keys` does it with
SCAN (never KEYS, which blocks the server for the whole keyspace), a page of ``count`` keys per
call, on one Redis or on each master of a Redis Cluster in turn (each master holds its own slots'
keys; a replica holds copies). :func:`run_commands` then sends the reads for what was found as
pipelines of at most ``window`` commands: one round trip per window, and on a cluster each command
goes to the master of its key's slot (redis-py's cluster pipeline follows a MOVED or an ASK, so a
slot that moves between the scan and the read is still read where it is).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..protocol.codec import text

#: Keys a SCAN call looks at (its COUNT): a short call for the server even on a keyspace of
#: millions, a few hundred round trips per million keys.
SCAN_COUNT = 1000

#: Plain commands per pipeline of :func:`run_commands`.
WINDOW = 1000

Command = tuple[Any, ...]


def masters(client: redis.Redis | RedisCluster) -> list[redis.Redis]:
    """A client per server holding keys: ``client`` itself, or each master of a cluster."""
    if isinstance(client, RedisCluster):
        cluster: Any = client  # redis-py's cluster API is untyped
        return [cluster.get_redis_connection(node) for node in cluster.get_primaries()]
    return [client]


def scan_keys(client: redis.Redis, pattern: str, count: int = SCAN_COUNT) -> Iterator[str]:
    """Every key of one server matching ``pattern`` (a Redis glob), as text, ``count`` keys
    looked at per SCAN. A key that exists for the whole walk is given at least once (SCAN may
    give it twice: callers that count keep a set); one added or deleted meanwhile may or may
    not be."""
    cursor: Any = 0
    while True:
        cursor, keys = client.scan(cursor=cursor, match=pattern, count=count)
        for key in keys:
            yield text(key)
        if int(cursor) == 0:
            return


def run_commands(client: redis.Redis | RedisCluster, commands: Sequence[Command],
                 window: int = WINDOW) -> list[Any]:
    """The reply of each command, in order; pipelines of ``window`` commands (not MULTI: each
    is its own read). An error reply is raised, the first one of its window."""
    replies: list[Any] = []
    for start in range(0, len(commands), window):
        pipe: Any = client.pipeline(transaction=False)
        for command in commands[start:start + window]:
            pipe.execute_command(*command)
        replies.extend(pipe.execute())
    return replies
