"""Worker listeners: each hook is told exactly when it should be, with what a Sentry, OpenTelemetry
or statsd listener needs, and a listener that raises or dawdles never breaks the worker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import fakeredis
import pytest
import redis

from echomq import WorkerListener
from echomq.errors import InvalidInputError
from echomq.protocol.keys import QueueKeys
from echomq.transport.connection import CONNECTION_ERRORS
from echomq.worker import listeners as listeners_module
from echomq.worker.listeners import ListenerSet
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions
from echomq.worker.worker import Worker

from support.workers import Running, seed_job, wait_until

LOGGER = "echomq.worker.listeners"


class Recorder(WorkerListener):
    """Every hook call, in order, as tuples."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def _add(self, *event: Any) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        with self._lock:
            return [event[1:] for event in self.events if event[0] == kind]

    def on_active(self, job: Any) -> None:
        self._add("active", job.id, id(job))

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        self._add("completed", job.id, result, duration_ms, id(job))

    def on_failed(self, job: Any, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        self._add("failed", job.id, str(error), final, retry_delay_ms, job.attempts_made, duration_ms)

    def on_stalled(self, queue_name: str, job_id: str) -> None:
        self._add("stalled", queue_name, job_id)

    def on_lock_lost(self, queue_name: str, job_id: str) -> None:
        self._add("lock_lost", queue_name, job_id)

    def on_redis_error(self, queue_name: str, error: BaseException, *, during: str) -> None:
        self._add("redis_error", queue_name, error, during)


class Raising(WorkerListener):
    """A listener with a bug in every hook."""

    def on_active(self, job: Any) -> None:
        raise RuntimeError("bug in on_active")

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        raise RuntimeError("bug in on_completed")

    def on_failed(self, job: Any, error: BaseException, *, duration_ms: float, final: bool,
                  retry_delay_ms: int | None) -> None:
        raise RuntimeError("bug in on_failed")

    def on_stalled(self, queue_name: str, job_id: str) -> None:
        raise RuntimeError("bug in on_stalled")

    def on_lock_lost(self, queue_name: str, job_id: str) -> None:
        raise RuntimeError("bug in on_lock_lost")

    def on_redis_error(self, queue_name: str, error: BaseException, *, during: str) -> None:
        raise RuntimeError("bug in on_redis_error")


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _orphan(connection: redis.Redis, queue_name: str) -> str:
    """A job a dead worker left behind: active under a token nobody renews, its lock expired."""
    job_id = seed_job(connection, queue_name, "orphan")
    transitions = Transitions(connection, QueueKeys(queue_name), WorkerOptions())
    assert transitions.move_to_active("dead-worker:1", int(time.time() * 1000)).job_id == job_id
    transitions.release_thread_connection()
    connection.delete(QueueKeys(queue_name).job_lock(job_id))
    return job_id


def _state(connection: redis.Redis, queue_name: str, job_id: str) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in connection.hgetall(QueueKeys(queue_name).job(job_id)).items()}


# -- each hook, when it should be told ------------------------------------------------------------
def test_active_then_completed_with_the_processors_job_result_and_duration(
        connection: redis.Redis, queue_name: str) -> None:
    recorder = Recorder()
    job_id = seed_job(connection, queue_name, "resize", {"px": 64})
    seen: list[int] = []

    def resize(job: Any) -> dict[str, int]:
        seen.append(id(job))
        time.sleep(0.03)
        return {"px": job.data["px"] * 2}

    with Running(Worker(connection, queue_name, resize, listeners=[recorder])):
        assert wait_until(lambda: recorder.of("completed"))
    assert recorder.of("active") == [(job_id, seen[0])]
    [(done_id, result, duration_ms, job_object)] = recorder.of("completed")
    assert (done_id, result, job_object) == (job_id, {"px": 128}, seen[0])  # the object the processor got
    assert 30 <= duration_ms < 5000
    assert [event[0] for event in recorder.events] == ["active", "completed"]
    assert connection.zscore(QueueKeys(queue_name).completed, job_id) is not None  # recorded before told


def test_failed_with_a_retry_ahead_then_for_good(connection: redis.Redis, queue_name: str) -> None:
    recorder = Recorder()
    job_id = seed_job(connection, queue_name, opts={"attempts": 2, "backoff": {"type": "fixed", "delay": 50}})

    def boom(job: Any) -> None:
        raise ValueError(f"no customer (attempt {job.attempts_made + 1})")

    with Running(Worker(connection, queue_name, boom, listeners=[recorder])):
        assert wait_until(lambda: len(recorder.of("failed")) == 2)
    first, second = recorder.of("failed")
    assert first[:5] == (job_id, "no customer (attempt 1)", False, 50, 0)
    assert second[:5] == (job_id, "no customer (attempt 2)", True, None, 1)
    assert all(0 <= failure[5] < 5000 for failure in (first, second))
    assert [event[0] for event in recorder.events] == ["active", "failed", "active", "failed"]
    assert recorder.of("completed") == []
    assert _state(connection, queue_name, job_id)["atm"] == "2"


