"""Prometheus metrics for EchoMQ (``pip install 'echomq[prometheus]'``, built on prometheus_client).

Two sources, one per question (docs/metrics.md):

* ``PrometheusListener``, a ``WorkerListener``: what this process's workers did. Counters of
  completed, failed, retried and stalled jobs, lost locks and Redis errors, and a histogram of
  how long the processor ran, each labelled by queue. Give one instance to every Worker of the
  process (``Worker(..., listeners=[metrics])``) and serve its registry as usual.
* ``QueueStateCollector``: what the queues hold, read from Redis on each scrape (the job
  counts by state of ``Queue.get_job_counts``), for any queue, worked on here or not. A scrape
  while Redis is away does not fail: that queue's ``echomq_queue_up`` is 0 and its counts are
  left out (a gauge that drops to 0 would read as "the queue emptied").

``echomq metrics serve`` runs the collector in a process of its own, answering ``GET /metrics``
with a ``MetricsServer``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from socketserver import ThreadingMixIn
from typing import Any, NamedTuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis

from ..errors import EchoMQError, InvalidInputError
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys
from ..protocol.states import COUNTED
from ..queue.queue import Queue
from ..transport.connection import Connection, Connections
from ..worker.active_job import ActiveJob
from ..worker.listeners import WorkerListener

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, make_wsgi_app
    from prometheus_client.core import GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # the extra is not installed: say which one
    raise ImportError("echomq.contrib.prometheus needs prometheus_client, which is not installed: "
                      "pip install 'echomq[prometheus]'") from exc

log = logging.getLogger(__name__)

#: Job durations run from milliseconds (a cache refresh) to minutes (a report), wider than the
#: request-sized buckets prometheus_client defaults to.
DURATION_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                                       60.0, 120.0, 300.0, 600.0, 1800.0)


class _QueueSeries(NamedTuple):
    """One queue's children of the listener's per-job metrics."""

    completed: Counter
    failed: Counter
    retried: Counter
    completed_seconds: Histogram
    failed_seconds: Histogram


class PrometheusListener(WorkerListener):
    """Counts what this process's workers do, into ``registry`` (prometheus_client's default
    registry unless given; None: register nowhere, for a collector of your own to wrap).

    Metric names start with ``namespace`` (``echomq_jobs_completed_total`` ...). A registry
    takes each name once, so one listener serves every Worker of a process: the ``queue`` label
    tells their queues apart.
    """

    def __init__(self, registry: CollectorRegistry | None = REGISTRY, *, namespace: str = "echomq",
                 buckets: Sequence[float] = DURATION_BUCKETS) -> None:
        def counter(name: str, documentation: str) -> Counter:
            return Counter(name, documentation, ["queue"], namespace=namespace, registry=registry)

        self.completed = counter("jobs_completed", "Jobs completed by this process's workers.")
        self.failed = counter("jobs_failed", "Jobs that failed for good (no retry left) in this process's workers.")
        self.retried = counter("jobs_retried", "Failed attempts with a retry ahead, in this process's workers.")
        self.stalled = counter("jobs_stalled", "Jobs this process's stalled checks found without a live lock and "
                                               "moved back to wait.")
        self.locks_lost = counter("job_locks_lost", "Jobs whose lock this process's workers lost while running them.")
        self.redis_errors = counter("redis_errors", "Redis calls of this process's workers that failed (and were "
                                                    "retried).")
        self.duration = Histogram("job_duration_seconds", "How long the processor ran, by outcome (completed or "
                                  "failed; a failed attempt with a retry ahead counts as failed).",
                                  ["queue", "outcome"], namespace=namespace, registry=registry, buckets=buckets)

        self._per_queue: dict[str, _QueueSeries] = {}

    def _series(self, queue: str) -> _QueueSeries:
        """The queue's labelled series, looked up once: ``labels()`` costs more than the
        increment itself, on every job. A race builds the same children twice, harmlessly."""
        series = self._per_queue.get(queue)
        if series is None:
            series = self._per_queue[queue] = _QueueSeries(
                self.completed.labels(queue), self.failed.labels(queue), self.retried.labels(queue),
                self.duration.labels(queue, "completed"), self.duration.labels(queue, "failed"))
        return series

    def on_completed(self, job: ActiveJob, result: Any, *, duration_ms: float) -> None:
        series = self._series(job.keys.queue_name)
        series.completed.inc()
        series.completed_seconds.observe(duration_ms / 1000)

    def on_failed(self, job: ActiveJob, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        series = self._series(job.keys.queue_name)
        (series.failed if final else series.retried).inc()
        series.failed_seconds.observe(duration_ms / 1000)

    def on_stalled(self, queue_name: str, job_id: str) -> None:
        self.stalled.labels(queue_name).inc()

    def on_lock_lost(self, queue_name: str, job_id: str) -> None:
        self.locks_lost.labels(queue_name).inc()

    def on_redis_error(self, queue_name: str, error: BaseException, *, during: str) -> None:
        self.redis_errors.labels(queue_name).inc()


class QueueStateCollector(Collector):
    """On each scrape, the job counts by state of ``queues`` (``echomq_queue_jobs{queue,state}``)
    and whether they could be read (``echomq_queue_up{queue}``, 1 or 0).

    ``connection`` is a client (it stays yours) or a URL (the collector owns the client it
    builds; ``close()`` disconnects it). A scrape waits as long as the client's
    ``socket_timeout``: give it one shorter than Prometheus's scrape timeout. Register it with
    ``registry.register(collector)``; nothing is read from Redis until the first scrape.
    """

    def __init__(self, connection: Connection, queues: Iterable[str], *, prefix: str = DEFAULT_PREFIX,
                 namespace: str = "echomq") -> None:
        names = [queues] if isinstance(queues, str) else list(queues)
        if not names:
            raise InvalidInputError("QueueStateCollector: queues must name at least one queue")
        if len(set(names)) != len(names):
            raise InvalidInputError(f"QueueStateCollector: queues={names!r} names a queue twice")
        self._connections = Connections(connection)
        # One client per queue's slot on a Redis Cluster (the same client on one Redis).
        self._queues = [Queue(self._connections.routed(QueueKeys(name, prefix).meta), name, prefix=prefix)
                        for name in names]  # QueueKeys checks each name
        self._namespace = namespace
        self._up: dict[str, bool] = {}
        self._lock = threading.Lock()

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (GaugeMetricFamily(f"{self._namespace}_queue_jobs", "Jobs in the queue, by state (read from Redis "
                                  "at scrape time).", labels=["queue", "state"]),
                GaugeMetricFamily(f"{self._namespace}_queue_up", "1 if the queue's counts could be read from Redis "
                                  "at this scrape, else 0.", labels=["queue"]))

    def describe(self) -> Iterable[Metric]:
        """The metric names, without reading Redis (what a registry asks at register time)."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        jobs, up = self._families()
        for queue in self._queues:
            counts = self._read(queue)
            up.add_metric([queue.name], 0 if counts is None else 1)
            for state in COUNTED:
                if counts is not None:
                    jobs.add_metric([queue.name, state], counts.get(state, 0))
        return [jobs, up]

    def _read(self, queue: Queue) -> dict[str, int] | None:
        """The queue's counts, or None (logged once per outage, not per scrape) when Redis fails."""
        try:
            counts = queue.get_job_counts()
        except (redis.RedisError, OSError, EchoMQError) as exc:
            with self._lock:
                was_up = self._up.get(queue.name, True)
                self._up[queue.name] = False
            log.log(logging.WARNING if was_up else logging.DEBUG,
                    "metrics: cannot read the job counts of queue %r (%s: %s); echomq_queue_up is 0 until they can",
                    queue.name, type(exc).__name__, exc)
            return None
        with self._lock:
            was_up = self._up.get(queue.name, True)
            self._up[queue.name] = True
        if not was_up:
            log.info("metrics: the job counts of queue %r can be read again", queue.name)
        return counts

    def close(self) -> None:
        self._connections.close()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Every scrape would be a line on stderr: say nothing."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """One thread per scrape, so a scrape slowed by Redis does not hold up the next one."""

    daemon_threads = True


class MetricsServer:
    """An HTTP server answering ``GET /metrics`` (any path, in fact) with ``registry``, in a
    thread of its own, until ``close()``. Port 0 takes any free port (see ``port``)."""

    def __init__(self, registry: CollectorRegistry, *, port: int, host: str = "127.0.0.1") -> None:
        self._server = make_server(host, port, make_wsgi_app(registry), server_class=_ThreadingServer,
                                   handler_class=_QuietHandler)
        self.host, self.port = str(self._server.server_address[0]), int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="echomq-metrics-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def queue_registry(collector: QueueStateCollector) -> CollectorRegistry:
    """A registry of its own holding only ``collector``: what ``echomq metrics serve`` exposes."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
