"""gunicorn server hooks: exactly one set of events readers per worker process, none in the master.

Use it from ``gunicorn.conf.py`` (docs/hosting.md, "gunicorn")::

    from echomq.contrib.gunicorn import post_worker_init, worker_exit

Why these two hooks and not ``post_fork``: ``post_fork`` runs in the new worker before it loads
the application, so without ``--preload`` Django's settings are not configured yet there.
``post_worker_init`` runs in the worker once the application is loaded, with or without
``--preload``; the master never runs it, so the master starts nothing, even when it imported
the application (``--preload``). ``worker_exit`` closes the worker's readers on its way out
(gunicorn also calls it in the master for a worker that vanished: nothing to close there).

The readers are the integration's: for Django, every queue of ``ECHOMQ["EVENTS"]["QUEUES"]``
(``echomq.contrib.django.events.start_events``), when ``"echomq.contrib.django"`` is installed.
A reader that cannot start (Redis down) is logged and does not stop the worker from serving; a
Django project with ``EVENTS["START"] = "request"`` then starts it on a later request.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger(__name__)


def _django_installed() -> bool:
    """True once the application loaded Django with the EchoMQ app installed."""
    if "django" not in sys.modules:
        return False
    from django.apps import apps  # type: ignore[import-untyped]

    return bool(apps.ready and apps.is_installed("echomq.contrib.django"))


def post_worker_init(worker: Any) -> None:
    """gunicorn hook, in each worker once its application is loaded: start its readers."""
    if not _django_installed():
        return
    from .django.events import start_events

    try:
        started = start_events()
    except Exception:
        log.warning("gunicorn worker %s: EchoMQ events readers could not start", getattr(worker, "pid", "?"),
                    exc_info=True)
        return
    log.info("gunicorn worker %s: EchoMQ events readers running for %s", getattr(worker, "pid", "?"),
             ", ".join(reader.queue_name for reader in started) or "no queue")


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn hook, as a worker exits: close the readers this process started."""
    if not _django_installed():
        return
    from .django.events import close_events

    close_events()
