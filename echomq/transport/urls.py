"""Connection URLs: one Redis, a Redis Cluster, or a master watched by Sentinel.

The grammar (docs/deployment.md, "URLs"):

* ``redis://``, ``rediss://`` (TLS), ``unix://``: one Redis, as redis-py's ``from_url`` reads them;
* ``redis+cluster://[[user]:password@]host[:port][,host[:port]...][/0][?option=value...]`` and
  ``rediss+cluster://...`` (TLS): a ``redis.cluster.RedisCluster`` with these startup nodes
  (port 6379 if omitted); the password is the nodes'; database 0 only;
* ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/<service>[/<db>][?option=value...]``
  and ``rediss+sentinel://...`` (TLS to the master and to the sentinels): a client of the
  master of ``<service>`` that the sentinels at these addresses (port 26379 if omitted) name,
  ``Sentinel(...).master_for(<service>)``; the user and password are the master's, the
  sentinels' own are the options ``sentinel_username`` and ``sentinel_password``.

Other options are redis-py's URL options (``socket_timeout``, ``ssl_ca_certs``...), applied to
the data connections (and the timeouts to the sentinels too). Parsing connects nothing; a bad
URL is an InvalidInputError naming what is wrong, with the password masked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import redis
import redis.cluster
import redis.connection
import redis.sentinel
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from ..errors import InvalidInputError
from .cluster import close_cluster
from .tls import url_client_options

#: Every scheme a URL may have, by what it opens.
SINGLE_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
ALL_SCHEMES = SINGLE_SCHEMES + CLUSTER_SCHEMES + SENTINEL_SCHEMES

_DEFAULT_PORT = {"cluster": 6379, "sentinel": 26379}
_SENTINEL_AUTH = ("sentinel_username", "sentinel_password")
_SENTINEL_TIMEOUTS = ("socket_timeout", "socket_connect_timeout", "socket_keepalive")
_SERVICE = re.compile(r"^[^\s/?#]+$")

# redis-py leaves these untyped; called through Any so strict mypy accepts the calls.
parse_url: Any = redis.connection.parse_url
_Sentinel: Any = redis.sentinel.Sentinel
_ClusterNode: Any = redis.cluster.ClusterNode
_RedisCluster: Any = RedisCluster


def redact_url(url: str) -> str:
    """``url`` without its passwords, for messages and logs (a URL may carry credentials):
    the one before ``@`` and every ``...password=`` option."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    query = re.sub(r"(?i)((?:^|&)(?:\w*_)?password=)[^&]*", r"\1***", parts.query)
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return parts._replace(netloc=netloc, query=query).geturl()


@dataclass(frozen=True)
class TopologyURL:
    """A ``redis+cluster://`` or ``redis+sentinel://`` URL, parsed and checked."""

    kind: str  # "cluster" or "sentinel"
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    service: str = ""
    db: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    sentinel_auth: dict[str, str] = field(default_factory=dict)


def scheme_of(url: str) -> str:
    return url.partition("://")[0].lower() if "://" in url else ""


def check_url(url: str) -> None:
    """Refuse a URL no component could open (wrong scheme, bad port, missing service...)
    before anything is built; connects nothing."""
    scheme = scheme_of(url)
    if scheme not in ALL_SCHEMES:
        raise InvalidInputError(f"connection URL {redact_url(url)!r} must start with "
                                f"{', '.join(s + '://' for s in ALL_SCHEMES)}")
    if scheme in SINGLE_SCHEMES:
        try:
            parse_url(url)
        except ValueError as exc:
            raise InvalidInputError(f"connection URL {redact_url(url)!r}: {exc}") from None
    else:
        parse_topology_url(url)


