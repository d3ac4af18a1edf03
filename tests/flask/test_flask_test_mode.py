"""A Flask app's own tests through Flask's test client, run for real: pytest in a subprocess on
a small app written here. With ``app.testing`` the registry connects to
``ECHOMQ_TEST_CONNECTION``: by default a fakeredis that is fresh for every test, even for an app
made once at import, whatever ``ECHOMQ_URL`` says; on a real test Redis, every queue a test
wrote to is deleted when it ends, and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import host_runs

APP = '''
import os

from flask import Flask

from echomq.contrib.flask import EchoMQ

echomq = EchoMQ()


@echomq.job(queue="mail")
def send_welcome(job):
    return {"sent_to": job.data["to"]}


@echomq.job(queue="reports")
def build_report(job):
    return "built"


def create_app(config=None):
    app = Flask("shop")
    app.config.update(
        ECHOMQ_URL="redis://127.0.0.1:1/0",  # nothing listens there: a test that reached it would fail
        ECHOMQ_PREFIX=os.environ.get("APP_PREFIX", "emq"),
        ECHOMQ_SCHEDULES={"nightly": {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin",
                                      "name": "build_report"}},
    )
    if os.environ.get("APP_TEST_REDIS"):
        app.config["ECHOMQ_TEST_CONNECTION"] = os.environ["APP_TEST_REDIS"]
    app.config.update(config or {})
    echomq.init_app(app)

    @app.post("/signup")
    def signup():
        return {"job": send_welcome.enqueue(to="ada@example.com").id}, 202

    return app


app = create_app({"TESTING": True})  # one app for the whole module, as many suites have
'''

TESTS = '''
import fakeredis

from echomq import JobScheduler, Queue
from echomq.testing import FakeClock, advance_time, run_until_idle
from shop import app, create_app, echomq


def signed_up(an_app):
    assert an_app.test_client().post("/signup").status_code == 202
    registry = echomq.registry_for(an_app)
    return run_until_idle(registry.queue("mail"), registry.processors("mail"))


def test_the_test_client_enqueues_on_a_fake():
    assert FAKE == isinstance(echomq.registry_for(app).connection(), fakeredis.FakeRedis)
    assert signed_up(app).outcomes() == ["completed"]


def test_the_next_test_starts_from_an_empty_redis():
    assert echomq.registry_for(app).queue("mail").get_job_counts("completed") == {"completed": 0}
    assert signed_up(app).outcomes() == ["completed"]


def test_the_declared_schedule_on_the_test_s_clock():
    clock = FakeClock("2027-03-27T12:00:00+01:00")
    report = echomq.sync_schedules(app, clock=clock)
    assert report.lines() == ["created reports/nightly", "1 declared: 1 created, 0 updated, 0 unchanged; 0 removed"]
    registry = echomq.registry_for(app)
    reports = Queue(registry.connection(), "reports", prefix=registry.prefix, clock=clock)
    nights = advance_time(clock, reports, registry.processors("reports"), days=2)
    assert nights.wall_times(fmt="%H:%M") == ["03:00", "02:00"]


def test_the_same_schedule_again_in_the_next_test():
    test_the_declared_schedule_on_the_test_s_clock()


def test_an_app_of_the_test_s_own():
    mine = create_app({"TESTING": True})
    assert signed_up(mine).outcomes() == ["completed"]
'''


def write_app(folder: Path, *, fake: bool) -> None:
    (folder / "shop.py").write_text(APP)
    (folder / "test_shop.py").write_text(f"FAKE = {fake}\n" + TESTS)


def run_pytest(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return host_runs.run_pytest(folder, "test_shop.py", drop=("FLASK_", "DJANGO_"), **env)


def test_with_the_test_client_each_test_gets_a_fresh_fake_redis(tmp_path: Path) -> None:
    write_app(tmp_path, fake=True)
    host_runs.suite_passes(run_pytest(tmp_path), "5 passed")


@pytest.mark.real_only
def test_on_a_real_test_redis_what_each_test_wrote_is_deleted_and_nothing_else(tmp_path: Path,
                                                                               redis_url: str) -> None:
    write_app(tmp_path, fake=False)
    host_runs.leaves_only_a_stranger(redis_url, "fltm", lambda prefix: run_pytest(
        tmp_path, APP_TEST_REDIS=redis_url, APP_PREFIX=prefix), "5 passed")
