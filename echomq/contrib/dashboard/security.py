"""The dashboard's session and its action token (docs/dashboard.md, "Security").

A browser gets a random session id in an HttpOnly, SameSite=Strict cookie on its first page;
every action form carries a token that is an HMAC of that id under the app's secret. A POST
whose token does not match its own cookie's (a forged form on another site, a replayed form
of another session, no token at all) is refused with 403 before anything is read or changed.
The secret is random per app unless given: restarting the app ends every session's tokens,
which costs a reload of the page.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Any

from .http import StartResponse, WSGIApp

COOKIE_NAME = "echomq_dashboard_session"


class Tokens:
    """Session ids and the tokens bound to them, under one secret."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    @staticmethod
    def new_session() -> str:
        return secrets.token_urlsafe(24)

    def token_for(self, session: str) -> str:
        return hmac.new(self._secret, session.encode("utf-8"), hashlib.sha256).hexdigest()

    def valid(self, session: str | None, token: str | None) -> bool:
        """Whether ``token`` is the token of ``session`` (both present; compared in constant time)."""
        if not session or not token:
            return False
        return hmac.compare_digest(self.token_for(session), token)


def session_cookie(session: str, path: str, *, secure: bool) -> str:
    """The Set-Cookie value: scoped to the mount, unreadable from script, never sent cross-site."""
    return (f"{COOKIE_NAME}={session}; Path={path or '/'}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def basic_auth(app: WSGIApp, user: str, password: str, realm: str = "EchoMQ dashboard") -> WSGIApp:
    """``app`` behind HTTP Basic authentication (for ``echomq dashboard --basic-auth``; put TLS in
    front of it beyond localhost): a request without the right credentials gets 401 and never
    reaches the app; one with them reaches it with ``REMOTE_USER`` set, the name actions log."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        given = str(environ.get("HTTP_AUTHORIZATION", ""))
        if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode()):
            body = b"sign in to see the dashboard"
            start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                                ("Content-Length", str(len(body))),
                                                ("WWW-Authenticate", f'Basic realm="{realm}", charset="UTF-8"')])
            return [body]
        return app({**environ, "REMOTE_USER": user}, start_response)

    return guarded
