"""The pytest plugin: registered by the package's entry point, inert unless its fixtures are
used, fakeredis by default and a real Redis on request, cleaning up every queue the test wrote
to, the application's included, and nothing else.

Each case runs pytest in a fresh process (pytester), as a user's suite would run it.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from support.queue_keys import SCAN_COUNT
from support.servers import free_port

pytest_plugins = ["pytester"]

USING_THE_FIXTURES = '''
import pytest
from echomq import JobScheduler
from echomq.testing import FakeClock, advance_time, run_until_idle


def test_defaults(echomq_connection, echomq_queue, echomq_clock):
    assert type(echomq_connection).__module__.startswith("fakeredis")
    assert echomq_connection.dbsize() == 0  # a server of its own
    assert isinstance(echomq_clock, FakeClock) and echomq_clock.datetime().isoformat() == "2030-01-01T00:00:00+00:00"
    assert echomq_queue.clock is echomq_clock and echomq_queue.client is echomq_connection
    echomq_queue.add("x")
    assert run_until_idle(echomq_queue, lambda job: "done").outcomes() == ["completed"]


def test_isolated_from_the_previous_test(echomq_connection):
    assert echomq_connection.dbsize() == 0


@pytest.mark.echomq_clock("2027-03-27T12:00:00+01:00")
def test_the_clock_marker_and_more_names(echomq_queue, echomq_clock, echomq_new_queue_name):
    other = echomq_new_queue_name()
    assert other != echomq_queue.name and other.startswith("t-test_the_clock_marker")
    JobScheduler(echomq_queue.client, echomq_queue.name, clock=echomq_clock).upsert(
        "nightly", {"pattern": "0 2 * * *", "tz": "Europe/Berlin"}, "report")
    nights = advance_time(echomq_clock, echomq_queue, lambda job: None, hours=24)
    assert nights.wall_times() == ["2027-03-28T03:00:00+02:00"]
'''

ON_REAL_REDIS = '''
import os

import pytest
from echomq import JobScheduler, Queue, Worker


@pytest.mark.echomq_real_redis
def test_real(echomq_connection, echomq_queue, request):
    assert not type(echomq_connection).__module__.startswith("fakeredis")
    echomq_queue.add("x")
    assert echomq_connection.exists(echomq_queue.keys.job("1"))
    with open("NAME", "w") as out:
        out.write(echomq_queue.name)
    # The application's own queue, under its own prefix, not made by echomq_queue_name.
    app = Queue(echomq_connection, os.environ["APP_QUEUE"], prefix=os.environ["APP_PREFIX"])
    app.add("welcome", {"to": "ada@example.com"})
    JobScheduler(echomq_connection, app.name, prefix=app.prefix).upsert("tick", {"every": 60000})
    with Worker(echomq_connection, app.name, lambda job: "done", prefix=app.prefix) as worker:
        pass  # a Worker's own connections (copies of the fixture's) write too
'''


def test_the_plugin_is_registered_and_inert_unless_used(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain='''
import sys

def test_untouched(request):
    assert not [name for name in request.fixturenames if name.startswith("echomq")]
    loaded = sorted(m for m in sys.modules if m.startswith("echomq."))
    assert loaded == ["echomq._version", "echomq.testing", "echomq.testing.isolation",
                      "echomq.testing.pytest_plugin"], loaded
    assert "redis" not in sys.modules
    assert "fakeredis" not in sys.modules
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trace-config")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*registered*echomq.testing.pytest_plugin*"])
    listed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fixtures")
    shown = listed.stdout.str()
    assert all(f"{name} -- " in shown for name in ("echomq_connection", "echomq_queue_name", "echomq_new_queue_name",
                                                  "echomq_queue", "echomq_clock"))
    helped = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--help")
    helped.stdout.fnmatch_lines(["*--echomq-backend*", "*--echomq-redis-url*"])


def test_the_fixtures_on_fakeredis(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fixtures=USING_THE_FIXTURES)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize("how", ["marker", "option"])
def test_a_real_redis_on_request_and_every_queue_the_test_wrote_cleaned(pytester: pytest.Pytester, redis_url: str,
                                                               how: str) -> None:
    neighbour = redis.Redis.from_url(redis_url)
    stranger = f"emq:{{outsider-{uuid.uuid4().hex[:8]}}}:meta"
    neighbour.set(stranger, "not the test's")
    app_prefix, app_queue = f"app{uuid.uuid4().hex[:8]}", "orders"
    next_door = f"{app_prefix}:{{billing}}:meta"  # the application's other queue: the test never named it
    neighbour.set(next_door, "kept")
    try:
        pytester.makepyfile(test_real=ON_REAL_REDIS if how == "marker" else ON_REAL_REDIS.replace(
            "@pytest.mark.echomq_real_redis\n", ""))
        args = ["-p", "no:cacheprovider", f"--echomq-redis-url={redis_url}"]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("APP_PREFIX", app_prefix)
            patch.setenv("APP_QUEUE", app_queue)
            result = pytester.runpytest_subprocess(*args, *(["--echomq-backend=real"] if how == "option" else []))
        result.assert_outcomes(passed=1)
        name = (pytester.path / "NAME").read_text()
        assert list(neighbour.scan_iter(match=f"emq:{{{name}}}:*", count=SCAN_COUNT)) == []
        found = neighbour.scan_iter(match=f"{app_prefix}:*", count=SCAN_COUNT)
        assert sorted(key.decode() for key in found) == [next_door]
        assert neighbour.get(stranger) == b"not the test's"
    finally:
        neighbour.delete(stranger, next_door)
        neighbour.close()


def test_an_unreachable_real_redis_fails_the_test_saying_where(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_real=ON_REAL_REDIS)
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--echomq-redis-url={url}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*no real Redis at {url}*"])
