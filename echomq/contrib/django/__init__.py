"""EchoMQ for Django (docs/django.md): add ``"echomq.contrib.django"`` to ``INSTALLED_APPS``.

- ``ECHOMQ`` in settings: the connection, prefix, queues with their default job options,
  declared schedules and events readers (``conf``; ``manage.py check`` validates it);
- ``@job`` registers a function with the project's one ``registry`` (built from the setting on
  first use; every installed app's ``jobs.py`` is imported then), and the job it returns has
  ``enqueue_on_commit(**data)`` for views: added once the transaction commits, never if it
  rolls back;
- ``manage.py echomq_worker`` (the options of ``echomq worker``; ``LISTENERS`` and
  ``WORKER_NAME`` from the setting; lost declared schedules re-created) and ``manage.py
  echomq_schedules`` (sync the declared schedules); ``sync_schedules(clock=...)`` does the
  same in a test;
- ``queue_events(queue)``, ``start_events()``, ``close_events()``: one events reader per
  process per queue, never under the test runner or in a management command unless allowed.

Django is imported only by this package. Importing it does nothing: every name below is
imported on first use, and ``registry`` is built from the setting when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["close_events", "get_registry", "job", "queue_events", "registry", "start_events", "sync_schedules"]


def __getattr__(name: str) -> Any:
    if name == "registry":  # not kept: get_registry() discovers jobs.py once apps are ready
        from .registration import get_registry

        return get_registry()
    if name in ("job", "get_registry", "sync_schedules"):
        from . import registration

        value = getattr(registration, name)
    elif name in ("queue_events", "start_events", "close_events"):
        from . import events

        value = getattr(events, name)
    else:
        raise AttributeError(f"module 'echomq.contrib.django' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ...registry import JobRegistry
    from .events import close_events, queue_events, start_events
    from .registration import get_registry, job, sync_schedules

    registry: JobRegistry
