"""The dashboard in a Flask app: ``echomq.init_dashboard(app, authorize=...)`` registers it as a
blueprint (``/echomq`` by default) on the app's EchoMQ connection and prefix.

``authorize(request)`` decides every request before the dashboard sees it: falsy is 403, a
``str`` is also the name each action is logged with. ``ECHOMQ_DASHBOARD_READ_ONLY`` (or
``read_only=``) hides the buttons and refuses every action. The action tokens are keyed from
the app's ``SECRET_KEY`` when it has one, so every process of the app accepts them; without
one, each process has its own (docs/dashboard.md).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import flask

from ...errors import InvalidInputError
from ..dashboard import USER_KEY, Dashboard
from ..dashboard.http import call_wsgi
from .state import AppState

Authorize = Callable[[flask.Request], Any]


def dashboard_blueprint(state: AppState, authorize: Authorize, read_only: bool | None) -> flask.Blueprint:
    if not callable(authorize):
        raise InvalidInputError(f"init_dashboard: authorize={authorize!r:.100} must be a callable taking the request")
    if read_only is None:
        read_only = state.app.config.get("ECHOMQ_DASHBOARD_READ_ONLY", False)
    if not isinstance(read_only, bool):
        raise InvalidInputError(f"app.config['ECHOMQ_DASHBOARD_READ_ONLY'] must be True or False, not {read_only!r}")
    blueprint = flask.Blueprint("echomq_dashboard", __name__)
    lock = threading.Lock()
    built: list[Dashboard] = []

    def app_now() -> Dashboard:
        """The dashboard on the registry's client of this process (a new one when it reconnected)."""
        client = state.registry.connection()
        with lock:
            if not built or built[0].client is not client:
                key = state.app.secret_key
                secret = (hmac.new(key if isinstance(key, bytes) else str(key).encode(), b"echomq.dashboard",
                                   hashlib.sha256).digest() if key else None)
                built[:] = [Dashboard(client, prefix=state.registry.prefix, read_only=bool(read_only), secret=secret)]
            return built[0]

    def view(rest: str = "") -> flask.Response:
        request = flask.request
        verdict = authorize(request)
        if not verdict:
            return flask.Response("you may not see the EchoMQ dashboard", 403, content_type="text/plain")
        mount = request.path[: len(request.path) - len(rest)] if rest else request.path
        form = urlencode(list(request.form.items(multi=False))).encode() if request.method == "POST" else b""
        status, headers, body = call_wsgi(app_now(), request.environ, script_name=mount, path_info="/" + rest,
                                          body=form,
                                          extra={USER_KEY: verdict if isinstance(verdict, str) else None,
                                                 "CONTENT_TYPE": "application/x-www-form-urlencoded"})
        return flask.Response(body, status, headers=[(k, v) for k, v in headers if k.lower() != "content-length"])

    blueprint.add_url_rule("/", "index", view, methods=["GET", "POST"])
    blueprint.add_url_rule("/<path:rest>", "page", view, methods=["GET", "POST"])
    return blueprint
