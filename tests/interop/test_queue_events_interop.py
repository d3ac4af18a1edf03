"""QueueEvents reads what BullMQ 6.7 really writes: a Node app drives jobs through all 17 kinds
of event (and a custom one), and EchoMQ's reader gets every entry, typed and decoded, in order."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from echomq import EventType, QueueEvents
from echomq.protocol.keys import QueueKeys

STORY = """
const name = '{%(q)s}';
const q = new bullmq.Queue(name, {connection: connection(), prefix});
await q.add('good', {n: 1}, {jobId: 'j1'});
await q.add('good', {n: 1}, {jobId: 'j1'});
await q.add('bad', {n: 2}, {jobId: 'j2'});
await q.add('later', {n: 3}, {jobId: 'j3', delay: 60000});
await q.add('dedup', {}, {jobId: 'j4', deduplication: {id: 'd1'}});
await q.add('dedup', {}, {jobId: 'j5', deduplication: {id: 'd1'}});
await q.remove('j3');
await q.pause();
await q.resume();
const w = new bullmq.Worker(name, async (job) => {
  if (job.name === 'bad') throw new Error('boom');
  await job.updateProgress({step: 1});
  return {ok: true, n: job.data.n};
}, {connection: connection(), prefix, stalledInterval: 200});  // its stalled-check guard must not outlive it
while (true) {
  const c = await q.getJobCounts('completed', 'failed');
  if (c.completed === 2 && c.failed === 1) break;
  await sleep(20);
}
await sleep(200);
await w.close();
await q.clean(0, 100, 'completed');
// A stall: worker A takes s1 and dies without renewing its lock; B's stalled check recovers it.
const a = new bullmq.Worker(name, () => new Promise(() => {}),
  {connection: connection(), prefix, lockDuration: 300, skipLockRenewal: true, skipStalledCheck: true});
await q.add('stuck', {}, {jobId: 's1'});
while ((await q.getJobCounts('active')).active === 0) await sleep(20);
await a.close(true).catch(() => {});
const b = new bullmq.Worker(name, async () => 'recovered', {connection: connection(), prefix, stalledInterval: 200,
                                                           lockDuration: 300});
while ((await q.getJobCounts('completed')).completed === 0) await sleep(50);
await b.close();
const flow = new bullmq.FlowProducer({connection: connection(), prefix});
await flow.add({name: 'parent', queueName: name, data: {}, opts: {jobId: 'p1'},
                children: [{name: 'child', queueName: name, data: {}, opts: {jobId: 'c1'}}]});
await flow.close();
const producer = new bullmq.QueueEventsProducer(name, {connection: connection(), prefix});
await producer.publishEvent({eventName: 'custom-thing', foo: 'bar'});
await producer.close();
await q.close();
return 'done';
"""


def test_every_event_bullmq_writes_arrives_decoded(bullmq_peer: Any, connection: redis.Redis,
                                                   queue_name: str) -> None:
    got: list[tuple[Any, dict[str, Any]]] = []
    lock = threading.Lock()

    def collect(event_type: Any, data: dict[str, Any]) -> None:
        with lock:
            got.append((event_type, data))

    qe = QueueEvents(connection, queue_name, block_ms=1000)
    qe.subscribe(collect)
    with qe:
        assert bullmq_peer.run(STORY % {"q": queue_name}) == ["done"]
        stream = connection.xrange(QueueKeys(queue_name).events)
        deadline = time.monotonic() + 10
        while len(got) < len(stream) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert [d["event_id"] for _, d in got] == [i.decode() for i, _ in stream]

    kinds = {t for t, _ in got}
    assert kinds == set(EventType) | {"custom-thing"}

    def first(event_type: Any, **match: Any) -> dict[str, Any]:
        return next(d for t, d in got if t == event_type and all(d.get(k) == v for k, v in match.items()))

    assert first(EventType.COMPLETED, jobId="j1")["returnvalue"] == {"ok": True, "n": 1}
    assert first(EventType.PROGRESS, jobId="j1")["data"] == {"step": 1}
    assert isinstance(first(EventType.DELAYED, jobId="j3")["delay"], int)
    assert first(EventType.FAILED, jobId="j2")["failedReason"] == "boom"
    assert first(EventType.RETRIES_EXHAUSTED, jobId="j2")["attemptsMade"] == 1
    assert first(EventType.REMOVED, jobId="j3")["prev"] == "delayed"
    assert first(EventType.DUPLICATED)["jobId"] == "j1"
    assert first(EventType.DEDUPLICATED)["deduplicatedJobId"] == "j5"
    assert first(EventType.WAITING_CHILDREN)["jobId"] == "p1"
    assert first(EventType.CLEANED)["count"] == 2
    assert first("custom-thing")["foo"] == "bar"
    stalled_at = next(i for i, (t, d) in enumerate(got) if t is EventType.STALLED)
    assert got[stalled_at][1]["jobId"] == "s1"
    assert got[stalled_at - 1][0] is EventType.WAITING and got[stalled_at - 1][1]["prev"] == "active"
    assert first(EventType.COMPLETED, jobId="s1")["returnvalue"] == "recovered"
