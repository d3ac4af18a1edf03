"""Where a docs page's Redis clients connect while the page runs (see tests/support/docs.py).

A snippet is written for a reader's machine: ``redis.Redis()``, ``"redis://localhost:6379/0"``,
``rediss://redis.internal:6380``. Run as written inside the suite, those would reach the shared
Redis on 127.0.0.1:6379 (or nothing), so while a page runs every client it makes is sent to the
backend under test instead: the page's own FakeServer, or the page's own redis-server. What the
snippet names for the endpoint (host, port, socket path, TLS files, user, password) is replaced;
every other setting (timeouts, ``client_name``, ``decode_responses``, the database) is kept.

Clients the page is handed (``connection=`` swaps) and clients EchoMQ derives from one (its
dedicated blocking connections copy the client's pool) are already on the backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import fakeredis
import redis
from fakeredis._clients._sync import FakeRedisMixin  # the one place FakeRedis takes its server
from redis.connection import ConnectionPool, parse_url

#: What names an endpoint or how to reach it: replaced by the backend's.
_ENDPOINT_SETTINGS = frozenset({"host", "port", "path", "username", "password", "connection_class",
                                "credential_provider"})

#: The connection classes a reader's settings pick (TCP, TLS, a Unix socket).
_NETWORK_CONNECTIONS = (redis.Connection, redis.SSLConnection, redis.UnixDomainSocketConnection)


def _without_endpoint(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items()
            if key not in _ENDPOINT_SETTINGS and not key.startswith("ssl")}


@dataclass(frozen=True)
class RedisTarget:
    """The backend of one page run: a FakeServer of its own, or a real server's host and port."""

    fake_server: fakeredis.FakeServer | None = None
    host: str = "127.0.0.1"
    port: int = 6379

    @classmethod
    def fake(cls) -> RedisTarget:
        return cls(fake_server=fakeredis.FakeServer())

    @classmethod
    def real(cls, url: str) -> RedisTarget:
        parts = urlsplit(url)
        return cls(host=parts.hostname or "127.0.0.1", port=parts.port or 6379)

    @property
    def backend(self) -> str:
        return "fake" if self.fake_server is not None else "real"

    def client(self) -> redis.Redis:
        """A client on the backend, made outside any page (the test's own view of it)."""
        if self.fake_server is not None:
            return fakeredis.FakeRedis(server=self.fake_server)
        return redis.Redis(host=self.host, port=self.port)


#: Non-empty while a page runs on fakeredis: ``redis.Redis(...)`` then makes a FakeRedis.
_fake_clients_now: list[bool] = []


def _new_client(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``redis.Redis.__new__``: a FakeRedis while a page runs on fakeredis, else the class asked for."""
    return object.__new__(fakeredis.FakeRedis if cls is redis.Redis and _fake_clients_now else cls)


# Installed once and inert outside a page run: CPython cannot take an ``__new__`` back off a
# class (object.__new__ then refuses the arguments of every later construction).
redis.Redis.__new__ = _new_client  # type: ignore[method-assign,assignment]


@contextlib.contextmanager
def clients_routed_to(target: RedisTarget) -> Iterator[None]:
    """Within the block, every client made connects to ``target`` (see the module doc)."""
    with contextlib.ExitStack() as stack:
        if target.fake_server is not None:
            _route_to_fake(stack, target.fake_server)
        else:
            _route_to_real(stack, target.host, target.port)
        yield


def _route_to_fake(stack: contextlib.ExitStack, server: fakeredis.FakeServer) -> None:
    """``redis.Redis(...)`` becomes a FakeRedis (EchoMQ tells fakeredis by the client's type:
    see ``_new_client``), URLs are parsed for their settings, and any FakeRedis made without a
    server or a pool gets ``server``."""
    from unittest import mock

    reader_classes = (redis.Redis, fakeredis.FakeRedis, fakeredis.FakeStrictRedis)
    original_init = FakeRedisMixin.__init__

    def fake_init(self: Any, *args: Any, server: Any = None, **kwargs: Any) -> None:
        if server is None and "connection_pool" not in kwargs:
            kwargs = _without_endpoint(kwargs)
            server = page_server
        original_init(self, *args, server=server, **kwargs)

    def from_url(cls: type, url: str, **kwargs: Any) -> Any:
        if cls not in reader_classes:
            return original_from_url.__func__(cls, url, **kwargs)  # type: ignore[attr-defined]
        settings = _without_endpoint({**parse_url(url), **kwargs})
        return fakeredis.FakeRedis(server=server, **settings)

    page_server = server
    original_from_url = redis.Redis.__dict__["from_url"]
    _fake_clients_now.append(True)
    stack.callback(_fake_clients_now.pop)
    stack.enter_context(mock.patch.object(FakeRedisMixin, "__init__", fake_init))
    stack.enter_context(mock.patch.object(redis.Redis, "from_url", classmethod(from_url)))
    for fake_class in (fakeredis.FakeRedis, fakeredis.FakeStrictRedis):
        stack.enter_context(mock.patch.object(fake_class, "from_url", classmethod(from_url)))


def _route_to_real(stack: contextlib.ExitStack, host: str, port: int) -> None:
    """Every network connection pool made points at ``host:port``, over plain TCP."""
    from unittest import mock

    original_init = ConnectionPool.__init__

    def pool_init(self: Any, *args: Any, **kwargs: Any) -> None:
        connection_class = kwargs.get("connection_class", redis.Connection)
        if not args and isinstance(connection_class, type) and issubclass(connection_class, _NETWORK_CONNECTIONS) \
                and not connection_class.__module__.startswith("fakeredis"):
            kwargs = {**_without_endpoint(kwargs), "connection_class": redis.Connection, "host": host, "port": port}
        original_init(self, *args, **kwargs)

    stack.enter_context(mock.patch.object(ConnectionPool, "__init__", pool_init))
