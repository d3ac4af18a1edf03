"""What a worker sends again after its master moved (echomq/worker/master_moves.py, the
reclaimJob script), on both backends, one interleaving per test.

A failover that lost the worker's last writes is played here by rewinding the queue
(tests/support/snapshot.py): every key is DUMPed at the moment the new master would have stopped
receiving, the worker goes on, and the keys are RESTOREd, as the promoted replica would hold
them. ``send_again`` is what the worker's settling does after it saw the move
(tests/topology/test_finish_replay.py does it under real failovers). Whatever the new master
already has is refused, and the refusal writes nothing (a key dump before and after is the same).
"""

from __future__ import annotations

from typing import Any

import redis

from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.maintenance import LockRegistry
from echomq.worker.master_moves import MAX_RECORD_BYTES, MAX_RECORDS, SMALL_RECORD_BYTES
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Fetched, Transitions

from support.queue_keys import SCAN_COUNT
from support.snapshot import queue_snapshot, rewind_queue, save_queue

NOW = 1_700_000_000_000
LOCK_MS = 30_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def _rig(connection: redis.Redis, queue_name: str) -> tuple[Queue, Transitions, LockRegistry, Clock]:
    clock = Clock()
    transitions = Transitions(connection, QueueKeys(queue_name), WorkerOptions(lock_duration=LOCK_MS, clock=clock))
    locks = LockRegistry()
    transitions.moves.held = locks.held
    return Queue(connection, queue_name), transitions, locks, clock


def _stamp(fetched: Fetched) -> tuple[str, str, str]:
    return fetched.hash["processedOn"], fetched.hash["ats"], fetched.hash["timestamp"]


def _take(transitions: Transitions, locks: LockRegistry, clock: Clock, token: str) -> Fetched:
    fetched = transitions.move_to_active(token, clock())
    assert fetched.job_id is not None
    locks.track(fetched.job_id, token, _stamp(fetched))
    return fetched


def _complete(transitions: Transitions, locks: LockRegistry, clock: Clock, fetched: Fetched, token: str, *,
              fetch_next: bool = False) -> Fetched | None:
    assert fetched.job_id is not None
    done = transitions.move_to_finished(fetched.job_id, token, clock(), completed=True, value='"ok"', keep=None,
                                        attempts=0, fetch_next=fetch_next,
                                        taken=_stamp(fetched))
    locks.untrack(fetched.job_id)
    return done


def _field(connection: redis.Redis, queue_name: str, job_id: str, name: str) -> Any:
    raw = connection.hget(QueueKeys(queue_name).job(job_id), name)
    return None if raw is None else text(raw)


def _events(connection: redis.Redis, queue_name: str, job_id: str) -> list[str]:
    return [text(fields[b"event"]) for _id, fields in connection.xrange(QueueKeys(queue_name).events)
            if fields.get(b"jobId") == job_id.encode()]


def _lost_completion(connection: redis.Redis, queue_name: str) -> tuple[Transitions, Clock, Fetched]:
    """One job taken by "tok-1" and completed 5 ms later; the completion lost (the take kept)."""
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    saved = save_queue(connection, queue_name)
    clock.now += 5
    _complete(transitions, locks, clock, taken, "tok-1")
    rewind_queue(connection, queue_name, saved)
    return transitions, clock, taken


def test_a_lost_completion_is_sent_again_and_a_second_time_refused_writing_nothing(
        connection: redis.Redis, queue_name: str) -> None:
    transitions, _clock, taken = _lost_completion(connection, queue_name)
    job_id = taken.job_id
    assert job_id is not None
    transitions.moves.send_again()
    assert transitions.moves.resent == [job_id] and transitions.moves.refused == []
    k = QueueKeys(queue_name)
    assert connection.zscore(k.completed, job_id) == NOW + 5
    assert (_field(connection, queue_name, job_id, "returnvalue"), _field(connection, queue_name, job_id, "finishedOn"),
            _field(connection, queue_name, job_id, "atm")) == ('"ok"', str(NOW + 5), "1")
    assert connection.llen(k.active) == 0 and connection.exists(k.job_lock(job_id)) == 0
    assert _events(connection, queue_name, job_id)[-1] == "completed"
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()  # the new master has it now
    assert transitions.moves.resent == [] and transitions.moves.refused == [job_id]
    assert queue_snapshot(connection, queue_name) == before


