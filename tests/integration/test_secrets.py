"""Secrets stay secret: a connection URL's password, and what jobs carry.

A URL may hold a password (``redis://user:password@host``, ``?password=``). Whatever EchoMQ
shows of a connection (the ``echomq`` command's output and errors, log lines at any level,
the ``repr()`` of a Queue, Worker, JobScheduler or QueueEvents, the errors they raise) never
holds it. These tests run the components and the command against a ``redis-server`` started
with a password (and against one with another password, and a port nothing listens on), with
every logger captured at DEBUG, and look for the password everywhere.

A job's data and return value are not logged either: the worker's failure lines name the job,
its name and the error, never what the job carries.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import EventType, JobScheduler, Queue, QueueEvents, Worker
from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys

from support.servers import RedisServer, free_port
from support.workers import Running, wait_until

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "S3cretPassw0rd"


@pytest.fixture
def secured(redis_server_factory: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    """A redis-server of this test's own that wants ``PASSWORD`` (set once it is up)."""
    server = redis_server_factory(persistent=False)
    admin = redis.Redis(port=server.port)
    admin.config_set("requirepass", PASSWORD)
    admin.close()
    yield server


def url_for(port: int, password: str = PASSWORD, *, in_query: bool = False) -> str:
    if in_query:
        return f"redis://127.0.0.1:{port}/0?password={password}"
    return f"redis://default:{password}@127.0.0.1:{port}/0"


