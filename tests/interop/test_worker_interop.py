"""EchoMQ's Worker and BullMQ 6.7's Worker on the same queues (real Redis, prefix emq).

1. BullMQ produces (plain, delayed, prioritized, retried with backoff, a flow); our Worker
   processes; BullMQ reads the results back.
2. We produce; a BullMQ Worker processes; we read the results back.
3. Both workers on one queue at once over 10,000 jobs, every tenth failing once and retrying:
   each job completes exactly once, none is lost, and each side reads the other's hashes.
4. Both workers advance one job scheduler: no slot twice, no slot skipped.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

from echomq.protocol.keys import QueueKeys
from echomq.queue.job import Job
from echomq.queue.queue import Queue
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.worker import Worker

from support.queue_keys import SCAN_COUNT
from support.workers import Running, events, wait_until


def js_queue(queue_name: str) -> str:
    return f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def test_echomq_worker_processes_what_bullmq_adds(bullmq_peer, connection, queue_name):
    k = QueueKeys(queue_name)
    added = bullmq_peer.run(
        js_queue(queue_name)
        + "const a = await q.add('plain', {n: 1});"
          "const b = await q.add('later', {n: 2}, {delay: 300});"
          "const c = await q.add('urgent', {n: 3}, {priority: 1});"
          "const d = await q.add('flaky', {n: 4}, {attempts: 3, backoff: {type: 'exponential', delay: 50}});"
          "const flow = new bullmq.FlowProducer({connection: connection(), prefix});"
          f"const tree = await flow.add({{name: 'parent', queueName: '{{{queue_name}}}', data: {{n: 5}},"
          f"  children: [{{name: 'child', queueName: '{{{queue_name}}}', data: {{n: 6}}}}]}});"
          "await flow.close();"
          "return {a: a.id, b: b.id, c: c.id, d: d.id, parent: tree.job.id, child: tree.children[0].job.id};"
    )[-1]
    seen: list[str] = []

    def process(job: Any) -> Any:
        seen.append(job.name)
        if job.name == "flaky" and job.attempts_made < 2:
            raise RuntimeError(f"flaky {job.attempts_made}")
        if job.name == "parent":
            return {"children": sorted(json.loads(v) for v in connection.hvals(k.job_processed(job.id)))}
        return {"doubled": job.data["n"] * 2}

    with Running(Worker(connection, queue_name, process, name="emq")):
        assert wait_until(lambda: connection.zcard(k.completed) == 6, timeout=15)
    assert seen.index("plain") < seen.index("child") < seen.index("urgent")  # wait before prioritized
    back = bullmq_peer.run(
        js_queue(queue_name)
        + "const res = {};"
        + "".join(
            f"{{ const j = await q.getJob('{added[key]}');"
            f"  res['{key}'] = {{state: await j.getState(), rv: j.returnvalue, atm: j.attemptsMade,"
            f"  ats: j.attemptsStarted, reason: j.failedReason, st: j.stacktrace.length, pb: j.processedBy,"
            f"  finished: !!j.finishedOn}}; }}"
            for key in ("a", "b", "c", "d", "parent", "child")
        )
        + "return res;"
    )[-1]
    assert all(v["state"] == "completed" and v["finished"] and v["pb"] == "emq" for v in back.values())
    assert back["a"]["rv"] == {"doubled": 2} and back["b"]["rv"] == {"doubled": 4}
    assert back["d"]["atm"] == 3 and back["d"]["ats"] == 3 and back["d"]["st"] == 2
    assert back["d"]["reason"] == "flaky 1"
    assert back["parent"]["rv"] == {"children": [{"doubled": 12}]}
    kinds = [(e["event"], e.get("prev")) for e in events(connection, queue_name)]
    assert ("waiting", "waiting-children") in kinds and ("waiting", "delayed") in kinds


def test_bullmq_worker_processes_what_echomq_adds(bullmq_peer, connection, queue_name):
    queue = Queue(connection, queue_name)
    ids = [queue.add("sum", {"a": i, "b": 1}).id for i in range(5)]
    retried = queue.add("flaky", {"a": 0, "b": 0}, attempts=2, backoff=30).id
    bullmq_peer.run(
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  if (job.name === 'flaky' && job.attemptsMade === 0) throw new Error('first try');"
        "  return {sum: job.data.a + job.data.b}; }, {connection: connection(), prefix, name: 'node'});"
        f"{js_queue(queue_name)}"
        "const deadline = Date.now() + 15000;"
        "while ((await q.getCompletedCount()) < 6 && Date.now() < deadline) await sleep(20);"
        "await w.close();",
        timeout=60,
    )
    for i, job_id in enumerate(ids):
        job = queue.get_job(job_id)
        assert job is not None and job.return_value == {"sum": i + 1} and job.attempts_made == 1
        assert job.processed_by == "node" and job.get_state() == "completed"
    job = queue.get_job(retried)
    assert job.attempts_made == 2 and job.failed_reason == "first try" and len(job.stacktrace) == 1


def test_both_workers_share_ten_thousand_jobs(bullmq_peer, connection, queue_name):
    n = 10_000
    k = QueueKeys(queue_name)
    queue = Queue(connection, queue_name)
    connection.hset(k.meta, "opts.maxLenEvents", 200_000)  # keep every entry for the audit below
    queue.add_bulk([{"name": "job", "data": {"i": i},
                     "opts": {"attempts": 3, "backoff": {"type": "fixed", "delay": 20}}} for i in range(n)])
    node = bullmq_peer.start(
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  if (job.data.i % 10 === 0 && job.attemptsMade === 0) throw new Error('flaky');"
        "  return {i: job.data.i, by: 'node'}; }, {connection: connection(), prefix, name: 'node', concurrency: 10});"
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix,"
        "  streams: {events: {maxLen: 200000}}});"
        "const deadline = Date.now() + 240000;"
        f"while ((await q.getCompletedCount()) < {n} && Date.now() < deadline) await sleep(100);"
        "await w.close(); return 'done';"
    )

    def process(job: Any) -> Any:
        if job.data["i"] % 10 == 0 and job.attempts_made == 0:
            raise RuntimeError("flaky")
        return {"i": job.data["i"], "by": "emq"}

    t0 = time.monotonic()
    try:
        with Running(Worker(connection, queue_name, process, name="emq", concurrency=10)):
            assert wait_until(lambda: connection.zcard(k.completed) == n, timeout=240, interval=0.2)
        elapsed = time.monotonic() - t0
        _out, err = node.communicate(timeout=60)
        assert node.returncode == 0, err
    finally:
        if node.poll() is None:
            node.kill()
    assert connection.zcard(k.failed) == 0 and connection.llen(k.active) == 0 and connection.llen(k.wait) == 0
    completed_events: dict[str, int] = {}
    for e in events(connection, queue_name):
        if e["event"] == "completed":
            completed_events[e["jobId"]] = completed_events.get(e["jobId"], 0) + 1
    assert len(completed_events) == n and set(completed_events.values()) == {1}  # exactly once each
    by: dict[str, int] = {}
    pipe = connection.pipeline(transaction=False)
    for job_id in completed_events:
        pipe.hmget(k.job(job_id), ["pb", "atm", "returnvalue", "data"])
    for pb, atm, rv, data in pipe.execute():
        i = json.loads(data)["i"]
        value = json.loads(rv)
        assert value == {"i": i, "by": _s(pb)}
        assert int(atm) == (2 if i % 10 == 0 else 1)
        by[_s(pb)] = by.get(_s(pb), 0) + 1
    assert by.get("emq", 0) > n // 20 and by.get("node", 0) > n // 20, by
    # each side reads a hash the other one finished
    node_done = next(j for j, c in completed_events.items()
                     if _s(connection.hget(k.job(j), "pb")) == "node" and int(j) % 10 == 1)
    ours_done = next(j for j, c in completed_events.items()
                     if _s(connection.hget(k.job(j), "pb")) == "emq" and int(j) % 10 == 1)
    job = Job.fetch(connection, k, node_done)
    assert job is not None and job.return_value["by"] == "node" and job.get_state() == "completed"
    back = bullmq_peer.run(
        js_queue(queue_name)
        + f"const j = await q.getJob('{ours_done}');"
          "return {rv: j.returnvalue, state: await j.getState(), atm: j.attemptsMade, reason: j.failedReason};"
    )[-1]
    assert back["rv"]["by"] == "emq" and back["state"] == "completed" and back["atm"] == 2
    assert back["reason"] == "flaky"
    assert elapsed < 240, f"10,000 jobs took {elapsed:.1f} s"


def test_both_workers_advance_one_scheduler_without_double_or_gap(bullmq_peer, connection, queue_name):
    every = 250
    sched = JobScheduler(connection, queue_name)
    start = int(time.time() * 1000) + 1500  # once node is up
    sched.upsert("beat", {"every": every, "start_date": start}, "beat")
    ours: list[str] = []
    lock = threading.Lock()

    def beat(job: Any) -> None:
        with lock:
            ours.append(job.id)
        time.sleep(every / 1000 * 1.2)  # still busy when the next slot is due: the other takes it

    node = bullmq_peer.start(
        "const seen = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        f"  seen.push(job.id); await sleep({int(every * 1.2)}); }}, {{connection: connection(), prefix}});"
        "await sleep(5500); await w.close(); return seen;"
    )
    with Running(Worker(connection, queue_name, beat)):
        time.sleep(5.5)
    out, err = node.communicate(timeout=60)
    assert node.returncode == 0, err
    theirs = json.loads(out.strip().splitlines()[-1])
    slots = sorted(int(j.rsplit(":", 1)[1]) for j in ours + theirs)
    assert len(slots) == len(set(slots)), "an iteration ran twice"
    assert slots[0] == start
    assert all(b - a == every for a, b in itertools.pairwise(slots)), slots
    assert len(ours) >= 3 and len(theirs) >= 3, (len(ours), len(theirs))


def test_same_jobs_leave_the_same_events_and_hash_fields(bullmq_peer, connection, queue_name):
    """The same three jobs (one completes, one fails once then completes after a backoff, one
    fails for good), added by BullMQ to two queues, one processed by a BullMQ Worker and one by
    ours: the streams carry the same events in the same order with the same fields, and the
    job hashes have the same field sets."""
    theirs, ours = f"{queue_name}-bull", f"{queue_name}-emq"
    adds = "".join(
        f"{{ const q = new bullmq.Queue('{{{name}}}', {{connection: connection(), prefix}});"
        "  await q.add('a', {n: 1});"
        "  await q.add('b', {n: 2}, {attempts: 2, backoff: {type: 'fixed', delay: 200}});"
        "  await q.add('c', {n: 3}); await q.close(); }"
        for name in (theirs, ours)
    )
    bullmq_peer.run(adds)

    def process_js() -> str:
        return ("async (job) => { if (job.name === 'a') return {x: 1};"
                " if (job.name === 'b' && job.attemptsMade === 0) throw new Error('b failed');"
                " if (job.name === 'c') throw new Error('c failed'); return {x: 2}; }")

    def process(job: Any) -> Any:
        if job.name == "a":
            return {"x": 1}
        if job.name == "b" and job.attempts_made == 0:
            raise RuntimeError("b failed")
        if job.name == "c":
            raise RuntimeError("c failed")
        return {"x": 2}

    try:
        bullmq_peer.run(
            f"const w = new bullmq.Worker('{{{theirs}}}', {process_js()}, {{connection: connection(), prefix}});"
            f"const r = connection();"
            "const deadline = Date.now() + 15000;"
            f"while ((await r.xrevrange('emq:{{{theirs}}}:events', '+', '-', 'COUNT', 1))[0][1][1] !== 'drained'"
            "  && Date.now() < deadline) await sleep(20);"
            "await w.close();",
            timeout=60,
        )
        with Running(Worker(connection, ours, process)):
            assert wait_until(lambda: events(connection, ours)[-1]["event"] == "drained", timeout=15)

        def shape(name: str) -> list[tuple[Any, ...]]:
            return [(e["event"], e.get("jobId"), e.get("prev"), tuple(sorted(e))) for e in events(connection, name)]

        assert shape(ours) == shape(theirs)
        for job_id in ("1", "2", "3"):
            mine = set(connection.hkeys(QueueKeys(ours).job(job_id)))
            bulls = set(connection.hkeys(QueueKeys(theirs).job(job_id)))
            assert mine == bulls, (job_id, mine ^ bulls)
        for name in (theirs, ours):
            k = QueueKeys(name)
            assert _s(connection.hget(k.job("2"), "returnvalue")) == '{"x":2}'  # JSON.stringify's bytes
            assert _s(connection.hget(k.job("3"), "failedReason")) == "c failed"
    finally:
        for name in (theirs, ours):
            for key in connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=SCAN_COUNT):
                connection.delete(key)
