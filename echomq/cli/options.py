"""The options every command that talks to a queue shares, declared once.

``--redis`` (default ``$REDIS_URL``, else the local server; any URL of docs/deployment.md:
``redis+cluster://``, ``redis+sentinel://``...), ``--cluster`` (the ``redis://`` URL names a
startup node of a Redis Cluster), ``--prefix`` and ``--queue``, plus ``--json`` for commands
that print records. Each is checked as argparse parses it (a
``type=``), so a bad one is a usage error naming the option, before anything connects.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..errors import InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, validate_prefix, validate_queue_name
from ..transport.urls import check_url, open_url, scheme_of

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def checked(check: Callable[[Any], Any], name: str) -> Callable[[str], str]:
    """An argparse ``type=`` that runs the library's own check (InvalidInputError -> usage error)."""
    def parse(text: str) -> str:
        try:
            check(text)
        except InvalidInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parse.__name__ = name  # argparse names the type in its message when it fails otherwise
    return parse


def _redis_url(text: str) -> None:
    check_url(text)  # parses the URL; connects nothing


def printable(text: str) -> str:
    """``text`` fit for a terminal: as it is when printable, else as a JSON string, so control
    characters stored in Redis (escape sequences, newlines) cannot rewrite the operator's screen."""
    return text if text.isprintable() else json.dumps(text)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type=`` for an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


#: Counts that must be at least 1, and offsets or limits where 0 means "none" or "all".
positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def add_queue_options(parser: argparse.ArgumentParser, *, json_output: bool = False) -> None:
    parser.add_argument("--queue", required=True, type=checked(validate_queue_name, "queue name"),
                        help="queue name (without braces)")
    add_connection_options(parser)
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """``--redis`` and ``--prefix``, for a command that names its queues its own way."""
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", DEFAULT_URL),
                        type=checked(_redis_url, "Redis URL"), help="Redis URL (default: $REDIS_URL or %(default)s); "
                        "redis+cluster://host:port[,host:port] for a Redis Cluster, "
                        "redis+sentinel://host:port[,host:port]/SERVICE for a master watched by Sentinel")
    parser.add_argument("--cluster", action="store_true",
                        help="--redis names a startup node of a Redis Cluster (as redis+cluster:// would)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, type=checked(validate_prefix, "prefix"),
                        help="key prefix (default: %(default)s)")


def connection_url(args: argparse.Namespace) -> str:
    """``--redis`` as the URL it means: with ``--cluster``, ``redis://`` (``rediss://``) becomes
    ``redis+cluster://`` (``rediss+cluster://``)."""
    url: str = args.redis
    if getattr(args, "cluster", False) and scheme_of(url) in ("redis", "rediss"):
        scheme, rest = url.split("://", 1)
        return f"{scheme}+cluster://{rest}"
    return url


def open_client(args: argparse.Namespace) -> Any:  # redis.Redis | RedisCluster (callers annotate redis.Redis)
    """A client on ``--redis`` (a cluster client on a cluster URL or with ``--cluster``: it
    connects to learn the slots); the command closes it when done. A component given a cluster
    client talks to the master of its queue's slot (``echomq workers`` lists that node's
    clients: docs/deployment.md)."""
    client: redis.Redis | RedisCluster = open_url(connection_url(args))[0]
    return client
