"""The dashboard in a real browser: one Chromium per test session (``browser``, tests/conftest.py), one
dashboard served per session on the real Redis under a prefix of the session's own, and the
same one read-only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq.contrib.dashboard import Dashboard

from support.browser import served
from support.prefixes import delete_prefix


@pytest.fixture(scope="session")
def browser_prefix(redis_url: str) -> Iterator[str]:
    prefix = f"brw-{uuid.uuid4().hex[:8]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()


@pytest.fixture(scope="session")
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def dashboard_url(redis_client: redis.Redis, browser_prefix: str) -> Iterator[str]:
    with served(Dashboard(redis_client, prefix=browser_prefix, poll_ms=200, discovery_ttl=0.5)) as url:
        yield url


@pytest.fixture(scope="session")
def read_only_url(redis_client: redis.Redis, browser_prefix: str) -> Iterator[str]:
    with served(Dashboard(redis_client, prefix=browser_prefix, read_only=True, discovery_ttl=0.5)) as url:
        yield url


@pytest.fixture(scope="session")
def browser_context(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(5000)
    yield context
    context.close()


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A tab of the session's browser; every dialog it opens and every console error is kept in
    ``page.seen`` (a dashboard that runs a job's script would show up there)."""
    tab = browser_context.new_page()
    seen: list[str] = []
    tab.on("dialog", lambda dialog: (seen.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    tab.on("console", lambda message: seen.append(f"console {message.type}: {message.text}")
           if message.type in ("error", "warning") else None)
    tab.on("pageerror", lambda error: seen.append(f"page error: {error}"))
    tab.seen = seen
    yield tab
    tab.close()
