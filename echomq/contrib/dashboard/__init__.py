"""EchoMQ's dashboard: see and steer every queue from a browser (docs/dashboard.md).

A WSGI application (:class:`Dashboard`), served by ``echomq dashboard``, mounted in Django with
``include("echomq.contrib.django.dashboard")`` or in Flask by ``EchoMQ.init_dashboard``. Needs the
``dashboard`` extra (Jinja2). Its actions are one table (``actions.ACTIONS``).
"""

from __future__ import annotations

from .actions import ACTIONS, Action, Input
from .app import USER_KEY, Dashboard

__all__ = ["ACTIONS", "USER_KEY", "Action", "Dashboard", "Input"]
