"""The id counter after a failover that lost the last adds, with BullMQ 6.7 producers on the queue
(docs/protocol.md §1.4, "When the counter goes back").

A failover is played by rewinding the queue (tests/support/snapshot.py): every key as the
promoted replica holds it, the last adds and the counter's last INCRs lost. BullMQ's add INCRs
with no check, so until an EchoMQ add moves the counter it is handed ids again; the first EchoMQ
add moves it past the highest id its Queue was handed plus the margin (1,000 at least), and
BullMQ's adds continue above. The margin is all that covers ids BullMQ alone was handed: past it
an EchoMQ add is handed one of them again.
"""

from __future__ import annotations

import json

import redis

from echomq import Queue
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.queue.add_book import MIN_MARGIN

from support.snapshot import rewind_queue, save_queue

ADD = """
const q = new bullmq.Queue('{%(queue)s}', {connection: connection(), prefix});
const ids = %(count)d === 1 ? [(await q.add('bull', {i: 0})).id]
  : (await q.addBulk(Array.from({length: %(count)d}, (_, i) => ({name: 'bull', data: {i}})))).map((job) => job.id);
await q.close();
return ids;
"""


def _bullmq_adds(bullmq_peer, queue_name: str, count: int = 1) -> list[str]:  # type: ignore[no-untyped-def]
    [ids] = bullmq_peer.run(ADD % {"queue": queue_name, "count": count})
    return [str(job_id) for job_id in ids]


def _name(connection: redis.Redis, queue_name: str, job_id: str) -> str | None:
    raw = connection.hget(QueueKeys(queue_name).job(job_id), "name")
    return None if raw is None else text(raw)


def test_bullmq_is_handed_lost_ids_until_an_echomq_add_moves_the_counter(
        bullmq_peer, connection: redis.Redis, queue_name: str) -> None:  # type: ignore[no-untyped-def]
    queue = Queue(connection, queue_name)
    kept = [queue.add("echo", {"n": n}).id for n in range(10)]
    saved = save_queue(connection, queue_name)
    lost = [queue.add("echo", {"n": n}).id for n in range(10, 20)]  # acknowledged, then lost
    rewind_queue(connection, queue_name, saved)
    assert (kept[-1], lost) == ("10", [str(n) for n in range(11, 21)])
    # BullMQ first: its INCR hands out 11 again, an id the EchoMQ producer was handed
    assert _bullmq_adds(bullmq_peer, queue_name) == ["11"]
    # EchoMQ next: its INCR gives 12, at or below the 20 it was handed: the counter moves past
    moved = queue.add("echo", {"n": "after"}).id
    assert int(moved) == 20 + MIN_MARGIN
    assert text(connection.hget(QueueKeys(queue_name).meta, "idGap")) == f"12:{moved}"
    assert queue.lost_job_ids == [str(n) for n in range(12, 21)]  # 11 names BullMQ's job now: not told
    # BullMQ from then on: above the moved counter
    assert _bullmq_adds(bullmq_peer, queue_name, 2) == [str(int(moved) + 1), str(int(moved) + 2)]
    assert (_name(connection, queue_name, "11"), _name(connection, queue_name, moved)) == ("bull", "echo")


def test_an_echomq_add_moves_past_what_bullmq_was_handed_within_the_margin(
        bullmq_peer, connection: redis.Redis, queue_name: str) -> None:  # type: ignore[no-untyped-def]
    queue = Queue(connection, queue_name)
    queue.add("echo")
    saved = save_queue(connection, queue_name)
    bull = _bullmq_adds(bullmq_peer, queue_name, 5)  # 2..6, lost
    echo = [queue.add("echo").id for _ in range(3)]  # 7..9, lost
    rewind_queue(connection, queue_name, saved)
    assert (bull, echo) == (["2", "3", "4", "5", "6"], ["7", "8", "9"])
    moved = queue.add("echo").id  # INCR gives 2: moved past 9 + the margin, past BullMQ's 2..6 too
    assert int(moved) == 9 + MIN_MARGIN
    assert _bullmq_adds(bullmq_peer, queue_name) == [str(int(moved) + 1)]
    assert sorted(queue.lost_job_ids, key=int) == echo


def test_ids_only_bullmq_was_handed_are_handed_again(
        bullmq_peer, connection: redis.Redis, queue_name: str) -> None:  # type: ignore[no-untyped-def]
    """Without a master move the Queue saw, the counter moves only when it went back to or below
    the highest id the Queue was handed; and only that far plus the margin: BullMQ's ids beyond
    are handed out again."""
    queue = Queue(connection, queue_name)
    queue.add("echo")
    saved = save_queue(connection, queue_name)
    bull = _bullmq_adds(bullmq_peer, queue_name, 5)  # 2..6, lost
    rewind_queue(connection, queue_name, saved)
    again = queue.add("echo").id  # INCR gives 2, above the 1 this Queue was handed: no move
    assert again == "2" and again in bull
    assert connection.hget(QueueKeys(queue_name).meta, "idGap") is None
    # unless the Queue saw its master move (the transport counts it: a Sentinel switch, a moved
    # slot): its first add after the move moves the counter past what it gives, by the margin
    saved = save_queue(connection, queue_name)
    bull = _bullmq_adds(bullmq_peer, queue_name, 5)  # 3..7, lost
    rewind_queue(connection, queue_name, saved)
    queue.client.connection_pool.master_moves = 1  # type: ignore[attr-defined]
    moved = queue.add("echo").id
    assert (bull, moved) == (["3", "4", "5", "6", "7"], str(3 + MIN_MARGIN))
    assert _bullmq_adds(bullmq_peer, queue_name) == [str(4 + MIN_MARGIN)]
    # past the margin: this Queue was handed two more ids, BullMQ the margin and ten more, all lost
    base = int(moved) + 1
    saved = save_queue(connection, queue_name)
    echo = [queue.add("echo").id for _ in range(2)]
    bull = _bullmq_adds(bullmq_peer, queue_name, MIN_MARGIN + 10)
    rewind_queue(connection, queue_name, saved)
    assert (echo, bull[0]) == ([str(base + 1), str(base + 2)], str(base + 3))
    moved = queue.add("echo").id  # INCR gives base + 1: moved to base + 2 + the margin, one of BullMQ's
    assert moved == str(base + 2 + MIN_MARGIN) and moved in bull
    assert json.loads(connection.hget(QueueKeys(queue_name).job(moved), "data")) == {}
