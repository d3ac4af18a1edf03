"""Connections: what callers pass in, the dedicated clients our threads block on, and backoff.

The caller's client is never used for a blocking command: a QueueEvents or a Worker opens its
own client on the same server (same pool kwargs, its own socket timeout and name), so the host's
connections stay free. That works for ``redis.Redis`` and for ``fakeredis.FakeRedis`` alike:
a FakeRedis client built from the same pool kwargs shares the same in-memory server.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import redis

from .errors import ForkedProcessError, InvalidInputError

Connection: TypeAlias = "redis.Redis | str"

#: Extra time on top of a BLOCK before the socket read gives up: the server answers a BLOCK
#: exactly at its timeout, so a socket timeout of block + margin never fires on a healthy link.
BLOCK_SOCKET_MARGIN_S = 10.0


def resolve_connection(connection: Connection) -> redis.Redis:
    """Accept a ``redis.Redis`` (or a fakeredis client) or a ``redis://`` URL."""
    if isinstance(connection, str):
        if not connection.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidInputError(f"connection URL {connection!r} must start with redis://, rediss:// or unix://")
        return redis.Redis.from_url(connection)
    if isinstance(connection, redis.Redis):
        return connection
    raise InvalidInputError(
        f"connection must be a redis.Redis or a redis:// URL, got {type(connection).__name__}"
    )


def dedicated_client(
    connection: redis.Redis,
    *,
    socket_timeout: float | None,
    client_name: str | None = None,
    **overrides: Any,
) -> redis.Redis:
    """A new client on the same server as ``connection``, with its own pool and timeouts.

    redis-py 8 defaults ``socket_timeout`` to 5 s; a blocking read longer than that would fail,
    so blocking readers pass ``block + BLOCK_SOCKET_MARGIN_S``. ``overrides`` replace other
    connection kwargs (QueueEvents has its parser decode UTF-8: ``decode_responses=True``).
    """
    pool = connection.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs["socket_timeout"] = socket_timeout
    kwargs.update(overrides)
    if client_name is not None and not is_fake(connection):
        kwargs["client_name"] = client_name
    new_pool = pool.__class__(connection_class=pool.connection_class, max_connections=4, **kwargs)
    return type(connection)(connection_pool=new_pool)


def is_fake(connection: redis.Redis) -> bool:
    """True for a fakeredis client: some server-side facilities (CLIENT UNBLOCK ...) are absent."""
    return type(connection).__module__.startswith("fakeredis")


def to_str(value: Any) -> str:
    """Decode a reply value whatever the client's ``decode_responses`` setting."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def to_str_or_none(value: Any) -> str | None:
    return None if value is None else to_str(value)


def decode_hash(raw: Any) -> dict[str, str]:
    """An HGETALL reply (dict or flat list, bytes or str) as a ``dict[str, str]``."""
    if isinstance(raw, dict):
        return {to_str(k): to_str(v) for k, v in raw.items()}
    items = list(raw or [])
    return {to_str(items[i]): to_str(items[i + 1]) for i in range(0, len(items) - 1, 2)}


@dataclass
class Backoff:
    """Capped exponential backoff with full jitter, for reconnect loops.

    ``next_delay()`` grows ``base * 2**n`` up to ``cap`` and draws uniformly below it, so a fleet
    of readers that lost the same server does not come back in lockstep. ``reset()`` after a
    success.
    """

    base: float = 0.05
    cap: float = 5.0
    failures: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * (2 ** min(self.failures, 30)))
        self.failures += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


class PidGuard:
    """Remembers the process that started a component; a forked child must not reuse it.

    A thread started before ``fork()`` does not exist in the child (gunicorn preload, Django's
    autoreloader), and sharing its sockets corrupts replies, so we refuse loudly instead.
    """

    def __init__(self) -> None:
        self._pid: int | None = None
        self._lock = threading.Lock()

    def claim(self) -> None:
        with self._lock:
            self._pid = os.getpid()

    def check(self, what: str) -> None:
        if self._pid is not None and self._pid != os.getpid():
            raise ForkedProcessError(
                f"{what} was started in process {self._pid} and cannot be used from process "
                f"{os.getpid()}: create and start it after fork (e.g. gunicorn post_fork)"
            )
