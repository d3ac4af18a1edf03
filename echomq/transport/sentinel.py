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
:class:`~echomq.transport.unsent.NotRunError` without sending; the executor resends (calls.py),
the components' reconnect loops reconnect, and each new socket goes to the current master.

The watch's thread (``echomq-sentinel-watch``, a daemon) runs only while a component's pool is
open: it starts at the first connect of one and stops when the last one closes (each
``Connections.close()`` ends in ``pool.disconnect()``). A forked child never uses the parent's
thread or sockets: they are forgotten after ``fork()`` and the child starts its own at its
first connect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
import weakref
from typing import Any

import redis
import redis.sentinel
from redis.backoff import NoBackoff
from redis.connection import Connection, SSLConnection
from redis.exceptions import ReadOnlyError
from redis.retry import Retry
from redis.sentinel import (
    MasterNotFoundError,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)

from .unsent import NotRunError

log = logging.getLogger(__name__)

Address = tuple[str, int]

#: How often the watch asks every sentinel who the master is (and the master its ROLE).
MASTER_CHECK_INTERVAL_S = 0.5
#: How often it asks while a failover is under way (the promoted replica's ROLE, the sentinels).
FAILOVER_CHECK_INTERVAL_S = 0.05
#: Timeouts of the watch's own connections to the sentinels and data nodes: a hung sentinel
#: delays one poll, never a sender.
WATCH_SOCKET_TIMEOUT_S = 0.5
#: How long a demotion the sentinels announced may last without a new master before the
#: watch stops trusting it (a failover that neither ended nor aborted): the master is written
#: to again if the sentinels still name it and it still answers as a master.
DEMOTION_TIMEOUT_S = 30.0

#: The sentinels' messages the watch acts on (docs/deployment.md, "Sentinel").
_DEMOTING = frozenset({"+selected-slave", "+failover-state-send-slaveof-noone", "+failover-state-wait-promotion",
                       "+odown"})
_PROMOTED = frozenset({"+promoted-slave", "+failover-state-reconf-slaves"})
_LIFTED = frozenset({"-odown", "-failover-abort-not-elected", "-failover-abort-no-good-slave",
                     "-failover-abort-slave-timeout", "+failover-end", "+failover-end-for-timeout"})
_CHANNELS = ("+switch-master", *sorted(_DEMOTING | _PROMOTED | _LIFTED), "+convert-to-slave", "+config-update-from")


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _role_of(reply: Any) -> str:
    """``master``, ``slave`` or ``sentinel`` from a ROLE reply."""
    return _text(reply[0]).lower() if isinstance(reply, (list, tuple)) and reply else ""


def _message_addresses(channel: str, data: str, service: str) -> tuple[Address | None, Address | None] | None:
    """(the instance, its master) of a sentinel event about ``service``; None for another service.

    ``+switch-master <name> <old ip> <old port> <new ip> <new port>``; the others are
    ``<type> <name> <ip> <port> [@ <master name> <master ip> <master port>]``, a master
    naming itself."""
    parts = data.split()
    try:
        if channel == "+switch-master":
            if parts[0] != service:
                return None
            return (parts[3], int(parts[4])), (parts[1], int(parts[2]))
        instance = (parts[2], int(parts[3]))
        if "@" in parts:
            at = parts.index("@")
            if parts[at + 1] != service:
                return None
            return instance, (parts[at + 2], int(parts[at + 3]))
        if parts[0] != "master" or parts[1] != service:
            return None
        return instance, instance
    except (IndexError, ValueError):
        return None


