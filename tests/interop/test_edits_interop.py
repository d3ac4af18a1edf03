"""Changing jobs across runtimes: change_priority, update_data, job logs and deduplication ids
against BullMQ 6.7, both ways, and a worker of the other runtime seeing the change.

The twin tests add the same jobs to two queues with BullMQ, change one with BullMQ and the other
with EchoMQ, and compare every key of the two queues: the same placements, scores, counters,
markers, fields and events (timestamps aside, which differ by when each job was added).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import Queue, Worker
from echomq.protocol.keys import QueueKeys

from support.snapshot import queue_snapshot
from support.workers import Running, wait_until


def _js(queue_name: str) -> str:
    return json.dumps("{" + queue_name + "}")


@pytest.fixture
def twin_name(connection: redis.Redis, queue_name: str) -> Iterator[str]:
    """A second queue for the test, deleted afterwards like ``queue_name``."""
    name = queue_name + "-twin"
    yield name
    with contextlib.suppress(redis.RedisError):
        stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=1000))
        if stale:
            connection.delete(*stale)


def _comparable(client: redis.Redis, queue_name: str) -> dict[str, Any]:
    """The queue's keys by suffix, without what depends on when a job was added: hash
    ``timestamp`` fields, delayed scores, the delay marker's score, events' ids and ``delay``."""
    base = QueueKeys(queue_name).job_prefix
    out: dict[str, Any] = {}
    for key, (kind, stored, has_ttl) in queue_snapshot(client, queue_name).items():
        suffix = key[len(base):]
        value = stored
        if kind == "hash":
            value = [(field, v) for field, v in stored if field != b"timestamp"]
        elif suffix == "delayed":
            value = [member for member, _score in stored]
        elif suffix == "marker":
            value = [(member, score if member == b"0" else "due") for member, score in stored]
        elif kind == "stream":
            value = [[(field, v) for field, v in fields if field != b"delay"] for _id, fields in stored]
        out[suffix] = (kind, value, has_ttl)
    return out


#: (job id, priority or None, lifo), applied in this order by both runtimes.
CHANGES: list[tuple[str, int | None, bool]] = [
    ("w1", 3, False),      # wait -> prioritized
    ("w2", None, True),    # wait -> wait, to the end workers take next (priority left out: 0)
    ("p1", 0, False),      # prioritized -> wait
    ("p2", 2, True),       # prioritized, ahead of its priority, no counter used
    ("p3", 1, False),      # prioritized -> prioritized
    ("d1", 9, False),      # delayed: only the field changes
    ("w3", 0, False),      # wait -> wait, LPUSHed again
]
#: The order a worker then runs the ready jobs (d1 is due in ten minutes).
ORDER = ["w2", "p1", "w3", "p3", "p2", "w1"]
NEW_DATA = {"path": "a/b", "text": "é ✓", "list": [1, 2.5, None, True]}

ADD_TWINS = """
const queues = [%(a)s, %(b)s].map((name) => new bullmq.Queue(name, {connection: connection(), prefix}));
for (const q of queues) {
  for (const id of ['w1', 'w2', 'w3']) await q.add(id, {id}, {jobId: id});
  await q.add('p1', {id: 'p1'}, {jobId: 'p1', priority: 5});
  await q.add('p2', {id: 'p2'}, {jobId: 'p2', priority: 5});
  await q.add('p3', {id: 'p3'}, {jobId: 'p3', priority: 7});
  await q.add('d1', {id: 'd1'}, {jobId: 'd1', priority: 4, delay: 600000});
  if (%(paused)s) await q.pause();
}
const changes = %(changes)s;
for (const [id, priority, lifo] of changes) {
  const job = await queues[0].getJob(id);
  await job.changePriority(priority === null ? {lifo} : {priority, lifo});
}
await (await queues[0].getJob('w1')).updateData(%(data)s);
for (const q of queues) await q.close();
"""

BULLMQ_WORKER = """
const order = [];
const w = new bullmq.Worker(%(queue)s, async (job) => { order.push([job.id, job.data]); },
  {connection: connection(), prefix});
