"""What the host layer's tests through Django and Flask share: a project's own pytest run in a
subprocess (its test mode, for real), and a framework worker command living through a restart
of its private Redis (the schedule keeper)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from support.django_site import Server, wait_until


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
        assert sorted(key.decode() for key in client.scan_iter(match=f"{prefix}:*")) == [stranger]
    finally:
        client.delete(stranger)
        client.close()


def restart_under(worker: Server, server: Any, back: Callable[[], bool], *, keepers: int) -> tuple[float, str]:
    """Once each of the worker's ``keepers`` had its first look, restart its Redis empty (the
    same port, no persistence) and wait until ``back()``; the seconds that took, and the log."""
    try:
        assert wait_until(lambda: worker.output().count("keeps the declared schedules") == keepers, 30), \
            worker.output()
        server.stop()
        server.start()
        restarted = time.monotonic()
        assert wait_until(back, 30), worker.output()
        took = time.monotonic() - restarted
    finally:
        worker.stop()
    return took, worker.output()
