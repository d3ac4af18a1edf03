"""The Prometheus integration, scraped as Prometheus scrapes it: the listener's counters and
histogram after a known workload, the queue collector's gauges, and ``echomq metrics serve``
as a process answering HTTP until SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from echomq.contrib.prometheus import MetricsServer, PrometheusListener, QueueStateCollector, queue_registry
from echomq.errors import InvalidInputError, InvalidQueueNameError
from echomq.protocol.keys import QueueKeys
from echomq.protocol.states import COUNTED
from echomq.queue.queue import Queue
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions
from echomq.worker.worker import Worker

from support.cli import ROOT
from support.servers import free_port
from support.workers import Running, wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scraped: Samples, name: str, **labels: str) -> float | None:
    return scraped.get((name, tuple(sorted(labels.items()))))


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return samples(response.read().decode())


def _orphan(connection: redis.Redis, queue: Queue) -> str:
    """A job a dead worker left active, its lock expired: the next stalled check recovers it."""
    job_id = queue.add("orphan").id
    transitions = Transitions(connection, queue.keys, WorkerOptions())
    assert transitions.move_to_active("dead-worker:1", int(time.time() * 1000)).job_id == job_id
    transitions.release_thread_connection()
    connection.delete(queue.keys.job_lock(job_id))
    return job_id


# -- the listener: what this process's workers did -------------------------------------------------
def test_the_listeners_counters_and_histogram_after_a_known_workload(connection: redis.Redis, queue_name: str) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusListener(registry)
    queue = Queue(connection, queue_name)
    _orphan(connection, queue)
    for n in range(3):
        queue.add("resize", {"n": n})
    queue.add("doomed", attempts=2)

    def work(job: Any) -> int:
        if job.name == "doomed":
            raise ValueError("doomed")
        if job.name == "resize":
            time.sleep(0.02)
        return 1

    k = QueueKeys(queue_name)
    with Running(Worker(connection, queue_name, work, stalled_interval=200, listeners=[metrics])):
        assert wait_until(lambda: connection.zcard(k.completed) == 4 and connection.zcard(k.failed) == 1)
    scraped = samples(generate_latest(registry).decode())
    assert value(scraped, "echomq_jobs_completed_total", queue=queue_name) == 4  # 3 + the recovered orphan
    assert value(scraped, "echomq_jobs_retried_total", queue=queue_name) == 1
    assert value(scraped, "echomq_jobs_failed_total", queue=queue_name) == 1
    assert value(scraped, "echomq_jobs_stalled_total", queue=queue_name) == 1
    assert value(scraped, "echomq_job_locks_lost_total", queue=queue_name) is None  # never labelled: none lost
    completed = {"queue": queue_name, "outcome": "completed"}
    assert value(scraped, "echomq_job_duration_seconds_count", **completed) == 4
    assert value(scraped, "echomq_job_duration_seconds_count", queue=queue_name, outcome="failed") == 2
    assert value(scraped, "echomq_job_duration_seconds_bucket", le="0.01", **completed) == 1  # only the orphan
    assert value(scraped, "echomq_job_duration_seconds_bucket", le="+Inf", **completed) == 4
    assert 0.06 <= value(scraped, "echomq_job_duration_seconds_sum", **completed) < 10  # type: ignore[operator]


def test_the_listeners_registry_served_over_http(connection: redis.Redis, queue_name: str) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusListener(registry, namespace="shop")
    queue = Queue(connection, queue_name)
    queue.add("a")
    queue.add("b")
    server = MetricsServer(registry, port=0)
    try:
        with Running(Worker(connection, queue_name, lambda job: None, listeners=[metrics])):
            assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 2)
        scraped = scrape(server.url)
    finally:
        server.close()
    assert value(scraped, "shop_jobs_completed_total", queue=queue_name) == 2
    assert value(scraped, "shop_job_duration_seconds_count", queue=queue_name, outcome="completed") == 2


def test_one_listener_per_registry() -> None:
    registry = CollectorRegistry()
    PrometheusListener(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        PrometheusListener(registry)
    PrometheusListener(None)  # registered nowhere: no clash


# -- the collector: what the queues hold ------------------------------------------------------------
def _known_queue(connection: redis.Redis, queue_name: str) -> None:
    """1 completed, 1 failed, 2 waiting, 1 delayed."""
    queue = Queue(connection, queue_name)
    queue.add("ok")
    queue.add("bad")
    k = QueueKeys(queue_name)

    def work(job: Any) -> None:
        if job.name == "bad":
            raise ValueError("bad")

    with Running(Worker(connection, queue_name, work)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1 and connection.zcard(k.failed) == 1)
    queue.add("later", delay=60_000)
    queue.add("next")
    queue.add("next")


EXPECTED = {"completed": 1, "failed": 1, "waiting": 2, "delayed": 1}


def test_the_collector_reports_each_queues_jobs_by_state(connection: redis.Redis, queue_name: str) -> None:
    _known_queue(connection, queue_name)
    other = f"{queue_name}-empty"
    collector = QueueStateCollector(connection, [queue_name, other])
    scraped = samples(generate_latest(queue_registry(collector)).decode())
    for state in COUNTED:
        assert value(scraped, "echomq_queue_jobs", queue=queue_name, state=state) == EXPECTED.get(state, 0), state
        assert value(scraped, "echomq_queue_jobs", queue=other, state=state) == 0
    assert value(scraped, "echomq_queue_up", queue=queue_name) == 1
    assert value(scraped, "echomq_queue_up", queue=other) == 1


@pytest.fixture(params=["real", "fake"])
def unreachable(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A client whose server is not there: a port nothing listens on, or fakeredis disconnected."""
    if request.param == "real":
        client = redis.Redis(port=free_port(), socket_connect_timeout=1, socket_timeout=1)
    else:
        server = fakeredis.FakeServer()
        server.connected = False
        client = fakeredis.FakeRedis(server=server)
    yield client
    client.close()


