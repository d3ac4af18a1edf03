"""What kind of process this is: serving requests, running a management command, running tests.

The events helper asks before it starts a reader (docs/django.md, "Events"). Django has no API
for "which command is running", so the answers come from what each runner leaves behind:

- **The test runner**: ``django.test.utils.setup_test_environment()`` (Django's runner and
  pytest-django both call it) sets ``django.core.mail.outbox``; plain pytest sets
  ``PYTEST_CURRENT_TEST`` while a test runs. The variable alone is not enough: a server a test
  starts as a subprocess inherits it, and that server is not under test, so pytest must also be
  imported in this process.
- **A management command**: ``manage.py X``, ``django-admin X`` and ``python -m django X`` all run
  ``ManagementUtility``, which takes the command name from ``sys.argv[1]``; it is a command when
  that is one of the project's commands (``get_commands()``). A WSGI server's argv (gunicorn,
  uWSGI) never starts with a command name.
- **runserver's autoreloader**: without ``--noreload`` the first process only watches files and
  restarts a child with ``RUN_MAIN=true`` (``DJANGO_AUTORELOAD_ENV``); the child serves.
"""

from __future__ import annotations

import os
import sys

#: The one command that serves requests (the others are one-off tasks).
SERVING_COMMAND = "runserver"


def under_test_runner() -> bool:
    """True inside Django's test runner, pytest-django, or a pytest test of this process."""
    from django.core import mail  # type: ignore[import-untyped]

    if hasattr(mail, "outbox"):
        return True
    return "pytest" in sys.modules and "PYTEST_CURRENT_TEST" in os.environ


def testing() -> bool:
    """True under ``manage.py test``, pytest-django or a pytest test of this process: the
    registry then connects to ``ECHOMQ["TEST_CONNECTION"]`` (docs/django.md, "Tests")."""
    return under_test_runner() or management_command() == "test"


def management_command() -> str | None:
    """The name of the management command this process runs, None when it runs none."""
    if len(sys.argv) < 2:
        return None
    from django.core.management import get_commands  # type: ignore[import-untyped]

    name = sys.argv[1]
    return name if name in get_commands() else None


def is_reloader_parent() -> bool:
    """True in the autoreloader's watching process of ``runserver`` (it never serves)."""
    from django.utils.autoreload import DJANGO_AUTORELOAD_ENV  # type: ignore[import-untyped]

    return "--noreload" not in sys.argv[2:] and os.environ.get(DJANGO_AUTORELOAD_ENV) != "true"


def start_refusal(*, in_commands: bool, in_tests: bool) -> str | None:
    """Why this process may not start an events reader, or None when it may.

    A serving process may (a WSGI server, runserver's serving child). Tests and management
    commands may not unless allowed (``in_tests``: ``manage.py test`` and pytest;
    ``in_commands``: every other command). The reloader's watching process never may: it has no
    request to serve and would only add a second reader.
    """
    command = management_command()
    if command == "test" or under_test_runner():
        return None if in_tests else "under the test runner (ECHOMQ['EVENTS']['IN_TESTS'] allows it)"
    if command == SERVING_COMMAND:
        return "in runserver's autoreloader process (its child serves)" if is_reloader_parent() else None
    if command is not None and not in_commands:
        return f"inside the management command {command!r} (ECHOMQ['EVENTS']['IN_COMMANDS'] allows it)"
    return None
