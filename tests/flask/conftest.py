"""Fixtures of the Flask integration's tests: apps of tests/flask_app made and closed, a key
prefix of the test's own (deleted afterwards), and ``flask`` run as a real subprocess."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask_app import create_app, echomq

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> Iterator[str]:
    """A key prefix no other test uses: every key of the test's apps is under it, and deleted
    afterwards from the test's connection."""
    name = f"tflask-{uuid.uuid4().hex[:10]}"
    yield name
    for fixture in ("connection", "url_connection"):
        if fixture in request.fixturenames:
            client: redis.Redis = request.getfixturevalue(fixture)
            with contextlib.suppress(redis.RedisError):
                keys = list(client.scan_iter(match=f"{name}:*", count=1000))
                for start in range(0, len(keys), 500):
                    client.delete(*keys[start:start + 500])


@pytest.fixture
def make_app() -> Iterator[Callable[..., Flask]]:
    """``make_app(**config)``: an app of tests/flask_app; its readers and its client are closed
    at the end of the test."""
    apps: list[Flask] = []

    def make(**config: Any) -> Flask:
        app = create_app(config)
        apps.append(app)
        return app

    yield make
    for app in apps:
        echomq.close_events(app, timeout=2)
        echomq.state(app).registry.close()


@pytest.fixture
def flask_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``flask_cli(*argv, env={...})``: ``flask --app flask_app ARGV`` as an operator runs it, in a
    subprocess with tests/ importable and without the caller's ``REDIS_URL`` nor ``FLASK_*``."""
    def run(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("FLASK_")}
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environment.get("PYTHONPATH")]))
        environment.update(env or {})
        return subprocess.run([sys.executable, "-m", "flask", "--app", "flask_app", *argv], cwd=TESTS.parent,
                              env=environment, capture_output=True, text=True, timeout=timeout, check=False)

    return run
