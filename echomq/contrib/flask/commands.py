"""``flask echomq worker`` and ``flask echomq schedules``: the ``echomq`` command group that
``init_app`` adds to an app's CLI.

``worker`` is ``echomq worker`` (``echomq.processes``, the command both share) with the app supplying the registry, the
connection, the prefix, ``ECHOMQ_LISTENERS`` and ``ECHOMQ_WORKER_NAME``: its arguments go through
untouched to the same argparse parser, so the two commands take the same options and print the
same help; each worker process re-creates the declared schedules Redis lost. ``schedules``
syncs the app's ``ECHOMQ_SCHEDULES`` into Redis. Both are the host layer's
(``echomq.contrib.host.project``), as Django's commands are, and print the same lines. Both run
inside the app context the ``flask`` command pushes.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import click
import flask
import redis
from flask.cli import AppGroup

from ...errors import EchoMQError
from ...processes.arguments import add_worker_arguments
from ..host.project import failure_message
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
        # No child_setup of Flask's own: a forked worker process inherits this command's app
        # context, the registry gives it a client of its own, and each job runs in an app context
        # of its own.
        state = state_of(None)
        raise SystemExit(state.project.run_worker(args, state.settings.host))

    @group.command("schedules")
    @click.option("--prune", is_flag=True, help="Also remove the schedulers that ECHOMQ_SCHEDULES does not "
                  "declare, in the app's queues.")
    @click.option("--dry-run", is_flag=True, help="Print the differences; change nothing.")
    def schedules(prune: bool, dry_run: bool) -> None:
        """Sync ECHOMQ_SCHEDULES into Redis: create the missing schedulers, update those that
        differ, leave the others (and their next run) alone. A refused sync writes nothing."""
        state = state_of(None)
        try:
            report = state.project.sync_schedules(state.settings.host, prune=prune, dry_run=dry_run)
        except (EchoMQError, redis.RedisError, OSError) as exc:
            raise click.ClickException(failure_message(exc)) from None
        for warning in report.warnings:
            click.echo(f"warning: {warning}", err=True)
        for line in report.lines():
            click.echo(line)

    return group
