"""The test rig: every Redis-touching test runs on a real Redis and on fakeredis.

Real Redis is found, in order, at ``REDIS_URL``, at 127.0.0.1:6379, or started here as a
throwaway ``redis-server`` on a free port (stopped at the end of the session). Under
``CI=true`` a missing real Redis fails the run instead of skipping.

``connection`` is a client on each backend (fakeredis in-process); ``server_url`` a URL of
each (fakeredis served over TCP), for what only takes a URL: the CLI, components that own the
client they build. ``redis_server_factory`` starts private servers a test may kill.

Tests isolate themselves with a unique queue name and delete that queue's keys afterwards;
nothing here ever flushes a database.

Production topologies (tests/support/topologies.py), started from the machine's redis-server
only when a test asks for them, so ``pytest tests/unit`` starts nothing (about 2 s each):

- ``redis_cluster``: a shared Redis Cluster (3 masters, 1 replica each) for the session;
  ``cluster_connection`` a ``redis.cluster.RedisCluster`` on it. Never kill its nodes.
- ``redis_sentinel``: a shared Sentinel setup (master, replica, 3 sentinels, service
  ``echomq``); ``sentinel_connection`` its ``Sentinel(...).master_for("echomq")`` client.
- ``cluster_factory`` / ``sentinel_factory``: private ones for a test that kills, restarts or
  fails over nodes (``extra=["min-replicas-to-write 1"]`` adds config lines), stopped after it.
- ``connection`` has a third param, "cluster" (a RedisCluster on ``redis_cluster``), kept only
  in the modules of ``CLUSTER_MODULES`` (minus ``NOT_ON_CLUSTER``): the contract tests that make
  sense on a cluster. Elsewhere the ids stay ``[real]`` and ``[fake]``.

Under ``CI=true`` a missing redis-server or redis-cli fails those tests instead of skipping.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import fakeredis
import pytest
import redis
from redis.cluster import RedisCluster

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


from support.fake_tcp import tcp_fake_server
from support.queue_keys import delete_queue_keys
from support.redis_versions import min_redis_gate  # noqa: F401  (autouse: the min_redis marker)
from support.servers import RedisServer, free_port, ping
from support.topologies import Cluster, SentinelSetup, binaries_missing

#: Integration modules whose contract tests also run on the shared Redis Cluster ("cluster"
#: backend). Left out: modules that test one server's internals (test_connections counts a
#: server's clients, test_pipelining, test_maintenance and test_scheduler_repair drive the
#: internal pinned/maintenance classes with the raw client) and the CLI (it takes URLs).
CLUSTER_MODULES = frozenset({
    "test_bulk_retry", "test_clock", "test_global_limits", "test_job", "test_job_edits", "test_job_metrics",
    "test_job_retry", "test_lifecycle_events", "test_prometheus", "test_queue", "test_queue_admin",
    "test_queue_events", "test_queue_events_lifecycle", "test_queue_hardening", "test_queue_lifecycle",
    "test_registry", "test_repeat_options", "test_scheduler", "test_scheduler_hardening",
    "test_scheduler_operate", "test_scheduler_pattern", "test_scheduler_worker", "test_schedules_sync", "test_scripts",
    "test_stored_options", "test_untrusted_data", "test_wait_until_finished", "test_worker",
    "test_worker_burst", "test_worker_hardening", "test_worker_listeners", "test_worker_log_lines",
    "test_worker_routing", "test_worker_scheduler", "test_whole_writes", "test_host_sync", "test_host_keeper",
    "test_dashboard",
})

#: Tests of those modules that stay on real and fake only, and why: what they do with the test's
#: own client is something a RedisCluster client cannot do, not something EchoMQ gets wrong.
NOT_ON_CLUSTER = {
    "test_worker::test_a_decode_responses_client_works_too": "builds a client from connection.connection_pool",
    "test_worker::test_several_workers_share_a_queue_each_job_once": "seeds through a ClusterPipeline: no EVAL",
    "test_queue_hardening::test_workers_of_another_queue_are_not_listed": "its CLIENT LIST asks one random node",
    "test_queue_lifecycle::test_flow_with_a_child_in_another_queue": "two queues in two slots: refused on a cluster",
    # these drive the internal script runner or Transitions with the test's client; a component
    # hands them the client of its slot's owner, a RedisCluster has no connection_pool for them
    **dict.fromkeys([
        "test_bulk_retry::test_the_scripts_refuse_bad_arguments_themselves_writing_nothing",
        "test_job_metrics::test_move_to_finished_refuses_bad_data_points_before_writing",
        "test_scheduler_hardening::test_the_update_script_refuses_a_bad_tick_before_its_first_write",
        "test_scheduler_hardening::test_the_add_script_refuses_bad_options_before_its_first_write",
        "test_scripts::test_includes_are_inlined_once_and_nested",
        "test_scripts::test_a_script_directive_runs_another_script_with_its_own_keys_and_args",
        "test_scripts::test_noscript_reloads_transparently_on_every_path",
        "test_scripts::test_a_flush_between_the_reload_and_the_call_is_survived",
        "test_queue_hardening::test_finishing_a_job_that_is_not_active_is_refused_and_keeps_the_lock",
        "test_lifecycle_events::test_queue_events_sees_every_event_type",
        "test_worker_listeners::test_stalled_is_told_once_by_the_worker_whose_check_found_it",
        "test_worker_listeners::test_a_listener_raising_in_every_hook_changes_nothing_and_is_logged_once_per_hook",
        "test_worker_listeners::test_a_slow_listener_on_a_stall_does_not_delay_lock_renewal",
        "test_prometheus::test_the_listeners_counters_and_histogram_after_a_known_workload",
    ], "runs an internal (run_script, Transitions) on the raw RedisCluster"),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the "cluster" param of ``connection`` only in CLUSTER_MODULES, minus NOT_ON_CLUSTER.

    The fixture itself has the three params, so every other id stays what it was; the cluster
    items elsewhere are dropped here, before anything reports them.
    """
    def on_cluster(item: pytest.Item) -> bool:
        module = item.module.__name__.rpartition(".")[2] if isinstance(item, pytest.Function) else ""
        name = item.originalname if isinstance(item, pytest.Function) else ""
        return module in CLUSTER_MODULES and f"{module}::{name}" not in NOT_ON_CLUSTER

    def backend(item: pytest.Item) -> object:
        return getattr(getattr(item, "callspec", None), "params", {}).get("connection")

    items[:] = [item for item in items if backend(item) != "cluster" or on_cluster(item)]
    items.sort(key=_start_early)


