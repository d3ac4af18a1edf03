"""EchoMQ's Queue and BullMQ 6.7 on one queue: each side's jobs are the other side's jobs."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import redis

from echomq import Queue
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys

from support.queue_keys import SCAN_COUNT

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _js_queue(queue_name: str) -> str:
    return f"'{{{queue_name}}}'"


def _events(client: redis.Redis, queue_name: str) -> list[dict[str, str]]:
    return [{text(k): text(v) for k, v in fields.items()}
            for _id, fields in client.xrange(QueueKeys(queue_name).events)]


def _job_events(events: list[dict[str, str]], job_id: str) -> list[str]:
    return [e["event"] + (f"<{e['prev']}" if "prev" in e else "") for e in events if e.get("jobId") == job_id]


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


WORKER = """
const w = new bullmq.Worker(%(queue)s, async (job) => {
  if (job.name === 'flaky' && job.attemptsMade === 0) throw new Error('first try fails');
  if (job.name === 'report') return Object.values(await job.getChildrenValues()).map((v) => v.doubled);
  return {doubled: job.data.n * 2};
}, {connection: connection(), prefix});
let done = 0;
const finished = new Promise((resolve) => w.on('completed', () => { if (++done === %(count)d) resolve(); }));
const timeout = sleep(20000).then(() => { throw new Error('only ' + done + ' jobs completed'); });
await Promise.race([finished, timeout]);
await w.close();
return done;
"""


def test_bullmq_worker_processes_what_echomq_adds(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    plain = queue.add("plain", {"n": 1})
    delayed = queue.add("delayed", {"n": 2}, delay=300)
    prioritized = queue.add("prioritized", {"n": 3}, priority=2)
    flaky = queue.add("flaky", {"n": 4}, attempts=2, backoff={"type": "fixed", "delay": 100})
    parent = queue.add_flow({"name": "report", "data": {}},
                            [{"name": "part", "data": {"n": 10}}, {"name": "part", "data": {"n": 20}}])
    assert bullmq_peer.run(WORKER % {"queue": _js_queue(queue_name), "count": 7}) == [7]

    for job, value in ((plain, {"doubled": 2}), (delayed, {"doubled": 4}), (prioritized, {"doubled": 6}),
                       (flaky, {"doubled": 8})):
        stored = queue.get_job(job.id)
        assert stored.get_state() == "completed", job.name
        assert stored.return_value == value
        assert stored.finished_on and stored.processed_on
    finished_parent = queue.get_job(parent.id)
    assert finished_parent.get_state() == "completed"
    assert sorted(finished_parent.return_value) == [20, 40]
    assert queue.get_job(flaky.id).attempts_made == 2
    assert queue.get_job(flaky.id).failed_reason == "first try fails"

    events = _events(connection, queue_name)
    assert _job_events(events, plain.id) == ["added", "waiting", "active<waiting", "completed<active"]
    assert _job_events(events, delayed.id) == ["added", "delayed", "waiting<delayed", "active<waiting",
                                               "completed<active"]
    assert _job_events(events, flaky.id) == ["added", "waiting", "active<waiting", "delayed",
                                             "waiting<delayed", "active<waiting", "completed<active"]
    assert _job_events(events, parent.id) == ["added", "waiting-children", "waiting<waiting-children",
                                              "active<waiting", "completed<active"]


ADD_AND_PROCESS = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
await q.add('plain', {a: [1, 'x']});
await q.add('custom', {b: 2}, {jobId: 'order-1', delay: 60000, priority: 7, attempts: 3,
  backoff: {type: 'exponential', delay: 500}, removeOnComplete: {age: 3600, count: 10},
  removeOnFail: 5, keepLogs: 10, stackTraceLimit: 4});
await q.add('dedup', null, {deduplication: {id: 'd1', ttl: 60000}, lifo: true});
await q.add('good', {n: 1});
await q.add('bad', {n: 2});
const w = new bullmq.Worker(%(queue)s, async (job) => {
  await job.updateProgress({step: 1});
  await job.log('working');
  if (job.name === 'bad') throw new Error('nope');
  return {ok: job.data};
}, {connection: connection(), prefix});
let n = 0;
await new Promise((resolve) => {
  const seen = () => { if (++n === 4) resolve(); };
  w.on('completed', seen); w.on('failed', seen);
});
await w.close();
const result = {};
for (const id of ['1', 'order-1', '3', '4', '5']) {
  const job = await q.getJob(id);
  result[id] = {json: job.asJSON(), state: await job.getState(), logs: (await q.getJobLogs(id)).logs};
}
await q.close();
return result;
"""