def shown(exc: BaseException) -> str:
    """Everything a user could print of an exception: its text and its traceback."""
    return str(exc) + repr(exc) + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def echomq(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run([sys.executable, "-m", "echomq", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


# -- the library ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_query", [False, True], ids=["userinfo", "query"])
def test_components_on_a_url_with_a_password_never_show_it(secured: RedisServer, queue_name: str, in_query: bool,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    url = url_for(secured.port, in_query=in_query)
    shown_texts: list[str] = []
    got: list[tuple[Any, dict[str, Any]]] = []
    with caplog.at_level(logging.DEBUG):  # every logger, redis-py's included
        queue = Queue(url, queue_name)
        scheduler = JobScheduler(url, queue_name)
        events = QueueEvents(url, queue_name, block_ms=100)
        events.subscribe(lambda event_type, data: got.append((event_type, data)))
        events.start()
        worker = Worker(url, queue_name, lambda job: "done", name="w1")
        with Running(worker):
            job = queue.add("email", {"to": "a@b.c"})
            scheduler.upsert("nightly", {"every": 60_000}, "report")
            assert wait_until(lambda: any(t is EventType.COMPLETED and d["jobId"] == job.id for t, d in got))
            shown_texts += [repr(c) for c in (queue, worker, scheduler, events, job)]
            shown_texts += [repr(queue.client), str(queue.client), repr(queue.client.connection_pool)]
            shown_texts += [str(w) for w in queue.get_workers()]
        events.close()
        scheduler.close()
        queue.close()
    assert shown_texts[0] == f"Queue({queue_name!r}, prefix='emq')"
    assert [PASSWORD in text for text in shown_texts] == [False] * len(shown_texts), shown_texts
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("where", ["wrong-password", "nothing-listening"])
def test_errors_and_log_lines_about_a_failing_connection_never_show_the_password(
    redis_server_factory: Callable[..., RedisServer], queue_name: str, where: str, caplog: pytest.LogCaptureFixture,
) -> None:
    if where == "wrong-password":  # a server that wants another password: PASSWORD is refused
        server = redis_server_factory(persistent=False)
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", "another-one")
        admin.close()
        port = server.port
    else:
        port = free_port()
    url = url_for(port)
    raised: list[BaseException] = []
    with caplog.at_level(logging.DEBUG):
        queue = Queue(url, queue_name)
        with pytest.raises(redis.ConnectionError) as adding:
            queue.add("email", {"to": "a@b.c"})
        raised.append(adding.value)
        with pytest.raises(redis.ConnectionError) as starting:
            QueueEvents(url, queue_name, block_ms=100).start()
        raised.append(starting.value)
        with pytest.raises(redis.ConnectionError) as upserting:
            JobScheduler(url, queue_name).upsert("nightly", {"every": 60_000})
        raised.append(upserting.value)
        worker = Worker(url, queue_name, lambda job: None, drain_delay=0.5)
        with Running(worker, close_timeout=5):
            assert wait_until(lambda: any("Redis failed while fetching" in r.getMessage() for r in caplog.records), 10)
        queue.close()
    with pytest.raises(InvalidInputError) as bad_url:
        Queue(f"redis://default:{PASSWORD}@127.0.0.1:not-a-port/0", queue_name)
    raised.append(bad_url.value)
    assert "redis://default:***@127.0.0.1:not-a-port/0" in str(bad_url.value)
    assert [PASSWORD in shown(exc) for exc in raised] == [False] * len(raised)
    # The log lines say what went wrong (and where, when redis-py says it), just not with what.
    assert ("username-password" if where == "wrong-password" else f"127.0.0.1:{port}") in caplog.text
    assert PASSWORD not in caplog.text


# -- the command -----------------------------------------------------------------------------------------

def test_the_command_never_prints_the_password_even_at_debug(secured: RedisServer, queue_name: str) -> None:
    url = url_for(secured.port)
    client = redis.Redis(port=secured.port, password=PASSWORD)
    Queue(client, queue_name).add("email", {"to": "a@b.c"})
    runs = [
        echomq("-v", "schedulers", "upsert", "nightly", "--every", "60000", "--queue", queue_name, "--redis", url),
        echomq("-v", "schedulers", "list", "--queue", queue_name, "--redis", url),
        echomq("-v", "schedulers", "get", "nightly", "--json", "--queue", queue_name, "--redis", url),
        echomq("-v", "events", "tail", "--from", "0", "--limit", "2", "--queue", queue_name, "--redis", url),
        echomq("-v", "demo", "--redis", url, "--queue", queue_name, "--seconds", "0.5"),
    ]
    client.close()
    for done in runs:
        assert done.returncode == 0, (done.args, done.stderr)
        assert PASSWORD not in done.stdout + done.stderr, done.args
    assert "nightly" in runs[1].stdout and "added" in runs[3].stdout
    assert f"echomq demo on redis://default:***@127.0.0.1:{secured.port}/0" in runs[4].stdout


@pytest.mark.parametrize("where", ["wrong-password", "nothing-listening", "bad-url"])
def test_the_commands_errors_never_print_the_password(redis_server_factory: Callable[..., RedisServer],
                                                       queue_name: str, where: str) -> None:
    if where == "wrong-password":
        server = redis_server_factory(persistent=False)
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", "another-one")
        admin.close()
        url = url_for(server.port)
    elif where == "nothing-listening":
        url = url_for(free_port())
    else:
        url = f"redis://default:{PASSWORD}@127.0.0.1:not-a-port/0"
    runs = [echomq("-v", "schedulers", "list", "--queue", queue_name, "--redis", url),
            echomq("-v", "events", "tail", "--queue", queue_name, "--redis", url),
            echomq("-v", "demo", "--redis", url, "--seconds", "0.5")]
    for done in runs:
        assert done.returncode != 0, (done.args, done.stdout)
        assert "Traceback" not in done.stderr, done.stderr
        assert PASSWORD not in done.stdout + done.stderr, (done.args, done.stderr)
        assert "***" in done.stderr or where != "bad-url", done.stderr  # the URL is named, masked


# -- what jobs carry -------------------------------------------------------------------------------------

DATA_SECRET = "4111-1111-data-secret"
RETURN_SECRET = "tok-return-secret"


def test_job_data_and_return_values_stay_out_of_the_logs(connection: redis.Redis, queue_name: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    events = QueueEvents(connection, queue_name, block_ms=100)

    def nosy_subscriber(event_type: Any, data: dict[str, Any]) -> None:
        if event_type is EventType.COMPLETED:
            raise RuntimeError("the subscriber broke")  # logged with its traceback

    events.subscribe(nosy_subscriber)

    def process(job: Any) -> Any:
        if job.name == "declined":
            raise ValueError("card declined")
        if job.name == "exits":
            raise SystemExit(3)  # an ERROR line with a traceback
        return {"token": RETURN_SECRET}

    with caplog.at_level(logging.INFO), events, Running(Worker(connection, queue_name, process)):
        ok = queue.add("charge", {"card": DATA_SECRET})
        declined = queue.add("declined", {"card": DATA_SECRET}, attempts=2, backoff=10)
        exits = queue.add("exits", {"card": DATA_SECRET})
        assert wait_until(lambda: connection.zcard(k.completed) == 1 and connection.zcard(k.failed) == 2)
        assert wait_until(lambda: "subscriber" in caplog.text)
    assert connection.hget(k.job(ok.id), "returnvalue") == f'{{"token":"{RETURN_SECRET}"}}'.encode()
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert any(f"job {declined.id} " in r.getMessage() and "card declined" in r.getMessage() for r in lines)
    assert any(f"job {exits.id} " in r.getMessage() and r.exc_info for r in lines)
    assert DATA_SECRET not in caplog.text and RETURN_SECRET not in caplog.text
    assert DATA_SECRET not in repr(ok) + repr(queue)
