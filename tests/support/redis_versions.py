"""Which Redis a test talks to, and the ``min_redis`` marker for the few features that need 7.0.

EchoMQ runs on Redis 6.2+; what needs a newer server says so in the docs (gap detection needs
XINFO STREAM's ``entries-added``, docs/events.md; the ACL preflight needs
``redis.acl_check_cmd``, docs/security.md). Their tests carry
``@pytest.mark.min_redis(7, 0, reason="...")`` and skip on an older server only: the
:func:`min_redis_gate` fixture (autouse, through tests/conftest.py) reads the version of the
server the test is given (its ``connection``, ``real_connection`` or ``url_connection``, else
the session's ``redis_url``) from ``INFO server``, or asks the ``redis-server`` on PATH for a
test that starts servers of its own (``redis_server_factory``). A fakeredis client answers with the version
its FakeServer emulates. Anything not marked runs on every server, 6.2 included
(``make matrix`` runs the Redis-touching subset on a 6.2).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import redis

#: The fixtures, in order of preference, whose server a marked test is about.
CLIENT_FIXTURES = ("connection", "real_connection", "url_connection")


def parse_version(text: str) -> tuple[int, ...]:
    """``"6.2.5"`` -> ``(6, 2, 5)``; a suffix (``"7.2.4-rc1"``) is dropped."""
    numbers: list[int] = []
    for piece in text.split("."):
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def server_version(client: redis.Redis) -> tuple[int, ...]:
    """The version of the server behind ``client``: ``INFO server``'s ``redis_version``, or for a
    fakeredis client (which has no INFO) the version its FakeServer emulates."""
    if type(client).__module__.startswith("fakeredis"):
        server = client.connection_pool.connection_kwargs.get("server")
        return tuple(getattr(server, "version", (7, 0)))
    info = client.info("server")
    if "redis_version" not in info:  # a RedisCluster answers per node: the oldest node counts
        return min(parse_version(str(node["redis_version"])) for node in info.values())
    return parse_version(str(info["redis_version"]))


def binary_version(binary: str = "redis-server") -> tuple[int, ...]:
    """The version of the ``redis-server`` on PATH (what ``redis_server_factory`` starts)."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=True)
    return parse_version(done.stdout.split(" v=", 1)[1].split()[0])


def _version_for(request: pytest.FixtureRequest) -> tuple[int, ...]:
    for name in CLIENT_FIXTURES:
        if name in request.fixturenames:
            return server_version(request.getfixturevalue(name))
    if "redis_server_factory" in request.fixturenames:
        return binary_version()
    client = redis.Redis.from_url(str(request.getfixturevalue("redis_url")))
    try:
        return server_version(client)
    finally:
        client.close()


@pytest.fixture(autouse=True)
def min_redis_gate(request: pytest.FixtureRequest) -> Iterator[None]:
    """Skip a ``min_redis(major, minor, reason=...)`` test on a server older than that."""
    marker = request.node.get_closest_marker("min_redis")
    if marker is not None:
        minimum = tuple(int(part) for part in marker.args)
        version = _version_for(request)
        if version < minimum:
            wanted = ".".join(map(str, minimum))
            pytest.skip(f"needs Redis {wanted}+ ({marker.kwargs.get('reason', 'see the docs')}); "
                        f"this server is {'.'.join(map(str, version))}")
    yield
