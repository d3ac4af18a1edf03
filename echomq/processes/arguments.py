"""The worker command's options, and the option types every command shares (``echomq.cli``
imports these from here: one home for both the command line and the framework commands).

Each option is checked as argparse parses it (a ``type=``), so a bad one is a usage error
naming the option, before anything connects or forks.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import string
from collections.abc import Callable
from typing import Any

from ..errors import InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, validate_prefix, validate_queue_name
from ..transport.urls import check_url, scheme_of
from ..worker.options import client_name_safe
from .logformat import FORMATS, LEVELS

DEFAULT_URL = "redis://127.0.0.1:6379/0"

#: Longest duration a Worker takes, in ms (Node's timer limit, as the Worker checks it).
MAX_DURATION_MS = 2**31 - 1

#: The worker name when none is given: every process of every host has its own.
DEFAULT_NAME = "{host}:{pid}"

#: What a ``--name`` may hold besides its own text, filled in each worker process.
NAME_FIELDS = ("host", "pid", "process")


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


def _redis_url(text: str) -> None:
    check_url(text)  # parses the URL; connects nothing


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


def worker_name(template: str, *, process: int, pid: int | None = None, host: str | None = None) -> str:
    """``template`` with its fields filled in for one worker process (``process``: its place in
    the pool, from 1), checked as Redis checks a client name; InvalidInputError naming what is
    wrong otherwise."""
    fields = [field for _text, field, _spec, _conv in _parse_template(template) if field is not None]
    unknown = sorted({field for field in fields if field not in NAME_FIELDS})
    if unknown:
        raise InvalidInputError(f"worker name {template!r}: unknown field(s) {', '.join(map(repr, unknown))}; it may "
                                f"hold {', '.join('{' + f + '}' for f in NAME_FIELDS)}")
    name = template.format(host=host or socket.gethostname(), pid=os.getpid() if pid is None else pid,
                           process=process)
    if not name:
        raise InvalidInputError("worker name: empty")
    return client_name_safe("name", name)


def _parse_template(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone brace
        raise InvalidInputError(f"worker name {template!r}: {exc} (write a brace as '{{{{' or '}}}}')") from None


def _name_template(text: str) -> str:
    try:
        worker_name(text, process=1, pid=1, host="host")
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value:g} must be a finite number of seconds, at least 0")
    return value


def _duration_ms(text: str) -> int:
    value = positive_int(text)
    if value > MAX_DURATION_MS:
        raise argparse.ArgumentTypeError(f"{value} is over {MAX_DURATION_MS} ms")
    return value


def add_worker_arguments(parser: argparse.ArgumentParser, *, app_option: bool = True) -> None:
    """Every option of ``echomq worker``; ``app_option=False`` leaves out ``--app``,
    ``--processor``, ``--redis`` and ``--prefix``, for a framework that supplies the registry."""
    parser.add_argument("queues", nargs="*", metavar="QUEUE", type=checked(validate_queue_name, "queue name"),
                        help="queues to process (with --app: default all of the registry's)")
    if app_option:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--processor", metavar="MODULE:FUNCTION",
                            help="the function every job of the QUEUEs runs, e.g. myapp.jobs:process")
        source.add_argument("--app", metavar="MODULE:REGISTRY", help="a JobRegistry, e.g. myapp.jobs:registry")
        add_connection_options(parser)
    parser.add_argument("--concurrency", type=positive_int, default=1, help="jobs at once per queue per process "
                        "(default: %(default)s)")
    parser.add_argument("--processes", type=positive_int, default=1,
                        help="worker processes under a supervisor (default: %(default)s, no supervisor)")
    parser.add_argument("--name", type=_name_template, metavar="NAME",
                        help="the workers' name in CLIENT LIST (BullMQ's getWorkers, bull-board, echomq workers); "
                        "{host}, {pid} and {process} (a pool's 1..N) are filled in per process "
                        f"(default: {DEFAULT_NAME.replace('%', '%%')})")
    parser.add_argument("--listener", action="append", default=[], metavar="MODULE:OBJECT",
                        help="a WorkerListener, a WorkerListener class or a function returning one, told by every "
                        "worker of each process (a class or function is called once per process); repeatable")
    parser.add_argument("--shutdown-timeout", type=_seconds, default=25.0, metavar="SECONDS",
                        help="on SIGTERM/SIGINT, how long running jobs may take to finish (default: %(default)s)")
    parser.add_argument("--max-jobs-per-child", type=positive_int, metavar="N",
                        help="replace a worker process after it started N jobs")
    parser.add_argument("--max-memory-per-child", type=positive_int, metavar="MIB",
                        help="replace a worker process once its resident memory passes MIB")
    parser.add_argument("--lock-duration", type=_duration_ms, default=30000, metavar="MS",
                        help="job lock TTL: how soon a job whose process died can be taken back (default: %(default)s)")
    parser.add_argument("--stalled-interval", type=_duration_ms, default=30000, metavar="MS",
                        help="how often the queue is checked for such jobs (default: %(default)s)")
    parser.add_argument("--time-limit-ms", type=_duration_ms, default=None, metavar="MS",
                        help="hard time limit of the jobs whose options set none: the job fails at it "
                        "(docs/worker.md, \"Time limits and cancel\")")
    parser.add_argument("--soft-time-limit-ms", type=_duration_ms, default=None, metavar="MS",
                        help="soft time limit of the jobs whose options set none: job.cancelled turns true")
    parser.add_argument("--burst", action="store_true", help="exit 0 once every queue is idle")
    parser.add_argument("--log-level", type=str.upper, choices=LEVELS, default="INFO", help="default: %(default)s")
    parser.add_argument("--log-format", choices=FORMATS, default="text", help="default: %(default)s")


#: Milliseconds per unit of a duration (`echomq queue clean --grace`, the dashboard's clean; ``ms`` before
#: ``m`` and ``s`` in the pattern).
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d)")


def duration_ms(text: str) -> int:
    """An argparse ``type=``: milliseconds given as a bare number, or as ``30s``, ``5m``, ``1h``,
    ``2d`` (parts add up: ``1h30m``)."""
    spec = text.strip()
    if spec.isdigit():
        return int(spec)
    parts = _DURATION_PART.findall(spec)
    if not parts or "".join(number + unit for number, unit in parts) != spec:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: milliseconds, or e.g. 30s, 5m, 1h, 2d, 1h30m")
    return sum(int(number) * _UNIT_MS[unit] for number, unit in parts)
