"""``echomq worker``: process jobs from the command line, in one process or a supervised pool.

``echomq worker --processor pkg.mod:fn QUEUE [QUEUE ...]`` runs ``fn`` on every job of those
queues; ``echomq worker --app pkg.mod:registry [QUEUE ...]`` runs a ``JobRegistry``'s jobs,
routed by name, on all of its queues or on those named. Each queue gets a Worker of its own
(``--concurrency`` threads each) in every worker process; ``--processes N`` forks N of them
under a supervisor (``supervisor.py``), and ``serving.py`` is what each process does.

Importing the module a ``--processor`` or ``--app`` names is this command's whole point: it is
the one place in EchoMQ that imports a module named by a string, and that string is typed by
the operator, never read from Redis. The current directory is importable, as with ``python -m``.

The command fails fast: a spec that does not resolve is one line and status 2, a Redis that
does not answer a PING at start-up one line and status 1 (the Workers, once running, retry a
lost Redis forever by design; a Redis that is not there at start is more often a wrong URL).
The Django and Flask integrations reuse ``add_worker_arguments`` and ``run_worker``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..errors import EchoMQError, InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, validate_queue_name
from ..registry import JobRegistry
from ..transport.connection import redact_url, without_retries
from ..transport.urls import open_url
from ..types import Processor
from ..worker.listeners import WorkerListener
from ..worker.options import WorkerOptions
from ..worker.worker import Worker
from .logformat import FORMATS, LEVELS, configure_logging
from .options import add_connection_options, checked, connection_url, positive_int
from .serving import BOOT_FAILED_STATUS, SignalInbox, WorkerProcess
from .supervisor import Supervisor

log = logging.getLogger(__name__)

#: Longest duration a Worker takes, in ms (Node's timer limit, as the Worker checks it).
MAX_DURATION_MS = 2**31 - 1

#: How long the start-up PING may take to connect.
CONNECT_TIMEOUT_S = 5.0


class StartupError(Exception):
    """Why the command cannot start, as its one line, with the exit status."""

    status = 1


class UsageError(StartupError):
    """A ``--processor`` / ``--app`` that does not name what it must, a queue the registry
    lacks, or settings the Worker refuses."""

    status = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worker", help="process jobs (a function's, or a job registry's routed by name)",
        description="Process jobs until SIGTERM or SIGINT (or, with --burst, until the queues are idle).")
    add_worker_arguments(parser)
    parser.set_defaults(handler=run_worker)


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
    parser.add_argument("--burst", action="store_true", help="exit 0 once every queue is idle")
    parser.add_argument("--log-level", type=str.upper, choices=LEVELS, default="INFO", help="default: %(default)s")
    parser.add_argument("--log-format", choices=FORMATS, default="text", help="default: %(default)s")


@dataclass(frozen=True)
class _Plan:
    """What every worker process runs: the queues and either a registry or one processor."""

    queues: tuple[str, ...]
    registry: JobRegistry | None
    processor: Processor | None
    url: str | None
    prefix: str
    worker_options: dict[str, Any]
    listeners: tuple[WorkerListener, ...] = ()

    def workers(self, listeners: Sequence[WorkerListener]) -> list[Worker]:
        """This process's Workers (each connects on first use, in the process that runs it)."""
        options: dict[str, Any] = {**self.worker_options, "listeners": [*self.listeners, *listeners]}
        registry = self.registry
        if registry is not None:
            return [registry.worker(queue, **options) for queue in self.queues]
        assert self.url is not None and self.processor is not None
        return [Worker(self.url, queue, self.processor, prefix=self.prefix, **options) for queue in self.queues]


