"""What the host layer's tests through Django and Flask share: a project's own pytest run in a
subprocess (its test mode, for real), and a framework worker command living through a restart
of its private Redis (the schedule keeper)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from support.django_site import Server, wait_until
from support.queue_keys import SCAN_COUNT


def run_pytest(folder: Path, *args: str, drop: tuple[str, ...], **env: str) -> subprocess.CompletedProcess[str]:
    """``pytest ARGS`` in ``folder`` as the project's own suite, without the variables of ours
    that start with ``drop`` (and ``PYTEST_``)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith((*drop, "PYTEST_"))}
    environment.update(env, PYTHONPATH=str(folder))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          env=environment, capture_output=True, text=True, timeout=180, check=False)


def suite_passes(result: subprocess.CompletedProcess[str], passed: str) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed in result.stdout


def leaves_only_a_stranger(redis_url: str, tag: str, run: Callable[[str], subprocess.CompletedProcess[str]],
                           passed: str) -> None:
    """``run(prefix)`` (a project's suite on this real Redis, under a prefix of its own) passes
    and leaves nothing under that prefix but the key a stranger put there beforehand."""
    prefix = f"{tag}{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    stranger = f"{prefix}:{{untouched}}:meta"
    client.set(stranger, "not the tests'")
    try:
        suite_passes(run(prefix), passed)
        assert sorted(key.decode() for key in client.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT)) == [stranger]
    finally:
        client.delete(stranger)
        client.close()


def blocked_fetchers(server: Any) -> int:
    """The clients of ``server`` blocked in BZPOPMIN: Workers waiting for jobs."""
    client = redis.Redis.from_url(server.url)
    try:
        return sum(1 for entry in client.client_list() if entry.get("cmd") == "bzpopmin")
    finally:
        client.close()


def _fetchers_expected(output: str) -> int:
    """Queues times processes, from the command's start line ("queues a, b; ...; processes 2")."""
    found = re.search(r"queues ([^;]+);.*?processes (\d+)", output)
    return 0 if found is None else len(found.group(1).split(", ")) * int(found.group(2))


def restart_under(worker: Server, server: Any, back: Callable[[], bool], *, keepers: int) -> tuple[float, str]:
    """Once each of the worker's ``keepers`` had its first look and every fetcher waits for jobs
    (a restart before the Workers connect is not seen by them, so only the keeper's interval
    would notice), restart its Redis empty (the same port, no persistence) and wait until
    ``back()``; the seconds that took, and the log."""
    try:
        assert wait_until(lambda: worker.output().count("keeps the declared schedules") == keepers, 30), \
            worker.output()
        assert wait_until(lambda: 0 < _fetchers_expected(worker.output()) <= blocked_fetchers(server), 30), \
            worker.output()
        server.stop()
        server.start()
        restarted = time.monotonic()
        assert wait_until(back, 30), worker.output()
        took = time.monotonic() - restarted
    finally:
        worker.stop()
    return took, worker.output()
