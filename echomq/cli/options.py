"""The options every command that talks to a queue shares, declared once.

``--redis`` (default ``$REDIS_URL``, else the local server; any URL of docs/deployment.md:
``redis+cluster://``, ``redis+sentinel://``...), ``--cluster`` (the ``redis://`` URL names a
startup node of a Redis Cluster), ``--prefix`` and ``--queue``, plus ``--json`` for commands
that print records. Each is checked as argparse parses it (a
``type=``), so a bad one is a usage error naming the option, before anything connects. The
option types and the connection options live with the worker command (``echomq.processes``),
which the framework integrations share; they are re-exported here for the other commands.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..processes.arguments import add_connection_options, checked, connection_url, non_negative_int, positive_int
from ..protocol.keys import validate_queue_name
from ..transport.urls import open_url

__all__ = ["add_connection_options", "add_queue_options", "checked", "connection_url", "non_negative_int",
           "open_client", "positive_int", "printable"]


def printable(text: str) -> str:
    """``text`` fit for a terminal: as it is when printable, else as a JSON string, so control
    characters stored in Redis (escape sequences, newlines) cannot rewrite the operator's screen."""
    return text if text.isprintable() else json.dumps(text)


def add_queue_options(parser: argparse.ArgumentParser, *, json_output: bool = False) -> None:
    parser.add_argument("--queue", required=True, type=checked(validate_queue_name, "queue name"),
                        help="queue name (without braces)")
    add_connection_options(parser)
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def open_client(args: argparse.Namespace) -> Any:  # redis.Redis | RedisCluster (callers annotate redis.Redis)
    """A client on ``--redis`` (a cluster client on a cluster URL or with ``--cluster``: it
    connects to learn the slots); the command closes it when done. A component given a cluster
    client talks to the master of its queue's slot (``echomq workers`` lists that node's
    clients: docs/deployment.md)."""
    client: redis.Redis | RedisCluster = open_url(connection_url(args))[0]
    return client
