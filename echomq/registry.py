"""The job registry: job functions declared once, by name and queue, then enqueued and run from that one list.

``@registry.job(queue="orders")`` registers a function under a job name (its ``__name__`` unless
given) with default job options, and returns a :class:`RegisteredJob`: calling it still calls the
function (unit tests hand it a job), and ``enqueue(**data)`` adds a job named after it whose data
is the keyword arguments. That is the same job a BullMQ producer adds with ``queue.add('email',
{to: ...})``, so either side may produce it and either side's worker may run it
(docs/registry.md). ``registry.worker("orders")`` builds a Worker that routes each job by name.

The registry composes the subsystems (queue, worker) for the hosts (the ``echomq worker``
command, the Django and Flask integrations), which is why it sits between them. It holds no
thread. Its client is made on first use, once per process: a registry built at import time in
a parent (gunicorn ``--preload``, a forking supervisor) gives each forked child a client and
Queues of its own, never a socket shared with the parent.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from redis.cluster import RedisCluster

from .errors import InvalidInputError, InvalidJobOptionsError
from .protocol.keys import DEFAULT_PREFIX, QueueKeys
from .protocol.options import dumps_json, encode_job_options, validate_job_name
from .queue.job import Job
from .queue.queue import Queue
from .transport.connection import PidGuard, close_any, dedicated_client, open_connection
from .transport.urls import check_url
from .types import JobOptions, Processor
from .worker.worker import Worker

if TYPE_CHECKING:
    from typing_extensions import Unpack

F = TypeVar("F", bound=Callable[..., Any])

#: Where the registry connects when given no connection and ``REDIS_URL`` is unset.
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"

#: What a registry's ``connection`` may be: a URL, a client, or a zero-argument client factory.
ConnectionSource = str | redis.Redis | RedisCluster | Callable[[], redis.Redis | RedisCluster] | None


class ConnectionChoice:
    """A registry's connection chosen when a process first connects, not when it is built.

    ``choose()`` returns what ``JobRegistry(connection=...)`` takes (a URL, a client, a factory,
    None), and the registry treats it as if it had been given that: a client stays the caller's,
    what a URL or a factory makes is the registry's. The hosts use it so that their settings are
    read at the first connection, and so that under test, known only then, the test connection
    is used (``echomq.contrib.host``). After ``close()`` the next use chooses again."""

    def __init__(self, choose: Callable[[], ConnectionSource]) -> None:
        if not callable(choose):
            raise InvalidInputError(f"ConnectionChoice({choose!r:.100}): give a function")
        self.choose = choose

    def __repr__(self) -> str:
        return f"ConnectionChoice({self.choose!r:.100})"

#: ``defer(fn)`` runs ``fn`` later (Django's ``transaction.on_commit``); what it returns is ignored.
Defer = Callable[[Callable[[], object]], object]

#: ``job_context()`` gives the context manager entered around each job (Flask's ``app.app_context``).
JobContext = Callable[[], AbstractContextManager[object]]


def _run_now(action: Callable[[], object]) -> object:
    """The default ``defer``: no transaction to wait for, so the add happens at once."""
    return action()


@dataclass
class _ProcessState:
    """What one process made of the registry: its client (owned unless the caller's) and Queues."""

    guard: PidGuard
    client: redis.Redis | RedisCluster
    owned: bool
    queues: dict[str, Queue] = field(default_factory=dict)


class RegisteredJob:
    """A registered job function: calling it calls the function; ``enqueue`` adds a job of its name.

    ``name``, ``queue`` and ``options`` (the default job options, snake_case as ``Queue.add``
    takes them) are fixed at registration; ``func`` is the plain function."""

    def __init__(self, registry: JobRegistry, func: Callable[..., Any], name: str, queue: str,
                 options: dict[str, Any]) -> None:
        functools.update_wrapper(self, func)  # __name__, __doc__, __module__, __wrapped__ stay the function's
        self.registry = registry
        self.func = func
        self.name = name
        self.queue = queue
        self.options = options

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def enqueue(self, **data: Any) -> Job:
        """Add the job now: its name, ``data`` as its data, the registered default options."""
        return self.registry.queue(self.queue).add(self.name, data, **self.options)

    def enqueue_with(self, opts: JobOptions | Mapping[str, Any], /, **data: Any) -> Job:
        """``enqueue`` with ``opts`` (``Queue.add``'s options) over the registered defaults."""
        if not isinstance(opts, Mapping):
            raise InvalidJobOptionsError(f"job {self.name!r:.100}: enqueue_with opts={opts!r:.100} must be a "
                                         "mapping of job options")
        return self.registry.queue(self.queue).add(self.name, data, **{**self.options, **opts})

    def enqueue_on_commit(self, **data: Any) -> None:
        """``enqueue`` through the registry's ``defer`` (Django: once the transaction commits, so the
        job sees the rows its request wrote; never, if it rolls back). The data is checked now,
        so a value that is not JSON fails in the caller, not at the commit."""
        dumps_json(data, "data")
        (self.registry.defer or _run_now)(functools.partial(self.enqueue, **data))

    def __repr__(self) -> str:
        return f"RegisteredJob({self.name!r}, queue={self.queue!r})"


class JobRegistry:
    """Job functions by queue and name, and this process's connection to run and enqueue them.

    ``connection``: a ``redis://`` URL, a client (it stays the caller's), or a zero-argument
    factory returning a client; None reads ``REDIS_URL`` on first use, else the local Redis.
    ``defer(fn)`` is how ``enqueue_on_commit`` runs its add (None: at once).
    ``job_context()``, when set, is entered around every job the registry's processors run;
    ``defer`` and ``job_context`` are attributes, settable after construction (an extension's
    ``init_app``)."""

    def __init__(self, connection: ConnectionSource | ConnectionChoice = None, *, prefix: str = DEFAULT_PREFIX,
                 defer: Defer | None = None, job_context: JobContext | None = None) -> None:
        if isinstance(connection, str):
            check_url(connection)  # a bad URL is refused here, by name, not at the first enqueue
        elif connection is not None and not isinstance(connection, (redis.Redis, RedisCluster, ConnectionChoice)) \
                and not callable(connection):
            raise InvalidInputError(f"JobRegistry connection={connection!r:.100}: give a URL, a redis.Redis, "
                                    "a redis.cluster.RedisCluster, or a function returning one")
        QueueKeys("registry", prefix)  # validates the prefix as every component does
        for label, value in (("defer", defer), ("job_context", job_context)):
            if value is not None and not callable(value):
                raise InvalidInputError(f"JobRegistry {label}={value!r:.100}: must be callable")
        self._source = connection
        self._built_in = os.getpid()  # the process a caller's client belongs to
        self.prefix = prefix
        self.defer: Defer | None = defer
        self.job_context: JobContext | None = job_context
        self._jobs: dict[str, dict[str, RegisteredJob]] = {}
        self._state: _ProcessState | None = None
        self._lock = threading.Lock()

    # -- declaring jobs -----------------------------------------------------------------------
    def job(self, name: str | None = None, *, queue: str,
            **default_job_options: Unpack[JobOptions]) -> Callable[[F], RegisteredJob]:
        """Decorator: register the function under ``name`` (default: its ``__name__``) for
        ``queue``, with default job options (checked now: a bad one fails at decoration)."""
        def decorate(func: F) -> RegisteredJob:
            return self.register(func, name=name, queue=queue, **default_job_options)

        return decorate

    def register(self, func: Callable[..., Any], *, name: str | None = None, queue: str,
                 **default_job_options: Any) -> RegisteredJob:
        """Register ``func`` (see :meth:`job`); InvalidInputError for a name the queue has already."""
        if not callable(func):
            raise InvalidInputError(f"JobRegistry.register: func={func!r:.100} must be callable")
        job_name = getattr(func, "__name__", None) if name is None else name
        if job_name is None:
            raise InvalidInputError(f"JobRegistry.register: {func!r:.100} has no __name__: pass name=")
        validate_job_name(job_name)
        QueueKeys(queue, self.prefix)  # the queue name, validated as a Queue validates it
        try:
            encode_job_options(default_job_options)
        except InvalidJobOptionsError as exc:
            raise InvalidJobOptionsError(f"job {job_name!r:.100} of queue {queue!r}: {exc}") from None
        jobs = self._jobs.setdefault(queue, {})
        if job_name in jobs:
            raise InvalidInputError(f"job name {job_name!r:.100} is registered twice for queue {queue!r} "
                                    f"(first by {jobs[job_name].func!r:.100}): give one of them another name")
        registered = RegisteredJob(self, func, job_name, queue, dict(default_job_options))
        jobs[job_name] = registered
        return registered

    @property
    def queues(self) -> tuple[str, ...]:
        """The queues with a registered job, in the order of their first registration."""
        return tuple(self._jobs)

    def job_names(self, queue: str) -> tuple[str, ...]:
        """The job names registered for ``queue`` (none for a queue without a job)."""
        return tuple(self._jobs.get(queue, ()))

    def _registered(self, queue: str) -> dict[str, RegisteredJob]:
        jobs = self._jobs.get(queue)
        if not jobs:
            raise InvalidInputError(f"no job is registered for queue {queue!r:.100} (queues with jobs: "
                                    f"{', '.join(map(repr, self._jobs)) or 'none'})")
        return jobs

    def processors(self, queue: str) -> dict[str, Processor]:
        """Job name -> processor for ``queue``: each calls its function with the job, inside
        ``job_context()`` when one is set (read at each job, so a later ``init_app`` counts)."""
        return {name: self._in_context(registered.func) for name, registered in self._registered(queue).items()}

    def _in_context(self, func: Callable[..., Any]) -> Processor:
        @functools.wraps(func)
        def process(job: Any) -> Any:
            context = self.job_context
            if context is None:
                return func(job)
            with context():
                return func(job)

        return process

    # -- this process's connection ------------------------------------------------------------
    def _process_state(self) -> _ProcessState:
        state = self._state
        if state is not None and not state.guard.foreign():
            return state
        with self._lock:
            state = self._state
            if state is None or state.guard.foreign():
                client, owned = self._new_client()
                guard = PidGuard()
                guard.claim()
                state = self._state = _ProcessState(guard, client, owned)
        return state

    def _new_client(self) -> tuple[redis.Redis | RedisCluster, bool]:
        """This process's client and whether the registry owns it. A caller's client is used as
        is in the process that gave it; a forked child gets a new client on its settings (a
        cluster client is used as is there too: redis-py's node pools reopen after a fork, and
        each component routes its own client from it)."""
        source = self._source.choose() if isinstance(self._source, ConnectionChoice) else self._source
        if isinstance(source, RedisCluster):
            return source, False
        if isinstance(source, redis.Redis):
            if os.getpid() == self._built_in:
                return source, False
            timeout = source.connection_pool.connection_kwargs.get("socket_timeout")
            return dedicated_client(source, socket_timeout=timeout), True
        if callable(source):
            client = source()
            if not isinstance(client, (redis.Redis, RedisCluster)):
                raise InvalidInputError(f"JobRegistry connection factory returned {client!r:.100}, not a redis.Redis")
            return client, True
        return open_connection(source or os.environ.get("REDIS_URL") or LOCAL_REDIS_URL), True

    def connection(self) -> redis.Redis | RedisCluster:
        """This process's client (made on first use; after a fork, a new one)."""
        return self._process_state().client

    def queue(self, name: str) -> Queue:
        """This process's Queue for ``name`` (made on first use, then reused)."""
        state = self._process_state()
        queue = state.queues.get(name)
        if queue is None:
            with self._lock:
                queue = state.queues.get(name)
                if queue is None:
                    queue = state.queues[name] = Queue(state.client, name, prefix=self.prefix)
        return queue

    def worker(self, queue: str, **worker_options: Any) -> Worker:
        """A Worker for ``queue`` on this process's client, routing each job to the function
        registered under its name; ``worker_options`` are the Worker's (``concurrency=``, ...)."""
        return Worker(self.connection(), queue, self.processors(queue), prefix=self.prefix, **worker_options)

    def close(self) -> None:
        """Disconnect the client the registry made in this process (a caller's client stays
        open); the next use makes a new one."""
        with self._lock:
            state, self._state = self._state, None
        if state is not None and state.owned and not state.guard.foreign():
            close_any(state.client)

    def __repr__(self) -> str:
        return f"JobRegistry(prefix={self.prefix!r}, queues={list(self._jobs)!r})"
