"""The dashboard blueprint of the Flask extension (``echomq.init_dashboard``), through Flask's
test client: ``authorize`` decides, the app's connection and prefix are read, read-only by
config, actions logged with the name ``authorize`` gave."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask, Request
from flask_app import echomq

from echomq import InvalidInputError, Queue


def ops_only(request: Request) -> Any:
    return "ops" if request.headers.get("X-User") == "ops" else None


def token_of(body: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', body)
    assert found, "no action form on the page"
    return found.group(1)


def test_authorize_decides_and_actions_are_logged_with_its_name(make_app: Callable[..., Flask],
                                                                connection: redis.Redis, prefix: str,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(connection, "mail", prefix=prefix)
    job = queue.add("send_welcome", {"to": "<b>ada</b>"}, delay=60_000)
    app = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix, SECRET_KEY="test-only")
    echomq.init_dashboard(app, authorize=ops_only, url_prefix="/admin/queues")
    client = app.test_client()
    refused = client.get("/admin/queues/")
    assert refused.status_code == 403 and b"mail" not in refused.data
    ops = {"X-User": "ops"}
    overview = client.get("/admin/queues/", headers=ops)
    assert overview.status_code == 200 and 'href="/admin/queues/queue?q=mail"' in overview.text
    assert overview.headers["Content-Security-Policy"].startswith("default-src 'self'")
    page = client.get(f"/admin/queues/job?q=mail&id={job.id}", headers=ops)
    assert "&lt;b&gt;ada&lt;/b&gt;" in page.text and "<b>ada" not in page.text
    assert client.post("/admin/queues/action/promote", data={"queue": "mail", "id": job.id},
                       headers=ops).status_code == 403  # no token
    form = {"queue": "mail", "id": job.id, "csrf": token_of(page.text), "next": f"/admin/queues/job?q=mail&id={job.id}"}
    assert client.post("/admin/queues/action/promote", data=form).status_code == 403  # authorize said no
    with caplog.at_level(logging.INFO, logger="echomq.contrib.dashboard"):
        done = client.post("/admin/queues/action/promote", data=form, headers=ops)
    assert (done.status_code, done.headers["Location"]) == (303, f"/admin/queues/job?q=mail&id={job.id}")
    assert queue.get_job(job.id).get_state() == "waiting"
    assert f"promote on queue 'mail' {job.id} by ops" in caplog.text
    # another process of the app (another blueprint instance, same SECRET_KEY) accepts the token
    again = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix, SECRET_KEY="test-only")
    echomq.init_dashboard(again, authorize=ops_only)
    other = again.test_client()
    session = client.get_cookie("echomq_dashboard_session", path="/admin/queues")
    other.set_cookie("echomq_dashboard_session", session.value)
    form["next"] = "/echomq/queue?q=mail"
    assert other.post("/echomq/action/pause", data=form, headers=ops).status_code == 303
    assert queue.is_paused()


def test_read_only_by_config(make_app: Callable[..., Flask], connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "mail", prefix=prefix)
    queue.add("send_welcome", {})
    app = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix, ECHOMQ_DASHBOARD_READ_ONLY=True)
    echomq.init_dashboard(app, authorize=ops_only)
    client = app.test_client()
    page = client.get("/echomq/queue?q=mail", headers={"X-User": "ops"})
    assert "read-only" in page.text and "csrf" not in page.text
    answer = client.post("/echomq/action/pause", data={"queue": "mail"}, headers={"X-User": "ops"})
    assert answer.status_code == 403 and not queue.is_paused()
    with pytest.raises(InvalidInputError, match="authorize=None must be a callable"):
        echomq.init_dashboard(make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix), authorize=None)
