"""Django's database connections around jobs and across the worker command's forks.

A job runs on a Worker thread, outside any request, so nothing closes the connections Django
opens for it as the end of a request would: :func:`job_connections` closes the ones that are
broken or past ``CONN_MAX_AGE`` before and after each job (what ``close_old_connections`` does
at a request's edges, and Celery around a task), so a database restart or an idle timeout fails
no later job. A connection inside a transaction is left alone: a Worker thread never has one,
but a test that runs jobs in its own thread (``echomq.testing.run_until_idle`` in a Django
``TestCase``) does, and closing it would end the test's transaction. Under the test runner the
connections are the runner's altogether, as Django's test client leaves them at a request's
edges: a job run in a test that has no database access (pytest-django blocks it) touches none.

``manage.py echomq_worker --processes N`` forks. A connection the supervisor opened (system
checks, a ``jobs.py`` that queried at import) is inherited by every child as the same socket;
closing it the usual way in a child would send the server a goodbye on the parent's session.
:func:`forget_inherited_connections` drops the child's copy without a word to the server.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from django.db import connections  # type: ignore[import-untyped]

from . import runtime


def close_old_connections() -> None:
    """``django.db.close_old_connections``, except for a connection inside a transaction."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


@contextlib.contextmanager
def job_connections() -> Iterator[None]:
    """Entered around every job of the Django registry (its ``job_context``)."""
    if runtime.testing():
        yield
        return
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def forget_inherited_connections() -> None:
    """In a forked worker process: close this process's copy of every connection the parent
    opened, without any I/O on it (the file descriptor first, so the driver's close has
    nothing left to write to), so the child opens its own on first use."""
    for connection in connections.all(initialized_only=True):
        raw = connection.connection
        if raw is not None:
            fileno = getattr(raw, "fileno", None)  # psycopg has one; sqlite3 has no socket
            if callable(fileno):
                with contextlib.suppress(Exception):
                    os.close(fileno())
        with contextlib.suppress(Exception):  # the driver's close fails on the closed descriptor
            connection.close()
