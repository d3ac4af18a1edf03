"""The Worker under the hardening issue: a processor that raises ``SystemExit`` and friends, a
failure that leaves a log line, ``close()`` from inside a processor, an inherited Worker in a
forked child, settings that would break at run time, and lock-loss warnings only for locks
really lost. Real Redis and fakeredis alike."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

from support.queue_keys import SCAN_COUNT
from support.workers import Running, seed_job, wait_until

PROCESSING_LOG = "echomq.worker.processing"
MAINTENANCE_LOG = "echomq.worker.maintenance"


def _s(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def _h(connection: redis.Redis, queue_name: str, job_id: str) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in connection.hgetall(QueueKeys(queue_name).job(job_id)).items()}


class DiskOnFire(BaseException):
    """Not an Exception: what a careless library might raise."""


# -- item 8: BaseException in a processor, and a log line per failed attempt --------------------

def test_system_exit_and_other_base_exceptions_fail_the_attempt_and_the_worker_lives_on(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    exit_job = seed_job(connection, queue_name, "exit", {"raise": "exit"}, opts={"attempts": 2})
    interrupt_job = seed_job(connection, queue_name, "interrupt", {"raise": "interrupt"})
    base_job = seed_job(connection, queue_name, "base", {"raise": "base"})
    after = [seed_job(connection, queue_name, "plain", {"raise": None}) for _ in range(3)]

    def process(job: Any) -> str:
        kind = job.data["raise"]
        if kind == "exit":
            raise SystemExit(3)
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "base":
            raise DiskOnFire("the disk is on fire")
        return "ok"

    worker = Worker(connection, queue_name, process, concurrency=3)
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 3 and connection.zcard(k.failed) == 3,
                          timeout=5), (connection.zcard(k.completed), connection.zcard(k.failed))
        assert worker.running
    for job_id in after:
        assert _h(connection, queue_name, job_id)["returnvalue"] == '"ok"'
    exit_hash = _h(connection, queue_name, exit_job)
    assert exit_hash["atm"] == "2" and exit_hash["failedReason"] == "3"  # retried once, as its attempts say
    traces = json.loads(exit_hash["stacktrace"])
    assert len(traces) == 2 and all("SystemExit: 3" in t for t in traces)
    assert _h(connection, queue_name, interrupt_job)["failedReason"] == "KeyboardInterrupt"
    assert _h(connection, queue_name, base_job)["failedReason"] == "the disk is on fire"
    assert connection.llen(k.active) == 0
    errors = [r for r in caplog.records if r.name == PROCESSING_LOG and r.levelno == logging.ERROR]
    for job_id, kind, count in [(exit_job, "SystemExit", 2), (interrupt_job, "KeyboardInterrupt", 1),
                                (base_job, "DiskOnFire", 1)]:
        mine = [r for r in errors if f"job {job_id} " in r.getMessage()]
        assert len(mine) == count, [r.getMessage() for r in errors]
        for record in mine:
            assert record.exc_info is not None and record.exc_info[0].__name__ == kind  # the traceback


def test_a_failed_attempt_leaves_a_log_line_saying_whether_a_retry_is_ahead(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, "charge-card", {"n": 1},
                      opts={"attempts": 2, "backoff": {"type": "fixed", "delay": 50}})

    def process(job: Any) -> None:
        raise ValueError("card declined")

    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1, timeout=5)
    lines = [r for r in caplog.records if r.name == PROCESSING_LOG and r.levelno >= logging.WARNING
             and f"job {job_id} " in r.getMessage()]
    assert len(lines) == 2, [r.getMessage() for r in caplog.records]
    first, last = (r.getMessage() for r in lines)
    assert "charge-card" in first and "attempt 1 of 2" in first and "card declined" in first
    assert "retrying in 50 ms" in first
    assert "charge-card" in last and "attempt 2 of 2" in last and "no retry" in last


# -- item 10: close() from inside a processor ----------------------------------------------------

@pytest.mark.parametrize("timeout", [None, 5.0], ids=["no-timeout", "timeout"])
@pytest.mark.parametrize("how", ["run", "start"])
def test_close_from_inside_a_processor_returns_and_the_job_completes(
    connection: redis.Redis, queue_name: str, timeout: float | None, how: str,
) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, "shutdown")
    box: dict[str, Any] = {}

    def process(job: Any) -> str:
        started = time.monotonic()
        box["worker"].close(timeout)
        box["close_took"] = time.monotonic() - started
        return "bye"

    worker = box["worker"] = Worker(connection, queue_name, process)
    if how == "run":
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        thread.join(5)
        assert not thread.is_alive(), "run() did not return after close() from inside the processor"
    else:
        worker.start()
        assert wait_until(lambda: "close_took" in box and not worker.running, timeout=5)
        started = time.monotonic()
        worker.close()  # the host's own close() afterwards joins what start() began
        assert time.monotonic() - started < 1.0
    assert box["close_took"] < 1.0
    assert not worker.running
    assert not [t.name for t in threading.enumerate() if queue_name in t.name and t.is_alive()]
    assert _h(connection, queue_name, job_id)["returnvalue"] == '"bye"'
    assert connection.llen(k.active) == 0 and not connection.exists(k.job_lock(job_id))
    seed_job(connection, queue_name, "later")
    time.sleep(0.1)
    assert connection.llen(k.wait) == 1  # nothing takes jobs any more


# -- item 12: an inherited Worker in a forked child ----------------------------------------------

def test_an_inherited_worker_is_not_running_in_a_forked_child(connection: redis.Redis, queue_name: str) -> None:
    worker = Worker(connection, queue_name, lambda job: None)
    with Running(worker):
        assert wait_until(lambda: worker.running)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: none of the worker's threads exist here
            try:
                os.write(write_end, b"1" if worker.running else b"0")
            finally:
                os._exit(0)
        os.close(write_end)
        answer = os.read(read_end, 1)
        os.close(read_end)
        os.waitpid(pid, 0)
        assert worker.running  # still running in the parent
    assert answer == b"0"


# -- item 13: settings that would break at run time ----------------------------------------------

class _NotCallable:
    pass


BAD_SETTINGS = [
    ({"lock_duration": 1000, "lock_renew_time": 1000}, "lock_renew_time"),
    ({"lock_duration": 1000, "lock_renew_time": 5000}, "lock_renew_time"),
    ({"lock_renew_time": 0}, "lock_renew_time"),
    ({"lock_duration": 2**31}, "lock_duration"),
    ({"stalled_interval": 2**31}, "stalled_interval"),
    ({"name": "my worker"}, "name"),
    ({"name": "w\n1"}, "name"),
    ({"name": "w\t1"}, "name"),
    ({"name": "wörker"}, "name"),
    ({"name": "w\x7f"}, "name"),
    ({"name": 7}, "name"),
    ({"prefix": "my app"}, "prefix"),
    ({"drain_delay": math.nan}, "drain_delay"),
    ({"drain_delay": math.inf}, "drain_delay"),
    ({"drain_delay": -1}, "drain_delay"),
    ({"drain_delay": 0}, "drain_delay"),
    ({"drain_delay": "5"}, "drain_delay"),
    ({"drain_delay": True}, "drain_delay"),
    ({"drain_delay": 1e12}, "drain_delay"),
    ({"clock": 1_700_000_000_000}, "clock"),
    ({"clock": None}, "clock"),
    ({"backoff_strategy": "exponential"}, "backoff_strategy"),
    ({"backoff_strategy": _NotCallable()}, "backoff_strategy"),
    ({"limiter": {"max": 1}}, "limiter"),
    ({"limiter": {"duration": 1000}}, "limiter"),
    ({"limiter": {"max": 0, "duration": 1000}}, "limiter"),
    ({"limiter": {"max": -1, "duration": 1000}}, "limiter"),
    ({"limiter": {"max": "10", "duration": 1000}}, "limiter"),
    ({"limiter": {"max": 1.5, "duration": 1000}}, "limiter"),
    ({"limiter": {"max": True, "duration": 1000}}, "limiter"),
    ({"limiter": {"max": 10, "duration": 0}}, "limiter"),
    ({"limiter": {"max": 10, "duration": "1s"}}, "limiter"),
    ({"limiter": {"max": 10, "duration": 2**31}}, "limiter"),
    ({"limiter": {"max": 10, "duration": 1000, "groupKey": "x"}}, "limiter"),
    ({"limiter": [10, 1000]}, "limiter"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": -2}, "concurrency"),
    ({"concurrency": 2.0}, "concurrency"),
    ({"concurrency": "4"}, "concurrency"),
    ({"concurrency": True}, "concurrency"),
    ({"skip_stalled_check": "no"}, "skip_stalled_check"),
    ({"max_stalled_count": 1.5}, "max_stalled_count"),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_SETTINGS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_SETTINGS)])
def test_a_setting_that_would_break_at_run_time_is_refused_naming_it(
    connection: redis.Redis, queue_name: str, kwargs: dict[str, Any], field: str,
) -> None:
    with pytest.raises(InvalidInputError, match=rf"\b{field}\b"):
        Worker(connection, queue_name, lambda job: None, **kwargs)
    assert list(connection.scan_iter(QueueKeys(queue_name).all_keys_pattern(), count=SCAN_COUNT)) == []


def test_settings_at_their_limits_are_accepted_and_run(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    seed_job(connection, queue_name)
    worker = Worker(connection, queue_name, lambda job: job.id, name="w-1~!{}#", lock_duration=1000,
                    lock_renew_time=999, drain_delay=0.5, limiter={"max": 1, "duration": 2**31 - 1},
                    backoff_strategy=lambda n, kind, err, job: 10, clock=lambda: int(time.time() * 1000),
                    skip_stalled_check=True, concurrency=2)
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 1, timeout=5)
    assert _h(connection, queue_name, _s(connection.zrange(k.completed, 0, 0)[0]))["pb"] == "w-1~!{}#"


# -- item 15: "could not be renewed" only for locks really lost ---------------------------------

def test_no_lock_warning_for_a_job_that_finished_while_its_lock_was_renewed(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)
    go = threading.Event()
    renewed = threading.Event()

    def process(job: Any) -> str:
        go.wait(5)
        return "done"

    worker = Worker(connection, queue_name, process)  # renews every 15 s: only the test renews here
    real_extend = worker.transitions.extend_locks
    real_untrack = worker.locks.untrack

    def extend_after_the_job_finished(tokens: Any) -> list[str]:
        go.set()  # the job finishes between the renewer's snapshot and extendLocks
        assert wait_until(lambda: connection.zscore(k.completed, job_id) is not None, timeout=5)
        return real_extend(tokens)

    def untrack_after_the_renewal(done_id: str) -> None:
        renewed.wait(5)  # the processor forgets the job only once the renewal has answered
        real_untrack(done_id)

    worker.transitions.extend_locks = extend_after_the_job_finished  # type: ignore[method-assign]
    worker.locks.untrack = untrack_after_the_renewal  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(worker):
        assert wait_until(lambda: len(worker.locks) == 1, timeout=5)
        try:
            lost = worker.maintenance.renew_locks()
        finally:
            renewed.set()
        assert wait_until(lambda: worker.processed == 1, timeout=5)
    assert lost == []
    assert [r.getMessage() for r in caplog.records if "could not be renewed" in r.getMessage()] == []


def test_no_lock_warning_for_a_job_that_moved_to_waiting_children_meanwhile(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    from echomq.errors import WaitingChildrenError
    from echomq.queue.queue import Queue

    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    parent = queue.add("parent").id
    go = threading.Event()
    parked = threading.Event()
    renewed = threading.Event()

    def process(job: Any) -> str:
        if job.name == "child":
            return "child"
        if connection.exists(k.job_processed(job.id)):
            return "parent"  # the re-run, after its child
        go.wait(5)
        queue.add("child", parent={"id": job.id, "queue": k.base})
        assert job.move_to_waiting_children() is True
        parked.set()
        renewed.wait(5)
        raise WaitingChildrenError()

    worker = Worker(connection, queue_name, process)
    real_extend = worker.transitions.extend_locks

    def extend_after_the_job_parked(tokens: Any) -> list[str]:
        go.set()
        assert parked.wait(5)
        return real_extend(tokens)

    worker.transitions.extend_locks = extend_after_the_job_parked  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(worker):
        assert wait_until(lambda: len(worker.locks) == 1, timeout=5)
        try:
            lost = worker.maintenance.renew_locks()
        finally:
            renewed.set()
        assert wait_until(lambda: connection.zcard(k.completed) == 2, timeout=5)
    assert lost == []
    assert [r.getMessage() for r in caplog.records if "could not be renewed" in r.getMessage()] == []
    assert _h(connection, queue_name, parent)["returnvalue"] == '"parent"'


def test_a_lock_really_taken_away_is_reported(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)
    release = threading.Event()
    worker = Worker(connection, queue_name, lambda job: release.wait(5))
    with caplog.at_level(logging.DEBUG, logger="echomq"), Running(worker):
        assert wait_until(lambda: len(worker.locks) == 1, timeout=5)
        connection.delete(k.job_lock(job_id))  # as if it expired, or someone removed it
        try:
            lost = worker.maintenance.renew_locks()
        finally:
            release.set()
    assert lost == [job_id]
    warnings = [r for r in caplog.records if r.name == MAINTENANCE_LOG and r.levelno == logging.WARNING
                and "could not be renewed" in r.getMessage()]
    assert [r.getMessage() for r in warnings] == [
        f"lock of job {job_id} could not be renewed; it may be processed again"]