def test_a_job_that_cannot_run_is_told_as_failed_for_good(connection: redis.Redis, queue_name: str) -> None:
    recorder = Recorder()
    job_id = seed_job(connection, queue_name, opts={"attempts": 3})
    connection.hset(QueueKeys(queue_name).job(job_id), "data", "{not json")
    with Running(Worker(connection, queue_name, lambda job: None, listeners=[recorder])):
        assert wait_until(lambda: recorder.of("failed"))
    [(failed_id, reason, final, delay, _made, _ms)] = recorder.of("failed")
    assert (failed_id, final, delay) == (job_id, True, None) and "data" in reason


def test_stalled_is_told_once_by_the_worker_whose_check_found_it(connection: redis.Redis, queue_name: str) -> None:
    recorder = Recorder()
    orphan = _orphan(connection, queue_name)
    with Running(Worker(connection, queue_name, lambda job: "recovered", stalled_interval=200, listeners=[recorder])):
        assert wait_until(lambda: recorder.of("completed"))
        time.sleep(0.5)  # two more stalled checks: nothing else is stalled
    assert recorder.of("stalled") == [(queue_name, orphan)]
    assert [c[:2] for c in recorder.of("completed")] == [(orphan, "recovered")]
    assert recorder.of("lock_lost") == []


@pytest.mark.parametrize("how", ["taken by another worker", "expired"])
def test_lock_lost_is_told_once_and_the_outcome_is_not(connection: redis.Redis, queue_name: str, how: str) -> None:
    """Taken: the renewal finds the lock held by someone else. Expired (with a renewal far off):
    the final move is refused. Either way the loss is told once and no outcome is."""
    k = QueueKeys(queue_name)
    recorder = Recorder()
    job_id = seed_job(connection, queue_name)
    running, release = threading.Event(), threading.Event()

    def slow(job: Any) -> str:
        running.set()
        release.wait(10)
        return "late"

    lock_duration = 400 if how == "taken by another worker" else 30000
    with Running(Worker(connection, queue_name, slow, lock_duration=lock_duration, listeners=[recorder])):
        assert running.wait(5)
        if how == "taken by another worker":
            connection.set(k.job_lock(job_id), "another-worker:1")
            assert wait_until(lambda: recorder.of("lock_lost"), timeout=5)
        else:
            connection.delete(k.job_lock(job_id))
        release.set()
        assert wait_until(lambda: recorder.of("lock_lost"), timeout=5)
        time.sleep(0.3)
    assert recorder.of("lock_lost") == [(queue_name, job_id)]
    assert recorder.of("completed") == [] and recorder.of("failed") == []
    assert connection.zscore(k.completed, job_id) is None


@pytest.fixture(params=["real", "fake"])
def breakable(request: pytest.FixtureRequest) -> Iterator[tuple[redis.Redis, Callable[[], None]]]:
    """A client and a way to take its server away: a private redis-server stopped, or a
    fakeredis server disconnected."""
    if request.param == "real":
        server = request.getfixturevalue("redis_server_factory")(persistent=False)
        client = redis.Redis.from_url(server.url, socket_timeout=2)
        yield client, server.stop
    else:
        fake = fakeredis.FakeServer()
        client = fakeredis.FakeRedis(server=fake)

        def disconnect() -> None:
            fake.connected = False

        yield client, disconnect
    client.close()


def test_redis_errors_are_told_with_what_the_worker_was_doing(
        breakable: tuple[redis.Redis, Callable[[], None]], queue_name: str) -> None:
    client, take_server_away = breakable
    recorder = Recorder()
    seed_job(client, queue_name)
    worker = Worker(client, queue_name, lambda job: "ok", drain_delay=0.2, listeners=[recorder])
    with Running(worker, close_timeout=1):
        assert wait_until(lambda: recorder.of("completed"))
        take_server_away()
        assert wait_until(lambda: recorder.of("redis_error"), timeout=10)
    told = recorder.of("redis_error")
    assert all(queue == queue_name and isinstance(error, CONNECTION_ERRORS) for queue, error, _ in told)
    assert {during for _, _, during in told} <= {"fetching a job", "waiting for jobs",
                                                  "renewing locks and checking for stalled jobs"}


