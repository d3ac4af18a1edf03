"""The extension's QueueEvents readers: none under tests or inside a command unless asked, one
per process when asked, started lazily at the first request, a new one in a forked child.
Readers are counted as Redis sees them: CLIENT LIST, by the reader's connection name
(docs/protocol.md §1.1)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable

import pytest
import redis
from flask import Flask
from flask_app import EVENTS_SEEN, echomq

from echomq import QueueKeys
from echomq.contrib.host.readers import RETRY_AFTER_S

from support.servers import free_port
from support.worker_cli import wait_until


def readers_connected(client: redis.Redis, prefix: str, queue: str = "mail") -> int:
    name = QueueKeys(queue, prefix).client_name(":qe")
    return sum(entry.get("name") == name for entry in client.client_list())


def test_no_reader_starts_under_tests_unless_asked(make_app: Callable[..., Flask], server_url: str,
                                                   url_connection: redis.Redis, prefix: str) -> None:
    app = make_app(ECHOMQ_TEST_CONNECTION=server_url, ECHOMQ_PREFIX=prefix, TESTING=True)
    client = app.test_client()
    for _ in range(2):
        assert client.get("/ping").status_code == 200
    assert echomq.running_events(app) == {}
    assert readers_connected(url_connection, prefix) == 0

    with app.app_context():
        reader = echomq.events("mail")  # asking is starting
        assert echomq.events("mail") is reader
    assert echomq.running_events(app) == {"mail": reader}
    assert readers_connected(url_connection, prefix) == 1


def test_a_served_request_starts_one_reader_per_process(make_app: Callable[..., Flask], server_url: str,
                                                        url_connection: redis.Redis, prefix: str) -> None:
    app = make_app(ECHOMQ_URL=server_url, ECHOMQ_PREFIX=prefix)  # not under test: ECHOMQ_EVENTS "auto"
    assert echomq.running_events(app) == {}  # init_app started nothing
    client = app.test_client()
    job_id = client.post("/signup", data={"email": "ada@example.com"}).get_json()["job_id"]
    reader = echomq.running_events(app)["mail"]
    second = client.post("/signup", data={"email": "grace@example.com"}).get_json()["job_id"]
    assert echomq.running_events(app) == {"mail": reader}
    assert readers_connected(url_connection, prefix) == 1
    # The reader started before the first view ran: that view's job is seen being added.
    assert wait_until(lambda: {("added", job_id), ("added", second)} <= set(EVENTS_SEEN), timeout=10)

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child serves a request: it starts its own reader, never reuses the parent's
        os.close(read_end)
        outcome: dict[str, object] = {}
        try:
            outcome["before"] = sorted(echomq.running_events(app))
            client.get("/ping")
            mine = echomq.running_events(app)["mail"]
            outcome["new_reader"] = mine is not reader
            outcome["connected"] = readers_connected(redis.Redis.from_url(server_url), prefix)
            echomq.close_events(app, timeout=2)  # what its exit hook does (os._exit skips it)
        except BaseException as exc:
            outcome["error"] = repr(exc)
        finally:
            os.write(write_end, json.dumps(outcome).encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        outcome = json.loads(pipe.read())
    os.waitpid(child, 0)
    assert outcome == {"before": [], "new_reader": True, "connected": 2}
    assert wait_until(lambda: readers_connected(url_connection, prefix) == 1, timeout=10)  # the child's is gone
    assert echomq.running_events(app) == {"mail": reader} and reader.running


def test_always_starts_under_tests_and_manual_only_when_asked(make_app: Callable[..., Flask], server_url: str,
                                                              url_connection: redis.Redis, prefix: str) -> None:
    always = make_app(ECHOMQ_TEST_CONNECTION=server_url, ECHOMQ_PREFIX=prefix, TESTING=True,
                      ECHOMQ_EVENTS="always")
    always.test_client().get("/ping")
    assert list(echomq.running_events(always)) == ["mail"]

    manual_prefix = prefix + ":manual"
    manual = make_app(ECHOMQ_URL=server_url, ECHOMQ_PREFIX=manual_prefix, ECHOMQ_EVENTS="manual")
    manual.test_client().get("/ping")
    assert echomq.running_events(manual) == {}
    with manual.app_context():
        assert list(echomq.start_events()[0:1]) == [echomq.running_events()["mail"]]
    assert readers_connected(url_connection, manual_prefix) == 1
    echomq.close_events(manual, timeout=2)
    assert wait_until(lambda: readers_connected(url_connection, manual_prefix) == 0, timeout=10)


def test_a_request_a_flask_command_serves_starts_no_reader(flask_cli: Callable[..., object], server_url: str,
                                                           url_connection: redis.Redis, prefix: str) -> None:
    done = flask_cli("serve-one-request", env={"FLASK_ECHOMQ_URL": server_url, "FLASK_ECHOMQ_PREFIX": prefix})
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    assert json.loads(done.stdout) == []  # type: ignore[attr-defined]
    assert readers_connected(url_connection, prefix) == 0


def test_a_reader_that_cannot_start_at_a_request_is_logged_once_and_tried_again_later(
        make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(ECHOMQ_URL=f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    client = app.test_client()
    with caplog.at_level(logging.WARNING, logger="echomq.contrib.host.readers"):
        for _ in range(3):
            assert client.get("/ping").status_code == 200  # the requests go on
    assert [r.getMessage() for r in caplog.records] == [
        f"EchoMQ events readers could not start; trying again in {RETRY_AFTER_S:g} s"]  # not at every request
    assert echomq.running_events(app) == {}
    with app.app_context(), pytest.raises(redis.ConnectionError):
        echomq.events("mail")  # asked for: raised
