"""The project's one JobRegistry, built from ``settings.ECHOMQ`` on first use, and ``@job``.

Nothing happens at import: the registry is made the first time something asks for it (a
``@job`` decoration in a ``jobs.py``, ``get_registry()``, the worker command), from the setting
as it is then: its ``PREFIX``, ``DEFAULT_QUEUE`` and ``QUEUES`` (``URL``, ``CONNECTION`` and
``TEST_CONNECTION`` are read when it first connects, once per process: under the test runner
it connects to ``TEST_CONNECTION``, a fresh fakeredis per pytest test by default). It is the
host layer's ``Project`` (``echomq.contrib.host.project``), which also syncs the declared
schedules and runs the worker command. Once Django's app registry is ready, the first
use also imports the ``jobs`` module of every installed app (``autodiscover_modules("jobs")``),
so the worker knows every job without a list to keep, and a view that enqueues one app's job
never misses another's.

The registry enqueues through ``transaction.on_commit`` (``RegisteredJob.enqueue_on_commit``:
the job is added once the transaction commits, and never if it rolls back) and runs each job
between two ``close_old_connections`` (``database.job_connections``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from django.apps import apps  # type: ignore[import-untyped]
from django.db import transaction  # type: ignore[import-untyped]
from django.utils.module_loading import autodiscover_modules  # type: ignore[import-untyped]

from ...clock import system_clock
from ...registry import JobRegistry, RegisteredJob
from ...types import Clock
from ..host.project import Project, SyncReport
from . import conf, runtime
from .database import job_connections

F = TypeVar("F", bound=Callable[..., Any])

#: The module every installed app may have, imported on the registry's first use.
JOBS_MODULE = "jobs"


class _Project:
    """The process's registry and how far the discovery of ``jobs.py`` modules got."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # re-entered: discovering imports jobs.py, whose @job asks for the registry
        self.project: Project | None = None
        self.discovered = False
        self.discovering = False

    def built(self) -> Project:
        with self.lock:
            if self.project is None:
                settings = conf.current(conf.REGISTRATION_KEYS)
                self.project = Project(lambda: conf.current(conf.CONNECTION_KEYS).host, prefix=settings.prefix,
                                       under_test=runtime.testing, defer=transaction.on_commit,
                                       job_context=job_connections)
            return self.project

    def discover(self) -> None:
        if not apps.ready:  # a jobs.py imported while apps load (from a models.py): discover later
            return
        with self.lock:
            if self.discovered or self.discovering:
                return
            self.discovering = True
            try:
                autodiscover_modules(JOBS_MODULE)
                self.discovered = True
            finally:
                self.discovering = False


_project = _Project()


def get_project() -> Project:
    """The project's registry and commands: built on first call, its apps' ``jobs`` modules
    imported as soon as the app registry is ready. An error in a ``jobs.py`` propagates; the
    next call retries."""
    project = _project.project or _project.built()
    if not _project.discovered:
        _project.discover()
    return project


def get_registry() -> JobRegistry:
    """The project's registry (see :func:`get_project`)."""
    return get_project().registry


def sync_schedules(*, prune: bool = False, dry_run: bool = False, clock: Clock | None = None) -> SyncReport:
    """What ``manage.py echomq_schedules`` does, in the caller's process, on ``clock`` (default:
    the system's): a test on a ``FakeClock`` syncs the declared schedules at the test's time
    (docs/testing.md)."""
    settings = conf.current()
    return get_project().sync_schedules(settings.host, prune=prune, dry_run=dry_run, clock=clock or system_clock,
                                        queues=list(settings.events.queues))


@overload
def job(name: F, /) -> RegisteredJob: ...
@overload
def job(name: str | None = None, /, *, queue: str | None = None, **options: Any) -> Callable[[F], RegisteredJob]: ...


def job(name: Any = None, /, *, queue: str | None = None, **options: Any) -> Any:
    """Register a job function with the project's registry: ``@job``, ``@job("name")``,
    ``@job(queue="reports", attempts=3)``.

    The job's name defaults to the function's ``__name__``, its queue to
    ``ECHOMQ["DEFAULT_QUEUE"]``; its default options are the queue's (``ECHOMQ["QUEUES"]``)
    updated with ``options``. Returns the ``RegisteredJob``: call it with a job in a unit test,
    ``.enqueue(**data)`` to add one now, ``.enqueue_on_commit(**data)`` from a view.
    """
    if callable(name):
        return job()(name)

    def decorate(func: F) -> RegisteredJob:
        registry = get_registry()
        settings = conf.current(conf.REGISTRATION_KEYS)
        queue_name = settings.default_queue if queue is None else queue
        return registry.register(func, name=name, queue=queue_name, **{**settings.queue_options(queue_name), **options})

    return decorate
