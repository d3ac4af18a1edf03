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

That alone leaves a window: after ``SENTINEL FAILOVER`` the sentinels promote the replica at
once but reconfigure the old master only seconds later (11 s on the test rig), and until then
it is still a master that takes writes, which vanish when it resyncs. So a connection asks the
sentinels, at most every :data:`MASTER_CHECK_INTERVAL_S` per pool, whether its server is
still the master before it sends; when it is not, it drops the socket and raises
ConnectionError without sending. The window shrinks to that interval. A ``NOREPLICAS`` reply
(``min-replicas-to-write``: the master lost its replicas) makes the next send check at once.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

import redis
import redis.sentinel
from redis.connection import SSLConnection
from redis.sentinel import SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection

log = logging.getLogger(__name__)

#: How stale the sentinels' answer to "who is the master" may be when a connection sends.
MASTER_CHECK_INTERVAL_S = 0.5


class _MasterWatch:
    """One pool's latest answer from the sentinels, shared by its connections (one asks, the
    others use the answer until it is :data:`MASTER_CHECK_INTERVAL_S` old)."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None
        self.checked = 0.0
        self.lock = threading.Lock()

    def due(self) -> bool:
        return time.monotonic() - self.checked >= MASTER_CHECK_INTERVAL_S

    def master(self, pool: Any) -> tuple[str, int] | None:
        """The master's address, asked again if the last answer is stale; None when no
        sentinel answers (the master we are on may well be fine: keep using it)."""
        with self.lock:
            if not self.due():
                return self.address
            self.checked = time.monotonic()
            try:
                host, port = pool.sentinel_manager.discover_master(pool.service_name)
            except (redis.RedisError, OSError) as exc:
                log.debug("sentinels did not name the master of %r (%s); staying on this one", pool.service_name, exc)
                return None
            self.address = (str(host), int(port))
            return self.address

    def expire(self) -> None:
        self.checked = 0.0


_WATCHES: weakref.WeakKeyDictionary[Any, _MasterWatch] = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def _watch_of(pool: Any) -> _MasterWatch:
    watch = _WATCHES.get(pool)
    if watch is None:
        with _WATCHES_LOCK:
            watch = _WATCHES.setdefault(pool, _MasterWatch())
    return watch


class MasterConnection(SentinelManagedConnection):
    """A connection to the service's current master, resolved at every connect and checked
    (at most every :data:`MASTER_CHECK_INTERVAL_S`) before it sends."""

    connection_pool: Any

    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        connect: Any = super()._connect  # untyped in redis-py
        return connect()

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        pool = self.connection_pool
        if pool.is_master and getattr(self, "_sock", None) is not None:
            watch = _watch_of(pool)
            if watch.due():
                master = watch.master(pool)
                if master is not None and master != (self.host, int(self.port)):
                    where = f"{self.host}:{self.port}"
                    disconnect: Any = self.disconnect  # untyped in redis-py
                    disconnect()
                    raise redis.ConnectionError(f"{where} is no longer the master of {pool.service_name!r} "
                                                f"(the sentinels name {master[0]}:{master[1]}): reconnecting")
        send: Any = super().send_packed_command  # untyped in redis-py
        send(command, check_health)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            read: Any = super().read_response  # untyped in redis-py
            return read(*args, **kwargs)
        except redis.ResponseError as exc:
            if "NOREPLICAS" in str(exc) and self.connection_pool.is_master:
                _watch_of(self.connection_pool).expire()  # a failover may be under way: ask at the next send
            raise


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
