"""Connections: what callers pass in, what a component opens itself, and who closes what.

A component (Queue, Worker, JobScheduler, QueueEvents) talks to Redis through one
:class:`Connections`: the caller's client (or one built from a URL, which the component then
owns), plus every dedicated client it opens for itself. The caller's client is never used for
a blocking command: a blocking reader gets a dedicated client on the same server (the same
connection settings, its own socket timeout and name), so the host's connections stay free.
``Connections.close()`` disconnects at once everything the component opened, and the client
only when the component built it.

That works for ``redis.Redis`` and ``fakeredis.FakeRedis`` alike: a FakeRedis client built from
the same pool settings shares the same in-memory server.
"""

from __future__ import annotations

import functools
import inspect
import os
import random
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from ..errors import ForkedProcessError, InvalidInputError
from .cluster import SlotOwnerPool, close_cluster, copy_slot_pool, slot_owner_client
from .sentinel import FollowingPool, copy_sentinel_pool, is_sentinel_master
from .tls import warn_if_unchecked
from .urls import CLUSTER_SCHEMES, check_url, open_url, redact_url, scheme_of

Connection: TypeAlias = "redis.Redis | RedisCluster | str"

__all__ = ["redact_url"]  # re-exported: callers outside transport import it from here

#: Errors that mean "the server went away" (or never answered): retried with backoff.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)

#: What the ssl module (and so redis-py's message) says when a certificate fails verification.
_VERIFY_FAILED = "CERTIFICATE_VERIFY_FAILED"

#: Extra time on top of a BLOCK before the socket read gives up: the server answers a BLOCK
#: exactly at its timeout, so a socket timeout of block + margin never fires on a healthy link.
BLOCK_SOCKET_MARGIN_S = 10.0

#: Pool settings redis-py writes at run time (maintenance notifications remember the original
#: timeouts and address there). Copied into a new pool they would override the new pool's own
#: settings: a relaxed timeout would fall back to the source pool's 5 s instead of ours.
_RUNTIME_ONLY_KWARGS = frozenset({
    "orig_host_address", "orig_socket_timeout", "orig_socket_connect_timeout",
    "maint_notifications_pool_handler", "oss_cluster_maint_notifications_handler",
})


def resolve_connection(connection: Connection) -> redis.Redis:
    """Accept a ``redis.Redis`` (a fakeredis client, a Sentinel ``master_for`` client) or a URL
    of one Redis or of a Sentinel-watched master (see urls.py for the grammar).

    A URL is checked here, before any component is built on it, so a bad one (wrong scheme, a
    port that is not a number) is refused by name, not when the first command runs. A Redis
    Cluster is refused: it has no one server to talk to until a queue names its slot
    (:class:`Connections` routes it).
    """
    if isinstance(connection, RedisCluster) or (
            isinstance(connection, str) and scheme_of(connection) in CLUSTER_SCHEMES):
        shown = redact_url(connection) if isinstance(connection, str) else "a RedisCluster"
        raise InvalidInputError(f"{shown!r}: a Redis Cluster is served per queue (from the master of the "
                                "queue's slot); give it to Queue, Worker, JobScheduler or QueueEvents")
    if isinstance(connection, str):
        check_url(connection)
        client, _close = open_url(connection)
        assert isinstance(client, redis.Redis)
        return client
    if isinstance(connection, redis.Redis):
        warn_if_unchecked(connection)
        return connection
    raise InvalidInputError(
        f"connection must be a redis.Redis, a redis.cluster.RedisCluster or a URL, got {type(connection).__name__}"
    )


def open_connection(connection: Connection) -> redis.Redis | RedisCluster:
    """A client, or the client a URL names, Redis Cluster included: for a holder of one client
    that builds components on it (a JobRegistry), where :func:`resolve_connection` would refuse
    a cluster. A URL's client is the caller's to close, with :func:`close_any`."""
    if isinstance(connection, str):
        check_url(connection)
        return open_url(connection)[0]
    if isinstance(connection, (redis.Redis, RedisCluster)):
        return connection
    raise InvalidInputError(
        f"connection must be a redis.Redis, a redis.cluster.RedisCluster or a URL, got {type(connection).__name__}"
    )


#: Where a cluster client keeps its slots' shared clients: on itself, because a slot client
#: references its cluster (the node settings it copies carry the cluster's connect hook), and a
#: table outside would keep both alive; as an attribute they form a cycle the collector frees.
_SHARED_ROUTES_ATTRIBUTE = "_echomq_slot_clients"
_SHARED_ROUTES_LOCK = threading.Lock()


#: Whether a client class is a cluster client's, learnt once per class (see is_cluster_client).
_CLUSTER_CLASSES: dict[type, bool] = {}


def is_cluster_client(client: object) -> bool:
    """``isinstance(client, RedisCluster)``, asked once per class: the isinstance itself costs
    half a microsecond (RedisCluster's metaclass is typing's Protocol one), and every Job the
    worker hands out asks it."""
    cls = client.__class__
    known = _CLUSTER_CLASSES.get(cls)
    if known is None:
        known = _CLUSTER_CLASSES[cls] = issubclass(cls, RedisCluster)
    return known


