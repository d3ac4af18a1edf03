"""Redis Cluster: a plain client that always talks to the master of one queue's slot.

Every key of a queue carries the queue's hash tag (``<prefix>:{<queue>}:...``), so a queue
lives in one slot, on one master (docs/protocol.md, "Redis Cluster"). A component does not go
through ``redis.cluster.RedisCluster`` for its commands: it keeps a plain ``redis.Redis`` whose
pool is a :class:`SlotOwnerPool`, so the pinned EVALSHA path, pipelines, MULTI and the blocking
reads (BZPOPMIN, XREAD BLOCK, CLIENT UNBLOCK) stay exactly what they are on a single Redis.

Each new socket of that pool asks the cluster's topology (redis-py's NodesManager) which node
masters the slot, and connects there with the cluster's connection settings (password, TLS,
username...). When the topology moves under it, a reply tells so: ``MOVED`` (the slot has a new
owner: a failover, a resharding), ``ASK``/``TRYAGAIN`` (a migration in progress),
``CLUSTERDOWN``/``MASTERDOWN`` (a failover in progress), ``READONLY`` or ``UNBLOCKED`` (the node
we are on was demoted to a replica), or the node refuses the connection (killed). Each is
turned into a ``redis.ConnectionError`` after dropping the socket and marking the topology
stale, so the components' own reconnect loops (with backoff) retry, and their next socket goes
to the new owner. This is the connection-class approach of redis-py's Sentinel support
(SentinelManagedConnection), so code that sends and reads on a connection directly re-resolves
too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from typing import Any

import redis
from redis.backoff import EqualJitterBackoff
from redis.cluster import RedisCluster
from redis.connection import Connection, ConnectionPool, SSLConnection
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.retry import Retry

from ..errors import WrongClusterNodeError
from .unsent import NotRunError

log = logging.getLogger(__name__)

#: Replies that mean "this node is no longer (or not yet) the master of the slot", told by the
#: error code redis-py strips (its parser maps them to classes on redis-py 8; older parsers
#: leave a plain ResponseError whose message starts with the code).
_TOPOLOGY_CODES = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "UNBLOCKED")
#: Those of them a server answers before it runs the command (or, READONLY, at a script's first
#: write): nothing was written, the command may be sent again (transport/unsent.py). UNBLOCKED
#: ends a blocking read, which is the reader's to retry.
_NOT_RUN_CODES = frozenset(_TOPOLOGY_CODES) - {"UNBLOCKED"}
#: What says the slot may be on another master now (None: a refused connection, the master gone):
#: counted on the pools (``master_moves``) for the components' books of what a move can lose.
#: ASK, TRYAGAIN, CLUSTERDOWN and MASTERDOWN leave the slot where it is.
_MOVE_CODES = frozenset({"MOVED", "READONLY", "UNBLOCKED", None})
#: The classes redis-py's parsers turn them into. redis-py 5.0's cluster parser strips the code
#: from the message ("The cluster is down"), so the class is all that tells; MasterDownError
#: before ClusterDownError, its base.
_CODE_CLASSES: tuple[tuple[type[BaseException], str], ...] = (
    (MovedError, "MOVED"), (AskError, "ASK"), (ReadOnlyError, "READONLY"), (TryAgainError, "TRYAGAIN"),
    (MasterDownError, "MASTERDOWN"), (ClusterDownError, "CLUSTERDOWN"))

#: The shortest time between two full topology refreshes (CLUSTER SLOTS) of one cluster client:
#: a hundred worker threads that all hit the same dead master refresh once, not a hundred times.
MIN_REFRESH_INTERVAL_S = 0.25

_LAST_REFRESH: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_REFRESH_LOCK = threading.Lock()

#: One router per (cluster client, slot), shared by every component on it: the first socket
#: that learns the slot moved drops the idle sockets of all their pools, so a call that comes
#: after it goes to the new owner at once instead of failing on a stale socket first.
_ROUTERS: weakref.WeakKeyDictionary[Any, dict[int, SlotRouter]] = weakref.WeakKeyDictionary()
_ROUTERS_LOCK = threading.Lock()


def topology_code(exc: BaseException) -> str | None:
    """The cluster error code of ``exc`` when it says the topology moved, else None."""
    for kind, code in _CODE_CLASSES:
        if isinstance(exc, kind):
            return code
    if not isinstance(exc, redis.ResponseError):
        return None
    for told in (getattr(exc, "status_code", None), str(exc).split(" ", 1)[0]):
        if told in _TOPOLOGY_CODES:
            return str(told)
    return None



def wrong_node(client: Any, exc: BaseException, what: str) -> WrongClusterNodeError | None:
    """The error to raise for a ``MOVED`` that reached a plain client (``client`` is one server,
    not routed by slot: a cluster node's URL given without ``--cluster``), else None. A routed
    client never sees one: its connections turn MOVED into NotRunError and follow the slot."""
    if topology_code(exc) != "MOVED" or isinstance(getattr(client, "connection_pool", None), SlotOwnerPool):
        return None
    slot, owner = getattr(exc, "slot_id", None), None
    if isinstance(exc, MovedError):
        owner = f"{exc.host}:{exc.port}"
    else:  # "MOVED <slot> <host>:<port>" from a parser that left the code in the message
        parts = str(exc).split()
        if len(parts) >= 3 and parts[1].isdigit():
            slot, owner = int(parts[1]), parts[2]
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    node = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    return WrongClusterNodeError(what, str(node), int(slot) if slot is not None else -1, owner or "another node")


class SlotRouter:
    """Where one slot of a cluster lives now, and how to find out again when that changed."""

    def __init__(self, cluster: RedisCluster, route_key: str) -> None:
        # Weak: the routers registry must not keep a closed component's cluster client alive.
        self._cluster = weakref.ref(cluster)
        self.route_key = route_key
        keyslot: Any = cluster.keyslot
        self.slot: int = int(keyslot(route_key))
        self._pools: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()
        self._pools_lock = threading.Lock()

    @property
    def cluster(self) -> Any:  # redis-py's cluster API is untyped
        cluster = self._cluster()
        if cluster is None:
            raise redis.ConnectionError(f"the cluster client of slot {self.slot} was garbage-collected")
        return cluster

    def owner(self) -> tuple[str, int]:
        """The (host, port) of the slot's master, as the topology knows it now."""
        try:
            node = self.cluster.nodes_manager.get_node_from_slot(self.slot)
        except redis.RedisError as exc:  # SlotNotCoveredError: the slot's master is failing over
            self.refresh(force=True)
            raise redis.ConnectionError(f"slot {self.slot} of {self.route_key!r} has no master now: {exc}") from exc
        return str(node.host), int(node.port)

    def template(self) -> ConnectionPool:
        """The pool of the cluster's own client for the slot's master: the connection class and
        settings (TLS, password, username, timeouts) every node is reached with."""
        node = self.cluster.nodes_manager.get_node_from_slot(self.slot)
        pool: ConnectionPool = self.cluster.get_redis_connection(node).connection_pool
        return pool

    def register(self, pool: ConnectionPool) -> None:
        with self._pools_lock:
            self._pools.add(pool)

    def stale(self, exc: BaseException, code: str | None) -> None:
        """A reply or a refused connection said the topology moved: learn the new one (a MOVED
        names the new owner; anything else refreshes the whole map, rate-limited), then drop
        the idle sockets of this slot's pools so none is reused against the old owner."""
        if code == "MOVED" and isinstance(exc, MovedError) and hasattr(self.cluster.nodes_manager, "move_slot"):
            try:
                self.cluster.nodes_manager.move_slot(exc)
            except (redis.RedisError, KeyError, AttributeError) as failed:
                log.debug("slot %d: applying %s failed (%s); refreshing the topology", self.slot, exc, failed)
                self.refresh()
        elif code != "ASK":  # ASK: the slot is still the old owner's until the migration ends
            self.refresh()
        with self._pools_lock:
            pools = list(self._pools)
        for pool in pools:
            if code in _MOVE_CODES:  # the components' books: the slot may be on another master now
                pool.master_moves = getattr(pool, "master_moves", 0) + 1  # type: ignore[attr-defined]
            pool.disconnect(inuse_connections=False)

    def refresh(self, *, force: bool = False) -> None:
        """Ask the cluster for its slots again (CLUSTER SLOTS), at most once per
        :data:`MIN_REFRESH_INTERVAL_S` per cluster client (NodesManager also folds concurrent
        refreshes into one)."""
        manager = self.cluster.nodes_manager
        now = time.monotonic()
        with _REFRESH_LOCK:
            last = _LAST_REFRESH.get(manager)
            if not force and last is not None and now - last < MIN_REFRESH_INTERVAL_S:
                return
            _LAST_REFRESH[manager] = now
        try:
            manager.initialize()
        except (redis.RedisError, RedisClusterException, OSError) as exc:
            # every startup node down, or a slot nobody serves (CLUSTERDOWN: redis-py refuses a map
            # that does not cover every slot): the map stays as it was, the next try refreshes again
            log.debug("cluster topology refresh failed: %s", exc)


class _SlotOwnerMixin:
    """Connects to the slot's current master; turns "the topology moved" into ConnectionError."""

    host: str
    port: int

    def __init__(self, **kwargs: Any) -> None:
        self.slot_router: SlotRouter = kwargs.pop("slot_router")
        super().__init__(**kwargs)

    def _connect(self) -> Any:
        self.host, self.port = self.slot_router.owner()
        try:
            return super()._connect()  # type: ignore[misc]
        except OSError as exc:  # refused, unreachable: the master may be gone
            self.slot_router.stale(exc, None)
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as exc:
            code = topology_code(exc)
            if code is None:
                raise
            if kwargs.get("disconnect_on_error", True) is not False:  # else the caller reads on, then drops it
                self.disconnect()  # type: ignore[attr-defined]
            self.slot_router.stale(exc, code)
            message = (f"slot {self.slot_router.slot} moved away from {self.host}:{self.port} ({code}: {exc}); "
                       "reconnecting to its current master")
            if code in _NOT_RUN_CODES:
                raise NotRunError(message + " (the command did not run)", code) from exc
            raise redis.ConnectionError(message) from exc


class SlotOwnerConnection(_SlotOwnerMixin, Connection):
    """A TCP connection to the master of one slot."""


class SlotOwnerSSLConnection(_SlotOwnerMixin, SSLConnection):
    """A TLS connection to the master of one slot."""


class SlotOwnerPool(ConnectionPool):
    """A pool whose connections all go to the current master of its router's slot."""

    def __init__(self, slot_router: SlotRouter, **kwargs: Any) -> None:
        kwargs["slot_router"] = slot_router
        super().__init__(**kwargs)
        self.slot_router = slot_router
        slot_router.register(self)

    def __repr__(self) -> str:
        return f"<SlotOwnerPool(slot={self.slot_router.slot}, key={self.slot_router.route_key!r})>"


#: Pool settings that describe one node (the router supplies them per socket), and the cluster's
#: per-node retry policy (none: RedisCluster retries above the node). Our client takes redis-py's
#: default instead, as a plain ``redis.Redis`` would: a command sent as the slot changes owner is
#: retried on the new one.
_PER_NODE_KWARGS = frozenset({"host", "port", "connection_pool", "slot_router", "retry"})


def command_retry() -> Retry:
    """The retry policy of a slot owner client's commands: a command sent as the slot changes
    owner is sent again (three times, with jittered backoff up to a second) on the new owner,
    as a plain client retries a lost connection. The components' own loops set theirs."""
    return Retry(EqualJitterBackoff(cap=1.0, base=0.05), 3)


def router_for(cluster: RedisCluster, route_key: str) -> SlotRouter:
    """The shared router of ``route_key``'s slot on ``cluster`` (see :data:`_ROUTERS`)."""
    keyslot: Any = cluster.keyslot
    slot = int(keyslot(route_key))
    with _ROUTERS_LOCK:
        routers = _ROUTERS.setdefault(cluster, {})
        router = routers.get(slot)
        if router is None:
            router = routers[slot] = SlotRouter(cluster, route_key)
    return router


def slot_owner_client(cluster: RedisCluster, route_key: str, *, max_connections: int | None = None,
                      exclude: frozenset[str] = frozenset(), **overrides: Any) -> redis.Redis:
    """A ``redis.Redis`` on the current master of ``route_key``'s slot that follows it (see
    the module docstring). The caller owns it: close its pool when done."""
    router = router_for(cluster, route_key)
    template = router.template()
    kwargs = {k: v for k, v in template.connection_kwargs.items() if k not in _PER_NODE_KWARGS | exclude}
    kwargs["retry"] = command_retry()
    kwargs.update(overrides)
    tls = issubclass(template.connection_class, SSLConnection)
    pool = SlotOwnerPool(router, connection_class=SlotOwnerSSLConnection if tls else SlotOwnerConnection,
                         max_connections=max_connections, **kwargs)
    return redis.Redis(connection_pool=pool)


def copy_slot_pool(pool: SlotOwnerPool, kwargs: dict[str, Any], max_connections: int) -> SlotOwnerPool:
    """A new pool on the same slot (the same router) with ``kwargs`` as its settings."""
    kwargs = {k: v for k, v in kwargs.items() if k != "slot_router"}
    return SlotOwnerPool(pool.slot_router, connection_class=pool.connection_class,
                         max_connections=max_connections, **kwargs)


def replica_answered(client: Any) -> None:
    """A keyless command (INFO) found ``client``'s server a replica: for a client routed by slot,
    the slot's master moved without a reply saying so (a ``CLUSTER FAILOVER`` leaves the old
    master up, as a replica, and only keyed commands get MOVED). Learn the owner again, as a
    READONLY reply would have, so the next socket goes to the new one. Other clients: nothing
    (a Sentinel pool follows its watch)."""
    pool = getattr(client, "connection_pool", None)
    if isinstance(pool, SlotOwnerPool):
        pool.slot_router.stale(ReadOnlyError("the server is a replica now"), "READONLY")


def routed_slot(client: Any) -> int | None:
    """The cluster slot ``client`` is routed to (a client of :func:`slot_owner_client`), else None."""
    pool = getattr(client, "connection_pool", None)
    return pool.slot_router.slot if isinstance(pool, SlotOwnerPool) else None


def key_slot(client: Any, key: str) -> int:
    """The slot of ``key`` on the cluster ``client`` is routed in (CRC16 of the hash tag)."""
    pool = client.connection_pool
    if not isinstance(pool, SlotOwnerPool):
        raise TypeError(f"{client!r} is not routed to a cluster slot")
    return int(pool.slot_router.cluster.keyslot(key))


def close_cluster(cluster: RedisCluster) -> None:
    """Close a cluster client this package built: every node's pool, now."""
    try:
        nodes = list(cluster.nodes_manager.nodes_cache.values())
    except AttributeError:
        nodes = []
    with contextlib.suppress(redis.RedisError, OSError):
        cluster.close()
    for node in nodes:
        client = node.redis_connection
        if client is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                client.connection_pool.disconnect()
