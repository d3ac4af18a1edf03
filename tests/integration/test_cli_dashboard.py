"""``echomq dashboard``: the app on a port of its own, as an operator starts it (in-process: the
parser, the server and the Basic check are the command's own; only the signal wait is left out)."""

from __future__ import annotations

import base64
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import Queue
from echomq.cli import build_parser, main
from echomq.cli.dashboard import build_server

from support.prefixes import delete_prefix


@pytest.fixture
def prefix(url_connection: redis.Redis) -> Iterator[str]:
    name = f"dcli-{uuid.uuid4().hex[:8]}"
    yield name
    delete_prefix(url_connection, name)


def running(argv: list[str]) -> tuple[Any, str, Any]:
    args = build_parser().parse_args(["dashboard", "--port", "0", *argv])
    server, address, close_client = build_server(args)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, address, close_client


def stop(server: Any, close_client: Any) -> None:
    server.shutdown()
    server.server_close()
    close_client()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_serves_the_queues_on_localhost_by_default(server_url: str, url_connection: redis.Redis, prefix: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    Queue(url_connection, "orders", prefix=prefix).add("o", {})
    Queue(url_connection, "hidden", prefix=prefix).add("h", {})
    server, address, close_client = running(["--redis", server_url, "--prefix", prefix, "--queue", "orders",
                                             "--read-only"])
    try:
        assert address.startswith("http://127.0.0.1:")
        status, body = get(address)
        assert status == 200 and ">orders</a>" in body and "hidden" not in body and "read-only" in body
        assert capsys.readouterr().err == ""  # localhost: no warning
    finally:
        stop(server, close_client)


def test_beyond_localhost_it_warns_unless_basic_auth_guards_it(server_url: str, url_connection: redis.Redis,
                                                               prefix: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    Queue(url_connection, "orders", prefix=prefix).add("o", {})
    server, _address, close_client = running(["--redis", server_url, "--prefix", prefix, "--host", "0.0.0.0"])
    stop(server, close_client)
    assert "warning: listening on 0.0.0.0 without --basic-auth: anyone who reaches this port can see the jobs " \
           "and act on the queues" in capsys.readouterr().err
    server, address, close_client = running(["--redis", server_url, "--prefix", prefix, "--host", "0.0.0.0",
                                             "--basic-auth", "ops:s3cret"])
    try:
        assert capsys.readouterr().err == ""
        port = address.rsplit(":", 1)[1]
        assert get(f"http://127.0.0.1:{port}")[0] == 401
        wrong = base64.b64encode(b"ops:nope").decode()
        assert get(f"http://127.0.0.1:{port}", {"Authorization": f"Basic {wrong}"})[0] == 401
        right = base64.b64encode(b"ops:s3cret").decode()
        status, body = get(f"http://127.0.0.1:{port}", {"Authorization": f"Basic {right}"})
        assert status == 200 and ">orders</a>" in body
    finally:
        stop(server, close_client)


def test_bad_options_are_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in ((["--basic-auth", "nopassword"], "give USER:PASSWORD"),
                          (["--port", "70000"], "not a port number"),
                          (["--queue", "a{b"], "queue name")):
        with pytest.raises(SystemExit) as exited:
            main(["dashboard", *argv])
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
