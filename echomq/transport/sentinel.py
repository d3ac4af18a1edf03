"""Sentinel: connections that ask the sentinels where the master is each time they connect.

redis-py's ``SentinelManagedConnection`` resolves the master in ``connect()``, which the pool
calls at checkout. A connection kept by its owner across an error (the worker's pinned
connection: transport/calls.py) reconnects through ``send_packed_command`` instead, which
reuses the old address: after a failover it would reconnect to the demoted master, read
READONLY, and do so forever. :class:`MasterConnection` resolves in ``_connect``, the one step
every path goes through, so each new socket goes to the current master. A component given a
``master_for()`` client works on a copy of its pool with this class (same service, sentinels
and settings); its dedicated clients too (connection.py's ``dedicated_client``).

A demoted master's READONLY is already a ConnectionError in redis-py (the socket is dropped),
and Sentinel closes the old master's client connections when it reconfigures it, so every
reader, pinned or blocking, lands in its component's reconnect loop (docs/deployment.md).
"""

from __future__ import annotations

from typing import Any

import redis.sentinel
from redis.connection import SSLConnection
from redis.sentinel import SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection


class MasterConnection(SentinelManagedConnection):
    """A connection to the service's current master, resolved at every connect."""

    connection_pool: Any

    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        connect: Any = super()._connect  # untyped in redis-py
        return connect()


class MasterSSLConnection(MasterConnection, SSLConnection):
    """The TLS variant of :class:`MasterConnection`."""


#: redis-py's classes and ours in their place; a class of the caller's own is kept as it is.
_REPLACED: dict[type, type] = {SentinelManagedConnection: MasterConnection,
                               SentinelManagedSSLConnection: MasterSSLConnection}


def is_sentinel_master(client: Any) -> bool:
    pool = getattr(client, "connection_pool", None)
    return isinstance(pool, SentinelConnectionPool) and bool(pool.is_master)


def copy_sentinel_pool(pool: SentinelConnectionPool, kwargs: dict[str, Any],
                       max_connections: int | None) -> SentinelConnectionPool:
    """A new pool on the same service and sentinels as ``pool``, with ``kwargs`` as settings."""
    kwargs = {k: v for k, v in kwargs.items() if k != "connection_pool"}  # the source pool's proxy
    connection_class = _REPLACED.get(pool.connection_class, pool.connection_class)
    new_pool: Any = redis.sentinel.SentinelConnectionPool  # untyped in redis-py
    copied: SentinelConnectionPool = new_pool(
        pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
        check_connection=pool.check_connection, connection_class=connection_class,
        max_connections=max_connections, **kwargs)
    return copied
