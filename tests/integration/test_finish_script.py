"""moveToFinished as the worker calls it (docs/protocol.md §3.4): what it refuses is refused before
anything is written, the attempt count it stores, and the events cap its capped write keeps."""

from __future__ import annotations

import time

import pytest
import redis

from echomq.errors import JobNotFoundError, LockError
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions
from echomq.worker.worker import Worker

from support.workers import Running, wait_until


def _now() -> int:
    return int(time.time() * 1000)


def _active_job(connection: redis.Redis, queue_name: str) -> tuple[Transitions, str]:
    """A queue with one job, taken by token "tok"."""
    Queue(connection, queue_name).add("job", {"n": 1})
    transitions = Transitions(connection, QueueKeys(queue_name), WorkerOptions())
    fetched = transitions.move_to_active("tok", _now())
    assert fetched.job_id is not None
    return transitions, fetched.job_id


def _state(connection: redis.Redis, queue_name: str, job_id: str) -> tuple[object, ...]:
    """Everything a refused finish must leave as it was."""
    k = QueueKeys(queue_name)
    return (connection.hgetall(k.job(job_id)), connection.get(k.job_lock(job_id)), connection.lrange(k.active, 0, -1),
            connection.zrange(k.completed, 0, -1), connection.xlen(k.events), connection.hgetall(k.meta))


def _complete(transitions: Transitions, job_id: str, *, token: str = "tok") -> object:
    return transitions.move_to_finished(job_id, token, _now(), completed=True, value="1", keep=None, attempts=0,
                                        fetch_next=False)


@pytest.mark.parametrize("atm", ["x", "1.5", ""])
def test_a_stored_atm_that_is_not_an_integer_is_refused_before_anything_is_written(
        connection: redis.Redis, queue_name: str, atm: str) -> None:
    transitions, job_id = _active_job(connection, queue_name)
    connection.hset(QueueKeys(queue_name).job(job_id), "atm", atm)
    before = _state(connection, queue_name, job_id)
    with pytest.raises(redis.ResponseError, match="the job's atm is not an integer"):
        _complete(transitions, job_id)
    assert _state(connection, queue_name, job_id) == before


@pytest.mark.parametrize("cap", ["many", "-5", "2.5"])
def test_an_events_cap_that_is_not_a_count_is_refused_before_anything_is_written(
        connection: redis.Redis, queue_name: str, cap: str) -> None:
    transitions, job_id = _active_job(connection, queue_name)
    connection.hset(QueueKeys(queue_name).meta, "opts.maxLenEvents", cap)
    before = _state(connection, queue_name, job_id)
    with pytest.raises(redis.ResponseError, match=r"opts\.maxLenEvents is not an integer >= 0"):
        _complete(transitions, job_id)
    assert _state(connection, queue_name, job_id) == before


def test_another_workers_lock_is_refused_and_nothing_is_written(connection: redis.Redis, queue_name: str) -> None:
    transitions, job_id = _active_job(connection, queue_name)
    before = _state(connection, queue_name, job_id)
    with pytest.raises(LockError, match="held by another worker"):
        _complete(transitions, job_id, token="not-mine")
    assert _state(connection, queue_name, job_id) == before


def test_atm_counts_every_finished_attempt_from_what_is_stored(connection: redis.Redis, queue_name: str) -> None:
    transitions, job_id = _active_job(connection, queue_name)
    k = QueueKeys(queue_name)
    connection.hset(k.job(job_id), "atm", "4")
    assert _complete(transitions, job_id) is None
    assert connection.hget(k.job(job_id), "atm") == b"5"
    assert connection.hget(k.job(job_id), "returnvalue") == b"1"
    assert connection.zscore(k.completed, job_id) is not None


def test_a_job_hash_without_timestamp_still_finishes_and_a_missing_one_is_not_found(
        connection: redis.Redis, queue_name: str) -> None:
    transitions, job_id = _active_job(connection, queue_name)
    k = QueueKeys(queue_name)
    connection.hdel(k.job(job_id), "timestamp")
    assert _complete(transitions, job_id) is None
    assert connection.hget(k.job(job_id), "atm") == b"1"
    with pytest.raises(JobNotFoundError, match="does not exist"):
        _complete(transitions, "no-such-job")


def test_finished_jobs_keep_the_events_stream_near_its_cap(connection: redis.Redis, queue_name: str) -> None:
    """Each job writes added, waiting and active uncapped as well: the capped completed trims
    them all (MAXLEN ~ drops whole stream nodes, so "near" is within a node or two)."""
    queue = Queue(connection, queue_name)
    queue.set_events_max_len(50)
    queue.add_bulk([("x", n) for n in range(600)])
    with Running(Worker(connection, queue_name, lambda job: None)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 600, timeout=30)
    events = QueueKeys(queue_name).events
    # 4 entries per job (2,400 untrimmed); never below the cap, above it by less than one stream
    # node (stream-node-max-entries, 100 by default): seen 140 on Redis 7, 94 on fakeredis
    assert 50 <= connection.xlen(events) < 50 + 100
    # what is kept is the newest: the last finish is there, the first job's events are gone
    kept = [fields for _, fields in connection.xrange(events)]
    finished = [f[b"jobId"] for f in kept if f.get(b"event") == b"completed"]
    assert b"600" in finished and b"1" not in [f.get(b"jobId") for f in kept]
