"""The ``echomq`` command line. Each subcommand lives in its own module with a ``register``.

This is the only part of EchoMQ that prints, configures logging or may install signal
handlers: it is a program, not the library.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from .._version import __version__

# Subcommand modules under echomq/cli/, each exposing register(subparsers).
COMMAND_MODULES: tuple[str, ...] = ("next_runs", "schedulers", "events", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="echomq", description="EchoMQ: jobs, schedules and events on Redis.")
    parser.add_argument("--version", action="version", version=f"echomq {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return int(args.handler(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
