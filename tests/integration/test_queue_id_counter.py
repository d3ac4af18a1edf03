"""No id names two jobs: when the queue's ``id`` counter goes back (a failover or a restart that
lost the last writes), the next add moves it past every id the producer was handed, and the
adds the producer can tell were lost are reported (echomq/queue/add_book.py).

The counter going back is made here the way a failover leaves it: the last adds' hashes and
INCRs are gone, the earlier ones are there.
"""

from __future__ import annotations

import logging

import pytest
import redis

from echomq import Queue
from echomq.protocol.keys import QueueKeys
from echomq.queue.add_book import MIN_MARGIN

from support.snapshot import rewind_queue, save_queue


def _lose_the_last(connection: redis.Redis, queue_name: str, kept: int, added: int) -> None:
    """What a failover leaves: jobs after ``kept`` never reached the new master."""
    keys = QueueKeys(queue_name)
    connection.set(keys.id, kept)
    for n in range(kept + 1, added + 1):
        connection.delete(keys.job(str(n)))
        connection.lrem(keys.wait, 0, str(n))


def test_after_the_counter_went_back_the_next_id_is_above_every_id_handed_out(
        connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(connection, queue_name)
    ids = [queue.add("n", {"i": i}).id for i in range(1, 6)]
    assert ids == ["1", "2", "3", "4", "5"]
    _lose_the_last(connection, queue_name, kept=3, added=5)
    with caplog.at_level(logging.WARNING, logger="echomq.queue.add_book"):
        job = queue.add("n", {"i": 6})
    assert int(job.id) > 5
    assert {j.id: j.data for j in queue.get_jobs("waiting")} == {"1": {"i": 1}, "2": {"i": 2}, "3": {"i": 3},
                                                                  job.id: {"i": 6}}
    assert queue.lost_job_ids == ["4", "5"]
    [record] = [r for r in caplog.records if r.name == "echomq.queue.add_book"]
    assert record.levelno == logging.WARNING
    assert "2 acknowledged add(s) are not on the master" in record.getMessage()
    assert "job ids 4, 5" in record.getMessage()
    assert connection.hget(QueueKeys(queue_name).meta, "idGap") == f"4:{job.id}".encode()
    again = queue.add("n", {"i": 7})
    assert int(again.id) == int(job.id) + 1  # then on as before, nothing more reported
    assert queue.lost_job_ids == ["4", "5"]


def test_a_counter_that_restarted_from_nothing_moves_past_the_ids_too(connection: redis.Redis,
                                                                       queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    for i in range(3):
        queue.add("n", {"i": i})
    connection.delete(QueueKeys(queue_name).id)  # a restart without persistence of that key
    assert int(queue.add("n").id) > 3


def test_a_bulk_after_the_counter_went_back_reuses_no_id(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    first = [job.id for job in queue.add_bulk([("n", {"i": i}) for i in range(10)])]
    _lose_the_last(connection, queue_name, kept=6, added=10)
    second = [job.id for job in queue.add_bulk([("n", {"i": i}) for i in range(10, 15)])]
    assert not set(second) & set(first)
    assert min(map(int, second)) > 10
    assert queue.lost_job_ids == ["7", "8", "9", "10"]


def test_custom_ids_are_left_aside_and_an_obliterate_starts_the_ids_again(connection: redis.Redis,
                                                                           queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("n")
    assert queue.add("n", job_id="mine").id == "mine"
    queue.obliterate(force=True)
    assert queue.add("n").id == "1"  # deliberate: nothing was lost
    assert queue.lost_job_ids == []


def test_another_producer_reports_its_lost_adds_after_a_master_move(connection: redis.Redis,
                                                                    queue_name: str) -> None:
    first, second = Queue(connection, queue_name), Queue(connection, queue_name)
    first.add("n")  # 1
    second.add("n")  # 2
    first.add("n")  # 3
    second.add("n")  # 4
    _lose_the_last(connection, queue_name, kept=2, added=4)
    assert int(first.add("n").id) > 4  # first finds the counter behind, writes meta idGap
    assert first.lost_job_ids == ["3"]
    # the transport counts a master move on second's pool (a Sentinel switch, a MOVED): its next
    # add reads the gap and reports its own lost add
    second.client.connection_pool.master_moves = 1  # type: ignore[attr-defined]
    second.add("n")
    assert second.lost_job_ids == ["4"]


def test_the_first_add_after_a_move_skips_the_ids_another_producer_lost(connection: redis.Redis,
                                                                        queue_name: str) -> None:
    """A producer whose own ids are all below where the counter went back is handed none of the
    ids another producer lost above: its first add after the move moves the counter past them
    (by the margin), and the other one reports them from the one gap both left."""
    first, second = Queue(connection, queue_name), Queue(connection, queue_name)
    assert [first.add("a").id for _ in range(2)] == ["1", "2"]
    saved = save_queue(connection, queue_name)
    assert [second.add("b").id for _ in range(3)] == ["3", "4", "5"]  # lost with the failover
    rewind_queue(connection, queue_name, saved)
    for queue in (first, second):  # the transport counts the master move on each pool
        queue.client.connection_pool.master_moves = 1  # type: ignore[attr-defined]
    moved = first.add("a").id  # INCR gives 3: above first's 2, moved past it all the same
    assert int(moved) == 3 + MIN_MARGIN
    assert first.lost_job_ids == []
    first.add("a")  # adds between the two producers' moves do not hide the first one's gap
    later = second.add("b").id  # INCR gives 1005, above second's 5: moved again, a second gap
    assert int(later) == int(moved) + 2 + MIN_MARGIN
    gaps = f"3:{moved},{int(moved) + 2}:{later}"
    assert connection.hget(QueueKeys(queue_name).meta, "idGap") == gaps.encode()
    assert second.lost_job_ids == ["3", "4", "5"]
    assert first.add("a").id == str(int(later) + 1)  # one move per move: then on as before
    assert {job.id for job in first.get_jobs("waiting")} == {"1", "2", moved, str(int(moved) + 1), later,
                                                          str(int(later) + 1)}


def test_the_gaps_kept_are_the_last_32(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    for n in range(34):
        queue.client.connection_pool.master_moves = n + 1  # type: ignore[attr-defined]
        queue.add("a")
    gaps = connection.hget(QueueKeys(queue_name).meta, "idGap").decode().split(",")
    assert len(gaps) == 32 and all(len(gap.split(":")) == 2 for gap in gaps)


def test_a_bulk_after_a_move_skips_once(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.add("a")
    queue.client.connection_pool.master_moves = 1  # type: ignore[attr-defined]
    ids = [int(job.id) for job in queue.add_bulk([("n", {"i": i}) for i in range(5)])]
    assert ids == [1 + MIN_MARGIN + n for n in range(1, 6)]  # the first moved past, the rest follow it