def queue_client(client: redis.Redis | RedisCluster, route_key: str) -> redis.Redis:
    """``client`` itself, or for a Redis Cluster the plain client of the master of
    ``route_key``'s slot, shared by every caller of that cluster client (it lives as long as
    the cluster client). For what takes a bare client rather than building
    :class:`Connections`: a ``Job`` given a cluster talks to its queue's master like a Queue,
    pipelines and MULTI included, whatever redis-py's cluster pipelines support."""
    if not is_cluster_client(client):
        return cast(redis.Redis, client)
    cluster = cast(RedisCluster, client)
    keyslot: Any = cluster.keyslot  # untyped in redis-py
    slot = int(keyslot(route_key))
    with _SHARED_ROUTES_LOCK:
        by_slot: dict[int, redis.Redis] = vars(cluster).setdefault(_SHARED_ROUTES_ATTRIBUTE, {})
        routed = by_slot.get(slot)
        if routed is None:
            routed = by_slot[slot] = slot_owner_client(cluster, route_key)
    return routed


def uses_tls(client: redis.Redis) -> bool:
    """True when ``client``'s connections are TLS (an SSL object must not be read by one
    thread while another writes to it)."""
    connection_class = getattr(client.connection_pool, "connection_class", None)
    return isinstance(connection_class, type) and issubclass(connection_class, redis.SSLConnection)


def close_any(client: redis.Redis | RedisCluster) -> None:
    """:func:`close_client` for one Redis, every node's sockets for a cluster."""
    if isinstance(client, RedisCluster):
        close_cluster(client)
    else:
        close_client(client)


def without_retries() -> dict[str, Any]:
    """Client settings that make redis-py fail at once instead of retrying with backoff.

    redis-py 6+ retries a timed-out or refused command (10 times, with backoff, for a client
    built by ``redis.Redis(...)``), inside the call. That is right for a host's client but wrong
    for a component with a reconnect loop of its own, and for the short calls of a ``close()``:
    retried, a 0.5 s timeout becomes half a minute against a Redis that hangs.
    """
    return {"retry": Retry(NoBackoff(), 0)}


def is_certificate_failure(exc: BaseException) -> bool:
    """True when ``exc`` is, or wraps, a TLS certificate that failed verification: signed by a CA
    the client does not trust, issued for another host name, expired.

    redis-py reports it as a ``ConnectionError`` (the ``ssl.SSLCertVerificationError`` is its
    context, and its message carries ``CERTIFICATE_VERIFY_FAILED``). It is one of
    :data:`CONNECTION_ERRORS`, but no retry can make a certificate verify: a loop that retries
    connection errors uses this to tell a misconfiguration (or an impostor) from an outage.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError) or (
                isinstance(current, redis.ConnectionError) and _VERIFY_FAILED in str(current)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@functools.cache
def _wants_command_name(get_connection: Any) -> bool:
    """redis-py before 5.3 requires ``get_connection(command_name)``; later versions deprecate
    passing one. Decided once per pool class's method, from its signature."""
    parameters = list(inspect.signature(get_connection).parameters.values())[1:]
    return bool(parameters) and parameters[0].default is inspect.Parameter.empty \
        and parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def checkout(pool: Any) -> Any:
    """A connection taken from ``pool`` (give it back with ``pool.release``), on every redis-py
    the package admits."""
    if _wants_command_name(type(pool).get_connection):
        return pool.get_connection("PING")
    return pool.get_connection()


def is_fake(connection: redis.Redis) -> bool:
    """True for a fakeredis client: some server-side facilities (CLIENT UNBLOCK ...) are absent.

    Told by the client's module name, never by importing fakeredis: it is an extra
    (``echomq[testing]``), absent from a production install."""
    return type(connection).__module__.startswith("fakeredis")


def dedicated_client(
    connection: redis.Redis,
    *,
    socket_timeout: float | None,
    client_name: str | None = None,
    **overrides: Any,
) -> redis.Redis:
    """A new client on the same server as ``connection``, with a pool of its own: on a Redis
    Cluster, the master of the same slot; under Sentinel, the master of the same service (each
    new socket asks where that is now).

    redis-py defaults ``socket_timeout`` to 5 s; a blocking read longer than that would fail,
    so blocking readers pass ``block + BLOCK_SOCKET_MARGIN_S``. ``overrides`` replace other
    connection settings (QueueEvents has its parser decode UTF-8: ``decode_responses=True``).
    The caller owns the result: close it with :func:`close_client`.
    """
    pool = connection.connection_pool
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k not in _RUNTIME_ONLY_KWARGS}
    kwargs["socket_timeout"] = socket_timeout
    kwargs.update(overrides)
    if client_name is not None:
        kwargs["client_name"] = client_name
    new_pool: Any
    if isinstance(pool, SlotOwnerPool):  # the same slot's master, followed as it moves
        new_pool = copy_slot_pool(pool, kwargs, max_connections=4)
    elif isinstance(pool, SentinelConnectionPool):  # the same service's master, asked of the sentinels
        new_pool = copy_sentinel_pool(pool, kwargs, max_connections=4)
    else:
        new_pool = pool.__class__(connection_class=pool.connection_class, max_connections=4, **kwargs)
    return type(connection)(connection_pool=new_pool)