await new Promise((resolve) => w.on('completed', () => { if (order.length === %(count)d) resolve(); }));
await w.close();
return order;
"""


@pytest.mark.parametrize("paused", [False, True])
def test_echomq_changes_bullmq_jobs_exactly_as_bullmq_does(bullmq_peer, connection: redis.Redis,
                                                          queue_name: str, twin_name: str, paused: bool) -> None:
    bullmq_peer.run(ADD_TWINS % {"a": _js(twin_name), "b": _js(queue_name), "paused": json.dumps(paused),
                                 "changes": json.dumps(CHANGES), "data": json.dumps(NEW_DATA)})
    queue = Queue(connection, queue_name)
    for job_id, priority, lifo in CHANGES:
        queue.get_job(job_id).change_priority(priority, lifo=lifo)
    queue.get_job("w1").update_data(NEW_DATA)
    assert _comparable(connection, queue_name) == _comparable(connection, twin_name)
    if paused:
        assert connection.exists(QueueKeys(queue_name).marker) == 0
        queue.resume()
    ran = bullmq_peer.run(BULLMQ_WORKER % {"queue": _js(queue_name), "count": len(ORDER)})[-1]
    assert [job_id for job_id, _data in ran] == ORDER
    assert dict(ran)["w1"] == NEW_DATA
    assert queue.get_job("d1").get_state() == "delayed" and queue.get_job("d1").priority == 9


BULLMQ_CHANGES = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
for (const [id, priority, lifo] of %(changes)s) {
  const job = await q.getJob(id);
  await job.changePriority(priority === null ? {lifo} : {priority, lifo});
}
await (await q.getJob('w1')).updateData(%(data)s);
let missing = null;
try { await new bullmq.Job(q, 'ghost', {}, {}, 'ghost').changePriority({priority: 1}); }
catch (err) { missing = err.message; }
await q.close();
return missing;
"""


