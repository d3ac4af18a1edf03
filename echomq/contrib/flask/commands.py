"""``flask echomq worker`` and ``flask echomq schedules``: the ``echomq`` command group that
``init_app`` adds to an app's CLI.

``worker`` is ``echomq worker`` (``echomq.processes``, the command both share) with the app
supplying the registry, the connection and the prefix: its arguments go through untouched to
the same argparse parser, so the two commands take the same options and print the same help.
``schedules`` syncs the app's ``ECHOMQ_SCHEDULES`` into Redis (``schedules_sync``). Both run
inside the app context the ``flask`` command pushes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import click
import flask
import redis
from flask.cli import AppGroup

from ...errors import InvalidInputError
from ...processes.arguments import add_worker_arguments
from ...processes.command import run_worker
from ..schedules_sync import Change, sync_schedules
from .state import AppState


def echomq_command_group(state_of: Callable[[flask.Flask | None], AppState]) -> AppGroup:
    """The ``echomq`` group of one extension: ``state_of(app)`` (None: the current app) is what
    the extension's ``init_app`` gave the app the command runs for."""
    group = AppGroup("echomq", help="EchoMQ: run workers, sync the declared schedules.")

    @group.command("worker", add_help_option=False, context_settings={"ignore_unknown_options": True},
                   short_help="Process the app's jobs (the options of `echomq worker`).")
    @click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
    def worker(arguments: tuple[str, ...]) -> None:
        """Process the app's jobs: every queue with a registered job, or the QUEUEs named.
        `flask echomq worker --help` lists the options."""
        parser = argparse.ArgumentParser(
            prog="flask echomq worker",
            description="Process the app's jobs, routed by name, until SIGTERM or SIGINT (or, with "
                        "--burst, until the queues are idle). Each job runs inside the app's context.")
        add_worker_arguments(parser, app_option=False)
        args = parser.parse_args(list(arguments))
        # No child_setup: a forked worker process inherits this command's app context, the
        # registry gives it a client of its own, and each job runs in an app context of its own.
        raise SystemExit(run_worker(args, registry=state_of(None).registry))

    @group.command("schedules")
    @click.option("--prune", is_flag=True, help="Also remove the schedulers that ECHOMQ_SCHEDULES does not "
                  "declare, in the app's queues.")
    @click.option("--dry-run", is_flag=True, help="Print the differences; change nothing.")
    def schedules(prune: bool, dry_run: bool) -> None:
        """Sync ECHOMQ_SCHEDULES into Redis: create the missing schedulers, update those that
        differ, leave the others (and their next run) alone."""
        state = state_of(None)
        declared = state.settings.schedules
        for warning in _unhandled(state):
            click.echo(f"warning: {warning}", err=True)
        try:
            changes = sync_schedules(state.registry.connection(), state.settings.prefix, declared, prune=prune,
                                     dry_run=dry_run, queues=(*state.registry.queues, *state.settings.queues))
        except InvalidInputError as exc:
            raise click.ClickException(str(exc)) from None
        except (redis.RedisError, OSError) as exc:
            raise click.ClickException(f"Redis: {exc}") from None
        for change in changes:
            click.echo(("would " if dry_run else "") + str(change))
        click.echo(_summary(changes, len(declared), dry_run))

    return group


def _unhandled(state: AppState) -> list[str]:
    """Declared schedules whose job no registered function of the app handles (a worker of
    another runtime may; EchoMQ's would fail them by name)."""
    return [f"schedule {sid!r}: no job {entry.get('job', sid)!r} is registered for queue {entry['queue']!r}"
            for sid, entry in state.settings.schedules.items()
            if (entry["queue"], entry.get("job", sid)) not in state.jobs]


def _summary(changes: list[Change], declared: int, dry_run: bool) -> str:
    counts = {action: sum(change.action == action for change in changes) for action in ("create", "update", "remove")}
    unchanged = declared - counts["create"] - counts["update"]
    text = (f"{declared} declared: {counts['create']} to create, {counts['update']} to update, {unchanged} "
            f"unchanged; {counts['remove']} to remove" if dry_run else
            f"{declared} declared: {counts['create']} created, {counts['update']} updated, {unchanged} "
            f"unchanged; {counts['remove']} removed")
    return text + (" (dry run: nothing written)" if dry_run else "")