def close_client(client: redis.Redis) -> None:
    """Close a client and disconnect every socket of its pool now (not at garbage collection:
    ``Redis.close()`` leaves a pool it was given open)."""
    try:
        client.close()
        client.connection_pool.disconnect()
    except (redis.RedisError, OSError, ValueError):
        # ValueError: fakeredis's socket refuses a close while another thread reads from it.
        pass


class Connections:
    """The connections one component uses, and the ones it must close.

    ``source`` is what the caller gave (a client, or what a URL built: then owned). ``client``
    is the plain ``redis.Redis`` the component sends its commands on: the caller's client, or
    on a Redis Cluster a client of the master of ``route_key``'s slot (a key of the component's
    queue; transport/cluster.py), built here and always closed here. A component spanning
    several queues gives no ``route_key`` and asks :meth:`routed` for each queue's client.
    ``dedicated()`` opens a client for this component alone; ``close()`` disconnects all of
    them at once, and what the URL built if any. Safe to call ``close()`` twice and from any thread.
    """

    def __init__(self, connection: Connection, *, route_key: str | None = None) -> None:
        self.source: redis.Redis | RedisCluster
        self._closers: list[Callable[[], None]] = []
        if isinstance(connection, str):
            check_url(connection)
            self.source, close = open_url(connection)
            self._closers.append(close)
        elif isinstance(connection, (redis.Redis, RedisCluster)):
            if isinstance(connection, redis.Redis):
                warn_if_unchecked(connection)
            self.source = connection
        else:
            raise InvalidInputError("connection must be a redis.Redis, a redis.cluster.RedisCluster or a URL, "
                                    f"got {type(connection).__name__}")
        self.owns_client = isinstance(connection, str)
        self._routed: dict[int, redis.Redis] = {}  # by slot; -1: a Sentinel master's copy
        self._dedicated: list[redis.Redis] = []
        self._lock = threading.Lock()
        self.closed = False
        self._client = self.routed(route_key) if route_key is not None or isinstance(self.source, redis.Redis) \
            else None

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            raise InvalidInputError("a Redis Cluster serves each queue from the master of its slot: this "
                                    "component spans several queues and must route each one (Connections.routed)")
        return self._client

    def routed(self, route_key: str | None) -> redis.Redis:
        """The client for the queue ``route_key`` (one of its keys) belongs to: the source
        itself when it is one Redis; on a cluster, a client of the slot's master (one per slot,
        closed with this object)."""
        source = self.source
        if isinstance(source, redis.Redis):
            # a pool of our own whose sockets follow the watch (sentinel.py); a component's client
            # given to another (the Worker's to its scheduler step) is one already, and is shared
            if is_sentinel_master(source) and not isinstance(source.connection_pool, FollowingPool):
                with self._lock:
                    if -1 not in self._routed:
                        pool: Any = source.connection_pool
                        kwargs = {k: v for k, v in pool.connection_kwargs.items() if k not in _RUNTIME_ONLY_KWARGS}
                        copied = copy_sentinel_pool(pool, kwargs, max_connections=None)
                        self._routed[-1] = type(source)(connection_pool=copied)
                    return self._routed[-1]
            return source
        if route_key is None:
            raise InvalidInputError("a Redis Cluster needs the queue a client is for (route_key)")
        keyslot: Any = source.keyslot  # untyped in redis-py
        slot = int(keyslot(route_key))
        with self._lock:
            client = self._routed.get(slot)
            if client is None:
                client = self._routed[slot] = slot_owner_client(source, route_key)
        return client

    def dedicated(self, *, socket_timeout: float | None, client_name: str | None = None,
                  **overrides: Any) -> redis.Redis:
        """A client of this component's own on the same server (see :func:`dedicated_client`)."""
        client = dedicated_client(self.client, socket_timeout=socket_timeout, client_name=client_name, **overrides)
        with self._lock:
            self._dedicated.append(client)
        return client

    def release(self, client: redis.Redis) -> None:
        """Close one dedicated client now, before the component closes."""
        with self._lock:  # by identity: a client type may define __eq__ by its settings
            self._dedicated = [c for c in self._dedicated if c is not client]
        close_client(client)

    def close(self) -> None:
        with self._lock:
            dedicated, self._dedicated = self._dedicated, []
            routed, self._routed = list(self._routed.values()), {}
            closers, self._closers = self._closers, []
            self.closed = True
        for client in dedicated + routed:
            close_client(client)
        for close in closers:
            close()


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

    def foreign(self) -> bool:
        """True in a forked child of the process that claimed the component: what runs there
        (threads, sockets) is the parent's, so the child must treat it as not running."""
        return self._pid is not None and self._pid != os.getpid()

    def check(self, what: str) -> None:
        if self._pid is not None and self._pid != os.getpid():
            raise ForkedProcessError(
                f"{what} was started in process {self._pid} and cannot be used from process "
                f"{os.getpid()}: create and start it after fork (e.g. gunicorn post_fork)"
            )