def test_bullmq_changes_echomq_jobs_and_an_echomq_worker_follows(bullmq_peer, connection: redis.Redis,
                                                                 queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    for job_id in ("w1", "w2", "w3"):
        queue.add(job_id, {"id": job_id}, job_id=job_id)
    queue.add("p1", {"id": "p1"}, job_id="p1", priority=5)
    queue.add("p2", {"id": "p2"}, job_id="p2", priority=5)
    queue.add("p3", {"id": "p3"}, job_id="p3", priority=7)
    queue.add("d1", {"id": "d1"}, job_id="d1", priority=4, delay=600_000)
    [missing] = bullmq_peer.run(BULLMQ_CHANGES % {"queue": _js(queue_name), "changes": json.dumps(CHANGES),
                                                  "data": json.dumps(NEW_DATA)})
    assert "ghost" in missing  # BullMQ refuses a missing job too (code -1)
    assert queue.get_job("w1").data == NEW_DATA
    assert [queue.get_job(job_id).priority for job_id, _p, _l in CHANGES] == [3, 0, 0, 2, 1, 9, 0]
    ran: list[tuple[str, Any]] = []
    with Running(Worker(connection, queue_name, lambda job: ran.append((job.id, job.data)))):
        assert wait_until(lambda: len(ran) == len(ORDER)), ran
    assert [job_id for job_id, _data in ran] == ORDER
    assert dict(ran)["w1"] == NEW_DATA


PROCESS_AND_UPDATE = """
const w = new bullmq.Worker(%(queue)s, async (job) => {
  await job.updateData({...job.data, seen: (job.data.seen || 0) + 1, by: 'bullmq'});
  if (job.attemptsMade === 0) throw new Error('again');
  return job.data;
}, {connection: connection(), prefix});
await new Promise((resolve) => w.on('completed', resolve));
await w.close();
"""


def test_processors_update_their_own_job_for_the_other_runtime(bullmq_peer, connection: redis.Redis,
                                                              queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("steps", {"seen": 0}, attempts=2)
    bullmq_peer.run(PROCESS_AND_UPDATE % {"queue": _js(queue_name)})
    done = queue.get_job(job.id)
    assert done.data == {"seen": 2, "by": "bullmq"} and done.return_value == done.data

    def process(active: Any) -> None:
        active.update_data({**active.data, "by": "echomq", "job": active.id})

    second = queue.add("steps", {"seen": 0})
    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: second.get_state() == "completed")
    [seen] = bullmq_peer.run(f"const q = new bullmq.Queue({_js(queue_name)}, {{connection: connection(), prefix}});"
                             f"const job = await q.getJob({json.dumps(second.id)}); await q.close(); return job.data;")
    assert seen == {"seen": 0, "by": "echomq", "job": second.id}


#: (start, end, asc) ranges read by both runtimes.
LOG_RANGES = [(0, -1, True), (1, 3, True), (-2, -1, True), (0, -1, False), (0, 1, False), (2, 10, False),
              (3, 3, False), (5, 9, True)]

BULLMQ_LOGS = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
const theirs = await q.add('logged', {});
for (let n = 0; n < 5; n++) await theirs.log('bullmq line ' + n);
const read = {};
for (const id of [theirs.id, %(ours)s, 'no-such-job']) {
  read[id] = [];
  for (const [start, end, asc] of %(ranges)s) read[id].push(await q.getJobLogs(id, start, end, asc));
}
await q.close();
return read;
"""


def test_job_logs_read_the_same_in_both_runtimes(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    ours = queue.add("logged", {})
    for n in range(4):
        ours.log(f"echomq line {n}")
    [read] = bullmq_peer.run(BULLMQ_LOGS % {"queue": _js(queue_name), "ours": json.dumps(ours.id),
                                            "ranges": json.dumps(LOG_RANGES)})
    assert len(read) == 3
    for job_id, theirs in read.items():
        assert [queue.get_job_logs(job_id, *args) for args in LOG_RANGES] == theirs, job_id
    assert read[ours.id][3] == {"logs": [f"echomq line {n}" for n in (3, 2, 1, 0)], "count": 4}


BULLMQ_DEDUP = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
const got = {};
const first = await q.add('sync', {}, {deduplication: {id: 'theirs'}});
got.first = first.id;
got.ownerOfOurs = await q.getDeduplicationJobId('ours');
const ourJob = await q.getJob(got.ownerOfOurs);
got.ourDedupId = ourJob.deduplicationId;
got.removedOurs = await ourJob.removeDeduplicationKey();
got.removedOursAgain = await ourJob.removeDeduplicationKey();
got.removedKey = await q.removeDeduplicationKey('other');
await q.close();
return got;
"""


def test_deduplication_ids_are_shared_both_ways(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    ours = queue.add("sync", {}, deduplication={"id": "ours"})
    queue.add("sync", {}, deduplication={"id": "other"})
    [got] = bullmq_peer.run(BULLMQ_DEDUP % {"queue": _js(queue_name)})
    assert got["ownerOfOurs"] == ours.id and got["ourDedupId"] == "ours"
    assert (got["removedOurs"], got["removedOursAgain"], got["removedKey"]) == (True, False, 1)
    assert queue.get_deduplication_job_id("ours") is None
    assert queue.get_deduplication_job_id("other") is None
    assert queue.get_deduplication_job_id("theirs") == got["first"]
    theirs = queue.get_job(got["first"])
    assert theirs.deduplication_id == "theirs"
    assert theirs.remove_deduplication_key() is True
    assert theirs.remove_deduplication_key() is False
    [again] = bullmq_peer.run(
        f"const q = new bullmq.Queue({_js(queue_name)}, {{connection: connection(), prefix}});"
        "const job = await q.add('sync', {}, {deduplication: {id: 'theirs'}});"
        "const owner = await q.getDeduplicationJobId('theirs'); await q.close(); return [job.id, owner];")
    assert again[0] == again[1] != got["first"]  # BullMQ adds a new job: the id was freed
    assert queue.remove_deduplication_key("theirs") == 1
    assert queue.get_deduplication_job_id("theirs") is None
