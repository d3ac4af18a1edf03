"""Cluster and Sentinel URLs (echomq/transport/urls.py): what each part means, and every bad URL
refused by name with its password masked, before anything connects."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from echomq.errors import InvalidInputError
from echomq.transport.connection import Connections, resolve_connection
from echomq.transport.urls import check_url, open_url, parse_topology_url, redact_url


@pytest.mark.parametrize(("url", "kind", "tls", "hosts", "user", "password", "service", "db"), [
    ("redis+cluster://h1:7000", "cluster", False, (("h1", 7000),), None, None, "", 0),
    ("rediss+cluster://u:p@h1:7000,h2,[::1]:7002/0", "cluster", True,
     (("h1", 7000), ("h2", 6379), ("::1", 7002)), "u", "p", "", 0),
    ("redis+sentinel://s1,s2:26380/mymaster", "sentinel", False, (("s1", 26379), ("s2", 26380)), None, None,
     "mymaster", 0),
    ("rediss+sentinel://:secret@s1:1/mymaster/3/", "sentinel", True, (("s1", 1),), None, "secret", "mymaster", 3),
], ids=["cluster", "cluster-tls-auth-ipv6", "sentinel", "sentinel-tls-db"])
def test_parts(url: str, kind: str, tls: bool, hosts: tuple[tuple[str, int], ...], user: str | None,
               password: str | None, service: str, db: int) -> None:
    parsed = parse_topology_url(url)
    assert (parsed.kind, parsed.tls, parsed.hosts, parsed.username, parsed.password, parsed.service, parsed.db) \
        == (kind, tls, hosts, user, password, service, db)


def test_options_go_to_the_data_connections_and_sentinel_auth_to_the_sentinels() -> None:
    parsed = parse_topology_url("redis+sentinel://s1/m?socket_timeout=2.5&sentinel_password=x&sentinel_username=y")
    assert parsed.options == {"socket_timeout": 2.5}
    assert parsed.sentinel_auth == {"sentinel_password": "x", "sentinel_username": "y"}


@pytest.mark.parametrize(("url", "says"), [
    ("http://h:1", "must start with"),
    ("redis+cluster://", "a host is missing"),
    ("redis+cluster://h1,,h2", "a host is missing"),
    ("redis+cluster://h1:notaport", "not a port number"),
    ("redis+cluster://h1:70000", "not a port number"),
    ("redis+cluster://h1/2", "database 0 only"),
    ("redis+cluster://h1?db=2", "database 0 only"),
    ("redis+cluster://h1?sentinel_password=x", r"sentinel_\* options"),
    ("redis+sentinel://s1", "name the Sentinel service"),
    ("redis+sentinel://s1/m/x", "must be a number"),
    ("redis+sentinel://s1/m/1/2", "unexpected path"),
    ("redis+sentinel://s1/m?socket_timeout=abc", "socket_timeout"),
    ("redis+sentinel://[::1/m", "bad host"),
    ("redis://h:notaport", "connection URL"),
])
def test_bad_urls_are_refused_by_name(url: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        check_url(url)


@pytest.mark.parametrize("url", [
    "redis+cluster://admin:hunter2@h1:bad",
    "redis+sentinel://admin:hunter2@s1/m/x",
    "redis+sentinel://s1:bad/m?sentinel_password=hunter2",
])
def test_a_refusal_never_shows_a_password(url: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_url(url)
    assert "hunter2" not in str(refused.value) and "***" in str(refused.value)


def test_redact_url_masks_every_password() -> None:
    assert redact_url("redis+sentinel://u:pw@s1,s2/m?sentinel_password=x&db=1") == \
        "redis+sentinel://u:***@s1,s2/m?sentinel_password=***&db=1"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"


def test_a_sentinel_url_builds_a_master_client_without_connecting() -> None:
    client, close = open_url("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster/2?sentinel_password=x")
    try:
        pool = client.connection_pool
        assert pool.service_name == "mymaster" and pool.is_master  # type: ignore[attr-defined]
        assert pool.connection_kwargs["db"] == 2
        sentinels = pool.sentinel_manager.sentinels  # type: ignore[attr-defined]
        assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [1, 2]
        assert sentinels[0].connection_pool.connection_kwargs["password"] == "x"
    finally:
        close()


def test_a_cluster_is_refused_where_no_queue_names_its_slot() -> None:
    with pytest.raises(InvalidInputError, match="served per queue"):
        resolve_connection("redis+cluster://127.0.0.1:1")
    with pytest.raises(InvalidInputError, match="served per queue"):
        resolve_connection(RedisCluster.__new__(RedisCluster))
    with pytest.raises(InvalidInputError, match=r"must be a redis\.Redis"):
        Connections(42)  # type: ignore[arg-type]
