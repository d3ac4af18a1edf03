"""TLS, end to end: every component and the CLI over ``rediss://`` with certificate verification
on (redis-py's default ``ssl_cert_reqs="required"``), with and without client certificates, and
a server whose certificate does not verify refused loudly by each of them.

The servers (tests/security/conftest.py) listen on a TLS port only: a connection that lost its
TLS settings (a dedicated blocking connection, the CLIENT UNBLOCK control connection) cannot
reach them at all, so a component that works proves each connection it opened kept them.

The TLS settings reach a component two ways, and both are tested: in the URL's query
(``rediss://...?ssl_ca_certs=...``, the component builds and owns the client) and only on a
``redis.Redis(ssl=True, ssl_ca_certs=...)`` object passed in (every dedicated connection is
cloned from it).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import redis

from echomq import EventType, JobScheduler, Queue, QueueEvents, Worker
from echomq.protocol.keys import QueueKeys
from echomq.transport.connection import Connections, without_retries

from support.cli import CONNECTING_COMMANDS, ROOT, command_id, echomq
from support.servers import free_port
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.timeout(120)]



#: A blocking read lasts this long unless cut short: a close() well below it was a CLIENT UNBLOCK.
BLOCK_S = 5.0
#: What "close() is fast" means here (a healthy close takes milliseconds; BLOCK_S would be a miss).
FAST_CLOSE_S = 1.0
#: Bound on a component refusing a bad certificate (it must fail, not retry forever).
REFUSAL_S = 20.0

VERIFY_FAILED = "CERTIFICATE_VERIFY_FAILED"


@pytest.fixture
def queue_name() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=[False, True], ids=["server-cert", "client-cert"])
def server(request: pytest.FixtureRequest, tls_server: Callable[..., Any]) -> Any:
    """A TLS server; with ``client-cert`` it demands a client certificate signed by the CA."""
    return tls_server(auth_clients=request.param)


@pytest.fixture(params=["url", "client"])
def connect(request: pytest.FixtureRequest, server: Any) -> Iterator[Callable[[], Any]]:
    """Makes what a component is given: the URL with the TLS settings in its query, or a
    ``redis.Redis(ssl=True, ...)`` with them only on the object (closed at the end)."""
    clients: list[redis.Redis] = []

    def make() -> Any:
        if request.param == "url":
            return server.url()
        client = server.client()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def named(server: Any, name: str) -> list[dict[str, Any]]:
    return [c for c in server.client_list() if c["name"] == name]


def blocked_in(server: Any, name: str, command: str) -> bool:
    """The connection named ``name`` is blocked in ``command`` (CLIENT LIST flag ``b``)."""
    return any(c["cmd"] == command and "b" in c["flags"] for c in named(server, name))


# -- every component, verified, both ways ------------------------------------------------------

def test_the_rig_has_no_plain_port_and_demands_what_it_says(server: Any, queue_name: str) -> None:
    # A plain redis:// client cannot talk to the TLS port: whatever works below went over TLS.
    plain = Queue(f"redis://127.0.0.1:{server.port}/0", queue_name)
    with pytest.raises(redis.ConnectionError):
        plain.add("x")
    plain.close()
    if server.auth_clients:
        # The server demands a client certificate: without one, it hangs up.
        bare = server.client(ssl_certfile=None, ssl_keyfile=None)
        with pytest.raises(redis.ConnectionError):
            Queue(bare, queue_name).add("x")
        bare.close()
    assert server.admin().dbsize() == 0


def test_a_queue_adds_and_reads_jobs_over_tls(server: Any, connect: Callable[[], Any], queue_name: str) -> None:
    queue = Queue(connect(), queue_name)
    job = queue.add("email", {"to": "a@b.c"}, attempts=2)
    stored = queue.get_job(job.id)
    assert stored is not None and stored.data == {"to": "a@b.c"}
    assert queue.get_job_counts("waiting") == {"waiting": 1}
    queue.close()
    assert server.admin().hget(QueueKeys(queue_name).job(job.id), "name") == "email"


def test_a_worker_processes_jobs_over_tls_and_closes_fast(server: Any, connect: Callable[[], Any],
                                                         queue_name: str) -> None:
    admin = server.admin()
    keys = QueueKeys(queue_name)
    together = threading.Barrier(2, timeout=10)  # two processors at once, each on its own TLS socket

    def process(job: Any) -> Any:
        if job.data["pair"]:
            together.wait()
        return job.data["i"] * 2

    queue = Queue(connect(), queue_name)
    queue.add_bulk([{"name": "n", "data": {"i": i, "pair": i < 2}} for i in range(8)])
    worker = Worker(connect(), queue_name, process, concurrency=4, drain_delay=BLOCK_S)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: admin.zcard(keys.completed) == 8, timeout=15), admin.zcard(keys.failed)
        assert sorted(int(admin.hget(keys.job(str(i)), "returnvalue")) for i in range(1, 9)) == \
            [i * 2 for i in range(8)]
        # Idle now: the fetcher waits for jobs on its dedicated (TLS) connection.
        assert wait_until(lambda: blocked_in(server, keys.client_name(), "bzpopmin"))
        unblocks = server.command_calls("client|unblock")
    finally:
        started = time.monotonic()
        worker.close(10)
        took = time.monotonic() - started
        thread.join(10)
        queue.close()
    assert not thread.is_alive()
    assert took < FAST_CLOSE_S, f"close() took {took:.2f}s"
    # The read was cut by CLIENT UNBLOCK sent over the control connection: TLS too.
    assert server.command_calls("client|unblock") > unblocks
    assert named(server, keys.client_name()) == []  # every connection the Worker opened is closed


def test_a_job_scheduler_fires_and_a_worker_runs_its_iterations_over_tls(
        server: Any, connect: Callable[[], Any], queue_name: str) -> None:
    schedules = JobScheduler(connect(), queue_name)
    iteration = schedules.upsert("tick", {"every": 300}, "tick", {"n": 1})
    assert iteration is not None
    ran: list[tuple[str, Any]] = []
    worker = Worker(connect(), queue_name, lambda job: ran.append((job.name, job.data)), drain_delay=BLOCK_S)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        # Two runs: the second was produced by the worker's own scheduler step, over TLS too.
        assert wait_until(lambda: len(ran) >= 2, timeout=15), ran
    finally:
        worker.close(10)
        thread.join(10)
    assert ran[:2] == [("tick", {"n": 1}), ("tick", {"n": 1})]
    record = schedules.get("tick")
    assert record is not None and record.every == 300 and (record.iteration_count or 0) >= 2
    assert [r.id for r in schedules.list()] == ["tick"]
    schedules.close()


def test_queue_events_receive_events_over_tls_and_close_fast(server: Any, connect: Callable[[], Any],
                                                             queue_name: str) -> None:
    keys = QueueKeys(queue_name)
    seen: list[tuple[Any, dict[str, Any]]] = []
    events = QueueEvents(connect(), queue_name, block_ms=int(BLOCK_S * 1000))
    events.subscribe(lambda event_type, data: seen.append((event_type, data)))
    events.start()
    try:
        queue = Queue(connect(), queue_name)
        job = queue.add("email", {"to": "a@b.c"})
        queue.close()
        assert wait_until(lambda: (EventType.WAITING, job.id) in [(t, d.get("jobId")) for t, d in seen])
        assert (EventType.ADDED, job.id) in [(t, d.get("jobId")) for t, d in seen]
        assert wait_until(lambda: blocked_in(server, keys.client_name(":qe"), "xread"))
        unblocks = server.command_calls("client|unblock")
    finally:
        started = time.monotonic()
        events.close(timeout=5)
        took = time.monotonic() - started
    assert not events.running
    assert took < FAST_CLOSE_S, f"close() took {took:.2f}s"
    assert server.command_calls("client|unblock") > unblocks  # the control connection got through
    assert named(server, keys.client_name(":qe")) == []


def test_localhost_verifies_by_its_dns_name(tls_server: Callable[..., Any], queue_name: str) -> None:
    server = tls_server()
    queue = Queue(server.url(host="localhost"), queue_name)
    assert queue.add("x").id == "1"
    queue.close()


# -- dedicated connections keep the client's TLS settings --------------------------------------

def test_every_dedicated_connection_is_a_clone_of_the_clients_tls_settings(tls_server: Callable[..., Any]) -> None:
    server = tls_server(auth_clients=True)
    given = server.client(ssl_min_version=ssl.TLSVersion.TLSv1_2, ssl_ciphers="HIGH:!aNULL")
    connections = Connections(given)
    try:
        clones = [
            connections.dedicated(socket_timeout=BLOCK_S + 10, client_name="reader", decode_responses=True,
                                  **without_retries()),
            connections.dedicated(socket_timeout=0.5, socket_connect_timeout=0.5, **without_retries()),
        ]
        for clone in clones:
            conn = clone.connection_pool.make_connection()
            assert isinstance(conn, redis.SSLConnection)
            assert conn.cert_reqs == ssl.CERT_REQUIRED and conn.check_hostname is True
            assert (conn.ca_certs, conn.certfile, conn.keyfile) == (
                str(server.pki.ca), str(server.pki.client_cert), str(server.pki.client_key))
            assert (conn.ssl_min_version, conn.ssl_ciphers) == (ssl.TLSVersion.TLSv1_2, "HIGH:!aNULL")
            assert clone.ping()  # and the server (TLS only, client certs demanded) takes it
    finally:
        connections.close()
        given.close()


def test_a_worker_and_queue_events_given_a_tls_client_open_only_tls_connections(
        tls_server: Callable[..., Any], queue_name: str) -> None:
    # The TLS settings (CA, client certificate) exist only on this object; the server has no
    # plain port and demands a client certificate, so each connection below is a faithful clone.
    server = tls_server(auth_clients=True)
    given = server.client()
    keys = QueueKeys(queue_name)
    before = {c["id"] for c in server.client_list()}
    Queue(given, queue_name).add_bulk([{"name": "n", "data": {"i": i}} for i in range(6)])
    done: list[Any] = []
    events = QueueEvents(given, queue_name, last_event_id="0", block_ms=int(BLOCK_S * 1000))
    events.subscribe(lambda t, d: done.append(d["jobId"]) if t is EventType.COMPLETED else None)
    events.start()
    worker = Worker(given, queue_name, lambda job: job.data["i"], concurrency=3, drain_delay=BLOCK_S).start()
    try:
        assert wait_until(lambda: sorted(done) == [str(i) for i in range(1, 7)], timeout=15), done
        assert wait_until(lambda: blocked_in(server, keys.client_name(), "bzpopmin")
                          and blocked_in(server, keys.client_name(":qe"), "xread"))
        ours = [c for c in server.client_list() if c["id"] not in before]
        names = sorted(c["name"] for c in ours if c["name"])
        assert names == [keys.client_name(), keys.client_name(":qe")]
        # The rest are the given client's own pool (the fetcher's and the processors' script
        # calls, the maintenance thread): at most one per thread that talks to Redis.
        unnamed = [c for c in ours if not c["name"]]
        assert 1 <= len(unnamed) <= 1 + 3 + 1, ours
        unblocks = server.command_calls("client|unblock")
    finally:
        started = time.monotonic()
        events.close(timeout=5)
        worker.close(10)
        took = time.monotonic() - started
    assert took < 2 * FAST_CLOSE_S, f"closing both took {took:.2f}s"
    assert server.command_calls("client|unblock") >= unblocks + 2  # one per blocked reader, over TLS
    assert {c["name"] for c in server.client_list()} <= {""}  # the named (dedicated) ones are gone
    assert given.ping()  # the given client stays the caller's, open
    given.close()


# -- a certificate that does not verify is refused, loudly --------------------------------------

@dataclass
class BadServer:
    """A server whose certificate must not verify, and the CA the client is given."""

    server: Any
    ca: Path
    kind: str

    def url(self) -> str:
        return str(self.server.url(ssl_ca_certs=str(self.ca)))


@pytest.fixture(params=["unknown-ca", "wrong-name"])
def bad(request: pytest.FixtureRequest, tls_server: Callable[..., Any]) -> BadServer:
    """Signed by a CA the client does not trust (``unknown-ca``), or by the trusted CA for
    another host name only (``wrong-name``: SAN DNS:elsewhere.invalid, reached at 127.0.0.1)."""
    if request.param == "unknown-ca":
        server = tls_server()
        return BadServer(server, server.pki.rogue_ca, request.param)
    server = tls_server(cert="mismatch")
    return BadServer(server, server.pki.ca, request.param)


@pytest.fixture(params=["url", "client"])
def bad_connect(request: pytest.FixtureRequest, bad: BadServer) -> Iterator[Callable[[], Any]]:
    clients: list[redis.Redis] = []

    def make() -> Any:
        if request.param == "url":
            return bad.url()
        client = bad.server.client(ssl_ca_certs=str(bad.ca))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def assert_verification_failed(exc: BaseException, kind: str) -> None:
    """What the user reads: redis-py's ConnectionError naming the verification failure."""
    assert isinstance(exc, redis.ConnectionError), repr(exc)
    message = str(exc)
    assert VERIFY_FAILED in message, message
    assert ("mismatch" in message) == (kind == "wrong-name"), message


