"""The dashboard in a Django project: ``path("echomq/", include("echomq.contrib.django.dashboard"))``.

Staff only by default (an active user with ``is_staff``); ``ECHOMQ_DASHBOARD = {"PERMISSION":
"app.codename"}`` asks for that permission instead, ``{"READ_ONLY": True}`` hides every button and
refuses every action (docs/dashboard.md). A visitor who is not signed in is sent to
``LOGIN_URL``; one signed in without the right gets 403. It reads the project's EchoMQ
connection and prefix (the ``ECHOMQ`` setting, through the project's registry) and logs each
action with the user's name. The action tokens are the dashboard's own (bound to its session
cookie and keyed from ``SECRET_KEY``, so every process of the site accepts them), hence the
view is exempt from Django's CSRF middleware, which would read the body first.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from typing import Any
from urllib.parse import urlencode

from django.conf import settings  # type: ignore[import-untyped]
from django.contrib.auth.views import redirect_to_login  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden  # type: ignore[import-untyped]
from django.urls import re_path  # type: ignore[import-untyped]
from django.views.decorators.csrf import csrf_exempt  # type: ignore[import-untyped]

from ..dashboard import USER_KEY, Dashboard
from ..dashboard.http import call_wsgi
from .registration import get_registry

#: The keys of ``ECHOMQ_DASHBOARD``.
SETTING_KEYS = ("PERMISSION", "READ_ONLY")

_lock = threading.Lock()
_apps: dict[tuple[int, str, bool], Dashboard] = {}


def dashboard_settings() -> tuple[str | None, bool]:
    """``ECHOMQ_DASHBOARD``'s permission (None: staff) and read-only flag, checked."""
    raw = getattr(settings, "ECHOMQ_DASHBOARD", None) or {}
    if not isinstance(raw, dict) or set(raw) - set(SETTING_KEYS):
        raise ImproperlyConfigured(f"ECHOMQ_DASHBOARD must be a dict with keys among {', '.join(SETTING_KEYS)}, "
                                   f"not {raw!r:.200}")
    permission, read_only = raw.get("PERMISSION"), raw.get("READ_ONLY", False)
    if permission is not None and (not isinstance(permission, str) or "." not in permission):
        raise ImproperlyConfigured(f"ECHOMQ_DASHBOARD['PERMISSION'] must be 'app_label.codename', not {permission!r}")
    if not isinstance(read_only, bool):
        raise ImproperlyConfigured(f"ECHOMQ_DASHBOARD['READ_ONLY'] must be True or False, not {read_only!r}")
    return permission, read_only


def allowed(user: Any, permission: str | None) -> bool:
    if user is None or not getattr(user, "is_active", False):
        return False
    return bool(user.has_perm(permission)) if permission else bool(getattr(user, "is_staff", False))


def _app(read_only: bool) -> Dashboard:
    """This process's dashboard on the registry's client (a new one when the registry reconnected)."""
    registry = get_registry()
    client = registry.connection()
    key = (id(client), registry.prefix, read_only)
    with _lock:
        app = _apps.get(key)
        if app is None or app.client is not client:
            _apps.clear()
            secret = hmac.new(str(settings.SECRET_KEY).encode(), b"echomq.dashboard", hashlib.sha256).digest()
            app = _apps[key] = Dashboard(client, prefix=registry.prefix, read_only=read_only, secret=secret)
        return app


def dashboard(request: HttpRequest, rest: str = "") -> HttpResponse:
    permission, read_only = dashboard_settings()
    user = getattr(request, "user", None)
    if user is None:
        raise ImproperlyConfigured("the EchoMQ dashboard needs django.contrib.auth's AuthenticationMiddleware")
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not allowed(user, permission):
        return HttpResponseForbidden("you may not see the EchoMQ dashboard", content_type="text/plain")
    mount = request.path[: len(request.path) - len(rest)] if rest else request.path
    # the form as Django parsed it (urlencoded or multipart), handed on in the one encoding the app reads
    form = urlencode(list(request.POST.items())).encode() if request.method == "POST" else b""
    status, headers, body = call_wsgi(_app(read_only), request.environ, script_name=mount, path_info="/" + rest,
                                      body=form, extra={USER_KEY: user.get_username(),
                                                        "CONTENT_TYPE": "application/x-www-form-urlencoded"})
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() == "content-length":
            continue
        if name.lower() == "set-cookie":
            response.cookies.load(value)  # Django writes its cookies from here (and its test client reads them)
        else:
            response[name] = value
    return response


# the dashboard's own session-bound token guards every action (docs/dashboard.md)
view: Any = csrf_exempt(dashboard)

app_name = "echomq_dashboard"
urlpatterns = [re_path(r"^(?P<rest>.*)$", view, name="dashboard")]
