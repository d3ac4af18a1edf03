"""Settings of the small shop the Django integration's tests run (tests/django).

Everything a test varies comes from the environment, so the test process and the servers and
workers it starts as subprocesses (runserver, gunicorn, ``manage.py echomq_worker``) agree:

- ``SHOP_REDIS_URL``: the Redis of the test (read by ``djsite.redis_client`` at each connect);
- ``SHOP_ECHOMQ_PREFIX``: a key prefix of the test session's own (keys and reader names);
- ``SHOP_DB``: the sqlite file; ``SHOP_TEST_DB``: the one pytest-django creates for tests;
- ``SHOP_EVENTS_IN_COMMANDS`` / ``SHOP_EVENTS_IN_TESTS``: ``ECHOMQ["EVENTS"]`` permissions;
- ``SHOP_REPORT_PATTERN``: the cron pattern of the nightly report (a changed declaration);
- ``SHOP_LISTENERS`` (comma-separated ``MODULE:OBJECT``), ``SHOP_WORKER_NAME``,
  ``SHOP_SCHEDULES_CHECK_INTERVAL``: what the worker command takes from the setting.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "echomq-tests-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    # for the dashboard's staff gate (tests/django/test_django_dashboard.py)
    "django.contrib.auth",
    "django.contrib.sessions",
    "echomq.contrib.django",
    "echoshop",
]
MIDDLEWARE: list[str] = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "djsite.urls"
WSGI_APPLICATION = "djsite.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", str(BASE_DIR / "db.sqlite3")),
        "TEST": {"NAME": os.environ.get("SHOP_TEST_DB")},
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"  # the live server's static handler wants one (the dashboard serves its own files)
USE_TZ = True
TIME_ZONE = "UTC"


def _flag(name: str) -> bool:
    return os.environ.get(name, "") == "1"


ECHOMQ = {
    "CONNECTION": "djsite.redis_client.make_client",
    # The suite's tests run on the Redis each test names (real, then fakeredis over TCP), not on
    # the in-memory fake a project's tests get by default.
    "TEST_CONNECTION": "djsite.redis_client.make_client",
    "PREFIX": os.environ.get("SHOP_ECHOMQ_PREFIX", "emq"),
    "DEFAULT_QUEUE": "orders",
    "QUEUES": {
        "orders": {"attempts": 3, "backoff": {"type": "exponential", "delay": 1000}},
        "reports": {"remove_on_complete": 100},
    },
    "SCHEDULES": {
        "nightly-report": {"queue": "reports", "pattern": os.environ.get("SHOP_REPORT_PATTERN", "0 2 * * *"),
                           "tz": "Europe/Berlin", "name": "build_report", "data": {"kind": "daily"}},
        "sweep-carts": {"queue": "orders", "every": 15 * 60 * 1000, "name": "sweep_carts",
                        "opts": {"attempts": 2}},
    },
    "LISTENERS": [spec for spec in os.environ.get("SHOP_LISTENERS", "").split(",") if spec],
    "WORKER_NAME": os.environ.get("SHOP_WORKER_NAME"),
    "SCHEDULES_CHECK_INTERVAL": float(os.environ.get("SHOP_SCHEDULES_CHECK_INTERVAL", "30")),
    "EVENTS": {
        "QUEUES": {"orders": ["echoshop.events.remember"]},
        "IN_COMMANDS": _flag("SHOP_EVENTS_IN_COMMANDS"),
        "IN_TESTS": _flag("SHOP_EVENTS_IN_TESTS"),
    },
}
