"""The ``echomq`` command line. Each subcommand lives in its own module with a ``register``.

This, with the worker command's core it shares with the framework commands
(``echomq.processes``), is the only part of EchoMQ that prints, configures logging or may install
signal handlers: it is a program, not the library. A user's mistake or an unreachable Redis ends a
command with one line on stderr and a non-zero status (2 for a bad argument or a refused
operation, 1 for Redis or for a job or queue that is not there), never with a traceback:
``main`` turns the library's errors into that line.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

import redis
from redis.exceptions import MovedError

from .._version import __version__
from ..errors import EchoMQError, NotFoundError
from ..transport.connection import redact_url

# Subcommand modules under echomq/cli/, each exposing register(subparsers), in --help order.
COMMAND_MODULES: tuple[str, ...] = ("worker", "next_runs", "schedulers", "events", "queues", "queue_ops", "jobs",
                                     "metrics", "dashboard", "demo")


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error reported as one line (argparse prints the usage block too).

    Subcommand parsers are built from the same class (argparse uses the parent's type)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="echomq", description="EchoMQ: jobs, schedules and events on Redis.")
    parser.add_argument("--version", action="version", version=f"echomq {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Imported by name: EchoMQ never imports a module that a string names.
    from . import dashboard, demo, events, jobs, metrics, next_runs, queue_ops, queues, schedulers, worker
    modules = {"next_runs": next_runs, "schedulers": schedulers, "events": events, "queues": queues,
               "queue_ops": queue_ops, "jobs": jobs, "metrics": metrics, "demo": demo, "worker": worker,
               "dashboard": dashboard}
    for name in COMMAND_MODULES:
        modules[name].register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    command = " ".join(part for part in ("echomq", args.command, getattr(args, f"{args.command}_command", None))
                       if part)
    where = redact_url(args.redis) if getattr(args, "redis", None) else "the configured server"
    try:
        return int(args.handler(args) or 0)
    except redis.AuthenticationError as exc:
        return _fail(f"{command}: Redis at {where} refused the login: {exc}", 1)
    except MovedError as exc:  # a plain URL of one node of a Redis Cluster (docs/deployment.md)
        return _fail(f"{command}: Redis at {where} is a node of a Redis Cluster and slot {exc.slot_id} of the "
                     f"queue is served by {exc.host}:{exc.port} (MOVED): give --cluster or a redis+cluster:// URL", 1)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        return _fail(f"{command}: cannot reach Redis at {where}: {exc}", 1)
    except redis.RedisError as exc:
        return _fail(f"{command}: Redis at {where} answered with an error: {exc}", 1)
    except NotFoundError as exc:
        return _fail(f"{command}: not found: {exc}", 1)
    except EchoMQError as exc:
        return _fail(f"{command}: error: {exc}", 2)


def _fail(line: str, status: int) -> int:
    sys.stderr.write(" ".join(line.split()) + "\n")  # one line, whatever the message holds
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
