"""``manage.py check``: a bad ``ECHOMQ`` setting is reported before anything runs.

Registered by the app config's ``ready()``. Each problem ``conf.problems`` finds is one Error
with its id (``echomq.E001`` ... ``E013``, listed in docs/django.md) and a hint, or one Warning
(``echomq.W001`` an ended schedule, ``W002`` the old ``job`` key); nothing connects to Redis.
Every management command runs the checks first (the worker and schedule commands included), so
a misconfigured worker does not start; a warning stops nothing.
"""

from __future__ import annotations

from typing import Any

from django.core import checks  # type: ignore[import-untyped]

from . import conf

TAG = "echomq"


def check_echomq_setting(app_configs: Any = None, **_: Any) -> list[Any]:
    """The system check of ``settings.ECHOMQ``."""
    return [(checks.Warning if problem.warning else checks.Error)(problem.message, hint=problem.hint,
                                                                   obj="settings.ECHOMQ", id=problem.id)
            for problem in conf.problems(conf.raw_setting())]
