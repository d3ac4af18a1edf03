"""A small Flask app for the tests of ``echomq.contrib.flask``: an app factory, a view that
enqueues, jobs that read ``current_app``, a subscriber to the mail queue's events.

The factory takes its config as an argument (in-process tests) or from ``FLASK_*`` environment
variables (``app.config.from_prefixed_env``: ``FLASK_ECHOMQ_URL``, ``FLASK_ECHOMQ_PREFIX``,
``FLASK_GREETING``, ``FLASK_ECHOMQ_SCHEDULES`` as JSON), which is how the tests start
``flask --app flask_app echomq worker`` in a subprocess.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import click
from flask import Flask, current_app, jsonify, request
from flask.typing import ResponseReturnValue

from echomq import ActiveJob
from echomq.contrib.flask import EchoMQ

echomq = EchoMQ()

#: What the subscriber below saw, in this process: (event type, job id).
EVENTS_SEEN: list[tuple[str, str]] = []


@echomq.job(queue="mail", attempts=2)
def send_welcome(job: ActiveJob) -> dict[str, Any]:
    """Reads the app's config: it works only inside the app's context."""
    return {"to": job.data["to"], "greeting": current_app.config["GREETING"], "app": current_app.name,
            "pid": os.getpid()}


@echomq.job(queue="reports")
def build_report(job: ActiveJob) -> dict[str, Any]:
    return {"report": job.data.get("kind", "daily"), "greeting": current_app.config["GREETING"]}


@echomq.on_event("mail")
def remember(event_type: Any, event_data: dict[str, Any]) -> None:
    EVENTS_SEEN.append((str(event_type), str(event_data.get("jobId"))))


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask("flask_app")
    app.config["GREETING"] = "Welcome"
    app.config.from_prefixed_env("FLASK")
    app.config.update(config or {})
    echomq.init_app(app)

    @app.post("/signup")
    def signup() -> ResponseReturnValue:
        job = send_welcome.enqueue(to=request.form["email"])
        return jsonify(job_id=job.id), 202

    @app.get("/ping")
    def ping() -> ResponseReturnValue:
        return jsonify(pid=os.getpid())

    @app.cli.command("serve-one-request")
    def serve_one_request() -> None:
        """A command that serves a request with the test client, then says which readers run."""
        app.test_client().get("/ping")
        click.echo(json.dumps(sorted(echomq.running_events())))

    return app