def test_a_scrape_without_redis_says_down_and_does_not_raise(unreachable: redis.Redis,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="echomq.contrib.prometheus")
    registry = queue_registry(QueueStateCollector(unreachable, ["orders"]))
    for _ in range(3):
        scraped = samples(generate_latest(registry).decode())
        assert value(scraped, "echomq_queue_up", queue="orders") == 0
        assert not any(name == "echomq_queue_jobs" for name, _ in scraped)  # no count rather than a false 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'orders'" in warnings[0].getMessage()  # once per outage, not per scrape


def test_the_collector_refuses_what_cannot_be_a_queue_list(connection: redis.Redis) -> None:
    with pytest.raises(InvalidInputError, match="at least one queue"):
        QueueStateCollector(connection, [])
    with pytest.raises(InvalidInputError, match="twice"):
        QueueStateCollector(connection, ["a", "a"])
    with pytest.raises(InvalidQueueNameError, match="braces"):
        QueueStateCollector(connection, ["{a}"])


# -- echomq metrics serve ---------------------------------------------------------------------------
def _serve(*argv: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.Popen([sys.executable, "-m", "echomq", "metrics", "serve", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _scrape_when_up(process: subprocess.Popen[str], url: str) -> Samples:
    deadline = time.monotonic() + 20
    while True:
        try:
            return scrape(url)
        except (urllib.error.URLError, ConnectionError):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "echomq metrics serve did not answer"
            time.sleep(0.1)


def _stop(process: subprocess.Popen[str], how: signal.Signals) -> tuple[int, str, str]:
    process.send_signal(how)
    out, err = process.communicate(timeout=15)
    return process.returncode, out, err


def test_metrics_serve_answers_scrapes_until_sigterm(server_url: str, url_connection: redis.Redis,
                                                     queue_name: str) -> None:
    _known_queue(url_connection, queue_name)
    other = f"{queue_name}-idle"
    port = free_port()
    process = _serve("--port", str(port), "--queue", queue_name, "--queue", other, "--redis", server_url)
    try:
        scraped = _scrape_when_up(process, f"http://127.0.0.1:{port}/metrics")
        Queue(url_connection, other).add("one")  # read at scrape time, not at start
        again = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        status, out, err = _stop(process, signal.SIGTERM)
    for state in COUNTED:
        assert value(scraped, "echomq_queue_jobs", queue=queue_name, state=state) == EXPECTED.get(state, 0), state
    assert value(scraped, "echomq_queue_jobs", queue=other, state="waiting") == 0
    assert value(again, "echomq_queue_jobs", queue=other, state="waiting") == 1
    assert value(scraped, "echomq_queue_up", queue=queue_name) == value(scraped, "echomq_queue_up", queue=other) == 1
    assert (status, err) == (0, "")
    assert out == f"echomq metrics serve: queues {queue_name}, {other} at http://127.0.0.1:{port}/metrics\n"


def test_metrics_serve_without_redis_serves_down_and_stops_on_ctrl_c() -> None:
    port = free_port()
    process = _serve("--port", str(port), "--queue", "orders", "--redis", f"redis://127.0.0.1:{free_port()}/0")
    try:
        scraped = _scrape_when_up(process, f"http://127.0.0.1:{port}/metrics")
    finally:
        status, _out, err = _stop(process, signal.SIGINT)
    assert value(scraped, "echomq_queue_up", queue="orders") == 0
    assert status == 0
    assert "cannot read the job counts of queue 'orders'" in err and "Traceback" not in err


def test_metrics_serve_on_a_taken_port_says_so_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _serve("--port", str(port), "--queue", "orders")
        out, err = process.communicate(timeout=30)
    assert process.returncode == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"echomq metrics serve: cannot listen on 127.0.0.1:{port}: ")


@pytest.mark.parametrize("argv", [["--queue", "orders"], ["--port", "70000", "--queue", "orders"],
                                  ["--port", "9100"], ["--port", "9100", "--queue", "a:b"]])
def test_metrics_serve_refuses_bad_arguments(argv: list[str]) -> None:
    process = _serve(*argv)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 2 and err.count("\n") == 1 and "error:" in err


WITHOUT_PROMETHEUS_CLIENT = "import sys; sys.modules['prometheus_client'] = None; "  # import fails as if absent


def test_without_prometheus_client_the_command_says_what_to_install() -> None:
    code = WITHOUT_PROMETHEUS_CLIENT + ("from echomq.cli import main; "
                                        "sys.exit(main(['metrics', 'serve', '--port', '0', '--queue', 'orders']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "pip install 'echomq[prometheus]'" in done.stderr


def test_without_prometheus_client_the_import_says_what_to_install() -> None:
    code = WITHOUT_PROMETHEUS_CLIENT + "import echomq.contrib.prometheus"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 1
    assert "ImportError: echomq.contrib.prometheus needs prometheus_client" in done.stderr
    assert "pip install 'echomq[prometheus]'" in done.stderr
