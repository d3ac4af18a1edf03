"""The Flask app under gunicorn with 2 workers, with and without ``--preload``: each worker
process that served a request runs exactly one reader of the mail queue, the master none
(counted as Redis sees them: CLIENT LIST, by the reader's connection name)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import redis

from echomq import QueueKeys

from support.servers import free_port
from support.worker_cli import wait_until

TESTS = Path(__file__).resolve().parents[1]


def _reader_addresses(client: redis.Redis, prefix: str) -> list[str]:
    name = QueueKeys("mail", prefix).client_name(":qe")
    return [entry["addr"] for entry in client.client_list() if entry.get("name") == name]


@pytest.mark.parametrize("preload", [False, True], ids=["no-preload", "preload"])
def test_each_gunicorn_worker_runs_one_reader_and_the_master_none(
        preload: bool, server_url: str, url_connection: redis.Redis, prefix: str) -> None:
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("FLASK_")}
    environment.update(PYTHONPATH=str(TESTS), FLASK_ECHOMQ_URL=server_url, FLASK_ECHOMQ_PREFIX=prefix)
    command = [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}",
               *(["--preload"] if preload else []), "flask_app:create_app()"]
    server = subprocess.Popen(command, cwd=TESTS.parent, env=environment, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        pids: set[int] = set()

        def served_by_both() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as response:
                    pids.add(json.loads(response.read())["pid"])
            except OSError:
                return False  # not listening yet
            return len(pids) == 2

        assert wait_until(served_by_both, timeout=30, interval=0.01), f"served by {pids}"
        assert server.pid not in pids
        # One reader per worker, started by its first request, whatever the later requests.
        assert wait_until(lambda: len(_reader_addresses(url_connection, prefix)) == 2, timeout=10)
        for _ in range(20):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2).close()
        assert len(_reader_addresses(url_connection, prefix)) == 2
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=30)
    assert server.returncode == 0, errors
    assert wait_until(lambda: _reader_addresses(url_connection, prefix) == [], timeout=10)  # closed at exit
