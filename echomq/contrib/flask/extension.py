"""The ``EchoMQ`` Flask extension: jobs declared once, run and enqueued per app.

One extension object serves every app an app factory makes. Jobs are declared on the extension
(``@echomq.job(queue="mail")``, usually at import of a ``jobs`` module); ``init_app(app)`` reads
the app's ``ECHOMQ_*`` config (``settings``) and gives the app a :class:`JobRegistry` of its own,
on its connection and prefix, holding every job declared (before or after ``init_app``) with
the app's queue defaults, and whose jobs run inside ``app.app_context()``. Everything that
enqueues or reads uses the registry of ``current_app``, so two apps with different configs
never share a connection, and a view, a command or a job simply calls ``send_welcome.enqueue()``.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
import flask

from ...clock import system_clock
from ...errors import InvalidInputError, InvalidJobOptionsError
from ...events.queue_events import QueueEvents
from ...protocol.keys import validate_queue_name
from ...protocol.options import encode_job_options, validate_job_name
from ...queue.job import Job
from ...queue.queue import Queue
from ...registry import JobRegistry, RegisteredJob
from ...types import Clock, JobOptions, Subscriber
from ..host.project import Project, SyncReport
from ..host.readers import ProcessReaders
from .commands import echomq_command_group
from .settings import read_settings
from .state import EXTENSION_KEY, AppState, DeclaredJob

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

class FlaskJob:
    """What ``@echomq.job`` returns: calling it calls the function (a unit test hands it a job);
    ``enqueue`` and its siblings add the job through the current app's registry."""

    def __init__(self, extension: EchoMQ, declared: DeclaredJob) -> None:
        self._extension = extension
        self.func = declared.func
        self.name = declared.name
        self.queue = declared.queue
        self.options = dict(declared.options)
        functools.update_wrapper(self, declared.func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def registered(self, app: flask.Flask | None = None) -> RegisteredJob:
        """The job as ``app`` (default: ``current_app``) registered it, with the app's defaults."""
        return self._extension.state(app).jobs[self.queue, self.name]

    def enqueue(self, **data: Any) -> Job:
        """Add the job now, in the current app's Redis: its name, ``data`` as its data."""
        return self.registered().enqueue(**data)

    def enqueue_with(self, opts: JobOptions | Mapping[str, Any], /, **data: Any) -> Job:
        """``enqueue`` with ``opts`` (``Queue.add``'s options) over the defaults."""
        return self.registered().enqueue_with(opts, **data)

    def enqueue_on_commit(self, **data: Any) -> None:
        """``enqueue`` through the registry's ``defer`` (Flask has no transaction hook: at once)."""
        self.registered().enqueue_on_commit(**data)

    def __repr__(self) -> str:
        return f"FlaskJob({self.name!r}, queue={self.queue!r})"


class EchoMQ:
    """The extension: ``EchoMQ(app)``, or ``EchoMQ()`` then ``init_app(app)`` in an app factory.

    ``init_app`` reads the app's ``ECHOMQ_*`` config (refusing bad values by key), gives the app
    its registry and registers the ``flask echomq`` commands. QueueEvents readers for the
    queues with subscribers (``@echomq.on_event``) start lazily, once per process: see
    ``ECHOMQ_EVENTS`` in docs/flask.md.
    """

    def __init__(self, app: flask.Flask | None = None) -> None:
        self._declared: dict[tuple[str, str], DeclaredJob] = {}
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._states: weakref.WeakSet[AppState] = weakref.WeakSet()
        self.cli = echomq_command_group(self.state)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        """Configure ``app`` from its ``ECHOMQ_*`` keys; InvalidInputError names a bad one."""
        if EXTENSION_KEY in app.extensions:
            raise InvalidInputError(f"app {app.name!r} is already initialised with EchoMQ")
        settings = read_settings(app.config)
        project = Project(lambda: settings.host, prefix=settings.prefix, under_test=lambda: bool(app.testing),
                          job_context=app.app_context)
        state = AppState(app, settings, project, ProcessReaders(lambda queue: self._make_reader(project, queue)))
        project.on_test_end.append(state.readers.close)
        for declared in self._declared.values():
            state.register(declared)
        app.extensions[EXTENSION_KEY] = state
        self._states.add(state)
        app.cli.add_command(self.cli)
        if settings.events != "manual":
            app.before_request(functools.partial(self._start_readers_on_request, state))

    # -- jobs ---------------------------------------------------------------------------------
    def job(self, name: str | None = None, *, queue: str, **default_job_options: Any) -> Callable[[F], FlaskJob]:
        """Decorator: declare the function as the job ``name`` (default: its ``__name__``) of
        ``queue``, with default job options (over the app's ``ECHOMQ_QUEUES`` defaults)."""
        def decorate(func: F) -> FlaskJob:
            return self.register(func, name=name, queue=queue, **default_job_options)

        return decorate

    def register(self, func: Callable[..., Any], *, name: str | None = None, queue: str,
                 **default_job_options: Any) -> FlaskJob:
        """Declare ``func`` (see :meth:`job`); every app initialised, now or later, registers it."""
        job_name = validate_job_name(getattr(func, "__name__", None) if name is None else name)
        validate_queue_name(queue)
        try:
            encode_job_options(default_job_options)
        except InvalidJobOptionsError as exc:
            raise InvalidJobOptionsError(f"job {job_name!r:.100} of queue {queue!r}: {exc}") from None
        if (queue, job_name) in self._declared:
            raise InvalidInputError(f"job name {job_name!r:.100} is declared twice for queue {queue!r}: give one "
                                    "of them another name")
        declared = DeclaredJob(func, job_name, queue, dict(default_job_options))
        states = list(self._states)
        for state in states:  # every app accepts it, or none registers it
            state.options_for(declared)
        for state in states:
            state.register(declared)
        self._declared[queue, job_name] = declared
        return FlaskJob(self, declared)

    def state(self, app: flask.Flask | None = None) -> AppState:
        """What ``init_app`` gave ``app`` (default: ``current_app``)."""
        if app is None:
            if not flask.has_app_context():
                raise RuntimeError("EchoMQ needs an app context here: call it from a view, a command or a job, or "
                                   "inside `with app.app_context():`")
            app = flask.current_app._get_current_object()  # type: ignore[attr-defined]
        state = app.extensions.get(EXTENSION_KEY)
        if not isinstance(state, AppState) or state not in self._states:
            raise RuntimeError(f"app {app.name!r} was not initialised with this EchoMQ: call init_app(app)")
        return state

    @property
    def registry(self) -> JobRegistry:
        """The current app's registry (``run_worker``, ``echomq.testing`` take it)."""
        return self.state().registry

    def registry_for(self, app: flask.Flask) -> JobRegistry:
        """``app``'s registry, outside its context (tests, a script building its own worker)."""
        return self.state(app).registry

    def queue(self, name: str) -> Queue:
        """The current app's Queue ``name``, for what the registry does not cover (``add_bulk`` ...)."""
        return self.registry.queue(name)

    # -- dashboard ----------------------------------------------------------------------------
    def init_dashboard(self, app: flask.Flask, *, authorize: Callable[[flask.Request], Any],
                       url_prefix: str = "/echomq", read_only: bool | None = None) -> flask.Blueprint:
        """Serve the dashboard (docs/dashboard.md) at ``url_prefix`` of ``app``, on its EchoMQ
        connection; ``authorize(request)`` decides each request (falsy: 403; a str: the user's
        name in the action log). ``read_only`` (default ``ECHOMQ_DASHBOARD_READ_ONLY``)."""
        from .dashboard import dashboard_blueprint

        blueprint = dashboard_blueprint(self.state(app), authorize, read_only)
        app.register_blueprint(blueprint, url_prefix=url_prefix)
        return blueprint

    # -- events -------------------------------------------------------------------------------
    def on_event(self, queue: str) -> Callable[[F], F]:
        """Decorator: subscribe ``fn(event_type, event_data)`` to the events of ``queue``."""
        def decorate(func: F) -> F:
            self.subscribe(queue, func)
            return func

        return decorate

    def subscribe(self, queue: str, subscriber: Subscriber) -> None:
        """Subscribe a callable or a ``queue.Queue`` to ``queue``'s events, in every app; a
        reader that already runs gets it at once."""
        validate_queue_name(queue)
        self._subscribers.setdefault(queue, []).append(subscriber)
        for state in list(self._states):
            reader = state.readers.running().get(queue)
            if reader is not None:
                reader.subscribe(subscriber)

    def events(self, queue: str) -> QueueEvents:
        """This process's reader of ``queue`` for the current app, started now if it does not run
        (whatever ``ECHOMQ_EVENTS`` says: asking is starting). Raises what
        ``QueueEvents.start()`` raises when Redis cannot be reached; the next call tries again."""
        return self.state().readers.get(validate_queue_name(queue))

    def start_events(self) -> list[QueueEvents]:
        """Start this process's readers of every queue with a subscriber, for the current app."""
        return self.state().readers.start(self._subscribers)

    def running_events(self, app: flask.Flask | None = None) -> dict[str, QueueEvents]:
        """The readers running in this process for ``app`` (default: ``current_app``), by queue."""
        return self.state(app).readers.running()

    def close_events(self, app: flask.Flask | None = None, timeout: float | None = None) -> None:
        """Close this process's readers for ``app`` (default: ``current_app``)."""
        self.state(app).readers.close(timeout)

    def sync_schedules(self, app: flask.Flask | None = None, *, prune: bool = False, dry_run: bool = False,
                       clock: Clock | None = None) -> SyncReport:
        """What ``flask echomq schedules`` does, for ``app`` (default: ``current_app``), on
        ``clock`` (default: the system's): a test on a ``FakeClock`` syncs the declared
        schedules at the test's time."""
        state = self.state(app)
        return state.project.sync_schedules(state.settings.host, prune=prune, dry_run=dry_run,
                                            clock=clock or system_clock)

    def _make_reader(self, project: Project, queue: str) -> QueueEvents:
        reader = QueueEvents(project.registry.connection(), queue, prefix=project.registry.prefix)
        for subscriber in self._subscribers.get(queue, ()):
            reader.subscribe(subscriber)
        return reader

    def _start_readers_on_request(self, state: AppState) -> None:
        """``before_request``: start the readers the first time a process serves a request,
        unless ``ECHOMQ_EVENTS`` is ``auto`` and the app is under test or inside a command. A
        start that fails is logged and tried again later (``host.readers.RETRY_AFTER_S``)."""
        if not self._subscribers:
            return
        if state.settings.events == "auto" and (state.app.testing or _inside_a_command()):
            return
        state.readers.start_on_request(self._subscribers)


def _inside_a_command() -> bool:
    """True inside a ``flask`` command other than ``flask run`` (a command's own test client)."""
    context = click.get_current_context(silent=True)
    return context is not None and context.command.name != "run"
