"""Serving processes: runserver with its autoreloader, gunicorn with 2 workers (with and without
``--preload``). Who holds a reader is read from CLIENT LIST and matched to each process's
sockets: one reader per serving process, none in the reloader's watcher or gunicorn's master."""

from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

import pytest
import redis

from support.django_site import Server, readers, readers_by_process, wait_until
from support.servers import free_port


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body: bytes = response.read()
    return body


def served(port: int) -> bool:
    try:
        return get(port, "/ping/") == b'{"pong": true}'
    except OSError:
        return False


def steady(client: redis.Redis, prefix: str, count: int, seconds: float = 1.5) -> bool:
    """The queue's reader count stays ``count`` for ``seconds`` (no late second start)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if readers(client, "orders", prefix) != count:
            return False
        time.sleep(0.1)
    return True


def test_runserver_starts_a_reader_in_its_serving_child_only(shop_redis: redis.Redis, prefix: str,
                                                            tmp_path: Path) -> None:
    port = free_port()
    # The project's ready() calls start_events() here, in both processes: the helper must
    # refuse in the reloader's watcher and start in the child that serves.
    server = Server([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"],
                    {"SHOP_EVENTS_IN_READY": "1"}, tmp_path / "runserver.log")
    try:
        assert wait_until(lambda: served(port), timeout=60), server.output()
        assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 1), server.output()
        [child] = server.children()
        assert readers_by_process(shop_redis, "orders", prefix, [server.pid, child]) == {server.pid: 0, child: 1}
        assert served(port)  # the first request (START = "request") starts nothing more
        assert steady(shop_redis, prefix, 1)
    finally:
        server.stop()
    assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 0)


@pytest.mark.parametrize("preload", [False, True], ids=["no-preload", "preload"])
def test_gunicorn_with_two_workers_runs_one_reader_in_each_and_none_in_the_master(
        preload: bool, shop_redis: redis.Redis, prefix: str, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--workers", "2",
            "--bind", f"127.0.0.1:{port}", *(["--preload"] if preload else []), "djsite.wsgi:application"]
    server = Server(argv, {}, tmp_path / "gunicorn.log")
    try:
        assert wait_until(lambda: served(port), timeout=60), server.output()
        assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 2), server.output()
        workers = server.children()
        assert len(workers) == 2, server.output()
        assert readers_by_process(shop_redis, "orders", prefix, [server.pid, *workers]) == {
            server.pid: 0, workers[0]: 1, workers[1]: 1}
        for _ in range(6):  # requests reach both workers: START = "request" adds nothing
            assert served(port)
        assert steady(shop_redis, prefix, 2)
    finally:
        server.stop()
    assert "Worker exiting" in server.output()
    assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 0)