def test_a_lost_take_and_its_lost_completion_both_come_back_once(connection: redis.Redis, queue_name: str) -> None:
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    saved = save_queue(connection, queue_name)  # before the take
    taken = _take(transitions, locks, clock, "tok-1")
    _complete(transitions, locks, clock, taken, "tok-1")
    rewind_queue(connection, queue_name, saved)
    job_id = taken.job_id
    assert job_id is not None
    transitions.moves.send_again()
    k = QueueKeys(queue_name)
    assert transitions.moves.resent == [job_id]
    assert connection.zscore(k.completed, job_id) is not None and connection.llen(k.wait) == 0
    assert (_field(connection, queue_name, job_id, "processedOn"), _field(connection, queue_name, job_id, "ats")) \
        == (taken.hash["processedOn"], taken.hash["ats"])
    assert _events(connection, queue_name, job_id)[-2:] == ["active", "completed"]


def test_a_running_job_whose_take_was_lost_is_held_again(connection: redis.Redis, queue_name: str) -> None:
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    queue.add("b")
    held = _take(transitions, locks, clock, "tok-1")  # replicated
    saved = save_queue(connection, queue_name)
    lost = _take(transitions, locks, clock, "tok-2")  # this take is lost
    rewind_queue(connection, queue_name, saved)
    assert lost.job_id is not None and held.job_id is not None
    transitions.moves.send_again()
    k = QueueKeys(queue_name)
    assert transitions.moves.reclaimed == [lost.job_id]
    assert connection.get(k.job_lock(lost.job_id)) == b"tok-2" and connection.get(k.job_lock(held.job_id)) == b"tok-1"
    assert sorted(map(text, connection.lrange(k.active, 0, -1))) == sorted([held.job_id, lost.job_id])
    assert connection.llen(k.wait) == 0
    # its own finish is accepted now
    _complete(transitions, locks, clock, lost, "tok-2")
    assert connection.zscore(k.completed, lost.job_id) is not None


def test_the_fetch_next_of_a_finish_is_not_sent_again(connection: redis.Redis, queue_name: str) -> None:
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    first = _take(transitions, locks, clock, "tok-1")
    queue.add("c")
    saved = save_queue(connection, queue_name)
    nxt = _complete(transitions, locks, clock, first, "tok-1", fetch_next=True)
    assert nxt is not None and nxt.job_id is not None  # took c
    rewind_queue(connection, queue_name, saved)  # both lost; c is not running here in this test
    transitions.moves.send_again()
    k = QueueKeys(queue_name)
    assert first.job_id is not None and connection.zscore(k.completed, first.job_id) is not None
    assert [text(x) for x in connection.lrange(k.wait, 0, -1)] == [nxt.job_id]  # not taken by the resend
    assert connection.llen(k.active) == 0


def test_a_job_finished_then_retried_is_left_alone(connection: redis.Redis, queue_name: str) -> None:
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    _complete(transitions, locks, clock, taken, "tok-1")
    assert queue.retry_jobs("completed", timestamp=NOW + 60_000) == 1  # back in wait, on every node
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()
    assert transitions.moves.resent == [] and transitions.moves.refused == [taken.job_id]
    assert queue_snapshot(connection, queue_name) == before
    # taken by another worker since: its lock stands
    other = transitions.move_to_active("tok-other", clock())
    assert other.job_id == taken.job_id
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()
    assert transitions.moves.refused == [taken.job_id]
    assert queue_snapshot(connection, queue_name) == before


def test_a_job_taken_by_another_token_after_its_lock_expired_is_left_alone(
        connection: redis.Redis, queue_name: str) -> None:
    """The worker runs it still; on the new master another take (its lock gone too) holds it."""
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    k = QueueKeys(queue_name)
    assert taken.job_id is not None
    connection.hset(k.job(taken.job_id), mapping={"processedOn": str(NOW + 99), "ats": "2"})
    connection.delete(k.job_lock(taken.job_id))
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()
    assert transitions.moves.reclaimed == []
    assert queue_snapshot(connection, queue_name) == before