def load_object(spec: str, option: str) -> object:
    """The object ``module:attribute`` names (``attribute`` may be dotted); UsageError when the
    module or the attribute is not there. An error raised by the module's own code while it
    imports is the application's, and propagates with its traceback."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        example = "myapp.jobs:registry" if option == "--app" else "myapp.jobs:process"
        raise UsageError(f"{option} {spec!r}: give MODULE:NAME, e.g. {example}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # the console script's sys.path lacks it; `python -m` has it
    try:
        target: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise  # the module exists and imports something missing: the application's error
        raise UsageError(f"{option} {spec!r}: no module named {exc.name!r}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"{option} {spec!r}: {module_name} has no {attribute!r}") from None
    return target


def _plan(args: argparse.Namespace, registry: JobRegistry | None, listeners: Sequence[WorkerListener] = (),
          name: str | None = None) -> _Plan:
    processor: Processor | None = None
    url: str | None = connection_url(args) if getattr(args, "redis", None) else None
    if registry is None and getattr(args, "app", None):
        found = load_object(args.app, "--app")
        if not isinstance(found, JobRegistry):
            raise UsageError(f"--app {args.app!r} is not an echomq JobRegistry (it is {found!r:.60})")
        if args.prefix not in (DEFAULT_PREFIX, found.prefix):
            raise UsageError(f"--prefix {args.prefix!r}: the registry {args.app!r} uses prefix {found.prefix!r}")
        # A registry built without a connection reads REDIS_URL on first use: --redis (whose
        # default is $REDIS_URL, else the local Redis) is that. One with its own keeps it.
        os.environ["REDIS_URL"] = args.redis
        registry = found
    elif registry is None:
        found = load_object(args.processor, "--processor")
        if not callable(found):
            raise UsageError(f"--processor {args.processor!r} is not callable (it is {found!r:.60})")
        processor = found
    queues = tuple(dict.fromkeys(args.queues))
    if registry is not None:
        unknown = [queue for queue in queues if queue not in registry.queues]
        if unknown:
            raise UsageError(f"queue(s) {', '.join(map(repr, unknown))} have no job in the registry (its queues: "
                            f"{', '.join(map(repr, registry.queues)) or 'none'})")
        queues = queues or registry.queues
        if not queues:
            raise UsageError("the registry has no job registered: nothing to process")
    elif not queues:
        raise UsageError("--processor needs at least one QUEUE")
    prefix = registry.prefix if registry is not None else getattr(args, "prefix", DEFAULT_PREFIX)
    options: dict[str, Any] = {"concurrency": args.concurrency, "lock_duration": args.lock_duration,
                               "stalled_interval": args.stalled_interval}
    if name is not None:
        options["name"] = name
    try:
        WorkerOptions(**options)  # refused here, in one line, not in each forked process
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None
    return _Plan(queues, registry, processor, url, prefix, options, tuple(listeners))


def _server(plan: _Plan, client: Any) -> str:
    if plan.url is not None and plan.registry is None:
        return redact_url(plan.url)
    if isinstance(client, RedisCluster):
        get_default_node: Any = client.get_default_node  # untyped in redis-py
        node = get_default_node()
        return f"the Redis Cluster of {node.host}:{node.port}"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def _check_redis(plan: _Plan, *, keep: bool) -> str:
    """PING the server before anything starts; return where it is, for the start-up line.
    ``keep=False`` (a supervisor) leaves no connection open in this process for its children to
    inherit (a registry's own client is closed; a caller's client stays the caller's)."""
    client: Any
    if plan.registry is not None:
        client = plan.registry.connection()
        where = _server(plan, client)
    else:
        assert plan.url is not None
        where = _server(plan, None)
        try:  # a cluster URL connects here to learn the slots: the same errors as a PING
            client, close_url = open_url(plan.url, socket_connect_timeout=CONNECT_TIMEOUT_S, **without_retries())
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise StartupError(f"cannot reach Redis at {where}: {exc}") from None
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise StartupError(f"Redis at {where} refused the login: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise StartupError(f"cannot reach Redis at {where}: {exc}") from None
    except redis.RedisError as exc:
        raise StartupError(f"Redis at {where} answered with an error: {exc}") from None
    finally:
        if plan.registry is None:
            close_url()
        elif not keep:
            plan.registry.close()
    return where


def _fail(line: str, status: int) -> int:
    sys.stderr.write(" ".join(line.split()) + "\n")  # one line, whatever the message holds
    return status


def run_worker(args: argparse.Namespace, *, registry: JobRegistry | None = None,
               child_setup: Callable[[], None] | None = None, listeners: Sequence[WorkerListener] = (),
               name: str | None = None) -> int:
    """Run the command (a supervisor when ``--processes`` > 1 or a child is to be recycled);
    return its exit status. ``child_setup`` runs in each worker process before it connects
    (after the fork); ``registry`` replaces ``--app``; ``listeners`` go to every Worker and
    ``name`` names them (the framework integrations' ``LISTENERS`` and ``WORKER_NAME``)."""
    configure_logging("DEBUG" if getattr(args, "verbose", False) else args.log_level, args.log_format)
    supervised = args.processes > 1 or bool(args.max_jobs_per_child or args.max_memory_per_child)
    try:
        plan = _plan(args, registry, listeners, name)
        if child_setup is not None and not supervised:
            child_setup()
        where = _check_redis(plan, keep=not supervised)
    except StartupError as exc:
        return _fail(f"echomq worker: {exc}", exc.status)
    except EchoMQError as exc:  # the registry refused its connection (a bad URL, a factory's wrong return)
        return _fail(f"echomq worker: error: {exc}", 2)
    log.info("echomq worker: queues %s; concurrency %d per queue; processes %d%s; Redis %s; prefix %s; pid %d",
             ", ".join(plan.queues), args.concurrency, args.processes, "; burst" if args.burst else "", where,
             plan.prefix, os.getpid())

    def serve(inbox: SignalInbox) -> WorkerProcess:
        return WorkerProcess(plan.workers, inbox, burst=args.burst, shutdown_timeout=args.shutdown_timeout,
                             max_jobs=args.max_jobs_per_child, max_memory_mib=args.max_memory_per_child)

    if not supervised:
        inbox = SignalInbox((signal.SIGTERM, signal.SIGINT)).install()
        try:
            process = serve(inbox)
            try:
                workers = process.build()
            except EchoMQError as exc:
                return _fail(f"echomq worker: error: {exc}", 2)
            return process.serve(workers)
        finally:
            inbox.restore()

    def child(parent_inbox: SignalInbox) -> int:
        # The children ignore SIGINT: a terminal's Ctrl-C reaches them through the supervisor.
        inbox = SignalInbox((signal.SIGTERM,), ignored=(signal.SIGINT,)).install()
        inbox.give(parent_inbox.take())  # a stop that came before these handlers were in place
        parent_inbox.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        process = serve(inbox)
        try:
            if child_setup is not None:
                child_setup()
            workers = process.build()
        except Exception:
            log.exception("worker process %d could not start", os.getpid())
            return BOOT_FAILED_STATUS
        log.info("worker process %d started: queues %s", os.getpid(), ", ".join(plan.queues))
        return process.serve(workers)

    return Supervisor(args.processes, child, shutdown_timeout=args.shutdown_timeout, burst=args.burst).run()

