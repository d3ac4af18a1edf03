"""The TLS rule for the clients EchoMQ builds: the server's certificate must name the host.

redis-py 6.0 made ``ssl_check_hostname=True`` the default; before it (redis-py 5.x, which the
package admits) a ``rediss://`` URL verified only that the certificate chains to a trusted CA,
so any certificate that CA ever signed, for any host, was accepted: whoever holds one can stand
in for the server and read the ``AUTH`` password. EchoMQ's promise is that verification is on
(docs/security.md, "Verification is on: keep it on"), whatever redis-py release is installed.

- A URL EchoMQ turns into a client: :func:`url_client_options` adds ``ssl_check_hostname=True``
  to a ``rediss://`` URL that does not say otherwise. A URL that says
  ``ssl_check_hostname=false``, or ``ssl_cert_reqs=none`` (no verification at all, which Python
  cannot combine with a host name check), is taken as written.
- A client the caller built stays the caller's: EchoMQ never changes its settings. On redis-py
  before 6.0 an unchecked host name there is usually redis-py's default, not a choice (the two
  cannot be told apart), so :func:`warn_if_unchecked` logs one WARNING per client naming the fix.
"""

from __future__ import annotations

import logging
import ssl
import threading
import weakref
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis

log = logging.getLogger(__name__)

#: The first redis-py release that checks host names by default.
HOSTNAME_CHECK_DEFAULT_SINCE = (6, 0)

#: How ``ssl_cert_reqs`` says "no verification" (a URL gives a string, a client may hold either).
_NO_VERIFICATION = ("none", ssl.CERT_NONE)

_warned: weakref.WeakSet[redis.Redis] = weakref.WeakSet()
_warned_lock = threading.Lock()


def _redis_py_version() -> tuple[int, ...]:
    parts: list[int] = []
    for piece in redis.__version__.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def checks_hostname_by_default() -> bool:
    """True when the installed redis-py checks TLS host names unless told not to (6.0+)."""
    return _redis_py_version() >= HOSTNAME_CHECK_DEFAULT_SINCE


def url_client_options(url: str) -> dict[str, Any]:
    """Keyword arguments for ``redis.Redis.from_url(url, **url_client_options(url))``.

    ``{"ssl_check_hostname": True}`` for a TLS URL (``rediss://``, ``rediss+cluster://``,
    ``rediss+sentinel://``) whose query names neither ``ssl_check_hostname`` nor
    ``ssl_cert_reqs=none``; nothing otherwise (a ``redis://`` or ``unix://`` connection takes no
    TLS settings at all). A setting in the URL's query wins over these keyword arguments in
    redis-py, so what the URL says is always what is used.
    """
    parts = urlsplit(url)
    if parts.scheme.lower().split("+", 1)[0] != "rediss":
        return {}
    query = {name.lower(): values for name, values in parse_qs(parts.query).items()}
    if "ssl_check_hostname" in query:
        return {}
    if any(value.strip().lower() == "none" for value in query.get("ssl_cert_reqs", [])):
        return {}
    return {"ssl_check_hostname": True}


def warn_if_unchecked(client: redis.Redis) -> None:
    """Log one WARNING for a caller's TLS client that verifies certificates but not host names,
    on a redis-py whose default is not to check them (before 6.0); nothing otherwise.

    On redis-py 6.0+ an unchecked host name can only be the caller's explicit choice, and a
    client without verification (``ssl_cert_reqs=none``) has a bigger problem that
    docs/security.md warns about: neither is second-guessed here.
    """
    if checks_hostname_by_default():
        return
    pool = getattr(client, "connection_pool", None)
    connection_class = getattr(pool, "connection_class", None)
    if not (isinstance(connection_class, type) and issubclass(connection_class, redis.SSLConnection)):
        return
    kwargs = getattr(pool, "connection_kwargs", {})
    if kwargs.get("ssl_check_hostname", False) or kwargs.get("ssl_cert_reqs", "required") in _NO_VERIFICATION:
        return
    with _warned_lock:
        if client in _warned:
            return
        _warned.add(client)
    log.warning(
        "TLS client %r does not check the server certificate's host name (redis-py %s's default): "
        "any certificate your CA signed, for any host, is accepted; pass ssl_check_hostname=True "
        "(docs/security.md)", client, redis.__version__)