def test_echomq_reads_every_field_of_bullmq_jobs(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    [seen] = bullmq_peer.run(ADD_AND_PROCESS % {"queue": _js_queue(queue_name)})
    queue = Queue(connection, queue_name)
    for job_id, node in seen.items():
        theirs = node["json"]
        ours = queue.get_job(job_id)
        assert ours is not None
        assert ours.get_state() == node["state"]
        assert ours.name == theirs["name"]
        assert ours.data == json.loads(theirs["data"])
        assert ours.raw_opts == json.loads(connection.hget(QueueKeys(queue_name).job(job_id), "opts"))
        assert ours.opts == {_snake(k): v for k, v in theirs["opts"].items()}
        assert ours.timestamp == theirs["timestamp"]
        assert ours.attempts_made == theirs.get("attemptsMade", 0)
        assert ours.attempts_started == theirs.get("attemptsStarted", 0)
        assert ours.processed_on == theirs.get("processedOn")
        assert ours.finished_on == theirs.get("finishedOn")
        assert ours.progress == theirs.get("progress", 0)
        assert ours.return_value == json.loads(theirs.get("returnvalue", "null"))
        assert ours.failed_reason == (json.loads(theirs["failedReason"]) if "failedReason" in theirs else None)
        assert ours.stacktrace == (json.loads(theirs["stacktrace"]) or [])
        assert ours.deduplication_id == theirs.get("deduplicationId")
        assert ours.get_logs() == node["logs"]
    custom = queue.get_job("order-1")
    assert custom.opts["backoff"] == {"type": "exponential", "delay": 500}
    assert custom.opts["keep_logs"] == 10 and custom.opts["remove_on_fail"] == 5
    assert (custom.delay, custom.priority) == (60000, 7)
    assert queue.get_job("5").failed_reason == "nope"
    assert queue.get_job("5").stacktrace[0].startswith("Error: nope")
    assert queue.get_job("3").opts["deduplication"] == {"id": "d1", "ttl": 60000}


PAUSE_WORKER = """
const w = new bullmq.Worker(%(queue)s, async (job) => {
  out({processed: job.id, at: Date.now()});
  return job.data;
}, {connection: connection(), prefix, drainDelay: 1});
await sleep(%(ms)d);
await w.close();
"""


def test_echomq_pause_stops_a_bullmq_worker_and_resume_restarts_it(bullmq_peer, connection: redis.Redis,
                                                                  queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.pause()
    proc = bullmq_peer.start(PAUSE_WORKER % {"queue": _js_queue(queue_name), "ms": 6000})
    try:
        job = queue.add("held", {"n": 1})
        time.sleep(2.0)
        assert job.get_state() == "waiting"
        resumed_at = int(time.time() * 1000)
        queue.resume()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [line["processed"] for line in lines] == [job.id]
    assert lines[0]["at"] >= resumed_at
    assert queue.get_job(job.id).get_state() == "completed"


FINISH_SOME = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
await q.addBulk([{name: 'ok', data: {}}, {name: 'ok', data: {}}, {name: 'fail', data: {}}]);
const w = new bullmq.Worker(%(queue)s, async (job) => {
  if (job.name === 'fail') throw new Error('boom');
  return 1;
}, {connection: connection(), prefix});
let n = 0;
await new Promise((resolve) => { const seen = () => { if (++n === 3) resolve(); };
  w.on('completed', seen); w.on('failed', seen); });
await w.close();
await q.close();
"""

COUNTS = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
const counts = await q.getJobCounts('completed', 'failed');
await q.close();
return counts;
"""


def test_echomq_clean_and_remove_work_on_bullmq_finished_jobs(bullmq_peer, connection: redis.Redis,
                                                             queue_name: str) -> None:
    bullmq_peer.run(FINISH_SOME % {"queue": _js_queue(queue_name)})
    queue = Queue(connection, queue_name)
    assert queue.get_job_counts("completed", "failed") == {"completed": 2, "failed": 1}
    assert sorted(queue.clean(0, 0, "completed")) == ["1", "2"]
    assert queue.remove("3") is True
    assert bullmq_peer.run(COUNTS % {"queue": _js_queue(queue_name)}) == [{"completed": 0, "failed": 0}]
    events = _events(connection, queue_name)
    assert {"event": "cleaned", "count": "2"} in events
    assert events[-1] == {"event": "removed", "jobId": "3", "prev": "failed"}
    assert not any(connection.exists(QueueKeys(queue_name).job(i)) for i in ("1", "2", "3"))


SEQUENCE_JS = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
const a = await q.add('plain', {n: 1});
await q.add('later', {n: 2}, {delay: 60000});
await q.add('urgent', {n: 3}, {priority: 4});
await q.add('custom', {n: 4}, {jobId: 'c-1', attempts: 3, backoff: 1000, removeOnComplete: true});
await q.add('custom', {n: 5}, {jobId: 'c-1'});
await q.add('dedup', {n: 6}, {deduplication: {id: 'x'}});
await q.add('dedup', {n: 7}, {deduplication: {id: 'x'}});
await a.updateProgress(50);
await a.log('hello');
await q.pause();
await q.add('while-paused', {});
await q.resume();
await q.remove('c-1');
await q.add('swap', {n: 8}, {delay: 5000, deduplication: {id: 'r', ttl: 60000, replace: true}});
await q.add('swap', {n: 9}, {delay: 5000, deduplication: {id: 'r', ttl: 60000, replace: true}});
await q.add('ext', {}, {deduplication: {id: 'e', ttl: 60000, extend: true}});
await q.add('ext', {}, {deduplication: {id: 'e', ttl: 60000, extend: true}});
const later = await q.getJob('2');
await later.changeDelay(120000);
await later.promote();
await q.addBulk([{name: 'bulk', data: {i: 1}}, {name: 'bulk', data: {i: 2}, opts: {lifo: true}}]);
await q.clean(0, 0, 'completed');
const flow = new bullmq.FlowProducer({connection: connection(), prefix});
await flow.add({name: 'parent', queueName: %(queue)s, data: {}, children: [
  {name: 'child', queueName: %(queue)s, data: {}}]});
await flow.close();
await q.close();
"""


def _sequence_echomq(queue: Queue) -> None:
    a = queue.add("plain", {"n": 1})
    queue.add("later", {"n": 2}, delay=60000)
    queue.add("urgent", {"n": 3}, priority=4)
    queue.add("custom", {"n": 4}, job_id="c-1", attempts=3, backoff=1000, remove_on_complete=True)
    queue.add("custom", {"n": 5}, job_id="c-1")
    queue.add("dedup", {"n": 6}, deduplication={"id": "x"})
    queue.add("dedup", {"n": 7}, deduplication={"id": "x"})
    a.update_progress(50)
    a.log("hello")
    queue.pause()
    queue.add("while-paused", {})
    queue.resume()
    queue.remove("c-1")
    queue.add("swap", {"n": 8}, delay=5000, deduplication={"id": "r", "ttl": 60000, "replace": True})
    queue.add("swap", {"n": 9}, delay=5000, deduplication={"id": "r", "ttl": 60000, "replace": True})
    queue.add("ext", {}, deduplication={"id": "e", "ttl": 60000, "extend": True})
    queue.add("ext", {}, deduplication={"id": "e", "ttl": 60000, "extend": True})
    later = queue.get_job("2")
    later.change_delay(120000)
    later.promote()
    queue.add_bulk([("bulk", {"i": 1}), ("bulk", {"i": 2}, {"lifo": True})])
    queue.clean(0, 0, "completed")
    queue.add_flow({"name": "parent", "data": {}}, [{"name": "child", "data": {}}])


def _shape(client: redis.Redis, queue_name: str) -> dict[str, Any]:
    """Everything about a queue's keys except values that differ by nature (times, UUIDs)."""
    base = QueueKeys(queue_name).job_prefix
    keys = [text(k) for k in client.scan_iter(match=QueueKeys(queue_name).all_keys_pattern(), count=1000)]
    # Flow nodes get random UUIDs: name each after its job's name so the two sides line up.
    uuids = {key[len(base):]: f"<{text(client.hget(key, 'name'))}>"
             for key in keys if UUID.match(key[len(base):])}

    def norm(text: str) -> str:
        text = text.replace(queue_name, "Q")
        for uid, label in uuids.items():
            text = text.replace(uid, label)
        return text

    shape: dict[str, Any] = {}
    for key in keys:
        kind = text(client.type(key))
        name = norm(key[len(base):])
        if kind == "hash":
            fields = {text(f): text(v) for f, v in client.hgetall(key).items()}
            fields.pop("version", None)  # BullMQ's Queue constructor writes its version; informational
            value: Any = sorted(fields)
            if "opts" in fields:
                value = (value, sorted(json.loads(fields["opts"])))
        elif kind == "zset":
            value = sorted(norm(text(m)) for m in client.zrange(key, 0, -1))
        elif kind == "list":
            value = [norm(text(m)) for m in client.lrange(key, 0, -1)]
        elif kind == "set":
            value = sorted(norm(text(m)) for m in client.smembers(key))
        elif kind == "stream":
            value = [[norm(text(x)) for pair in fields.items() for x in pair]
                     for _id, fields in client.xrange(key)]
            value = [[x if not x.isdigit() or len(x) < 10 else "<ts>" for x in entry] for entry in value]
        else:
            value = kind
        shape[name] = (kind, value)
    return shape


def test_same_calls_write_the_same_key_shapes(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    theirs_name = queue_name + "-bullmq"
    try:
        bullmq_peer.run(SEQUENCE_JS % {"queue": _js_queue(theirs_name)})
        _sequence_echomq(Queue(connection, queue_name))
        ours, theirs = _shape(connection, queue_name), _shape(connection, theirs_name)
        assert sorted(ours) == sorted(theirs)
        for key in theirs:
            assert ours[key] == theirs[key], key
    finally:
        keys = list(connection.scan_iter(match=QueueKeys(theirs_name).all_keys_pattern(), count=SCAN_COUNT))
        if keys:
            connection.delete(*keys)
