"""``flask echomq worker``: a job enqueued by a view runs in a real ``flask`` subprocess, inside
the app's context, on a real Redis and on fakeredis served over TCP."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import redis
from flask import Flask

from echomq import Queue

Cli = Callable[..., subprocess.CompletedProcess[str]]


def test_a_job_a_view_enqueued_runs_in_the_worker_inside_the_app_context(
        make_app: Callable[..., Flask], flask_cli: Cli, server_url: str, url_connection: redis.Redis,
        prefix: str) -> None:
    app = make_app(ECHOMQ_URL=server_url, ECHOMQ_PREFIX=prefix, GREETING="Hello from the web app")
    response = app.test_client().post("/signup", data={"email": "ada@example.com"})
    assert response.status_code == 202
    job_id = response.get_json()["job_id"]
    queue = Queue(url_connection, "mail", prefix=prefix)
    assert queue.get_job(job_id).get_state() == "waiting"

    done = flask_cli("echomq", "worker", "--burst", env={
        "FLASK_ECHOMQ_URL": server_url, "FLASK_ECHOMQ_PREFIX": prefix, "FLASK_GREETING": "Hello from the worker"})

    assert done.returncode == 0, done.stderr
    job = queue.get_job(job_id)
    assert job.get_state() == "completed"
    # current_app in the job was the worker process's app, built from the worker's config.
    assert {k: v for k, v in job.return_value.items() if k != "pid"} == {
        "to": "ada@example.com", "greeting": "Hello from the worker", "app": "flask_app"}
    assert job.attempts_made == 1
    assert job.opts["attempts"] == 2  # the decorator's default option


def test_the_worker_takes_the_options_of_echomq_worker_and_forks_children(
        make_app: Callable[..., Flask], flask_cli: Cli, server_url: str, url_connection: redis.Redis,
        prefix: str) -> None:
    app = make_app(ECHOMQ_URL=server_url, ECHOMQ_PREFIX=prefix)
    client = app.test_client()
    ids = [client.post("/signup", data={"email": f"user{n}@example.com"}).get_json()["job_id"] for n in range(6)]

    done = flask_cli("echomq", "worker", "mail", "--processes", "2", "--concurrency", "2", "--burst",
                     "--log-level", "debug",
                     env={"FLASK_ECHOMQ_URL": server_url, "FLASK_ECHOMQ_PREFIX": prefix})

    assert done.returncode == 0, done.stderr
    queue = Queue(url_connection, "mail", prefix=prefix)
    jobs = [queue.get_job(job_id) for job_id in ids]
    assert [job.get_state() for job in jobs] == ["completed"] * 6
    assert {job.return_value["greeting"] for job in jobs} == {"Welcome"}
    assert "processes 2" in done.stderr


def test_the_worker_help_lists_the_options_the_app_does_not_supply(flask_cli: Cli) -> None:
    shown = flask_cli("echomq", "worker", "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: flask echomq worker")
    for option in ("--concurrency", "--processes", "--shutdown-timeout", "--max-jobs-per-child", "--burst",
                   "--log-format"):
        assert option in shown.stdout
    options = {line.split()[0].rstrip(",") for line in shown.stdout.splitlines() if line.startswith("  -")}
    assert "--burst" in options
    assert options.isdisjoint({"--redis", "--prefix", "--app", "--processor"})  # the app supplies them
    group = flask_cli("echomq", "--help")
    assert "worker" in group.stdout and "schedules" in group.stdout


def test_a_queue_without_jobs_or_a_bad_option_is_refused_by_name(flask_cli: Cli, server_url: str,
                                                                 prefix: str) -> None:
    env = {"FLASK_ECHOMQ_URL": server_url, "FLASK_ECHOMQ_PREFIX": prefix}
    unknown = flask_cli("echomq", "worker", "orders", "--burst", env=env)
    assert unknown.returncode == 2
    assert "'orders'" in unknown.stderr and "'mail'" in unknown.stderr and "'reports'" in unknown.stderr
    bad = flask_cli("echomq", "worker", "--concurrency", "0", env=env)
    assert bad.returncode == 2
    assert "--concurrency" in bad.stderr


def test_a_redis_that_does_not_answer_fails_the_worker_at_once(flask_cli: Cli) -> None:
    down = flask_cli("echomq", "worker", "--burst", env={"FLASK_ECHOMQ_URL": "redis://127.0.0.1:1/0"})
    assert down.returncode == 1
    assert "cannot reach Redis" in down.stderr
