"""Time limits from a Flask app's settings: ``ECHOMQ_QUEUES`` gives a queue's jobs their
default ``time_limit_ms`` / ``soft_time_limit_ms`` (the shared host settings, so Django's
``ECHOMQ['QUEUES']`` reads the same), and a bad one is refused at init_app, naming the key."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis
from flask import Flask
from flask_app import echomq

from echomq import InvalidJobOptionsError, Queue


def test_a_queues_default_time_limits_reach_its_jobs(make_app: Callable[..., Flask], connection: redis.Redis,
                                                     prefix: str) -> None:
    app = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix,
                   ECHOMQ_QUEUES={"mail": {"time_limit_ms": 30_000, "soft_time_limit_ms": 25_000}})
    job_id = app.test_client().post("/signup", data={"email": "a@example.com"}).get_json()["job_id"]
    job = Queue(connection, "mail", prefix=prefix).get_job(job_id)
    assert job is not None and (job.opts["time_limit_ms"], job.opts["soft_time_limit_ms"]) == (30_000, 25_000)


def test_a_bad_time_limit_setting_is_refused_at_init_app() -> None:
    app = Flask("misconfigured")
    app.config.update(ECHOMQ_QUEUES={"mail": {"time_limit_ms": 100, "soft_time_limit_ms": 200}})
    with pytest.raises(InvalidJobOptionsError, match=r"ECHOMQ_QUEUES'\]\['mail'\].*soft_time_limit_ms=200: must be "
                                                     r"below time_limit_ms=100"):
        echomq.init_app(app)
