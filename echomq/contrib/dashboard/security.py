"""The dashboard's session and its action token (docs/dashboard.md, "Security").

A browser gets a random session id in an HttpOnly, SameSite=Strict cookie on its first page;
every action form carries a token that is an HMAC of that id under the app's secret. A POST
whose token does not match its own cookie's (a forged form on another site, a replayed form
of another session, no token at all) is refused with 403 before anything is read or changed.
The secret is random per app unless given: restarting the app ends every session's tokens,
which costs a reload of the page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

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
