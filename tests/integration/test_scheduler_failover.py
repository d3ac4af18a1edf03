"""A scheduler iteration runs at most once per slot when a failover loses its completion
(echomq/schedule/runs.py): the new master still holds it as pending, as the replica had it."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import redis

from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker

from support.workers import Running, wait_until


def test_an_iteration_whose_completion_was_lost_is_not_run_again(connection: redis.Redis, queue_name: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    keys = QueueKeys(queue_name)
    iteration = JobScheduler(connection, queue_name).upsert("tick", {"every": 3_600_000}, "tick")
    assert iteration is not None
    job_id = iteration.job_id
    as_the_replica_had_it = connection.hgetall(keys.job(job_id))
    runs: list[str] = []
    lock = threading.Lock()

    def processor(job: Any) -> str:
        with lock:
            runs.append(job.id)
        return "done"

    worker = Worker(connection, queue_name, processor, drain_delay=0.2)
    with Running(worker), caplog.at_level(logging.WARNING, logger="echomq.worker.processing"):
        connection.zadd(keys.delayed, {job_id: 0})  # due now
        connection.zadd(keys.marker, {"0": 0})
        assert wait_until(lambda: connection.zscore(keys.completed, job_id) is not None)
        # the failover: the completion is gone, the iteration is pending again (as the replica had it)
        connection.zrem(keys.completed, job_id)
        connection.delete(keys.job(job_id))
        connection.hset(keys.job(job_id), mapping=as_the_replica_had_it)
        connection.zadd(keys.delayed, {job_id: 0})
        connection.zadd(keys.marker, {"0": 0})
        assert wait_until(lambda: connection.zscore(keys.completed, job_id) is not None)
    assert runs == [job_id]
    assert connection.hget(keys.job(job_id), "returnvalue") == b'"done"'
    assert any("ran here already" in r.getMessage() and job_id in r.getMessage() for r in caplog.records)
