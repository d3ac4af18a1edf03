"""The test rig: every Redis-touching test runs on a real Redis and on fakeredis.

Real Redis is found, in order, at ``REDIS_URL``, at 127.0.0.1:6379, or started here as a
throwaway ``redis-server`` on a free port (stopped at the end of the session). Under
``CI=true`` a missing real Redis fails the run instead of skipping.

``connection`` is a client on each backend (fakeredis in-process); ``server_url`` a URL of
each (fakeredis served over TCP), for what only takes a URL: the CLI, components that own the
client they build. ``redis_server_factory`` starts private servers a test may kill.

Tests isolate themselves with a unique queue name and delete that queue's keys afterwards;
nothing here ever flushes a database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import fakeredis
import pytest
import redis

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


from support.servers import RedisServer, free_port, ping


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a real Redis for this session (found or started)."""
    candidates = [os.environ.get("REDIS_URL"), "redis://127.0.0.1:6379/0"]
    for url in candidates:
        if url and ping(url):
            yield url
            return
    if shutil.which("redis-server") is None:
        message = "no real Redis: set REDIS_URL, run one on 127.0.0.1:6379, or install redis-server"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    with tempfile.TemporaryDirectory(prefix="echomq-redis-") as tmp:
        server = RedisServer(free_port(), Path(tmp), persistent=False).start()
        try:
            yield server.url
        finally:
            server.stop()


@pytest.fixture
def redis_server_factory() -> Iterator[callable]:  # type: ignore[valid-type]
    """Start private redis-servers (persistence on) that a test may kill and restart."""
    servers: list[RedisServer] = []
    dirs: list[tempfile.TemporaryDirectory[str]] = []
    if shutil.which("redis-server") is None:
        if IN_CI:
            pytest.fail("redis-server is not installed")
        pytest.skip("redis-server is not installed")

    def make(persistent: bool = True) -> RedisServer:
        tmp = tempfile.TemporaryDirectory(prefix="echomq-redis-")
        dirs.append(tmp)
        server = RedisServer(free_port(), Path(tmp.name), persistent=persistent).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
    for tmp in dirs:
        tmp.cleanup()


@pytest.fixture(scope="session")
def fake_redis_url() -> Iterator[str]:
    """A fakeredis server on a TCP port of its own, for the whole session."""
    server = fakeredis.TcpFakeServer(("127.0.0.1", 0), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, name="fakeredis-tcp", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"redis://{host}:{port}/0"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["real", "fake"])
def server_url(request: pytest.FixtureRequest) -> str:
    """A URL of a real Redis, then of fakeredis served over TCP."""
    return str(request.getfixturevalue("redis_url" if request.param == "real" else "fake_redis_url"))


@pytest.fixture
def url_connection(server_url: str) -> Iterator[redis.Redis]:
    """A client on ``server_url`` (the test's own view of that server)."""
    client = redis.Redis.from_url(server_url)
    yield client
    client.close()


def _delete_queue_keys(client: redis.Redis, prefix: str, queue_name: str) -> None:
    pattern = f"{prefix}:\\{{{queue_name}\\}}:*"
    batch = list(client.scan_iter(match=pattern, count=1000))
    for start in range(0, len(batch), 500):
        client.delete(*batch[start : start + 500])


@pytest.fixture
def real_connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(params=["real", "fake"])
def connection(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A client on real Redis, then on fakeredis: the same test runs on both."""
    if request.param == "real":
        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url)
    else:
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


@pytest.fixture
def backend(connection: redis.Redis) -> str:
    """"real" or "fake", for the rare assertion that differs (e.g. cjson escaping)."""
    return "fake" if type(connection).__module__.startswith("fakeredis") else "real"


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique queue name; the queue's keys are deleted afterwards on the test's connection."""
    name = f"t-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
    name = name.replace(":", "-").replace("{", "").replace("}", "")
    yield name
    for fixture in ("connection", "real_connection", "url_connection"):
        if fixture in request.fixturenames:
            client = request.getfixturevalue(fixture)
            with contextlib.suppress(redis.RedisError):
                _delete_queue_keys(client, "emq", name)
