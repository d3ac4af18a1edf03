"""Sentinel: connections that follow the master the moment the sentinels name it.

redis-py's ``SentinelManagedConnection`` asks ``discover_master`` (``SENTINEL MASTERS``) when it
connects, and the sentinel that runs a failover keeps naming the old master there for seconds
after it already answers the new one to ``SENTINEL GET-MASTER-ADDR-BY-NAME`` (about 6 s on the
test rig). A client that keeps writing to the old master until the sentinels demote it loses
every one of those writes when it resyncs. So a component's Sentinel pool (a copy of the
caller's ``master_for()`` pool, :func:`copy_sentinel_pool`) follows one :class:`SentinelWatch`
per (Sentinel object, service), which

* asks **every** sentinel ``GET-MASTER-ADDR-BY-NAME`` (the question that answers first), every
  :data:`MASTER_CHECK_INTERVAL_S`, and when they disagree moves to the node named that is not
  the one it is on and answers ``ROLE`` as a master (a sentinel that ran the failover knows
  before the others; a node it left behind is never gone back to until they all name it);
* subscribes to every sentinel's failover messages: ``+selected-slave``,
  ``+failover-state-send-slaveof-noone``, ``+failover-state-wait-promotion`` and ``+odown``
  mark the master as **being demoted** (connections stop sending to it at once: what it took
  from then on would be thrown away), ``+promoted-slave`` and ``+switch-master`` name the new
  master (connections move there in milliseconds), ``-failover-abort-*``, ``-odown`` and
  ``+failover-end`` lift the demotion if the master did not change;
* checks ``ROLE`` of the master it follows at every poll and of every new socket: a master that
  answers as a replica is gone, whatever a sentinel says.

A connection whose server is no longer the one to write to drops its socket and raises
:class:`~echomq.transport.unsent.NotRunError` without sending; the executor resends (stream_calls.py),
the components' reconnect loops reconnect, and each new socket goes to the current master.

The watch's thread (``echomq-sentinel-watch``, a daemon) runs only while a component's pool is
open: it starts at the first connect of one and stops when the last one closes (each
``Connections.close()`` ends in ``pool.disconnect()``). A forked child never uses the parent's
thread or sockets: they are forgotten after ``fork()`` and the child starts its own at its
first connect.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Any

import redis
import redis.sentinel
from redis.connection import Connection, SSLConnection
from redis.exceptions import ReadOnlyError
from redis.sentinel import SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection

from .sentinel_watch import MASTER_CHECK_INTERVAL_S, SentinelWatch
from .sentinel_wire import role_of
from .unsent import NotRunError

__all__ = ["MASTER_CHECK_INTERVAL_S", "SentinelWatch", "watch_of"]


_WATCHES: weakref.WeakKeyDictionary[Any, dict[str, SentinelWatch]] = weakref.WeakKeyDictionary()
_WATCHES_LOCK = threading.Lock()


def watch_of(pool: Any) -> SentinelWatch:
    """The watch of ``pool``'s Sentinel object and service (one per pair, made on first use)."""
    watch: SentinelWatch | None = getattr(pool, "sentinel_watch", None)
    if watch is not None:
        return watch
    with _WATCHES_LOCK:
        by_service = _WATCHES.setdefault(pool.sentinel_manager, {})
        watch = by_service.get(pool.service_name)
        if watch is None:
            watch = by_service[pool.service_name] = SentinelWatch(pool.sentinel_manager, pool.service_name)
    with contextlib.suppress(AttributeError):
        pool.sentinel_watch = watch
    return watch


def _forget_watches_after_fork() -> None:
    # _WATCHES_LOCK is only held for a dict lookup, never across a fork-prone call
    for by_service in list(_WATCHES.values()):
        for watch in by_service.values():
            watch.forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watches_after_fork)


def _pool_of(conn: Any) -> Any:
    """The pool a connection belongs to (redis-py 6+ hands connections a proxy of it)."""
    pool = conn.connection_pool
    ref = getattr(pool, "connection_pool_ref", None)
    if ref is not None:
        real = ref()
        if real is not None:
            return real
    return pool