def parse_topology_url(url: str) -> TopologyURL:
    """Parse a cluster or sentinel URL (see the module docstring); InvalidInputError if bad."""
    shown = redact_url(url)
    scheme = scheme_of(url)
    kind = "cluster" if scheme in CLUSTER_SCHEMES else "sentinel" if scheme in SENTINEL_SCHEMES else ""
    if not kind:
        raise InvalidInputError(f"connection URL {shown!r}: not a cluster or sentinel URL")
    rest = url.split("://", 1)[1]
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, host_list = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    hosts = tuple(_host(item, _DEFAULT_PORT[kind], shown) for item in host_list.split(","))
    segments = path.split("/") if path else []
    if segments and not segments[-1]:  # a trailing slash
        segments.pop()
    service, db = "", 0
    if kind == "sentinel":
        if not segments or not segments[0]:
            raise InvalidInputError(f"connection URL {shown!r}: name the Sentinel service after the "
                                    "hosts (redis+sentinel://host:26379/<service>)")
        service = unquote(segments[0])
        if not _SERVICE.match(service):
            raise InvalidInputError(f"connection URL {shown!r}: bad service name {service!r}")
        segments = segments[1:]
    if len(segments) > 1:
        raise InvalidInputError(f"connection URL {shown!r}: unexpected path /{'/'.join(segments)}")
    if segments:
        if not segments[0].isdigit():
            raise InvalidInputError(f"connection URL {shown!r}: the database must be a number, "
                                    f"got {segments[0]!r}")
        db = int(segments[0])
    if kind == "cluster" and db != 0:
        raise InvalidInputError(f"connection URL {shown!r}: a Redis Cluster has database 0 only")
    pairs = parse_qsl(query, keep_blank_values=True)
    sentinel_auth = {k: v for k, v in pairs if k in _SENTINEL_AUTH}
    if sentinel_auth and kind != "sentinel":
        raise InvalidInputError(f"connection URL {shown!r}: sentinel_* options need a redis+sentinel:// URL")
    rest_query = urlencode([(k, v) for k, v in pairs if k not in _SENTINEL_AUTH])
    try:
        options = parse_url(f"redis://localhost/?{rest_query}") if rest_query else {}
    except ValueError as exc:
        raise InvalidInputError(f"connection URL {shown!r}: {exc}") from None
    options.pop("host", None)
    if "db" in options:
        if kind == "cluster" and options["db"] != 0:
            raise InvalidInputError(f"connection URL {shown!r}: a Redis Cluster has database 0 only")
        db = int(options.pop("db"))
    if fragment:
        raise InvalidInputError(f"connection URL {shown!r}: unexpected #{fragment}")
    return TopologyURL(kind, scheme.startswith("rediss"), hosts, username, password, service, db,
                       options, sentinel_auth)


def _host(item: str, default_port: int, shown: str) -> tuple[str, int]:
    item = unquote(item.strip())
    if item.startswith("["):  # [IPv6]:port
        host, bracket, port_text = item[1:].partition("]")
        if not bracket or (port_text and not port_text.startswith(":")):
            raise InvalidInputError(f"connection URL {shown!r}: bad host {item!r}")
        port_text = port_text[1:]
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise InvalidInputError(f"connection URL {shown!r}: a host is missing "
                                "(hosts are host:port, separated by commas)")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidInputError(f"connection URL {shown!r}: port {port_text!r} of {host!r} is not a "
                                "port number (1-65535)")
    return host, int(port_text)


def open_url(url: str, **overrides: Any) -> tuple[redis.Redis | RedisCluster, Callable[[], None]]:
    """The client ``url`` names, and how to close everything built for it (the caller owns both).
    ``overrides`` are client settings on top of the URL's (the CLI's short connect timeout).

    A cluster client connects here (it learns the slots from a startup node); a Sentinel or a
    single-Redis client connects at its first command."""
    scheme = scheme_of(url)
    if scheme not in CLUSTER_SCHEMES + SENTINEL_SCHEMES:
        check_url(url)
        client = redis.Redis.from_url(url, **{**url_client_options(url), **overrides})
        return client, lambda: _close_redis(client)
    parsed = parse_topology_url(url)
    parsed = replace(parsed, options={**url_client_options(url), **parsed.options, **overrides})
    auth = {k: v for k, v in (("username", parsed.username), ("password", parsed.password)) if v is not None}
    if parsed.kind == "cluster":
        return _open_cluster(parsed, auth)
    sentinel_kwargs: dict[str, Any] = {k: parsed.options[k] for k in _SENTINEL_TIMEOUTS if k in parsed.options}
    sentinel_kwargs.update({k.removeprefix("sentinel_"): v for k, v in parsed.sentinel_auth.items()})
    if parsed.tls:
        sentinel_kwargs["ssl"] = True
    options = {k: v for k, v in parsed.options.items() if k != "connection_class"}
    sentinel = _Sentinel(list(parsed.hosts), sentinel_kwargs=sentinel_kwargs)
    master: redis.Redis = sentinel.master_for(parsed.service, db=parsed.db, ssl=parsed.tls, **auth, **options)

    def close() -> None:
        _close_redis(master)
        for client in sentinel.sentinels:
            _close_redis(client)

    return master, close


def _open_cluster(parsed: TopologyURL, auth: dict[str, str]) -> tuple[RedisCluster, Callable[[], None]]:
    options = {k: v for k, v in parsed.options.items() if k != "connection_class"}
    try:
        nodes = [_ClusterNode(host, port) for host, port in parsed.hosts]
        cluster: RedisCluster = _RedisCluster(startup_nodes=nodes, ssl=parsed.tls, **auth, **options)
    except redis.ConnectionError:
        raise
    except (RedisClusterException, redis.RedisError) as exc:  # no startup node answered as a cluster
        raise redis.ConnectionError(f"Redis Cluster at {_hosts_text(parsed.hosts)}: {exc}") from exc
    return cluster, lambda: close_cluster(cluster)


def _hosts_text(hosts: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{h}:{p}" for h, p in hosts)


def _close_redis(client: redis.Redis) -> None:
    try:
        client.close()
        client.connection_pool.disconnect()
    except (redis.RedisError, OSError, ValueError):
        pass
