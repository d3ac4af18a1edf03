"""A sample application for ``echomq worker`` tests: processors and a registry, imported by the
command in a subprocess as ``support.sample_jobs:...`` (tests/ on its PYTHONPATH).

Every job records what a test checks in a Redis list named by its data (``results``): its id,
its queue and the pid of the process that ran it. The registry's queues come from
``SAMPLE_APP_QUEUES`` (comma-separated), so each test gives its subprocess queues of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from echomq import JobRegistry, Queue, WorkerListener
from echomq.processes.arguments import add_worker_arguments
from echomq.processes.command import run_worker

#: What ``leaky`` keeps alive, as leaky application code does.
LEAKED: list[bytes] = []


def results_key(queue: str) -> str:
    """Where the jobs of ``queue`` record themselves (under the queue's keys, so the tests'
    ``queue_name`` cleanup removes it)."""
    return f"emq:{{{queue}}}:test-results"


def record(job: Any) -> dict[str, Any]:
    """The job's trace, pushed on ``data["results"]``; also its return value."""
    entry = {"id": job.id, "queue": job.keys.queue_name, "pid": os.getpid(), "name": job.name}
    results = job.data.get("results")
    if results:
        job.connection.rpush(results, json.dumps(entry))
    return entry


def sleepy(job: Any) -> dict[str, Any]:
    """Mark the start (``data["started"]``, a list), sleep ``data["seconds"]``, add a ``record``
    job to the queue ``data["chain"]`` names if any, then record."""
    started = job.data.get("started")
    if started:
        job.connection.rpush(started, json.dumps({"id": job.id, "pid": os.getpid()}))
    time.sleep(float(job.data.get("seconds", 1)))
    chain = job.data.get("chain")
    if chain:
        Queue(job.connection, chain).add("record", {"results": results_key(chain)})
    return record(job)


def leaky(job: Any) -> dict[str, Any]:
    """Keep ``data["mib"]`` MiB alive for good (written, so it is resident), then record."""
    LEAKED.append(b"x" * (int(job.data.get("mib", 8)) * 2**20))
    time.sleep(float(job.data.get("seconds", 0)))
    return record(job)


def boom(job: Any) -> None:
    raise ValueError(f"boom in job {job.id}")


NOT_A_FUNCTION = 42


def listened_key(queue: str, prefix: str = "emq") -> str:
    """Where the sample listeners record what they were told (under the queue's keys)."""
    return f"{prefix}:{{{queue}}}:test-listened"


class RecordingListener(WorkerListener):
    """Records each completed job it is told of, with its tag, its process and which instance
    it is, so a test sees what listened where (``--listener support.sample_jobs:...``)."""

    def __init__(self, tag: str = "class") -> None:
        self.tag = tag

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        entry = {"tag": self.tag, "pid": os.getpid(), "instance": id(self), "job": job.id}
        job.connection.rpush(listened_key(job.keys.queue_name, job.keys.prefix), json.dumps(entry))


#: A listener instance, as ``--listener support.sample_jobs:LISTENER`` names it.
LISTENER = RecordingListener("instance")


def listener_factory() -> RecordingListener:
    return RecordingListener("factory")


def not_a_listener_factory() -> int:
    return 42


class NotAListener:
    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None: ...


def _sample_registry() -> JobRegistry:
    registry = JobRegistry()  # REDIS_URL at first use: the command sets it from --redis
    queues = [q for q in os.environ.get("SAMPLE_APP_QUEUES", "sample-orders,sample-emails").split(",") if q]
    for queue in queues:
        registry.register(record, queue=queue)
        registry.register(sleepy, queue=queue)
        registry.register(boom, queue=queue)
    return registry


registry = _sample_registry()


def framework_command(argv: list[str]) -> int:
    """What a framework's command (Django's, Flask's) does with ``echomq.processes``: the
    registry is its own, the other options the command's; ``child_setup`` appends the pid of
    each worker process to the file ``SAMPLE_SETUP_LOG`` names."""
    parser = argparse.ArgumentParser(prog="sample-framework worker")
    add_worker_arguments(parser, app_option=False)
    args = parser.parse_args(argv)

    def child_setup() -> None:
        with open(os.environ["SAMPLE_SETUP_LOG"], "a", encoding="ascii") as log:
            log.write(f"{os.getpid()}\n")

    # What a framework's settings hand the command (Django's and Flask's LISTENERS, a worker name).
    host_listeners = [RecordingListener("host")] if os.environ.get("SAMPLE_HOST_LISTENER") else []
    return run_worker(args, registry=registry, child_setup=child_setup, listeners=host_listeners,
                      name=os.environ.get("SAMPLE_WORKER_NAME"))
