"""A project's EchoMQ as one integration configured it: its registry on the connection the
settings say (under test, the test connection), its schedule sync and its worker command.

The registry is a ``JobRegistry`` whose connection is chosen when a process first connects
(``ConnectionChoice``): the settings are read then, and so is whether the process is under
test (the adapter's ``under_test``: Django's test runner or pytest, Flask's ``app.testing``).
Under test it connects to ``TEST_CONNECTION``:

- ``"fake"`` (the default): an in-memory fakeredis. Under pytest (the ``echomq`` plugin) each
  test gets a fresh server: the registry's client and the project's events readers are closed
  when a test ends, and the next test's first use connects to a new one;
- a URL, a client or a function returning one: a real Redis for the tests. Its client notes
  the queues each command names, and when a test ends every key of those queues is deleted
  (``echomq.testing.isolation``), the application's queues included;
- None: the normal connection, under test too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis

from ...clock import system_clock
from ...errors import EchoMQError
from ...processes.command import run_worker as run_worker_command
from ...registry import ConnectionChoice, ConnectionSource, Defer, JobContext, JobRegistry
from ...testing import isolation
from ...transport.connection import is_fake
from ...types import Clock
from ..schedules_sync import Change, summary, sync_schedules
from .keeper import ScheduleKeeper
from .settings import FAKE, HostSettings


@dataclass(frozen=True)
class SyncReport:
    """What a schedule sync did (or, in a dry run, would do), and its warnings."""

    changes: list[Change]
    declared: int
    dry_run: bool
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The command's output, the same in both frameworks: one line per change, then the sum."""
        return [*(change.line(dry_run=self.dry_run) for change in self.changes),
                summary(self.changes, self.declared, dry_run=self.dry_run)]


def failure_message(exc: BaseException) -> str:
    """A refused or failed sync as the commands print it."""
    if isinstance(exc, EchoMQError):
        return str(exc)
    return f"Redis: {exc}"


class Project:
    """The registry of one project (Django) or app (Flask), and what the commands do with it.

    ``connection_settings()`` gives the settings the connection is chosen from (read at each
    first connection of a process); ``under_test()`` says whether this process is under test;
    ``on_test_end`` are closed when a pytest test that used the test connection ends."""

    def __init__(self, connection_settings: Callable[[], HostSettings], *, prefix: str,
                 under_test: Callable[[], bool], defer: Defer | None = None,
                 job_context: JobContext | None = None) -> None:
        self._connection_settings = connection_settings
        self._under_test = under_test
        self.on_test_end: list[Callable[[], None]] = []
        self.registry = JobRegistry(ConnectionChoice(self._choose), prefix=prefix, defer=defer,
                                    job_context=job_context)

    # -- the connection ---------------------------------------------------------------------
    def _choose(self) -> ConnectionSource:
        settings = self._connection_settings()
        test = settings.test_connection
        if test is None or not self._under_test():
            return settings.connection if settings.connection is not None else settings.url
        isolation.at_test_end(self, self._test_ended)
        if test == FAKE:
            return isolation.fake_client
        if isinstance(test, redis.Redis) and is_fake(test):
            return test  # a fake the test made: its own server already
        recorder = isolation.QueueRecorder().watch()
        if isinstance(test, (str, redis.Redis)):
            return lambda: recorder.client(test)

        def recorded() -> redis.Redis:
            made = test()
            try:
                return recorder.client(made)
            finally:
                made.close()

        return recorded

    def _test_ended(self) -> None:
        for close in self.on_test_end:
            close()
        self.registry.close()

    # -- schedules --------------------------------------------------------------------------
    def sync_schedules(self, settings: HostSettings, *, prune: bool = False, dry_run: bool = False,
                       clock: Clock = system_clock, queues: Sequence[str] = ()) -> SyncReport:
        """Sync the declared schedules into the registry's Redis (``schedules_sync``); prune in
        every queue the settings, the registry and ``queues`` name."""
        known = [*settings.known_queues(), *self.registry.queues, *queues]
        changes = sync_schedules(self.registry.connection(), self.registry.prefix, settings.schedules, prune=prune,
                                 dry_run=dry_run, queues=known, clock=clock)
        return SyncReport(changes, len(settings.schedules), dry_run, self.unhandled(settings))

    def unhandled(self, settings: HostSettings) -> list[str]:
        """Declared schedules whose job no registered function handles (a worker of another
        runtime may; EchoMQ's would fail them by name)."""
        return [f"schedule {schedule.scheduler_id!r}: no job {schedule.job_name!r} is registered for queue "
                f"{schedule.queue!r}" for schedule in settings.declared()
                if schedule.job_name not in self.registry.job_names(schedule.queue)]

    def keeper(self, settings: HostSettings) -> ScheduleKeeper | None:
        """The keeper of the declared schedules (None: none declared, or the check is off)."""
        if not settings.schedules or not settings.schedules_check_interval:
            return None
        return ScheduleKeeper(self.registry, settings.schedules, interval_s=settings.schedules_check_interval)

    # -- the worker command -----------------------------------------------------------------
    def run_worker(self, args: argparse.Namespace, settings: HostSettings, *,
                   child_setup: Callable[[], None] | None = None) -> int:
        """``echomq worker`` for the registry, with the settings' listeners and worker name and
        a keeper of the declared schedules in each worker process; its exit status."""
        keeper = self.keeper(settings)

        def setup() -> None:  # in each worker process (the command's own without --processes)
            if child_setup is not None:
                child_setup()
            if keeper is not None:
                keeper.start()

        try:
            return run_worker_command(args, registry=self.registry, child_setup=setup,
                                      listeners=[*settings.listeners, *([keeper] if keeper else [])],
                                      name=settings.worker_name)
        finally:
            if keeper is not None:
                keeper.stop()