def test_queue_add_refuses_a_certificate_that_does_not_verify(bad: BadServer, bad_connect: Callable[[], Any],
                                                              queue_name: str) -> None:
    queue = Queue(bad_connect(), queue_name)
    with pytest.raises(redis.ConnectionError) as caught:
        queue.add("email", {"to": "a@b.c"})
    assert_verification_failed(caught.value, bad.kind)
    queue.close()
    assert bad.server.admin().dbsize() == 0  # nothing was sent


def test_queue_events_start_refuses_a_certificate_that_does_not_verify(bad: BadServer, bad_connect: Callable[[], Any],
                                                                       queue_name: str) -> None:
    events = QueueEvents(bad_connect(), queue_name)
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError) as caught:
        events.start()
    assert time.monotonic() - started < REFUSAL_S
    assert_verification_failed(caught.value, bad.kind)
    assert not events.running
    events.close()


def test_worker_run_fails_on_a_certificate_that_does_not_verify(bad: BadServer, bad_connect: Callable[[], Any],
                                                                queue_name: str) -> None:
    # Not retried forever with warnings: the worker never talked to this server, and no retry
    # can make its certificate verify. run() raises, every thread joined, nothing left running.
    worker = Worker(bad_connect(), queue_name, lambda job: None, concurrency=2, drain_delay=BLOCK_S)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(REFUSAL_S)
    alive = thread.is_alive()
    if alive:
        worker.close(5)
        thread.join(10)
    assert not alive, "Worker.run() kept retrying a certificate that does not verify"
    assert len(raised) == 1
    assert_verification_failed(raised[0], bad.kind)
    assert not worker.running
    assert [t.name for t in threading.enumerate() if t.name.startswith(f"echomq-proc-{queue_name}")] == []


