"""Lock renewal and the stalled check, stepped with a fixed clock.

Real time only matters for key TTLs, so the tests delete a lock (as if it had expired) or the
``stalled-check`` mutex (as if the interval had passed) instead of sleeping.
"""

from __future__ import annotations

import redis

from echomq.protocol.keys import QueueKeys
from echomq.worker.maintenance import LockRegistry, Maintenance
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions

from support.workers import events, seed_job

T0 = 1_800_000_000_000


def _setup(connection: redis.Redis, queue_name: str, **kw: int) -> tuple[Transitions, LockRegistry, Maintenance]:
    tr = Transitions(connection, QueueKeys(queue_name), WorkerOptions(lock_duration=kw.pop("lock_duration", 30000)))
    locks = LockRegistry()
    return tr, locks, Maintenance(tr, locks, lock_duration=tr.options.lock_duration, **kw)


def _s(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def test_first_step_checks_stalled_and_schedules_renewal(connection: redis.Redis, queue_name: str) -> None:
    _, _, m = _setup(connection, queue_name, lock_duration=10000, stalled_interval=30000)
    assert m.run_once(T0) == 5000  # renewal at lock_duration / 2 comes first
    assert connection.exists(QueueKeys(queue_name).stalled_check)
    assert m.run_once(T0 + 4000) == 1000


def test_an_expired_lock_sends_the_job_back_to_wait(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, _, m = _setup(connection, queue_name, stalled_interval=1000)
    job_id = seed_job(connection, queue_name)
    assert tr.move_to_active("tok", T0).job_id == job_id
    m.run_once(T0)  # seeds the stalled set with the active job
    assert connection.smembers(k.stalled) == {job_id.encode()}
    connection.delete(k.job_lock(job_id), k.stalled_check)  # the lock expired, the interval passed
    m.run_once(T0 + 1000)
    assert m.last_stalled == [job_id]
    assert [_s(x) for x in connection.lrange(k.wait, 0, -1)] == [job_id]
    assert connection.llen(k.active) == 0
    assert _s(connection.hget(k.job(job_id), "stc")) == "1"
    tail = [(e["event"], e.get("prev")) for e in events(connection, queue_name)][-2:]
    assert tail == [("waiting", "active"), ("stalled", None)]  # the order of docs/protocol.md §3.5


def test_an_events_cap_that_is_not_a_count_trims_nothing_and_the_stalled_job_still_returns(
        connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, _, m = _setup(connection, queue_name, stalled_interval=1000)
    job_id = seed_job(connection, queue_name)
    assert tr.move_to_active("tok", T0).job_id == job_id
    m.run_once(T0)
    connection.hset(k.meta, "opts.maxLenEvents", "many")  # written by someone else, not a count
    before = connection.xlen(k.events)
    connection.delete(k.job_lock(job_id), k.stalled_check)
    m.run_once(T0 + 1000)
    assert m.last_stalled == [job_id]
    assert [_s(x) for x in connection.lrange(k.wait, 0, -1)] == [job_id]
    assert connection.xlen(k.events) == before + 2  # waiting prev=active and stalled, nothing trimmed


def test_a_held_lock_is_not_stalled(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, _, m = _setup(connection, queue_name)
    job_id = seed_job(connection, queue_name)
    tr.move_to_active("tok", T0)
    m.run_once(T0)
    connection.delete(k.stalled_check)
    m.check_stalled(T0 + 1)
    assert m.last_stalled == []
    assert [_s(x) for x in connection.lrange(k.active, 0, -1)] == [job_id]


def test_stalling_too_often_marks_the_job_for_failure(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, _, m = _setup(connection, queue_name, max_stalled_count=1)
    job_id = seed_job(connection, queue_name)
    for _round in range(2):
        assert tr.move_to_active("tok", T0).job_id == job_id
        connection.delete(k.stalled_check)
        m.check_stalled(T0)
        connection.delete(k.job_lock(job_id), k.stalled_check)
        m.check_stalled(T0)
    assert _s(connection.hget(k.job(job_id), "stc")) == "2"
    assert _s(connection.hget(k.job(job_id), "defa")) == "job stalled more than allowable limit"


def test_a_live_schedulers_iteration_is_always_requeued(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, _, m = _setup(connection, queue_name, max_stalled_count=0)
    connection.hset(k.scheduler("every-sec"), mapping={"name": "tick", "every": "1000", "ic": "1"})
    job_id = seed_job(connection, queue_name, job_id=f"repeat:every-sec:{T0}", rjk="every-sec")
    tr.move_to_active("tok", T0)
    m.check_stalled(T0)
    connection.delete(k.job_lock(job_id), k.stalled_check)
    m.check_stalled(T0)
    assert m.last_stalled == [job_id]
    assert connection.hget(k.job(job_id), "defa") is None


def test_renewal_extends_tracked_locks_and_reports_lost_ones(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    tr, locks, m = _setup(connection, queue_name, lock_duration=4000, skip_stalled_check=True)
    a = seed_job(connection, queue_name)
    b = seed_job(connection, queue_name)
    tr.move_to_active("tok-a", T0)
    tr.move_to_active("tok-b", T0)
    locks.track(a, "tok-a")
    locks.track(b, "tok-b")
    connection.sadd(k.stalled, a, b)
    connection.pexpire(k.job_lock(a), 500)
    connection.set(k.job_lock(b), "someone-else")
    assert m.run_once(T0) == 2000
    assert m.renew_locks() == [b]  # the step at T0 + 2000
    assert connection.pttl(k.job_lock(a)) > 3000
    assert connection.smembers(k.stalled) == {b.encode()}  # a proved alive, b did not
    assert set(locks.snapshot()) == {a}
