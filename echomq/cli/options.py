"""The options every command that talks to a queue shares, declared once.

``--redis`` (default ``$REDIS_URL``, else the local server), ``--prefix`` and ``--queue``,
plus ``--json`` for commands that print records.
"""

from __future__ import annotations

import argparse
import os

import redis

from ..protocol.keys import DEFAULT_PREFIX

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def add_queue_options(parser: argparse.ArgumentParser, *, json_output: bool = False) -> None:
    parser.add_argument("--queue", required=True, help="queue name (without braces)")
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", DEFAULT_URL),
                        help="Redis URL (default: $REDIS_URL or %(default)s)")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help="key prefix (default: %(default)s)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def open_client(args: argparse.Namespace) -> redis.Redis:
    """A client on ``--redis``; the command closes it when done."""
    return redis.Redis.from_url(args.redis)
