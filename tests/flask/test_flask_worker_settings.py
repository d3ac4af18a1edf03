"""What ``flask echomq worker`` takes from the app's config: its listeners
(``ECHOMQ_LISTENERS``), the name of its workers (``ECHOMQ_WORKER_NAME``), and a keeper that
re-creates the declared schedules a Redis restarted without persistence lost; as an operator
runs the command, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import JobScheduler, Queue

from support.django_site import Server
from support.host_runs import restart_under

Cli = Callable[..., subprocess.CompletedProcess[str]]
TESTS = Path(__file__).resolve().parents[1]
SCHEDULES = {"nightly": {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin", "name": "build_report"},
             "tick": {"queue": "reports", "every": 3_600_000, "name": "build_report"}}


def test_the_listeners_and_the_worker_name_of_the_config(flask_cli: Cli, server_url: str,
                                                        url_connection: redis.Redis, prefix: str,
                                                        tmp_path: Path) -> None:
    mail = Queue(url_connection, "mail", prefix=prefix)
    jobs = [mail.add("send_welcome", {"to": f"{n}@example.com"}) for n in range(2)]
    out = tmp_path / "listened"
    done = flask_cli("echomq", "worker", "--burst", "mail", env={
        "FLASK_ECHOMQ_URL": server_url, "FLASK_ECHOMQ_PREFIX": prefix, "FLASK_ECHOMQ_WORKER_NAME": "mail-eu-1",
        "FLASK_ECHOMQ_LISTENERS": json.dumps(["support.recording_listener:FileRecorder",
                                              "support.recording_listener:RECORDER"]),
        "ECHOMQ_TEST_LISTENER_FILE": str(out)})
    assert done.returncode == 0, done.stderr
    assert sorted(out.read_text().splitlines()) == sorted(
        f"{kind} completed send_welcome {job.id}" for kind in ("FileRecorder", "SecondRecorder") for job in jobs)
    assert {mail.get_job(job.id).processed_by for job in jobs} == {"mail-eu-1"}


def test_a_bad_worker_name_is_refused_before_the_worker_starts(flask_cli: Cli) -> None:
    done = flask_cli("echomq", "worker", "--burst", env={"FLASK_ECHOMQ_WORKER_NAME": "mail eu"})
    assert done.returncode != 0
    assert "app.config['ECHOMQ_WORKER_NAME']: Worker name='mail eu': Redis refuses [' ']" in done.stderr


@pytest.mark.real_only
def test_the_worker_re_creates_the_declared_schedules_a_restart_without_persistence_lost(
        redis_server_factory: Any, flask_cli: Cli, prefix: str, tmp_path: Path) -> None:
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url)
    env = {"FLASK_ECHOMQ_URL": server.url, "FLASK_ECHOMQ_PREFIX": prefix,
           "FLASK_ECHOMQ_SCHEDULES": json.dumps(SCHEDULES)}
    synced = flask_cli("echomq", "schedules", env=env)
    assert synced.returncode == 0, synced.stderr

    def stored() -> list[str]:
        return [record.id for record in JobScheduler(client, "reports", prefix=prefix).list(asc=True)]

    assert sorted(stored()) == ["nightly", "tick"]
    environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("FLASK_")}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environment.get("PYTHONPATH")]))
    worker = Server([sys.executable, "-m", "flask", "--app", "flask_app", "echomq", "worker"],
                    {**environment, **env}, tmp_path / "worker.log", cwd=TESTS.parent)
    try:
        took, log = restart_under(worker, server, lambda: sorted(stored()) == ["nightly", "tick"], keepers=1)
    finally:
        client.close()
    assert took < 15, f"{took:.1f} s; the worker said:\n{log}"
    assert "EchoMQ: schedule reports/nightly was gone from Redis with the queue's data" in log, log
    assert "EchoMQ: schedule reports/tick was gone from Redis with the queue's data" in log