# -- a listener never breaks the worker -----------------------------------------------------------
def test_a_listener_raising_in_every_hook_changes_nothing_and_is_logged_once_per_hook(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    k = QueueKeys(queue_name)
    caplog.set_level(logging.ERROR, logger=LOGGER)
    recorder = Recorder()
    orphan = _orphan(connection, queue_name)
    ok = [seed_job(connection, queue_name, "ok", {"n": n}) for n in range(4)]
    doomed = seed_job(connection, queue_name, "doomed")

    def work(job: Any) -> int:
        if job.name == "doomed":
            raise ValueError("doomed")
        return int(job.data.get("n", -1))

    worker = Worker(connection, queue_name, work, stalled_interval=200, listeners=[Raising(), recorder])
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 5 and connection.zcard(k.failed) == 1)
        assert wait_until(lambda: recorder.of("stalled"))
    assert {_s(m) for m in connection.zrange(k.completed, 0, -1)} == {*ok, orphan}
    assert {_s(m) for m in connection.zrange(k.failed, 0, -1)} == {doomed}
    assert len(recorder.of("completed")) == 5  # the listener after the raising one is still told
    records = [r for r in caplog.records if r.name == LOGGER]
    by_hook = {hook: [r for r in records if f"Raising.{hook}" in r.getMessage()]
               for hook in ("on_active", "on_completed", "on_failed", "on_stalled")}
    for hook, found in by_hook.items():
        assert len(found) == 1, (hook, [r.getMessage() for r in records])  # 6 active, 5 completed: logged once
        assert found[0].exc_info is not None and f"bug in {hook}" in str(found[0].exc_info[1])


def test_repeated_listener_errors_are_summed_up_not_logged_each_time(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    listeners = ListenerSet([Raising()], "orders")
    for n in range(5):
        listeners.lock_lost(str(n))
    listeners.join(5)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(messages) == 1 and "Raising.on_lock_lost raised" in messages[0]
    monkeypatch.setattr(listeners_module, "REPEAT_LOG_S", 0.0)
    listeners.lock_lost("5")
    listeners.join(5)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(messages) == 2
    assert "raised 5 more time(s), the last time RuntimeError: bug in on_lock_lost" in messages[1]


def test_a_slow_listener_on_an_outcome_keeps_the_next_jobs_lock_alive(
        connection: redis.Redis, queue_name: str) -> None:
    """Fetch-next hands the processor its next job, locked, with the outcome: while a listener
    dawdles over that outcome, the next job's lock is renewed like any running job's."""
    k = QueueKeys(queue_name)

    class SlowOnFirst(Recorder):
        def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
            if result == 0:
                time.sleep(1.2)  # three lock durations
            super().on_completed(job, result, duration_ms=duration_ms)

    recorder = SlowOnFirst()
    first, second = (seed_job(connection, queue_name, "n", {"n": n}) for n in range(2))
    worker = Worker(connection, queue_name, lambda job: job.data["n"], lock_duration=400, listeners=[recorder])
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 2, timeout=10)
    assert [c[:2] for c in recorder.of("completed")] == [(first, 0), (second, 1)]
    assert recorder.of("lock_lost") == []
    assert _state(connection, queue_name, second)["ats"] == "1"  # ran once, never stalled


def test_a_slow_listener_on_a_stall_does_not_delay_lock_renewal(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)

    class SlowOnStall(Recorder):
        def on_stalled(self, queue_name: str, job_id: str) -> None:
            time.sleep(1.5)  # were it told on the maintenance thread, every lock would expire meanwhile
            super().on_stalled(queue_name, job_id)

    recorder = SlowOnStall()
    orphan = _orphan(connection, queue_name)
    long_job = seed_job(connection, queue_name, "long")

    def work(job: Any) -> str:
        if job.name == "long":
            time.sleep(1.5)
        return job.name

    worker = Worker(connection, queue_name, work, concurrency=2, lock_duration=400, stalled_interval=200,
                    listeners=[recorder])
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 2, timeout=10)
        assert wait_until(lambda: recorder.of("stalled"), timeout=5)
    assert recorder.of("stalled") == [(queue_name, orphan)]
    assert recorder.of("lock_lost") == []
    assert _state(connection, queue_name, long_job)["ats"] == "1"


# -- what a Worker accepts ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [Recorder(), [object()], "listener", 42])
def test_listeners_must_be_a_list_of_worker_listeners(connection: redis.Redis, queue_name: str, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="listeners"):
        Worker(connection, queue_name, lambda job: None, listeners=bad)


def test_a_listener_overriding_no_job_hook_costs_the_processor_threads_nothing() -> None:
    class StallsOnly(WorkerListener):
        def on_stalled(self, queue_name: str, job_id: str) -> None:
            pass

    assert not ListenerSet([StallsOnly()], "orders").times_jobs
    assert not ListenerSet(None, "orders").times_jobs
    assert ListenerSet([Recorder()], "orders").times_jobs
