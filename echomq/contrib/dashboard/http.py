"""The little HTTP the dashboard needs, on plain WSGI: a request read from the environ, a
response with the security headers every answer carries, and a way for a framework mount to
call the app with its own request.

No framework: the standalone server is the standard library's, and a Django or Flask mount
hands its request over as a WSGI environ (``call_wsgi``), so one app serves all three.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

#: What every answer says about itself: only the app's own files, no framing, no sniffing,
#: no referrer (a job id in a URL is nobody else's business).
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)

#: A form bigger than this is refused (every form of the dashboard is a few fields).
MAX_FORM_BYTES = 64 * 1024

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


@dataclass
class Request:
    """One request: method, path under the app's mount, query and form fields, cookies."""

    method: str
    path: str
    script_name: str
    query: dict[str, str]
    form: dict[str, str]
    cookies: dict[str, str]
    remote_addr: str
    environ: dict[str, Any] = field(repr=False)

    @classmethod
    def from_environ(cls, environ: dict[str, Any]) -> Request:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        form: dict[str, str] = {}
        if method == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if 0 < length <= MAX_FORM_BYTES:
                body = environ["wsgi.input"].read(length)
                form = _fields(body.decode("utf-8", "replace"))
        cookies: dict[str, str] = {}
        try:
            jar = SimpleCookie(str(environ.get("HTTP_COOKIE", "")))
            cookies = {name: morsel.value for name, morsel in jar.items()}
        except CookieError:
            pass
        return cls(method, _wsgi_text(environ.get("PATH_INFO", "")) or "/",
                   _wsgi_text(environ.get("SCRIPT_NAME", "")).rstrip("/"),
                   _fields(str(environ.get("QUERY_STRING", ""))), form, cookies,
                   str(environ.get("REMOTE_ADDR", "")), environ)

    def url(self, path: str, **query: Any) -> str:
        """An absolute path under the app's mount, with the query given (None values left out)."""
        kept = {k: v for k, v in query.items() if v is not None}
        return self.script_name + path + ("?" + urlencode(kept) if kept else "")


def _wsgi_text(value: Any) -> str:
    """PEP 3333 hands paths as latin-1 decoded bytes: read them back as the UTF-8 they were."""
    raw = str(value)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def _fields(encoded: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(encoded, keep_blank_values=True).items()}


@dataclass
class Response:
    """An answer; ``headers`` are added to the security headers."""

    body: bytes | str
    status: str = "200 OK"
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        payload = self.body.encode("utf-8") if isinstance(self.body, str) else self.body
        start_response(self.status, [("Content-Type", self.content_type), ("Content-Length", str(len(payload))),
                                     *SECURITY_HEADERS, *self.headers])
        return [payload]


def redirect(location: str, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(b"", "303 See Other", "text/plain; charset=utf-8", [("Location", location), *(headers or [])])


def call_wsgi(app: WSGIApp, environ: dict[str, Any], *, script_name: str, path_info: str, body: bytes,
              extra: Mapping[str, Any] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run ``app`` on a copy of a framework's ``environ``, mounted at ``script_name`` and asked
    for ``path_info``, with ``body`` as its input (the framework may have read the stream
    already); returns (status code, headers, body)."""
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        answer["status"], answer["headers"] = status, headers

    inner = {**environ, "SCRIPT_NAME": script_name.rstrip("/"), "PATH_INFO": path_info,
             "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), **(extra or {})}
    chunks = app(inner, start_response)
    payload = b"".join(chunks)
    return int(str(answer["status"]).split()[0]), list(answer["headers"]), payload
