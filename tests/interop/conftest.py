"""Interop rig: BullMQ 6.7.0 in Node on the same real Redis as EchoMQ.

``bullmq_peer.run(js_body)`` runs an async JS body (see peer.js) and returns its JSON lines;
``bullmq_peer.start(js_body)`` runs it in the background (a Popen) for workers and readers.
Without node the interop tests skip, except under CI=true where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

HERE = Path(__file__).resolve().parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.interop)


class BullMQPeer:
    def __init__(self, redis_url: str) -> None:
        self.env = {**os.environ, "REDIS_URL": redis_url, "NODE_PATH": str(HERE / "node_modules")}

    def _args(self, body: str) -> list[str]:
        return ["node", str(HERE / "peer.js"), "run", body]

    def run(self, body: str, timeout: float = 60) -> list[Any]:
        done = subprocess.run(self._args(body), env=self.env, cwd=HERE, capture_output=True, check=False,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"peer.js failed ({done.returncode}):\n{done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def start(self, body: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self._args(body), env=self.env, cwd=HERE, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="session")
def bullmq_peer(redis_url: str) -> BullMQPeer:
    if shutil.which("node") is None or not (HERE / "node_modules" / "bullmq").is_dir():
        message = "node or tests/interop/node_modules missing (run make node-deps)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return BullMQPeer(redis_url)


@pytest.fixture(params=["real"])
def connection(request: pytest.FixtureRequest, redis_url: str) -> Iterator[redis.Redis]:
    """Interop runs on real Redis only: BullMQ cannot reach fakeredis."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
