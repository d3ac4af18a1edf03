"""The watch of one Sentinel service: who the master is, as fast as the sentinels can tell.

See transport/sentinel.py for what it is for; this is how it knows. Every
:data:`MASTER_CHECK_INTERVAL_S` (:data:`FAILOVER_CHECK_INTERVAL_S` during a failover) it asks
every sentinel ``GET-MASTER-ADDR-BY-NAME`` and the master ``ROLE``; between polls its thread
reads every sentinel's failover messages (pub/sub) and applies each at once. The thread lives
while a component pool is attached, and a forked child forgets the parent's.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
import weakref
from typing import Any

from redis.connection import Connection, SSLConnection
from redis.sentinel import MasterNotFoundError

from .sentinel_wire import (
    Address,
    ask,
    drain,
    message_addresses,
    node_settings,
    promotable_from,
    role_of,
    sentinel_addresses,
    sentinel_settings,
    subscribe,
    text_of,
)
from .unsent import NotRunError

log = logging.getLogger(__name__)


#: How often the watch asks every sentinel who the master is (and the master its ROLE).
MASTER_CHECK_INTERVAL_S = 0.5
#: How often it asks while a failover is under way (the promoted replica's ROLE, the sentinels).
FAILOVER_CHECK_INTERVAL_S = 0.05
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
                    self._node_kwargs = node_settings(pool.connection_kwargs)
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
            for pool in list(self._pools):  # the components' books: what the old master had may be gone
                pool.master_moves = getattr(pool, "master_moves", 0) + 1
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
        addresses = message_addresses(channel, data, self.service)
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
        for sentinel in sentinel_addresses(manager):
            conn = self._sentinel_conn(manager, sentinel)
            reply = ask(conn, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            answers[sentinel] = (text_of(reply[0]), int(reply[1])) if isinstance(reply, (list, tuple)) and reply \
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
            reply = ask(self._sentinel_conn(manager, sentinel), "SENTINEL", "REPLICAS", self.service)
            if not isinstance(reply, list):
                continue
            promotable = promotable_from(reply, master)
            self._replicas = frozenset(promotable)
            return

    def _role(self, address: Address) -> str:
        conn = self._node_conns.get(address)
        if conn is None:
            conn = self._node_conns[address] = self._node_class(host=address[0], port=address[1],
                                                                **self._node_kwargs)
        return role_of(ask(conn, "ROLE"))

    def _sentinel_conn(self, manager: Any, address: Address) -> Any:
        conn = self._sentinel_conns.get(address)
        if conn is None:
            settings = sentinel_settings(manager, address)
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
                for address in sentinel_addresses(manager):
                    if address not in subscribed and retry_at.get(address, 0.0) <= now:
                        conn = subscribe(manager, address, _CHANNELS)
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
                    if not drain(subscribed[address], self.on_message):
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
