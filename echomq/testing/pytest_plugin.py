"""The pytest plugin of echomq.testing, registered as the ``echomq`` pytest11 entry point.

Inert unless used: it adds an option group and two markers, fixtures that do nothing until a
test asks for them, and one autouse fixture that costs a function call per test: the test's
isolation (``isolation.begin_test`` / ``end_test``). A Django or Flask project under test
(``echomq.contrib.host``) connects to a fresh fakeredis per test through it, or, on a real test
Redis, has every queue the test wrote to deleted afterwards. No hook touches collection or other
tests, and nothing imports redis, fakeredis or EchoMQ's subsystems until a fixture runs.

Fixtures:

* ``echomq_connection``: a fakeredis client on a server of its own (nothing shared between
  tests), or a real Redis when the test is marked ``@pytest.mark.echomq_real_redis`` or the run
  says ``--echomq-backend=real``. The real one is ``--echomq-redis-url`` /
  ``ECHOMQ_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); unreachable, the test fails.
  Afterwards every key of every queue a command of the test named (``<prefix>:{<queue>}:*``,
  whatever the prefix) is deleted from it, and nothing else: nothing is ever flushed.
* ``echomq_queue_name``: a queue name unique to the test; ``echomq_new_queue_name()`` makes
  more. Afterwards the keys of those queues (``emq:{name}:*``) are deleted from
  ``echomq_connection``.
* ``echomq_clock``: a ``FakeClock`` at 2030-01-01T00:00:00Z, or where
  ``@pytest.mark.echomq_clock("2027-03-28T00:00:00+01:00")`` says.
* ``echomq_queue``: ``Queue(echomq_connection, echomq_queue_name, clock=echomq_clock)``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import redis

    from ..queue.queue import Queue
    from .clock import FakeClock

#: Where the real Redis is, unless the option or the environment says otherwise.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

#: The FakeClock's start unless a marker says otherwise: a fixed instant, never today.
DEFAULT_CLOCK_START = "2030-01-01T00:00:00+00:00"

#: What the fakeredis fixtures say when fakeredis is not installed.
MISSING_FAKEREDIS = ("fakeredis is not installed: pip install 'echomq[testing]' "
                     "(or run on a real Redis: --echomq-backend=real)")

REAL_MARKER = "echomq_real_redis"
CLOCK_MARKER = "echomq_clock"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("echomq", "echomq.testing fixtures")
    group.addoption("--echomq-backend", choices=("fake", "real"), default=None,
                    help="what echomq_connection connects to: fakeredis (default) or a real Redis "
                         "(env ECHOMQ_TEST_BACKEND)")
    group.addoption("--echomq-redis-url", default=None,
                    help="the real Redis for echomq_connection (env ECHOMQ_TEST_REDIS_URL, default "
                         f"{DEFAULT_REDIS_URL})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{REAL_MARKER}: echomq_connection is a real Redis for this test")
    config.addinivalue_line("markers", f"{CLOCK_MARKER}(start): where echomq_clock starts (epoch ms or ISO 8601)")


def _wants_real(request: pytest.FixtureRequest) -> bool:
    if request.node.get_closest_marker(REAL_MARKER) is not None:
        return True
    backend = request.config.getoption("--echomq-backend") or os.environ.get("ECHOMQ_TEST_BACKEND") or "fake"
    if backend not in ("fake", "real"):
        raise pytest.UsageError(f"ECHOMQ_TEST_BACKEND={backend!r}: must be 'fake' or 'real'")
    return backend == "real"


def _redis_url(config: pytest.Config) -> str:
    return str(config.getoption("--echomq-redis-url") or os.environ.get("ECHOMQ_TEST_REDIS_URL") or DEFAULT_REDIS_URL)


@pytest.fixture(autouse=True)
def _echomq_isolation() -> Iterator[None]:
    """Each test on a Redis of its own, for the projects under test (``isolation``)."""
    from . import isolation

    isolation.begin_test()
    yield
    isolation.end_test()


@pytest.fixture
def echomq_connection(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """fakeredis by default, a real Redis on request (see the module doc); closed afterwards."""
    import redis

    from .isolation import QueueRecorder

    recorder: QueueRecorder | None = None
    if _wants_real(request):
        url = _redis_url(request.config)
        recorder = QueueRecorder()
        settings = redis.Redis.from_url(url, socket_connect_timeout=2)
        client = recorder.client(settings)  # a client with those settings whose commands are noted
        settings.close()
        try:
            client.ping()
        except redis.RedisError as exc:
            client.close()
            pytest.fail(f"echomq_connection: no real Redis at {url} ({exc}); start one or set --echomq-redis-url",
                        pytrace=False)
    else:
        try:
            import fakeredis
        except ImportError:  # not an install requirement: it comes with the testing extra
            pytest.fail(f"echomq_connection: {MISSING_FAKEREDIS}", pytrace=False)
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    if recorder is not None:
        recorder.clean()
    client.close()


def _unique_name(request: pytest.FixtureRequest) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in request.node.name[:40])
    return f"t-{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def echomq_new_queue_name(request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """Makes queue names unique to the test; their keys are deleted afterwards (only theirs)."""
    made: list[str] = []
    # Set up first when the test uses it, so that it is torn down after the cleanup below.
    client = request.getfixturevalue("echomq_connection") if "echomq_connection" in request.fixturenames else None

    def new_name() -> str:
        name = _unique_name(request)
        made.append(name)
        return name

    yield new_name
    if made and client is not None:
        _delete_keys(client, made)


def _delete_keys(client: Any, names: list[str]) -> None:
    import redis

    from ..protocol.keys import QueueKeys

    try:
        for name in names:
            batch = list(client.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=1000))
            for start in range(0, len(batch), 500):
                client.delete(*batch[start:start + 500])
    except redis.RedisError:  # the test may have stopped the server: nothing left to clean
        return


@pytest.fixture
def echomq_queue_name(echomq_new_queue_name: Callable[[], str]) -> str:
    """A queue name unique to this test (its keys are deleted afterwards)."""
    return echomq_new_queue_name()


@pytest.fixture
def echomq_clock(request: pytest.FixtureRequest) -> FakeClock:
    """A FakeClock at 2030-01-01T00:00:00Z, or at ``@pytest.mark.echomq_clock(start)``."""
    from .clock import FakeClock

    marker = request.node.get_closest_marker(CLOCK_MARKER)
    if marker is None:
        return FakeClock(DEFAULT_CLOCK_START)
    if len(marker.args) != 1 or marker.kwargs:
        raise pytest.UsageError(f"@pytest.mark.{CLOCK_MARKER}(start): give exactly one start, got {marker.args!r}")
    return FakeClock(marker.args[0])


@pytest.fixture
def echomq_queue(echomq_connection: redis.Redis, echomq_queue_name: str, echomq_clock: FakeClock) -> Queue:
    """A Queue on ``echomq_connection``, named ``echomq_queue_name``, on ``echomq_clock``."""
    from ..queue.queue import Queue

    return Queue(echomq_connection, echomq_queue_name, clock=echomq_clock)
