"""The TLS host-name rule (echomq/transport/tls.py), whatever redis-py is installed.

No server: what is checked is the settings a client is built with, which is what decides the
handshake (tests/security/test_tls.py checks the handshakes themselves, on real servers).
"""

from __future__ import annotations

import logging
import ssl

import pytest
import redis

from echomq.transport import tls

CA = "/nonexistent/ca.pem"  # never read: no connection is made


def built(url: str) -> redis.connection.Connection:
    """The connection a client built the way EchoMQ builds one from ``url`` would open."""
    client = redis.Redis.from_url(url, **tls.url_client_options(url))
    return client.connection_pool.make_connection()


def test_a_rediss_url_checks_the_host_name_on_every_redis_py() -> None:
    conn = built(f"rediss://db.example:6380/0?ssl_ca_certs={CA}")
    assert isinstance(conn, redis.SSLConnection)
    assert conn.check_hostname is True and conn.cert_reqs == ssl.CERT_REQUIRED


@pytest.mark.parametrize("query, check", [
    ("ssl_check_hostname=false", False),
    ("ssl_check_hostname=False", False),
    ("ssl_check_hostname=true", True),
])
def test_what_the_url_says_about_the_host_name_is_what_is_used(query: str, check: bool) -> None:
    assert built(f"rediss://db.example:6380/0?ssl_ca_certs={CA}&{query}").check_hostname is check


@pytest.mark.parametrize("scheme", ["rediss+cluster", "rediss+sentinel", "REDISS"])
def test_every_tls_scheme_gets_the_host_name_check(scheme: str) -> None:
    assert tls.url_client_options(f"{scheme}://a:1,b:2/echomq?ssl_ca_certs={CA}") == {"ssl_check_hostname": True}


def test_a_url_without_verification_gets_no_host_name_check_python_would_refuse() -> None:
    # ssl refuses check_hostname with CERT_NONE; the URL asked for no verification at all.
    assert tls.url_client_options("rediss://db.example:6380/0?ssl_cert_reqs=none") == {}


@pytest.mark.parametrize("url", ["redis://db.example:6379/0", "unix:///tmp/redis.sock"])
def test_a_plain_url_gets_no_tls_settings(url: str) -> None:
    assert tls.url_client_options(url) == {}
    assert not isinstance(built(url), redis.SSLConnection)


def test_a_tls_client_that_does_not_check_host_names_is_named_when_that_is_redis_pys_default(
        caplog: pytest.LogCaptureFixture) -> None:
    unchecked = redis.Redis(host="db.example", ssl=True, ssl_ca_certs=CA, ssl_check_hostname=False)
    caplog.set_level(logging.WARNING, logger="echomq.transport.tls")
    tls.warn_if_unchecked(unchecked)
    tls.warn_if_unchecked(unchecked)  # once per client
    warnings = [r.getMessage() for r in caplog.records]
    if tls.checks_hostname_by_default():
        assert warnings == []  # on redis-py 6+, False here can only be the caller's choice
    else:
        assert len(warnings) == 1
        assert "ssl_check_hostname=True" in warnings[0] and "db.example" in warnings[0]
    # The caller's client is never changed.
    assert unchecked.connection_pool.connection_kwargs["ssl_check_hostname"] is False


def test_a_checked_plain_or_unverified_client_gets_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="echomq.transport.tls")
    for client in (redis.Redis(host="db.example", ssl=True, ssl_ca_certs=CA, ssl_check_hostname=True),
                   redis.Redis(host="db.example"),
                   redis.Redis(host="db.example", ssl=True, ssl_cert_reqs="none", ssl_check_hostname=False)):
        tls.warn_if_unchecked(client)
    assert caplog.records == []


def test_the_default_matches_the_installed_redis_py() -> None:
    # redis-py 6.0 changed the default (docs/security.md); the rule must know which side it is on.
    default = redis.Redis(host="db.example", ssl=True).connection_pool.connection_kwargs.get("ssl_check_hostname")
    assert bool(default) is tls.checks_hostname_by_default()
