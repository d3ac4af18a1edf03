"""The worker command's core: ``echomq worker``, ``manage.py echomq_worker`` and ``flask echomq
worker`` are this, with the registry (and their settings) supplied by the framework.

``--processor pkg.mod:fn QUEUE [QUEUE ...]`` runs ``fn`` on every job of those queues;
``--app pkg.mod:registry [QUEUE ...]`` runs a ``JobRegistry``'s jobs, routed by name, on all of
its queues or on those named. Each queue gets a Worker of its own (``--concurrency`` threads
each) in every worker process; ``--processes N`` forks N of them under a supervisor
(``supervisor.py``), and ``serving.py`` is what each process does. ``--listener`` adds
WorkerListeners (``loading.py``), ``--name`` names the workers' connections.

The command fails fast: a spec that does not resolve is one line and status 2, a Redis that
does not answer a PING at start-up one line and status 1 (the Workers, once running, retry a
lost Redis forever by design; a Redis that is not there at start is more often a wrong URL).

This package is host code (it installs signal handlers, configures logging and writes to
stderr), called only from a command's main thread, never from the library's own API.
"""

from __future__ import annotations

import argparse
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
from ..protocol.keys import DEFAULT_PREFIX
from ..registry import JobRegistry
from ..transport.connection import redact_url, without_retries
from ..transport.urls import open_url
from ..types import Processor
from ..worker.listeners import WorkerListener
from ..worker.options import WorkerOptions
from ..worker.worker import Worker
from .arguments import DEFAULT_NAME, connection_url, worker_name
from .loading import ListenerSource, StartupError, UsageError, listener_sources, load_object, make_listeners
from .logformat import configure_logging
from .serving import BOOT_FAILED_STATUS, WorkerProcess
from .signals import (
    FORCE_SIGNAL,
    PARENT_DEATH_SIGNAL,
    Lifeline,
    SenderAwareInbox,
    SignalInbox,
    set_parent_death_signal,
)
from .supervisor import Supervisor

log = logging.getLogger(__name__)

#: How long the start-up PING may take to connect.
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Plan:
    """What every worker process runs: the queues and either a registry or one processor, the
    listener sources and the name template."""

    queues: tuple[str, ...]
    registry: JobRegistry | None
    processor: Processor | None
    url: str | None
    prefix: str
    worker_options: dict[str, Any]
    listeners: tuple[tuple[ListenerSource, str], ...] = ()
    name: str = DEFAULT_NAME

    def workers(self, listeners: Sequence[WorkerListener], name: str) -> list[Worker]:
        """This process's Workers (each connects on first use, in the process that runs it)."""
        options: dict[str, Any] = {**self.worker_options, "listeners": list(listeners), "name": name}
        registry = self.registry
        if registry is not None:
            return [registry.worker(queue, **options) for queue in self.queues]
        assert self.url is not None and self.processor is not None
        return [Worker(self.url, queue, self.processor, prefix=self.prefix, **options) for queue in self.queues]


def _plan(args: argparse.Namespace, registry: JobRegistry | None, listeners: Sequence[object],
          name: str | None) -> _Plan:
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
    options = {"concurrency": args.concurrency, "lock_duration": args.lock_duration,
               "stalled_interval": args.stalled_interval,
               **{limit: getattr(args, limit) for limit in ("time_limit_ms", "soft_time_limit_ms")
                  if getattr(args, limit, None) is not None}}
    try:
        WorkerOptions(**options)  # refused here, in one line, not in each forked process
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None
    template = getattr(args, "name", None) or name or DEFAULT_NAME
    try:
        worker_name(template, process=1)  # a host's name is checked here; --name was, as it was parsed
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None
    sources = listener_sources(getattr(args, "listener", None) or (), listeners)
    return _Plan(queues, registry, processor, url, prefix, options, tuple(sources), template)


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
               child_setup: Callable[[], None] | None = None, listeners: Sequence[object] = (),
               name: str | None = None) -> int:
    """Run the command (a supervisor when ``--processes`` > 1 or a child is to be recycled);
    return its exit status. ``registry`` replaces ``--app``; ``child_setup`` runs in each worker
    process before it connects (after the fork); ``listeners`` (WorkerListeners, their classes or
    factories, as ``--listener`` takes them) come before those of ``--listener``; ``name`` is the
    workers' name template when ``--name`` gives none (default ``{host}:{pid}``)."""
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

    def serve(inbox: SignalInbox, index: int, lifeline: Lifeline | None = None) -> WorkerProcess:
        made = make_listeners(plan.listeners)
        named = worker_name(plan.name, process=index)
        return WorkerProcess(lambda told: plan.workers(told, named), inbox, burst=args.burst,
                             shutdown_timeout=args.shutdown_timeout, max_jobs=args.max_jobs_per_child,
                             max_memory_mib=args.max_memory_per_child, listeners=made, lifeline=lifeline)

    if not supervised:
        inbox = SignalInbox((signal.SIGTERM, signal.SIGINT, FORCE_SIGNAL)).install()
        try:
            try:
                process = serve(inbox, 1)
                workers = process.build()
            except EchoMQError as exc:
                return _fail(f"echomq worker: error: {exc}", 2)
            return process.serve(workers)
        finally:
            inbox.restore()

    def child(parent_inbox: SenderAwareInbox, lifeline: Lifeline, index: int) -> int:
        # The children ignore SIGINT: a terminal's Ctrl-C reaches them through the supervisor.
        inbox = SignalInbox((signal.SIGTERM, FORCE_SIGNAL, PARENT_DEATH_SIGNAL), ignored=(signal.SIGINT,)).install()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        parent_inbox.release_mask()  # the supervisor takes its signals blocked; these handlers take ours
        inbox.give(parent_inbox.take())  # a stop that came before these handlers were in place
        parent_inbox.close()
        if lifeline.fd is not None:
            inbox.watch(lifeline.fd)
        set_parent_death_signal(PARENT_DEATH_SIGNAL)  # then its parent is looked at (Lifeline.look)
        try:
            if child_setup is not None:
                child_setup()
            process = serve(inbox, index, lifeline)
            workers = process.build()
        except Exception:
            log.exception("worker process %d could not start", os.getpid())
            return BOOT_FAILED_STATUS
        log.info("worker process %d started: queues %s", os.getpid(), ", ".join(plan.queues))
        return process.serve(workers)

    return Supervisor(args.processes, child, shutdown_timeout=args.shutdown_timeout, burst=args.burst).run()
