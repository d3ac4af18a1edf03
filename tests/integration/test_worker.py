"""The Worker on real Redis and fakeredis: results, failures, retries, keep rules, delayed
jobs, concurrency, shutdown, bad input."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest
import redis

from echomq.errors import InvalidInputError, UnrecoverableError
from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

from support.queue_keys import SCAN_COUNT
from support.workers import Running, events, seed_job, wait_until


def _s(v: Any) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


def _h(connection: redis.Redis, queue_name: str, job_id: str) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in connection.hgetall(QueueKeys(queue_name).job(job_id)).items()}


def _ids(values: list[Any]) -> list[str]:
    return [_s(v) for v in values]


def test_processes_jobs_and_stores_return_values(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    ids = [seed_job(connection, queue_name, "double", {"n": n}) for n in range(5)]
    with Running(Worker(connection, queue_name, lambda job: {"out": job.data["n"] * 2}, name="w1")):
        assert wait_until(lambda: connection.zcard(k.completed) == 5)
    for n, job_id in enumerate(ids):
        h = _h(connection, queue_name, job_id)
        assert json.loads(h["returnvalue"]) == {"out": n * 2}
        assert h["atm"] == "1" and h["ats"] == "1" and h["pb"] == "w1"
        assert int(h["finishedOn"]) >= int(h["processedOn"]) >= int(h["timestamp"])
    assert connection.llen(k.active) == 0 and connection.llen(k.wait) == 0
    assert not connection.exists(k.job_lock(ids[0]))
    kinds = [e["event"] for e in events(connection, queue_name)]
    assert kinds.count("active") == 5 and kinds.count("completed") == 5
    assert kinds[-1] == "drained" and kinds.count("drained") == 1


def test_no_thread_starts_before_run(connection: redis.Redis, queue_name: str) -> None:
    before = threading.active_count()
    Worker(connection, queue_name, lambda job: None, concurrency=4)
    assert threading.active_count() == before


def test_an_exception_fails_the_job_with_message_and_trace(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)

    def boom(job: Any) -> None:
        raise ValueError("no such customer")

    with Running(Worker(connection, queue_name, boom)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1)
    h = _h(connection, queue_name, job_id)
    assert h["failedReason"] == "no such customer"
    trace = json.loads(h["stacktrace"])
    assert len(trace) == 1 and "ValueError: no such customer" in trace[0] and "in boom" in trace[0]
    tail = [(e["event"], e.get("failedReason"), e.get("attemptsMade")) for e in events(connection, queue_name)][-3:]
    assert tail == [("failed", "no such customer", None), ("retries-exhausted", None, "1"), ("drained", None, None)]


def test_retries_with_fixed_backoff_then_completes(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, opts={"attempts": 3, "backoff": {"type": "fixed", "delay": 100}})
    starts: list[float] = []

    def flaky(job: Any) -> str:
        starts.append(time.monotonic())
        if len(starts) < 3:
            raise RuntimeError(f"try {len(starts)}")
        return "ok"

    with Running(Worker(connection, queue_name, flaky)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1)
    assert [b - a >= 0.09 for a, b in itertools.pairwise(starts)] == [True, True]
    h = _h(connection, queue_name, job_id)
    assert h["atm"] == "3" and h["ats"] == "3" and h["delay"] == "0"
    assert len(json.loads(h["stacktrace"])) == 2 and h["failedReason"] == "try 2"
    seq = [(e["event"], e.get("prev")) for e in events(connection, queue_name) if e.get("jobId") == job_id]
    assert seq == [("added", None), ("waiting", None), ("active", "waiting"), ("delayed", None),
                   ("waiting", "delayed"), ("active", "waiting"), ("delayed", None),
                   ("waiting", "delayed"), ("active", "waiting"), ("completed", "active")]


def test_exponential_backoff_sets_the_delay_of_each_retry(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, opts={"attempts": 3, "backoff": {"type": "exponential", "delay": 50}})

    def fail(job: Any) -> None:
        raise RuntimeError("down")

    with Running(Worker(connection, queue_name, fail)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1)
    delayed = [e for e in events(connection, queue_name) if e["event"] == "delayed"]
    assert len(delayed) == 2
    adds = int(_h(connection, queue_name, job_id)["timestamp"])
    dues = [int(e["delay"]) for e in delayed]
    assert dues[0] - adds >= 50 and dues[1] - dues[0] >= 100  # 50 ms, then 100 ms
    assert _h(connection, queue_name, job_id)["atm"] == "3"


def test_attempts_without_backoff_retry_at_once(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, opts={"attempts": 2})
    calls = []

    def once(job: Any) -> str:
        calls.append(job.attempts_made)
        if len(calls) == 1:
            raise RuntimeError("first")
        return "second"

    with Running(Worker(connection, queue_name, once)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1)
    assert calls == [0, 1]
    assert ("waiting", "active") in [(e["event"], e.get("prev")) for e in events(connection, queue_name)
                                     if e.get("jobId") == job_id]


def test_unrecoverable_error_fails_at_once(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, opts={"attempts": 5, "backoff": 10})

    def fatal(job: Any) -> None:
        raise UnrecoverableError("card declined")

    with Running(Worker(connection, queue_name, fatal)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1)
    h = _h(connection, queue_name, job_id)
    assert h["atm"] == "1" and h["failedReason"] == "card declined"
    kinds = [e["event"] for e in events(connection, queue_name)]
    assert "delayed" not in kinds and "retries-exhausted" not in kinds  # atm 1 < attempts 5


@pytest.mark.parametrize(
    ("keep", "kept"),
    [(True, 0), (2, 2), ({"count": 3}, 3), (False, 5), ({"age": 3600}, 5)],
)
def test_remove_on_complete(connection: redis.Redis, queue_name: str, keep: Any, kept: int) -> None:
    k = QueueKeys(queue_name)
    ids = [seed_job(connection, queue_name, opts={"removeOnComplete": keep}) for _ in range(5)]
    done = []
    with Running(Worker(connection, queue_name, lambda job: done.append(job.id))):
        assert wait_until(lambda: len(done) == 5 and connection.llen(k.active) == 0)
        assert wait_until(lambda: b"drained" in str(connection.xrevrange(k.events, count=1)).encode())
    assert _ids(connection.zrange(k.completed, 0, -1)) == ids[5 - kept:]
    assert sum(connection.exists(k.job(i)) for i in ids) == kept


def test_remove_on_fail_keeps_the_newest(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    ids = [seed_job(connection, queue_name, opts={"removeOnFail": 1}) for _ in range(3)]

    def fail(job: Any) -> None:
        raise RuntimeError("x")

    with Running(Worker(connection, queue_name, fail)):
        assert wait_until(lambda: connection.llen(k.wait) == 0 and connection.llen(k.active) == 0
                          and connection.zcard(k.failed) == 1 and not connection.exists(k.job(ids[1])))
    assert _ids(connection.zrange(k.failed, 0, -1)) == [ids[2]]


def test_a_delayed_job_starts_within_50ms_of_its_due_time(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    started: list[int] = []
    with Running(Worker(connection, queue_name, lambda job: started.append(int(time.time() * 1000)))):
        time.sleep(0.2)  # the worker is idle, blocked on the marker
        now = int(time.time() * 1000)
        job_id = seed_job(connection, queue_name, delay=2000, now_ms=now)
        assert wait_until(lambda: bool(started), timeout=5)
    due = now + 2000
    assert 0 <= started[0] - due < 50, started[0] - due
    assert int(_h(connection, queue_name, job_id)["processedOn"]) - due < 50
    kinds = [(e["event"], e.get("prev")) for e in events(connection, queue_name)]
    assert ("waiting", "delayed") in kinds
    assert connection.zcard(k.delayed) == 0


def test_concurrency_runs_jobs_side_by_side(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    for _ in range(8):
        seed_job(connection, queue_name)
    active_now = []
    peak = []
    lock = threading.Lock()

    def slow(job: Any) -> None:
        with lock:
            active_now.append(job.id)
            peak.append(len(active_now))
        time.sleep(0.3)
        with lock:
            active_now.remove(job.id)

    t0 = time.monotonic()
    with Running(Worker(connection, queue_name, slow, concurrency=4)):
        assert wait_until(lambda: connection.zcard(k.completed) == 8)
    assert max(peak) == 4
    assert time.monotonic() - t0 < 2.0  # two rounds of 0.3 s, not eight


def test_paused_queue_is_not_consumed(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    connection.hset(k.meta, "paused", 1)
    seed_job(connection, queue_name)
    with Running(Worker(connection, queue_name, lambda job: None)):
        time.sleep(0.5)
        assert connection.llen(k.wait) == 1 and connection.llen(k.active) == 0
        connection.hdel(k.meta, "paused")
        connection.zadd(k.marker, {"0": 0})  # what resume does
        assert wait_until(lambda: connection.zcard(k.completed) == 1)


def test_prioritized_jobs_run_lowest_priority_first(connection: redis.Redis, queue_name: str) -> None:
    order = []
    for p in (3, 1, 2):
        seed_job(connection, queue_name, data={"p": p}, priority=p)
    with Running(Worker(connection, queue_name, lambda job: order.append(job.data["p"]))):
        assert wait_until(lambda: len(order) == 3)
    assert order == [1, 2, 3]


def test_close_waits_for_the_running_job(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    seed_job(connection, queue_name)
    seed_job(connection, queue_name)
    entered = threading.Event()

    def slow(job: Any) -> str:
        entered.set()
        time.sleep(0.5)
        return "done"

    worker = Worker(connection, queue_name, slow)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert entered.wait(5)
    t0 = time.monotonic()
    worker.close()
    assert time.monotonic() - t0 >= 0.3
    thread.join(5)
    assert not thread.is_alive()
    assert connection.zcard(k.completed) == 1  # the running one finished ...
    assert connection.llen(k.wait) == 1  # ... and the other was not taken
    assert not [t for t in threading.enumerate() if t.name.startswith("echomq-") and t.is_alive()]


def test_close_timeout_leaves_the_job_to_the_stalled_check(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)
    entered = threading.Event()
    release = threading.Event()

    def stuck(job: Any) -> None:
        entered.set()
        release.wait(10)

    worker = Worker(connection, queue_name, stuck, lock_duration=300, stalled_interval=200)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert entered.wait(5)
    worker.close(timeout=0.1)
    thread.join(5)
    assert not thread.is_alive()
    assert _ids(connection.lrange(k.active, 0, -1)) == [job_id]  # not lost, not finished
    release.set()
    done = []
    rescuer = Worker(connection, queue_name, lambda job: done.append(job.id), lock_duration=300, stalled_interval=200)
    with Running(rescuer):
        assert wait_until(lambda: done == [job_id], timeout=5)
    assert _h(connection, queue_name, job_id)["stc"] == "1"
    assert "stalled" in [e["event"] for e in events(connection, queue_name)]


def test_a_job_with_defa_fails_without_running(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name, opts={"attempts": 3})
    connection.hset(k.job(job_id), "defa", "job stalled more than allowable limit")
    ran = []
    with Running(Worker(connection, queue_name, ran.append)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1)
    assert ran == []
    h = _h(connection, queue_name, job_id)
    assert h["failedReason"] == "job stalled more than allowable limit" and "defa" not in h


def test_no_drained_while_a_delayed_job_waits(connection: redis.Redis, queue_name: str) -> None:
    seed_job(connection, queue_name)
    seed_job(connection, queue_name, delay=60_000)
    done = []
    with Running(Worker(connection, queue_name, done.append)):
        assert wait_until(lambda: len(done) == 1)
        time.sleep(0.1)
    assert "drained" not in [e["event"] for e in events(connection, queue_name)]  # docs/protocol.md §3.4


def test_a_non_json_return_value_fails_the_job(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)
    with Running(Worker(connection, queue_name, lambda job: object())):
        assert wait_until(lambda: connection.zcard(k.failed) == 1)
    assert "JSON serializable" in _h(connection, queue_name, job_id)["failedReason"]


def test_non_finite_floats_are_stored_as_null_like_json_stringify(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    job_id = seed_job(connection, queue_name)
    result = {"ratio": float("nan"), "limits": [float("inf"), 1.5]}
    with Running(Worker(connection, queue_name, lambda job: result)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1)
    assert json.loads(_h(connection, queue_name, job_id)["returnvalue"]) == {"ratio": None, "limits": [None, 1.5]}
    [done] = [e for e in events(connection, queue_name) if e["event"] == "completed"]
    assert json.loads(done["returnvalue"]) == {"ratio": None, "limits": [None, 1.5]}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"concurrency": 0}, "concurrency"), ({"lock_duration": -1}, "lock_duration"),
     ({"stalled_interval": 1.5}, "stalled_interval"), ({"max_stalled_count": -1}, "max_stalled_count"),
     ({"drain_delay": 0}, "drain_delay"), ({"limiter": {"max": 1}}, "limiter"),
     ({"remove_on_complete": -1}, "remove_on_complete"), ({"remove_on_fail": {"days": 1}}, "remove_on_fail")],
)
def test_bad_settings_are_refused_and_nothing_is_written(
    connection: redis.Redis, queue_name: str, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInputError, match=field):
        Worker(connection, queue_name, lambda job: None, **kwargs)
    assert list(connection.scan_iter(QueueKeys(queue_name).all_keys_pattern(), count=SCAN_COUNT)) == []


def test_processor_must_be_callable(connection: redis.Redis, queue_name: str) -> None:
    with pytest.raises(InvalidInputError, match="processor"):
        Worker(connection, queue_name, "not a function")  # type: ignore[arg-type]


def test_run_twice_is_refused(connection: redis.Redis, queue_name: str) -> None:
    worker = Worker(connection, queue_name, lambda job: None)
    with Running(worker):
        time.sleep(0.05)
    with pytest.raises(Exception, match="runs once"):
        worker.run()


def test_limiter_spaces_jobs_across_the_queue(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    for _ in range(6):
        seed_job(connection, queue_name)
    starts: list[float] = []
    t0 = time.monotonic()
    with Running(Worker(connection, queue_name, lambda job: starts.append(time.monotonic() - t0), concurrency=3,
                        limiter={"max": 2, "duration": 400})):
        assert wait_until(lambda: connection.zcard(k.completed) == 6, timeout=10)
    # two per 400 ms window: the 5th and 6th cannot start before the third window
    assert starts[4] >= 0.75 and starts[5] >= 0.75, starts


def test_a_server_error_on_finish_leaves_the_job_to_the_stalled_check(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    first = seed_job(connection, queue_name)
    seed_job(connection, queue_name)
    worker = Worker(connection, queue_name, lambda job: job.id, lock_duration=300, stalled_interval=200)
    real_finish = worker.transitions.move_to_finished
    failures = []

    def flaky_finish(job_id: str, *args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append(job_id)
            worker.locks.untrack(job_id)  # as after a failover: the lock is not renewed either
            raise redis.ResponseError("READONLY You can't write against a read only replica.")
        return real_finish(job_id, *args, **kwargs)

    worker.transitions.move_to_finished = flaky_finish  # type: ignore[method-assign]
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 2, timeout=10)
    assert failures == [first]
    assert _h(connection, queue_name, first)["stc"] == "1"  # came back through the stalled check


def test_a_processor_can_wait_for_the_children_it_adds(connection: redis.Redis, queue_name: str) -> None:
    from echomq.errors import WaitingChildrenError
    from echomq.queue.queue import Queue

    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    parent_id = queue.add("parent", {"step": "fan-out"}).id
    runs: list[str] = []

    def process(job: Any) -> Any:
        runs.append(job.name)
        if job.name == "child":
            return job.data["n"] * 10
        if not connection.exists(k.job_dependencies(job.id)) and not connection.exists(k.job_processed(job.id)):
            for n in (1, 2):
                queue.add("child", {"n": n}, parent={"id": job.id, "queue": k.base})
            assert job.move_to_waiting_children() is True
            raise WaitingChildrenError()
        assert job.move_to_waiting_children() is False  # nothing pending any more
        return sorted(int(v) for v in connection.hvals(k.job_processed(job.id)))

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: connection.zcard(k.completed) == 3, timeout=10)
    assert runs == ["parent", "child", "child", "parent"]
    assert json.loads(_h(connection, queue_name, parent_id)["returnvalue"]) == [10, 20]
    seq = [(e["event"], e.get("prev")) for e in events(connection, queue_name) if e.get("jobId") == parent_id]
    assert ("waiting-children", "active") in seq and ("waiting", "waiting-children") in seq
    # docs/protocol.md §3.6: the parent's release is written before the last child's own "completed"
    stream = events(connection, queue_name)
    release = next(i for i, e in enumerate(stream) if e.get("prev") == "waiting-children")
    last_child_done = max(i for i, e in enumerate(stream) if e["event"] == "completed" and e["jobId"] != parent_id)
    assert release == last_child_done - 1
    assert _h(connection, queue_name, parent_id)["ats"] == "2"


def test_start_then_close_at_once_joins_every_thread(connection: redis.Redis, queue_name: str) -> None:
    before = {t.ident for t in threading.enumerate()}
    worker = Worker(connection, queue_name, lambda job: None, concurrency=3).start()
    worker.close()
    assert {t.ident for t in threading.enumerate() if t.is_alive()} - before == set()
    assert not worker.running


def test_a_decode_responses_client_works_too(connection: redis.Redis, queue_name: str) -> None:
    pool = connection.connection_pool
    kwargs = {**pool.connection_kwargs, "decode_responses": True}
    text_client = type(connection)(connection_pool=pool.__class__(connection_class=pool.connection_class, **kwargs))
    k = QueueKeys(queue_name)
    ok = seed_job(connection, queue_name, data={"n": 2})
    bad = seed_job(connection, queue_name, data={"n": -1}, opts={"attempts": 2, "backoff": 20})

    def process(job: Any) -> int:
        if job.data["n"] < 0:
            raise ValueError("negative")
        return job.data["n"] * 2

    with Running(Worker(text_client, queue_name, process, lock_duration=1000)):
        assert wait_until(lambda: connection.zcard(k.completed) == 1 and connection.zcard(k.failed) == 1)
    assert _h(connection, queue_name, ok)["returnvalue"] == "4"
    assert _h(connection, queue_name, bad)["atm"] == "2"
    text_client.close()


def test_several_workers_share_a_queue_each_job_once(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    n = 600
    pipe = connection.pipeline(transaction=False)
    for i in range(n):
        seed_job(pipe, queue_name, data={"i": i}, opts={"attempts": 2} if i % 7 == 0 else None)
    pipe.execute()
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()

    def make(name: str) -> Any:
        def process(job: Any) -> str:
            with lock:
                seen.append((name, job.data["i"]))
            if job.data["i"] % 7 == 0 and job.attempts_made == 0:
                raise RuntimeError("again")
            return name
        return process

    workers = [Worker(connection, queue_name, make(f"w{i}"), concurrency=3, name=f"w{i}") for i in range(3)]
    runners = [Running(w) for w in workers]
    for r in runners:
        r.__enter__()
    try:
        assert wait_until(lambda: connection.zcard(k.completed) == n, timeout=60)
    finally:
        for r in runners:
            r.__exit__()
    retried = len(range(0, n, 7))
    assert len(seen) == n + retried  # every job once, the flaky ones twice
    assert sorted({i for _, i in seen}) == list(range(n))
    assert len({name for name, _ in seen}) == 3  # all three took part
    assert connection.llen(k.active) == 0 and connection.zcard(k.failed) == 0


def test_worker_keep_rules_apply_where_the_job_sets_none(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    ids = [seed_job(connection, queue_name) for _ in range(4)]
    own = seed_job(connection, queue_name, opts={"removeOnComplete": False})
    done = []
    with Running(Worker(connection, queue_name, done.append, remove_on_complete={"count": 2})):
        assert wait_until(lambda: len(done) == 5 and connection.llen(k.active) == 0)
        assert wait_until(lambda: connection.zcard(k.completed) <= 3)
    # the worker's count trimmed as the others finished; the last job's own rule (keep all) won
    assert _ids(connection.zrange(k.completed, 0, -1)) == [ids[2], ids[3], own]
    assert connection.exists(k.job(own)) and not connection.exists(k.job(ids[0]))


def test_options_given_to_queue_add_steer_the_worker(connection: redis.Redis, queue_name: str) -> None:
    from echomq.queue.queue import Queue

    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    gone = queue.add("gone", {}, remove_on_complete=True).id
    capped = queue.add("capped", {}, attempts=3, backoff={"type": "fixed", "delay": 10}, stack_trace_limit=1).id

    def process(job: Any) -> str:
        if job.name == "capped":
            raise RuntimeError(f"attempt {job.attempts_made + 1}")
        return "ok"

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: connection.zcard(k.failed) == 1 and connection.llen(k.active) == 0)
    assert not connection.exists(k.job(gone))
    job = queue.get_job(capped)
    assert job is not None and job.attempts_made == 3 and job.failed_reason == "attempt 3"
    assert len(job.stacktrace) == 1 and "attempt 3" in job.stacktrace[0]
