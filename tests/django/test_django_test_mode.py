"""A Django project's own tests under pytest-django, run for real: pytest in a subprocess on a
small project written here. Under test the registry connects to ``TEST_CONNECTION``: by default
a fakeredis that is fresh for every test (so a declared schedule synced and run in one test is
not there in the next), whatever ``URL`` says; on a real test Redis, every queue a test wrote to
(the application's included) is deleted when it ends, and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import host_runs

SETTINGS = '''
import os

SECRET_KEY = "tests"
INSTALLED_APPS = ["django.contrib.contenttypes", "echomq.contrib.django", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
ECHOMQ = {
    "URL": "redis://127.0.0.1:1/0",  # nothing listens there: a test that reached it would fail
    "PREFIX": os.environ.get("PROJ_PREFIX", "emq"),
    "DEFAULT_QUEUE": "emails",
    "SCHEDULES": {"nightly-report": {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin",
                                     "name": "build_report"}},
}
if os.environ.get("PROJ_TEST_REDIS"):
    ECHOMQ["TEST_CONNECTION"] = os.environ["PROJ_TEST_REDIS"]
'''

JOBS = '''
from echomq.contrib.django import job


@job(queue="reports")
def build_report(job):
    return "built"


@job
def welcome(job):
    return {"sent_to": job.data["to"]}
'''

TESTS = '''
import fakeredis
import pytest
from django.test import TestCase

from echomq import JobScheduler, Queue
from echomq.contrib.django import registry, sync_schedules
from echomq.testing import FakeClock, advance_time, run_until_idle

from shop.jobs import welcome


def the_night_of_the_spring_change():
    clock = FakeClock("2027-03-27T12:00:00+01:00")
    report = sync_schedules(clock=clock)  # what the deploy's echomq_schedules does, at the test's time
    assert [change.line() for change in report.changes] == ["created reports/nightly-report"]
    reports = Queue(registry.connection(), "reports", prefix=registry.prefix, clock=clock)
    nights = advance_time(clock, reports, registry.processors("reports"), days=2)
    assert nights.wall_times(fmt="%H:%M") == ["03:00", "02:00"]


def test_the_registry_is_on_a_fake_and_the_schedule_runs_on_the_test_s_clock():
    assert FAKE == isinstance(registry.connection(), fakeredis.FakeRedis)
    the_night_of_the_spring_change()


def test_the_next_test_starts_from_an_empty_redis():
    assert JobScheduler(registry.connection(), "reports", prefix=registry.prefix).count() == 0
    the_night_of_the_spring_change()  # the same again: nothing of the test before is left


def upsert_and_live_the_night():
    """The same upsert on the same clock in two tests: on a server the tests shared, the first
    test's finished iteration would hold the second's iteration id (SchedulerConflictError)."""
    clock = FakeClock("2030-01-01T00:00:00+00:00")
    JobScheduler(registry.connection(), "reports", prefix=registry.prefix, clock=clock).upsert(
        "nightly-report", {"pattern": "0 2 * * *", "tz": "UTC"}, "build_report")
    reports = Queue(registry.connection(), "reports", prefix=registry.prefix, clock=clock)
    assert advance_time(clock, reports, registry.processors("reports"), days=1).outcomes() == ["completed"]


def test_an_upsert_on_the_test_s_clock():
    upsert_and_live_the_night()


def test_the_same_upsert_in_the_next_test():
    upsert_and_live_the_night()


def test_a_job_enqueued_then_run():
    welcome.enqueue(to="ada@example.com")
    ran = run_until_idle(registry.queue("emails"), registry.processors("emails"))
    assert ran.outcomes() == ["completed"]


class UnittestStyle(TestCase):
    def test_a_test_case_class_is_isolated_too(self):
        assert registry.queue("emails").get_job_counts("completed") == {"completed": 0}
        welcome.enqueue(to="grace@example.com")
        self.assertEqual(registry.queue("emails").get_job_counts("waiting"), {"waiting": 1})
'''


def write_project(folder: Path, *, fake: bool) -> None:
    (folder / "proj").mkdir()
    (folder / "proj" / "__init__.py").write_text("")
    (folder / "proj" / "settings.py").write_text(SETTINGS)
    (folder / "shop").mkdir()
    (folder / "shop" / "__init__.py").write_text("")
    (folder / "shop" / "jobs.py").write_text(JOBS)
    (folder / "test_shop.py").write_text(f"FAKE = {fake}\n" + TESTS)


def run_pytest(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return host_runs.run_pytest(folder, "--ds=proj.settings", "test_shop.py", drop=("DJANGO_", "SHOP_"), **env)


def test_under_pytest_django_each_test_gets_a_fresh_fake_redis(tmp_path: Path) -> None:
    write_project(tmp_path, fake=True)
    host_runs.suite_passes(run_pytest(tmp_path), "6 passed")


@pytest.mark.real_only
def test_on_a_real_test_redis_what_each_test_wrote_is_deleted_and_nothing_else(tmp_path: Path,
                                                                               redis_url: str) -> None:
    write_project(tmp_path, fake=False)
    host_runs.leaves_only_a_stranger(redis_url, "djtm", lambda prefix: run_pytest(
        tmp_path, PROJ_TEST_REDIS=redis_url, PROJ_PREFIX=prefix), "6 passed")
