"""pytest-django for the tests of this folder, and only for them.

pytest-django configures Django when ``DJANGO_SETTINGS_MODULE`` is set before pytest starts;
the rest of the suite runs without it. This conftest is imported only when these tests are
collected: it points Django at the test project (tests/django_project), sets Django up itself
(pytest-django's own setup ran before this file was imported), and gives the session a key
prefix of its own, which the project's settings read (every key, every reader name), so the
session meets no other test's keys or readers on a shared Redis.

A test's subprocesses (manage.py, runserver, gunicorn) get the project's environment from
``shop_redis``, with the Redis the test runs on (``SHOP_REDIS_URL``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.django_site import PROJECT

SESSION_PREFIX = f"djt{uuid.uuid4().hex[:10]}"
_DB_DIR = Path(tempfile.mkdtemp(prefix="echomq-django-"))

#: What the project's settings read, for this process and the subprocesses of a test.
PROJECT_ENV = {
    "SHOP_ECHOMQ_PREFIX": SESSION_PREFIX,
    "SHOP_TEST_DB": str(_DB_DIR / "test-shop.sqlite3"),
    "SHOP_DB": str(_DB_DIR / "shop.sqlite3"),
}

if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

import django

# Set only while the settings load: left in the environment, DJANGO_SETTINGS_MODULE would reach
# every subprocess of the session, pytest runs of other tests included (pytest-django there
# would look for this project). pytest-django sees Django configured all the same.
with pytest.MonkeyPatch.context() as patch:
    patch.setenv("DJANGO_SETTINGS_MODULE", "djsite.settings")
    for name, value in PROJECT_ENV.items():
        patch.setenv(name, value)
    django.setup()

from echomq.contrib.django import close_events, get_registry


@pytest.fixture
def shop_redis(server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    """The project's registry on this test's Redis (real, then fakeredis over TCP), and a client
    of the test's own there. Afterwards: readers closed, the session prefix's keys deleted."""
    for name, value in {**PROJECT_ENV, "SHOP_REDIS_URL": server_url}.items():
        monkeypatch.setenv(name, value)  # for this process's connection and the test's subprocesses
    registry = get_registry()
    registry.close()  # the next use connects to SHOP_REDIS_URL, read by djsite.redis_client
    client = redis.Redis.from_url(server_url)
    try:
        yield client
    finally:
        close_events()
        registry.close()
        with contextlib.suppress(redis.RedisError):
            keys = list(client.scan_iter(match=f"{SESSION_PREFIX}:*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start:start + 500])
        client.close()


@pytest.fixture
def prefix() -> str:
    return SESSION_PREFIX
