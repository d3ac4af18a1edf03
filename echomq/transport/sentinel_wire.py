"""How the Sentinel watch talks: its own short-timeout connections to the sentinels and the
data nodes, the questions it asks and the messages it reads (transport/sentinel_watch.py)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

Address = tuple[str, int]

#: Timeouts of the watch's own connections to the sentinels and data nodes: a hung sentinel
#: delays one poll, never a sender.
WATCH_SOCKET_TIMEOUT_S = 0.5


def text_of(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def role_of(reply: Any) -> str:
    """``master``, ``slave`` or ``sentinel`` from a ROLE reply."""
    return text_of(reply[0]).lower() if isinstance(reply, (list, tuple)) and reply else ""


def message_addresses(channel: str, data: str, service: str) -> tuple[Address | None, Address | None] | None:
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


def ask(conn: Any, *command: Any) -> Any:
    """One command on one of the watch's connections; None when it failed (the connection is
    dropped and reopened next time)."""
    try:
        conn.send_command(*command)
        return conn.read_response()
    except (redis.RedisError, OSError, ValueError) as exc:
        log.debug("%s on %s:%s failed: %s", command[0], conn.host, conn.port, exc)
        conn.disconnect()
        return None


def sentinel_addresses(manager: Any) -> list[Address]:
    found = []
    for client in manager.sentinels:
        kwargs = client.connection_pool.connection_kwargs
        found.append((str(kwargs.get("host", "localhost")), int(kwargs.get("port", 26379))))
    return found


def sentinel_settings(manager: Any, address: Address) -> tuple[Any, dict[str, Any]]:
    for client in manager.sentinels:
        pool = client.connection_pool
        kwargs = pool.connection_kwargs
        if (str(kwargs.get("host", "localhost")), int(kwargs.get("port", 26379))) == address:
            settings = short_timeouts(dict(kwargs))
            return pool.connection_class, settings
    raise LookupError(address)


def short_timeouts(kwargs: dict[str, Any]) -> dict[str, Any]:
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


def node_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    return short_timeouts({k: v for k, v in kwargs.items() if k not in _NOT_FOR_THE_WATCH})




def promotable_from(reply: list[Any], master: Address) -> set[Address]:
    """The replicas in a ``SENTINEL REPLICAS`` reply that the sentinels would promote: up,
    following ``master`` with a live link, priority above 0."""
    promotable: set[Address] = set()
    for entry in reply:
        if isinstance(entry, dict):  # RESP3
            fields = {text_of(k): text_of(v) for k, v in entry.items()}
        elif isinstance(entry, list):
            fields = dict(zip(map(text_of, entry[::2]), map(text_of, entry[1::2])))
        else:
            continue
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
    return promotable


def subscribe(manager: Any, address: Address, channels: tuple[str, ...]) -> Any:
    connection_class, settings = sentinel_settings(manager, address)
    # select() says when a message came; RESP2, where messages are replies (RESP3 would hand
    # them to redis-py's push handler and read on)
    settings["protocol"] = 2
    conn = connection_class(**settings)
    try:
        conn.connect()
        conn.send_command("SUBSCRIBE", *channels)
        return conn
    except (redis.RedisError, OSError) as exc:
        log.debug("subscribing to the sentinel %s:%d failed: %s", address[0], address[1], exc)
        conn.disconnect()
        return None

def drain(conn: Any, on_message: Callable[[str, str], None]) -> bool:
    """Apply every message waiting on ``conn``; False when the sentinel went away."""
    try:
        while True:
            reply = conn.read_response()
            if isinstance(reply, list) and len(reply) == 3 and text_of(reply[0]) == "message":
                on_message(text_of(reply[1]), text_of(reply[2]))
            if not conn.can_read(timeout=0):
                return True
    except (redis.RedisError, OSError, ValueError):
        return False