class MasterConnection(SentinelManagedConnection):
    """A connection to the service's current master as its :class:`SentinelWatch` knows it:
    resolved at every connect, checked with ROLE once connected, and checked against the watch
    (two attribute reads) before every send."""

    connection_pool: Any
    _watch: SentinelWatch | None = None
    _watch_epoch = -1
    #: Set by the executor while it streams several windows before reading: a send in the
    #: middle must not drop the socket with replies still due on it.
    streaming = False

    def _connect(self) -> Any:
        pool = _pool_of(self)
        if pool.is_master:
            watch = watch_of(pool)
            watch.attach(pool)
            self._watch = watch
            self._watch_epoch = watch.epoch
            self.host, self.port = watch.address()
        connect: Any = super()._connect  # untyped in redis-py
        return connect()

    def _check_role(self) -> None:
        """A node that answers ROLE as a replica is not the master, whoever named it."""
        if not self.connection_pool.is_master:
            return
        send: Any = self.send_command  # untyped in redis-py
        send("ROLE", check_health=False)
        role = role_of(self.read_response())
        if role != "master":
            where = (str(self.host), int(self.port))
            watch_of(_pool_of(self)).supersede(where, f"answers ROLE as {role or 'nothing'}")
            disconnect: Any = self.disconnect  # untyped in redis-py
            disconnect()
            raise NotRunError(f"{where[0]}:{where[1]} is a {role or 'non-master'}, not the master of "
                              f"{self.connection_pool.service_name!r}: reconnecting", "READONLY")

    if hasattr(Connection, "on_connect_check_health"):  # redis-py 6+
        def on_connect_check_health(self, check_health: bool = True) -> None:
            handshake: Any = super().on_connect_check_health
            handshake(check_health=check_health)
            self._check_role()
    else:  # pragma: no cover - redis-py 5
        def on_connect(self) -> None:
            handshake: Any = super().on_connect
            handshake()
            self._check_role()

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        watch = self._watch
        if watch is not None and watch.epoch != self._watch_epoch and not self.streaming \
                and getattr(self, "_sock", None) is not None:
            self._recheck(watch)
        send: Any = super().send_packed_command  # untyped in redis-py
        send(command, check_health)

    def _recheck(self, watch: SentinelWatch) -> None:
        """The watch moved on since this socket connected: still the node to write to?"""
        where = (str(self.host), int(self.port))
        with watch.lock:
            master, demoting, epoch = watch.master, watch.demoting, watch.epoch
        if master == where and demoting != where:
            self._watch_epoch = epoch
            return
        disconnect: Any = self.disconnect  # untyped in redis-py
        disconnect()
        if demoting == where:
            raise NotRunError(f"{where[0]}:{where[1]} is being demoted by the sentinels of {watch.service!r}: "
                              "not sent, reconnecting to the new master", "DEMOTING")
        named = f"{master[0]}:{master[1]}" if master else "no master yet"
        raise NotRunError(f"{where[0]}:{where[1]} is no longer the master of {watch.service!r} (the sentinels "
                          f"name {named}): not sent, reconnecting", "MOVED-MASTER")

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            read: Any = Connection.read_response  # below SentinelManagedConnection's: READONLY is handled here
            return read(self, *args, **kwargs)
        except ReadOnlyError as exc:
            if not self.connection_pool.is_master:
                raise
            where = (str(self.host), int(self.port))
            watch_of(_pool_of(self)).supersede(where, "answered READONLY")
            if kwargs.get("disconnect_on_error", True) is not False:
                disconnect: Any = self.disconnect  # untyped in redis-py
                disconnect()
            raise NotRunError(f"{where[0]}:{where[1]} answered READONLY: it is a replica now; the command did "
                              "not run", "READONLY") from exc
        except redis.ResponseError as exc:
            if "NOREPLICAS" in str(exc) and self.connection_pool.is_master:
                watch = watch_of(_pool_of(self))
                watch._next_poll = 0.0  # a failover may be under way: ask now
                watch._poke()
            raise


class MasterSSLConnection(MasterConnection, SSLConnection):
    """The TLS variant of :class:`MasterConnection`."""


class FollowingPool(SentinelConnectionPool):
    """A component's pool on a Sentinel service: its connections follow the watch, and its
    full ``disconnect()`` (what closing the component does) lets the watch's thread go."""

    sentinel_watch: SentinelWatch | None = None

    def get_master_address(self) -> Any:
        """The watch's master (redis-py's own asks ``SENTINEL MASTERS``, which lags)."""
        if self.is_master:
            return watch_of(self).address()
        resolve: Any = super().get_master_address  # untyped in redis-py
        return resolve()

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        if inuse_connections and self.is_master:
            watch_of(self).detach(self)


#: redis-py's classes and ours in their place; a class of the caller's own is kept as it is.
_REPLACED: dict[type, type] = {SentinelManagedConnection: MasterConnection,
                               SentinelManagedSSLConnection: MasterSSLConnection}


def is_sentinel_master(client: Any) -> bool:
    pool = getattr(client, "connection_pool", None)
    return isinstance(pool, SentinelConnectionPool) and bool(pool.is_master)


def watch_for(client: Any) -> SentinelWatch | None:
    """The watch a component client follows (a client of :func:`copy_sentinel_pool`), else None."""
    pool = getattr(client, "connection_pool", None)
    if isinstance(pool, FollowingPool) and pool.is_master:
        return watch_of(pool)
    return None


def copy_sentinel_pool(pool: SentinelConnectionPool, kwargs: dict[str, Any],
                       max_connections: int | None) -> SentinelConnectionPool:
    """A new pool on the same service and sentinels as ``pool``, with ``kwargs`` as settings."""
    kwargs = {k: v for k, v in kwargs.items() if k != "connection_pool"}  # the source pool's proxy
    connection_class = _REPLACED.get(pool.connection_class, pool.connection_class)
    new_pool: Any = FollowingPool  # untyped base in redis-py
    copied: SentinelConnectionPool = new_pool(
        pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
        check_connection=pool.check_connection, connection_class=connection_class,
        max_connections=max_connections, **kwargs)
    return copied