class SentinelWatch:
    """Who the master of one service is, as fast as the sentinels can tell; shared by every
    component pool of one Sentinel object and service (see the module docstring)."""

    def __init__(self, manager: Any, service: str) -> None:
        self._manager = weakref.ref(manager)
        self.service = service
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        #: The node to write to, or None while nobody is known (a failover, no sentinel answered).
        self.master: Address | None = None
        #: Bumped on every change a sender must react to (a new master, a demotion begun).
        self.epoch = 0
        self.demoting: Address | None = None
        self._demoting_since = 0.0
        self._candidate: Address | None = None
        #: Nodes the watch moved away from: not gone back to until every sentinel names one.
        self._superseded: set[Address] = set()
        self._replicas: frozenset[Address] | None = None
        self._wants_replicas = 0.0
        self._node_kwargs: dict[str, Any] = {}
        self._node_class: Any = Connection
        self._pools: weakref.WeakSet[Any] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._queries = threading.Lock()
        self._sentinel_conns: dict[Address, Any] = {}
        self._node_conns: dict[Address, Any] = {}
        self._next_poll = 0.0
        self.switches = 0

    # -- lifetime -------------------------------------------------------------------------------
    def attach(self, pool: Any) -> None:
        """A component pool connects: follow the master for it (starts the thread if needed)."""
        with self.lock:
            if pool not in self._pools:
                self._pools.add(pool)
                if not self._node_kwargs:
                    self._node_kwargs = _node_settings(pool.connection_kwargs)
                    self._node_class = SSLConnection if issubclass(pool.connection_class, SSLConnection) \
                        else Connection
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._wake = socket.socketpair()
                self._thread = threading.Thread(target=self._run, name="echomq-sentinel-watch", daemon=True)
                self._thread.start()

    def detach(self, pool: Any) -> None:
        """A component pool closed; the last one stops the thread (joined: none is left)."""
        with self.lock:
            self._pools.discard(pool)
            if len(self._pools) or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._stop.set()
            self._poke()
        if thread is not threading.current_thread():
            thread.join(5)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's thread is not here and its sockets are not ours."""
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._queries = threading.Lock()
        self._thread = None
        self._stop = threading.Event()
        self._wake = None  # dropped, not closed: the parent still uses them
        self._sentinel_conns = {}
        self._node_conns = {}
        self._pools = weakref.WeakSet()
        self.master = None
        self.demoting = None
        self._next_poll = 0.0

    def _poke(self) -> None:
        if self._wake is not None:
            with contextlib.suppress(OSError):
                self._wake[1].send(b"x")

    # -- what senders ask -------------------------------------------------------------------------
    def address(self) -> Address:
        """Where a new socket goes: the master the watch follows, asked of the sentinels first if
        it knows none. Raises :class:`NotRunError` while the master is being demoted and no
        new one is named, MasterNotFoundError when no sentinel names one."""
        with self.lock:
            master, demoting = self.master, self.demoting
        if master is None or not self.running:
            self.poll()
            with self.lock:
                master, demoting = self.master, self.demoting
        if master is None:
            raise MasterNotFoundError(f"no sentinel names a master for {self.service!r} now")
        if master == demoting:
            raise NotRunError(f"{master[0]}:{master[1]} is being demoted by the sentinels of {self.service!r}; "
                              "waiting for the new master", "DEMOTING")
        return master

    def wait_for_change(self, epoch: int, timeout: float) -> None:
        """Block up to ``timeout`` s until the watch's epoch is past ``epoch`` (a failover moved on)."""
        with self.changed:
            self.changed.wait_for(lambda: self.epoch != epoch, timeout)

    def supersede(self, address: Address, why: str) -> None:
        """``address`` answered as a replica (or READONLY): it is not the master, whatever was said."""
        with self.lock:
            if address in self._superseded and self.master != address:
                return
            self._superseded.add(address)
            if self.master == address:
                log.warning("%s:%d, the master of %r, %s: following the sentinels to the new one",
                            address[0], address[1], self.service, why)
                self._set_master(None)
        self._next_poll = 0.0
        self._poke()

    def promotable_replicas(self) -> frozenset[Address] | None:
        """The replicas the sentinels would promote (following the master, up, priority above 0)
        as of the last poll; None when not known yet. Asking turns the polling of it on."""
        first = self._wants_replicas == 0.0
        self._wants_replicas = time.monotonic()
        if first or self._replicas is None:
            self.poll()
        return self._replicas

    # -- state changes (under the lock) -----------------------------------------------------------
    def _set_master(self, address: Address | None) -> None:
        if address == self.master and self.demoting is None:
            return
        old = self.master
        if old is not None and address is not None and address != old:
            self._superseded.add(old)
            self.switches += 1
            log.info("the master of %r moved from %s:%d to %s:%d", self.service, old[0], old[1], address[0], address[1])
        if address is not None:
            self._superseded.discard(address)
        self.master = address
        self.demoting = None
        self._candidate = None
        self.epoch += 1
        self.changed.notify_all()

    def _set_demoting(self, master: Address, candidate: Address | None, why: str) -> None:
        if self.master != master:
            return
        if self.demoting != master:
            log.info("the sentinels of %r are demoting %s:%d (%s): writes to it stop", self.service, master[0],
                     master[1], why)
            self.demoting = master
            self._demoting_since = time.monotonic()
            self.epoch += 1
            self.changed.notify_all()
        if candidate is not None and candidate != master:
            self._candidate = candidate

    def _lift(self, master: Address) -> None:
        if self.demoting == master and self.master == master:
            log.info("the sentinels of %r no longer demote %s:%d", self.service, master[0], master[1])
            self.demoting = None
            self.epoch += 1
            self.changed.notify_all()

    def on_message(self, channel: str, data: str) -> None:
        """One sentinel event (pub/sub), applied at once."""
        addresses = _message_addresses(channel, data, self.service)
        if addresses is None:
            return
        instance, master = addresses
        assert instance is not None and master is not None
        with self.lock:
            if channel == "+switch-master":
                if self.master != instance:
                    self._set_master(instance)
                self._superseded.add(master)
            elif channel in _PROMOTED:
                new = instance if channel == "+promoted-slave" else self._candidate
                if new is not None and self.master == master:
                    self._set_master(new)
            elif channel in _DEMOTING:
                self._set_demoting(master, instance if instance != master else None, channel)
            elif channel in _LIFTED:
                self._lift(master)
            elif channel == "+convert-to-slave":
                self._superseded.add(instance)
                if self.master == instance:
                    self._set_master(None)
        self._next_poll = 0.0

    # -- asking the sentinels and the nodes -------------------------------------------------------
    def poll(self) -> None:
        """Ask every sentinel who the master is, check the answer with ROLE, apply it."""
        with self._queries:
            self._poll_locked()

    def _poll_locked(self) -> None:
        manager = self._manager()
        if manager is None:
            return
        answers: dict[Address, Address | None] = {}
        for sentinel in _sentinel_addresses(manager):
            conn = self._sentinel_conn(manager, sentinel)
            reply = _ask(conn, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            answers[sentinel] = (_text(reply[0]), int(reply[1])) if isinstance(reply, (list, tuple)) and reply \
                else None
        named = [a for a in answers.values() if a is not None]
        with self.lock:
            current, demoting, candidate = self.master, self.demoting, self._candidate
        if not named:
            log.debug("no sentinel of %r answered; staying on %s", self.service, current)
            return
        choice = self._choose(named, current)
        if demoting is not None and candidate is not None and choice in (None, demoting) \
                and self._role(candidate) == "master":
            choice = candidate
        if choice is None:
            return
        with self.lock:
            backwards = choice != current and choice in self._superseded
        if backwards and current is not None and self._role(current) == "master":
            return  # never back to a node left behind while the one followed is still a master
        role = self._role(choice)
        with self.lock:
            if role == "slave":
                self._superseded.add(choice)
                if self.master == choice:
                    self._set_master(None)
                return
            if role == "master" or choice == self.master:
                if choice != self.master:
                    self._set_master(choice)
                elif self.demoting == choice and time.monotonic() - self._demoting_since > DEMOTION_TIMEOUT_S \
                        and len(set(named)) == 1:
                    self._lift(choice)
        if self._wants_replicas and time.monotonic() - self._wants_replicas < 60:
            self._poll_replicas(manager, answers)

    def _choose(self, named: list[Address], current: Address | None) -> Address | None:
        """The master among the sentinels' answers: a unanimous one, else the news (a node named
        that is not the one followed now, nor one left behind) that answers ROLE as a master."""
        distinct = list(dict.fromkeys(named))
        if len(distinct) == 1:
            return distinct[0]
        with self.lock:
            superseded = set(self._superseded)
        news = [a for a in distinct if a != current and a not in superseded]
        for address in news:
            if self._role(address) == "master":
                return address
        return current if current in distinct else None

    def _poll_replicas(self, manager: Any, answers: dict[Address, Address | None]) -> None:
        with self.lock:
            master = self.master
        if master is None:
            return
        for sentinel, named in answers.items():
            if named != master:
                continue
            reply = _ask(self._sentinel_conn(manager, sentinel), "SENTINEL", "REPLICAS", self.service)
            if not isinstance(reply, list):
                continue
            promotable = set()
            for entry in reply:
                fields = dict(zip(map(_text, entry[::2]), map(_text, entry[1::2]))) if isinstance(entry, list) \
                    else {}
                flags = fields.get("flags", "")
                if "s_down" in flags or "o_down" in flags or "disconnected" in flags:
                    continue
                if fields.get("slave-priority", fields.get("replica-priority", "1")) == "0":
                    continue
                if (fields.get("master-host"), fields.get("master-port")) != (master[0], str(master[1])):
                    continue
                if fields.get("master-link-status", "ok") != "ok":
                    continue
                with contextlib.suppress(KeyError, ValueError):
                    promotable.add((fields["ip"], int(fields["port"])))
            self._replicas = frozenset(promotable)
            return

    def _role(self, address: Address) -> str:
        conn = self._node_conns.get(address)
        if conn is None:
            conn = self._node_conns[address] = self._node_class(host=address[0], port=address[1],
                                                                **self._node_kwargs)
        return _role_of(_ask(conn, "ROLE"))

    def _sentinel_conn(self, manager: Any, address: Address) -> Any:
        conn = self._sentinel_conns.get(address)
        if conn is None:
            settings = _sentinel_settings(manager, address)
            conn = self._sentinel_conns[address] = settings[0](**settings[1])
        return conn

    # -- the thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        stop, wake = self._stop, self._wake
        subscribed: dict[Address, Any] = {}
        retry_at: dict[Address, float] = {}
        selector = selectors.DefaultSelector()
        if wake is not None:
            selector.register(wake[0], selectors.EVENT_READ, None)
        try:
            while not stop.is_set():
                manager = self._manager()
                if manager is None:
                    return
                now = time.monotonic()
                for address in _sentinel_addresses(manager):
                    if address not in subscribed and retry_at.get(address, 0.0) <= now:
                        conn = self._subscribe(manager, address)
                        if conn is None:
                            retry_at[address] = now + 1.0
                        else:
                            subscribed[address] = conn
                            selector.register(conn._sock, selectors.EVENT_READ, address)
                del manager
                if time.monotonic() >= self._next_poll:
                    try:
                        self.poll()
                    except Exception:
                        log.debug("sentinel poll of %r failed", self.service, exc_info=True)
                    with self.lock:
                        fast = self.demoting is not None or self.master is None
                    self._next_poll = time.monotonic() + (FAILOVER_CHECK_INTERVAL_S if fast
                                                          else MASTER_CHECK_INTERVAL_S)
                timeout = max(0.0, min(self._next_poll - time.monotonic(), MASTER_CHECK_INTERVAL_S))
                for key, _events in selector.select(timeout):
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            key.fileobj.recv(64)  # type: ignore[union-attr]
                        continue
                    address = key.data
                    if not self._drain(subscribed[address]):
                        selector.unregister(key.fileobj)
                        subscribed.pop(address).disconnect()
                        retry_at[address] = time.monotonic() + 0.2
        finally:
            selector.close()
            with self._queries:
                for conn in [*subscribed.values(), *self._sentinel_conns.values(), *self._node_conns.values()]:
                    with contextlib.suppress(Exception):
                        conn.disconnect()
                self._sentinel_conns, self._node_conns = {}, {}
            if wake is not None:
                for end in wake:
                    end.close()

    def _subscribe(self, manager: Any, address: Address) -> Any:
        connection_class, settings = _sentinel_settings(manager, address)
        # select() says when a message came; RESP2, where messages are replies (RESP3 would hand
        # them to redis-py's push handler and read on)
        settings["protocol"] = 2
        conn = connection_class(**settings)
        try:
            conn.connect()
            conn.send_command("SUBSCRIBE", *_CHANNELS)
            return conn
        except (redis.RedisError, OSError) as exc:
            log.debug("subscribing to the sentinel %s:%d failed: %s", address[0], address[1], exc)
            conn.disconnect()
            return None

    def _drain(self, conn: Any) -> bool:
        """Apply every message waiting on ``conn``; False when the sentinel went away."""
        try:
            while True:
                reply = conn.read_response()
                if isinstance(reply, list) and len(reply) == 3 and _text(reply[0]) == "message":
                    self.on_message(_text(reply[1]), _text(reply[2]))
                if not conn.can_read(timeout=0):
                    return True
        except (redis.RedisError, OSError, ValueError):
            return False


def _ask(conn: Any, *command: Any) -> Any:
    """One command on one of the watch's connections; None when it failed (the connection is
    dropped and reopened next time)."""
    try:
        conn.send_command(*command)
        return conn.read_response()
    except (redis.RedisError, OSError, ValueError) as exc:
        log.debug("%s on %s:%s failed: %s", command[0], conn.host, conn.port, exc)
        conn.disconnect()
        return None


def _sentinel_addresses(manager: Any) -> list[Address]:
    found = []
    for client in manager.sentinels:
        kwargs = client.connection_pool.connection_kwargs
        found.append((str(kwargs.get("host", "localhost")), int(kwargs.get("port", 26379))))
    return found


def _sentinel_settings(manager: Any, address: Address) -> tuple[Any, dict[str, Any]]:
    for client in manager.sentinels:
        pool = client.connection_pool
        kwargs = pool.connection_kwargs
        if (str(kwargs.get("host", "localhost")), int(kwargs.get("port", 26379))) == address:
            settings = _short_timeouts(dict(kwargs))
            return pool.connection_class, settings
    raise LookupError(address)


def _short_timeouts(kwargs: dict[str, Any]) -> dict[str, Any]:
    for name in ("socket_timeout", "socket_connect_timeout"):
        given = kwargs.get(name)
        kwargs[name] = WATCH_SOCKET_TIMEOUT_S if given is None else min(float(given), WATCH_SOCKET_TIMEOUT_S)
    kwargs["retry"] = Retry(NoBackoff(), 0)  # a failed question is asked again at the next poll
    kwargs.pop("connection_pool", None)
    return kwargs


#: Settings of a data node connection the watch does not copy: the pool's proxy, the caller's
#: name (CLIENT LIST shows workers by it) and what redis-py writes at run time.
_NOT_FOR_THE_WATCH = frozenset({"connection_pool", "client_name", "host", "port", "orig_host_address",
                                "orig_socket_timeout", "orig_socket_connect_timeout",
                                "maint_notifications_pool_handler", "oss_cluster_maint_notifications_handler",
                                "cache", "cache_config"})


def _node_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    return _short_timeouts({k: v for k, v in kwargs.items() if k not in _NOT_FOR_THE_WATCH})


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
        role = _role_of(self.read_response())
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

