"""The operator's side: pause/resume, clean, drain, obliterate, trim, listings and counts."""

from __future__ import annotations

import pytest
import redis

from echomq import Queue
from echomq.errors import InvalidInputError, InvalidStateError
from echomq.protocol.keys import QueueKeys

from support.queues import queue_keys, raw_events, read_events


def _finish(connection: redis.Redis, k: QueueKeys, job_id: str, state: str, finished_on: int) -> None:
    """Put a waiting job into completed/failed as a worker would have left it."""
    connection.lrem(k.wait, 1, job_id)
    connection.zadd(k.key(state), {job_id: finished_on})
    connection.hset(k.job(job_id), mapping={"finishedOn": finished_on, "processedOn": finished_on - 1})


def test_pause_sets_the_flag_and_drops_the_marker_resume_restores_it(connection: redis.Redis,
                                                                    queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    queue.add("x")
    queue.pause()
    assert queue.is_paused()
    assert connection.hget(k.meta, "paused") == b"1"
    assert not connection.exists(k.marker)
    assert connection.llen(k.wait) == 1 and not connection.exists(k.paused)
    queue.resume()
    assert not queue.is_paused()
    assert connection.zrange(k.marker, 0, -1, withscores=True) == [(b"0", 0.0)]
    assert raw_events(connection, queue_name)[-2:] == [["event", "paused"], ["event", "resumed"]]
    assert [e for e, _ in read_events(connection, queue_name)][-2:] == ["paused", "resumed"]


def test_resume_with_only_delayed_jobs_sets_the_delay_marker(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("x", delay=60_000, timestamp=1_900_000_000_000)
    queue.pause()
    queue.resume()
    assert connection.zrange(QueueKeys(queue_name).marker, 0, -1, withscores=True) == [
        (b"1", float(1_900_000_060_000))]
    assert job.get_state() == "delayed"


@pytest.mark.parametrize("wait_exists", [False, True])
def test_resume_migrates_a_legacy_paused_list(connection: redis.Redis, queue_name: str, wait_exists: bool) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    connection.hset(k.meta, "paused", 1)
    connection.rpush(k.paused, *[f"p{n}" for n in range(7005)])
    if wait_exists:
        connection.rpush(k.wait, "w")
    queue.resume()
    assert not connection.exists(k.paused)
    wait = [x.decode() for x in connection.lrange(k.wait, 0, -1)]
    assert wait == (["w"] if wait_exists else []) + [f"p{n}" for n in range(7005)]
    assert [e for e, _ in read_events(connection, queue_name)] == ["resumed"]


def test_clean_completed_respects_grace_and_limit(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    jobs = [queue.add("x", n) for n in range(5)]
    now = 1_900_000_000_000
    for n, job in enumerate(jobs):
        _finish(connection, k, job.id, "completed", 1_000 + n)
    young = queue.add("young")
    _finish(connection, k, young.id, "completed", now * 10)  # finished "in the future": inside grace
    assert queue.clean(0, 2) == [jobs[0].id, jobs[1].id]
    assert queue.clean(0) == [j.id for j in jobs[2:]]
    assert queue.clean(0) == []
    assert connection.zrange(k.completed, 0, -1) == [young.id.encode()]
    assert not any(connection.exists(k.job(j.id)) for j in jobs)
    cleaned = [d for e, d in read_events(connection, queue_name) if e == "cleaned"]
    assert cleaned == [{"count": 2}, {"count": 3}, {"count": 0}]
    assert raw_events(connection, queue_name)[-1] == ["event", "cleaned", "count", "0"]


def test_clean_waiting_delayed_prioritized_and_failed(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    w = [queue.add("w", timestamp=1000 + n) for n in range(3)]
    d = queue.add("d", delay=10, timestamp=1000)
    p = queue.add("p", priority=2, timestamp=1000)
    f = queue.add("f", timestamp=1000)
    _finish(connection, k, f.id, "failed", 2000)
    fresh = queue.add("fresh")
    # Lists are cleaned from the oldest end.
    assert queue.clean(60_000, 2, "wait") == [w[0].id, w[1].id]
    assert queue.clean(60_000, 0, "waiting") == [w[2].id]
    assert fresh.get_state() == "waiting"
    assert queue.clean(60_000, 0, "delayed") == [d.id]
    assert queue.clean(60_000, 0, "prioritized") == [p.id]
    assert queue.clean(60_000, 0, "failed") == [f.id]
    assert queue.get_job_counts("waiting", "delayed", "prioritized", "failed") == {
        "waiting": 1, "delayed": 0, "prioritized": 0, "failed": 0}


def test_clean_skips_locked_active_jobs_and_scheduler_iterations(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    a, b = queue.add("a", timestamp=1000), queue.add("b", timestamp=1000)
    for job in (a, b):
        connection.lrem(k.wait, 1, job.id)
        connection.lpush(k.active, job.id)
    connection.set(k.job_lock(a.id), "tok")
    assert queue.clean(0, 0, "active") == [b.id]
    it = queue.add("tick", job_id="repeat:s:1900000000000", delay=5, repeat_job_key="s", timestamp=1000)
    connection.zadd(k.repeat, {"s": 1900000000000})
    assert queue.clean(0, 0, "delayed") == []
    assert it.get_state() == "delayed"


def test_clean_rejects_bad_arguments(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    for args in ((-1,), (0, -1), (0, 0, "finished"), ("5",)):
        with pytest.raises(InvalidInputError):
            queue.clean(*args)  # type: ignore[arg-type]
    assert queue_keys(connection, queue_name) == set()


def test_drain_keeps_active_finished_and_scheduler_iterations(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    queue.add_bulk([("w", 1), ("w", 2), ("p", 3, {"priority": 1})])
    delayed = queue.add("d", delay=60_000)
    done = queue.add("done")
    _finish(connection, k, done.id, "completed", 5)
    it = queue.add("tick", job_id="repeat:s:1900000000000", repeat_job_key="s")
    connection.zadd(k.repeat, {"s": 1900000000000})
    assert queue.drain() == 3
    assert [j.id for j in queue.get_jobs("waiting")] == [it.id]
    assert delayed.get_state() == "delayed" and done.get_state() == "completed"
    assert queue.drain(include_delayed=True) == 1
    assert delayed.get_state() == "unknown" and not connection.exists(k.job(delayed.id))
    assert not any(e in ("removed", "cleaned") for e, _ in read_events(connection, queue_name))


def test_obliterate_deletes_every_key(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    queue.add_bulk([("w", n) for n in range(1100)])
    queue.add("d", delay=1000)
    queue.add("p", priority=3, deduplication={"id": "x"})
    queue.add_flow({"name": "parent"}, [{"name": "child"}])
    done = queue.add("done")
    done.log("line")
    _finish(connection, k, done.id, "completed", 5)
    connection.zadd(k.repeat, {"s": 1})
    connection.hset(k.scheduler("s"), "name", "s")
    queue.obliterate()
    assert queue_keys(connection, queue_name) == set()


def test_obliterate_refuses_active_jobs_unless_forced(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    job = queue.add("x")
    connection.lrem(k.wait, 1, job.id)
    connection.lpush(k.active, job.id)
    connection.set(k.job_lock(job.id), "tok")
    with pytest.raises(InvalidStateError, match="force"):
        queue.obliterate()
    assert connection.exists(k.job(job.id))
    queue.obliterate(force=True)
    assert queue_keys(connection, queue_name) == set()


def test_trim_events(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add_bulk([("x", n) for n in range(300)])
    assert connection.xlen(QueueKeys(queue_name).events) == 600
    queue.trim_events(0)
    assert connection.xlen(QueueKeys(queue_name).events) < 600
    with pytest.raises(InvalidInputError):
        queue.trim_events(-1)


def test_events_cap_comes_from_meta(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    assert queue.get_events_max_len() == 10000
    with pytest.raises(InvalidInputError):
        queue.set_events_max_len(0)
    queue.set_events_max_len(50)
    assert connection.hget(QueueKeys(queue_name).meta, "opts.maxLenEvents") == b"50"
    queue.add_bulk([("x", n) for n in range(400)])
    # MAXLEN ~ trims whole radix-tree nodes, so the stream stays near the cap, not at 800.
    assert connection.xlen(QueueKeys(queue_name).events) < 400
    assert queue.get_events_max_len() == 50


def test_get_jobs_orders_newest_first_unless_asc(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    ids = [j.id for j in queue.add_bulk([("x", n) for n in range(5)])]
    assert [j.id for j in queue.get_jobs("waiting")] == ids[::-1]
    assert [j.id for j in queue.get_jobs("waiting", 0, 1, asc=True)] == ids[:2]
    assert [j.id for j in queue.get_jobs(["waiting"], 1, 2)] == ids[::-1][1:3]
    delayed = [queue.add("d", delay=1000 * n).id for n in (3, 1, 2)]
    assert [j.id for j in queue.get_jobs("delayed", asc=True)] == [delayed[1], delayed[2], delayed[0]]
    assert len(queue.get_jobs(["waiting", "delayed"])) == 8
    with pytest.raises(InvalidInputError):
        queue.get_jobs("finished")


def test_get_job_counts_defaults_to_every_state(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("a")
    queue.add("b", delay=100)
    queue.add_flow({"name": "p"}, [{"name": "c", "opts": {"priority": 2}}])
    assert queue.get_job_counts() == {"active": 0, "completed": 0, "delayed": 1, "failed": 0, "paused": 0,
                                      "prioritized": 1, "waiting": 1, "waiting-children": 1}