def test_a_running_job_active_without_its_lock_is_locked_again(connection: redis.Redis, queue_name: str) -> None:
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    k = QueueKeys(queue_name)
    assert taken.job_id is not None
    connection.delete(k.job_lock(taken.job_id))  # expired on the new master
    transitions.moves.send_again()
    assert transitions.moves.reclaimed == [taken.job_id]
    assert connection.get(k.job_lock(taken.job_id)) == b"tok-1" and connection.pttl(k.job_lock(taken.job_id)) > 0


def test_finishes_older_than_the_lock_are_not_sent(connection: redis.Redis, queue_name: str) -> None:
    transitions, clock, _taken = _lost_completion(connection, queue_name)
    clock.now += LOCK_MS + 1
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()
    assert transitions.moves.resent == [] and transitions.moves.refused == []
    assert queue_snapshot(connection, queue_name) == before


def test_the_record_is_bounded_in_count_and_bytes(connection: redis.Redis, queue_name: str) -> None:
    _queue, transitions, _locks, _clock = _rig(connection, queue_name)
    moves = transitions.moves
    for n in range(MAX_RECORDS + 5):
        moves.record((str(n), "tok", ("", "", ""), NOW, 1))
    assert len(moves.records) == MAX_RECORDS and moves.records[0][0] == "5"
    big = SMALL_RECORD_BYTES + 1
    for n in range(MAX_RECORD_BYTES // big + 3):
        moves.record((f"big-{n}", "tok", ("", "", ""), NOW + n, big))
    assert sum(record[4] for record in moves.large_records) <= MAX_RECORD_BYTES
    assert len(moves.large_records) == MAX_RECORD_BYTES // big and moves.large_records[0][0] == "big-3"
    assert len(moves.records) == MAX_RECORDS


def test_an_id_naming_another_job_now_is_left_alone(connection: redis.Redis, queue_name: str) -> None:
    """A restart that lost everything hands the same ids out again: the job waiting under the id
    of a finish this worker made is another job (added at another time), and it runs."""
    queue, transitions, locks, clock = _rig(connection, queue_name)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    _complete(transitions, locks, clock, taken, "tok-1")
    for key in list(connection.scan_iter(match=QueueKeys(queue_name).all_keys_pattern(), count=SCAN_COUNT)):
        connection.delete(key)  # the server came back empty
    fresh = Queue(connection, queue_name, clock=lambda: NOW + 7).add("b")
    assert fresh.id == taken.job_id
    before = queue_snapshot(connection, queue_name)
    transitions.moves.send_again()
    assert transitions.moves.resent == [] and transitions.moves.refused == [taken.job_id]
    assert queue_snapshot(connection, queue_name) == before


def test_settling_finds_a_new_server_by_its_run_id(real_connection: redis.Redis, queue_name: str) -> None:
    """Only a changed identity (or a move the transport counted) sends anything again."""
    queue, transitions, locks, clock = _rig(real_connection, queue_name)
    moves = transitions.moves
    moves.settle(force=True)  # learns who the server is (a worker's first maintenance step does)
    assert moves.settled == 0
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    _complete(transitions, locks, clock, taken, "tok-1")
    moves.suspect = True
    moves.settle()  # the same server: nothing sent
    assert (moves.settled, moves.suspect) == (0, False)
    moves._identity = ("another-run-id", "another-replid")  # as if it had been another server before
    moves.suspect = True
    moves.settle()
    assert moves.settled == 1 and moves.refused == [taken.job_id]



def test_settling_on_the_same_server_sends_nothing(connection: redis.Redis, queue_name: str) -> None:
    """A lost connection to the same server (or fakeredis, which has no INFO to tell by)."""
    queue, transitions, locks, clock = _rig(connection, queue_name)
    transitions.moves.settle(force=True)
    queue.add("a")
    taken = _take(transitions, locks, clock, "tok-1")
    _complete(transitions, locks, clock, taken, "tok-1")
    before = queue_snapshot(connection, queue_name)
    transitions.moves.suspect = True
    transitions.moves.settle()
    assert transitions.moves.settled == 0 and not transitions.moves.suspect
    assert queue_snapshot(connection, queue_name) == before