#: Folders whose tests take seconds each (servers started, failed over, killed; subprocesses):
#: run first, so that under pytest-xdist (``--dist worksteal``) the short tests fill the end of
#: the run, where an idle worker steals them, instead of one finishing a failover test alone.
LONG_RUNNING_FOLDERS = ("topology", "faults", "django", "flask", "security", "docs", "testing", "browser")


def _start_early(item: pytest.Item) -> int:
    """The sort key of ``item``: its folder's place in LONG_RUNNING_FOLDERS, the rest after (a
    stable sort keeps every folder's own order)."""
    folder = Path(str(item.fspath)).parent.name
    return LONG_RUNNING_FOLDERS.index(folder) if folder in LONG_RUNNING_FOLDERS else len(LONG_RUNNING_FOLDERS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Make a report sendable: tests that feed lone surrogates to the library may see them in a
    failure's text or a captured log, and pytest-xdist's workers (execnet) can send only text
    that encodes to UTF-8; unescaped, one such report would crash the worker and the run."""
    outcome = yield
    report = outcome.get_result()
    if report.longrepr is not None and not _encodes(str(report.longrepr)):
        report.longrepr = _escaped(str(report.longrepr))
    report.sections = [(title, content if _encodes(content) else _escaped(content))
                       for title, content in report.sections]


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
    server = tcp_fake_server(("127.0.0.1", 0))
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


@pytest.fixture
def real_connection(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(params=["real", "fake", "cluster"])
def connection(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A client on real Redis, then on fakeredis (and in CLUSTER_MODULES on a Redis Cluster)."""
    if request.param == "real":
        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url)
    elif request.param == "cluster":
        client = request.getfixturevalue("redis_cluster").client()
    else:
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


@pytest.fixture
def backend(connection: redis.Redis) -> str:
    """"real", "fake" or "cluster", for the rare assertion that differs (e.g. cjson escaping)."""
    if isinstance(connection, RedisCluster):
        return "cluster"
    return "fake" if type(connection).__module__.startswith("fakeredis") else "real"


def _require_topology_binaries() -> None:
    missing = binaries_missing()
    if missing:
        message = f"{' and '.join(missing)} not installed: no Redis Cluster or Sentinel can be started"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """A Redis Cluster shared by the session: 3 masters, 1 replica each. Never kill its nodes."""
    _require_topology_binaries()
    with Cluster() as cluster:
        yield cluster


@pytest.fixture
def cluster_connection(redis_cluster: Cluster) -> Iterator[RedisCluster]:
    client = redis_cluster.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[SentinelSetup]:
    """A Sentinel setup shared by the session (master, replica, 3 sentinels). Never fail it over."""
    _require_topology_binaries()
    with SentinelSetup() as setup:
        yield setup


@pytest.fixture
def sentinel_connection(redis_sentinel: SentinelSetup) -> Iterator[redis.Redis]:
    client = redis_sentinel.client()
    yield client
    client.close()


@pytest.fixture
def cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """Start private clusters (``Cluster(**kwargs)``) a test may break; all stopped after it."""
    _require_topology_binaries()
    with contextlib.ExitStack() as stack:
        yield lambda **kwargs: stack.enter_context(Cluster(**kwargs))


@pytest.fixture
def sentinel_factory() -> Iterator[Callable[..., SentinelSetup]]:
    """Start private Sentinel setups (``SentinelSetup(**kwargs)``) a test may fail over; stopped after it."""
    _require_topology_binaries()
    with contextlib.ExitStack() as stack:
        yield lambda **kwargs: stack.enter_context(SentinelSetup(**kwargs))


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's Chromium under Playwright, one per test session (tests/support/browser.py).

    Playwright's sync API keeps an asyncio loop running in this thread while it lives, so
    Django's guard against sync ORM calls from async code (SynchronousOnlyOperation) would take
    every later Django test of this process for async code: the guard is off while the browser
    lives (Playwright's and Django's documented remedy), and back on after."""
    from support.browser import launched

    with pytest.MonkeyPatch.context() as patch, launched() as chromium:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield chromium


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
                delete_queue_keys(client, name)