def test_a_started_worker_keeps_the_certificate_error_and_prints_nothing(
        bad: BadServer, bad_connect: Callable[[], Any], queue_name: str, capfd: pytest.CaptureFixture[str]) -> None:
    # start() runs run() in a thread of the worker's: the error that ends it is logged and kept
    # in worker.failure, never handed to the thread excepthook (which prints to stderr).
    worker = Worker(bad_connect(), queue_name, lambda job: None, drain_delay=BLOCK_S).start()
    assert wait_until(lambda: worker.failure is not None, timeout=REFUSAL_S)
    assert worker.failure is not None
    assert_verification_failed(worker.failure, bad.kind)
    assert wait_until(lambda: not worker.running)
    worker.close(5)
    assert capfd.readouterr().err == ""


def test_worker_run_still_waits_for_a_tls_server_that_is_not_up_yet(tls_pki: Any, tls_server: Callable[..., Any],
                                                                     queue_name: str) -> None:
    # The other half of the choice: a refused connection is an outage, not a misconfiguration,
    # so a worker started before Redis keeps retrying and works once the server is up.
    port = free_port()
    url = f"rediss://127.0.0.1:{port}/0?" + urlencode({"ssl_ca_certs": str(tls_pki.ca)}, quote_via=quote)
    done: list[Any] = []
    worker = Worker(url, queue_name, lambda job: done.append(job.data), drain_delay=BLOCK_S)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)
        assert thread.is_alive() and worker.running
        server = tls_server(port=port)
        Queue(server.url(), queue_name).add("x", {"n": 1})
        assert wait_until(lambda: done == [{"n": 1}], timeout=20), done
    finally:
        worker.close(5)
        thread.join(10)
    assert not thread.is_alive()


