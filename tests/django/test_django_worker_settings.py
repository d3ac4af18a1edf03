"""What ``manage.py echomq_worker`` takes from ``ECHOMQ``: its listeners (``LISTENERS``), the
name of its workers (``WORKER_NAME``), and a keeper that re-creates the declared schedules a
Redis restarted without persistence lost (``SCHEDULES_CHECK_INTERVAL``); as an operator runs
the command, in a subprocess."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import JobScheduler, Queue

from support.django_site import PROJECT, Server, manage
from support.host_runs import restart_under

TESTS = str(PROJECT.parent)


def test_the_listeners_and_the_worker_name_of_the_setting(shop_redis: redis.Redis, prefix: str,
                                                         tmp_path: Path) -> None:
    orders = Queue(shop_redis, "orders", prefix=prefix)
    first = orders.add("sweep_carts", {})
    second = orders.add("sweep_carts", {})
    out = tmp_path / "listened"
    worker = manage("echomq_worker", "--burst", "orders", env={
        "SHOP_LISTENERS": "support.recording_listener:FileRecorder,support.recording_listener:RECORDER",
        "SHOP_WORKER_NAME": "shop-eu-1", "ECHOMQ_TEST_LISTENER_FILE": str(out), "PYTHONPATH": TESTS})
    assert worker.returncode == 0, worker.stderr
    assert sorted(out.read_text().splitlines()) == sorted(
        f"{kind} completed sweep_carts {job.id}" for kind in ("FileRecorder", "SecondRecorder")
        for job in (first, second))
    assert {orders.get_job(job.id).processed_by for job in (first, second)} == {"shop-eu-1"}


def test_a_listener_the_setting_names_wrongly_stops_the_worker_before_it_starts(shop_redis: redis.Redis) -> None:
    worker = manage("echomq_worker", "--burst", env={"SHOP_LISTENERS": "support.recording_listener:nobody",
                                                     "PYTHONPATH": TESTS})
    assert worker.returncode == 1
    assert "(echomq.E010)" in worker.stderr and "support.recording_listener has no 'nobody'" in worker.stderr


@pytest.mark.real_only
def test_the_worker_re_creates_the_declared_schedules_a_restart_without_persistence_lost(
        redis_server_factory: Any, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url)
    env = {"SHOP_REDIS_URL": server.url, "SHOP_ECHOMQ_PREFIX": prefix}
    synced = manage("echomq_schedules", env=env)
    assert synced.returncode == 0, synced.stderr
    declared = {"reports": ["nightly-report"], "orders": ["sweep-carts"]}

    def stored() -> dict[str, list[str]]:
        return {queue: [r.id for r in JobScheduler(client, queue, prefix=prefix).list()] for queue in declared}

    assert stored() == declared
    worker = Server([sys.executable, "manage.py", "echomq_worker", "--processes", "2"], env, tmp_path / "worker.log")
    try:
        took, log = restart_under(worker, server, lambda: stored() == declared, keepers=2)  # one per process
    finally:
        client.close()
    assert took < 15, f"{took:.1f} s; the worker said:\n{log}"
    assert "EchoMQ: schedule reports/nightly-report was gone from Redis with the queue's data" in log, log
    assert "EchoMQ: schedule orders/sweep-carts was gone from Redis with the queue's data" in log