def test_a_certificate_failing_after_the_worker_once_worked_is_retried_until_it_verifies(
        tls_server: Callable[..., Any], queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    # A certificate that stops verifying under a running worker (a rotation gone wrong) is
    # logged and retried, not fatal: the worker resumes once the server presents a good one.
    server = tls_server()
    port, url = server.port, server.url()
    done: list[Any] = []
    worker = Worker(url, queue_name, lambda job: done.append(job.data["n"]), drain_delay=0.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        Queue(server.url(), queue_name).add("x", {"n": 1})
        assert wait_until(lambda: done == [1])
        server.stop()
        impostor = tls_server(cert="mismatch", port=port)
        assert wait_until(lambda: VERIFY_FAILED in caplog.text, timeout=15)
        assert thread.is_alive() and worker.running
        impostor.stop()
        server = tls_server(port=port)  # a fresh, empty server with the good certificate
        Queue(server.url(), queue_name).add("x", {"n": 2})
        assert wait_until(lambda: done == [1, 2], timeout=30), done
    finally:
        worker.close(5)
        thread.join(10)
    assert not thread.is_alive()


def test_a_wrong_name_is_refused_only_because_of_the_name(tls_server: Callable[..., Any], queue_name: str) -> None:
    # The mismatch certificate is signed by the trusted CA: only the host name check refuses it.
    server = tls_server(cert="mismatch")
    queue = Queue(server.url(ssl_ca_certs=str(server.pki.ca), ssl_check_hostname="false"), queue_name)
    assert queue.add("x").id == "1"
    queue.close()


# -- the CLI ---------------------------------------------------------------------------------------

def test_the_cli_works_over_tls(server: Any, queue_name: str) -> None:
    url = server.url()
    common = ("--queue", queue_name, "--redis", url)
    upsert = echomq("schedulers", "upsert", "nightly", "--every", "60000", "--name", "report", *common)
    assert upsert.returncode == 0, upsert.stderr
    listed = echomq("schedulers", "list", "--json", *common)
    assert listed.returncode == 0, listed.stderr
    assert [(r["key"], r["name"], r["every"]) for r in json.loads(listed.stdout)] == [
        ("nightly", "report", 60000)]
    got = echomq("schedulers", "get", "nightly", *common)
    assert got.returncode == 0 and "every 60000 ms" in got.stdout, got

    # A live tail: it reads over its dedicated TLS connection, gets two events and exits.
    keys = QueueKeys(queue_name)
    tail = subprocess.Popen([sys.executable, "-m", "echomq", "events", "tail", "--limit", "2", *common], cwd=ROOT,
                            env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: blocked_in(server, keys.client_name(":qe"), "xread"), timeout=15)
        producer = server.client()
        job = Queue(producer, queue_name).add("email", {"to": "a@b.c"})
        producer.close()
        out, err = tail.communicate(timeout=15)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.communicate()
    assert tail.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and all(f"job={job.id}" in line for line in lines), out
    assert "added" in lines[0] and "waiting" in lines[1], out

    removed = echomq("schedulers", "remove", "nightly", *common)
    assert removed.returncode == 0 and "removed nightly" in removed.stdout, removed
    assert named(server, keys.client_name(":qe")) == []


@pytest.mark.parametrize("command", CONNECTING_COMMANDS, ids=command_id)
def test_the_cli_refuses_a_certificate_that_does_not_verify_in_one_line(bad: BadServer, command: list[str]) -> None:
    done = echomq(*command, "--queue", "orders", "--redis", bad.url())
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert VERIFY_FAILED in lines[0] and f"127.0.0.1:{bad.server.port}" in lines[0], lines[0]
    assert done.stdout == ""
    assert bad.server.admin().dbsize() == 0
