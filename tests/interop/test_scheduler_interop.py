"""Job schedulers across runtimes: EchoMQ and BullMQ 6.7 share the repeat keys both ways.

1. EchoMQ upserts every 500 ms; a BullMQ Worker processes three iterations, advancing it.
2. EchoMQ upserts a pattern with tz; BullMQ's getJobSchedulers reads the same record.
3. BullMQ upserts every and pattern schedulers; EchoMQ get/list/count read the same values;
   EchoMQ's remove is seen by BullMQ.
4. The same call sequence leaves the same keys, types, hash fields and events in both runtimes.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import redis

from echomq.protocol.keys import QueueKeys
from echomq.schedule.scheduler import JobScheduler

HOUR = 3_600_000


def js_queue(queue_name: str) -> str:
    return f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"


def test_bullmq_worker_advances_an_echomq_every_schedule(bullmq_peer, connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    start = int(time.time() * 1000) + 2000  # after node has started, so no run is missed
    first = sched.upsert("half-second", {"every": 500, "start_date": start}, "beat", {"n": 1},
                         {"remove_on_complete": 10})
    seen = bullmq_peer.run(
        "const seen = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  seen.push({id: job.id, name: job.name, data: job.data, count: job.opts.repeat.count,"
        "             rjk: job.repeatJobKey}); }, {connection: connection(), prefix});"
        "const deadline = Date.now() + 15000;"
        "while (seen.length < 3 && Date.now() < deadline) await sleep(20);"
        "await w.close(); return seen;",
        timeout=60,
    )[-1]
    assert len(seen) >= 3
    due = [int(s["id"].rsplit(":", 1)[1]) for s in seen[:3]]
    assert due[0] == first.due_ms == start
    # each run advances the schedule on its 500 ms grid (a late pickup skips missed slots)
    assert due[0] < due[1] < due[2] and all((d - start) % 500 == 0 for d in due)
    assert [s["count"] for s in seen[:3]] == [1, 2, 3]
    assert all(s["name"] == "beat" and s["data"] == {"n": 1} and s["rjk"] == "half-second" for s in seen)
    record = sched.get("half-second")
    assert record.iteration_count >= 3 and record.next_millis >= due[2] + 500
    # the iteration BullMQ made is one our worker-side step can continue from
    nxt = sched.produce_next(f"repeat:half-second:{record.next_millis}", now_ms=record.next_millis)
    assert nxt is not None and nxt.due_ms == record.next_millis + 500


def test_bullmq_worker_advances_an_echomq_pattern_schedule(bullmq_peer, connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    start = int(time.time() * 1000) + 2000  # after node has started
    first = sched.upsert("each-second", {"pattern": "* * * * * *", "tz": "Asia/Kolkata", "start_date": start},
                         "tick")
    seen = bullmq_peer.run(
        "const seen = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  seen.push({id: job.id, prev: job.opts.prevMillis, count: job.opts.repeat.count}); },"
        "  {connection: connection(), prefix});"
        "const deadline = Date.now() + 15000;"
        "while (seen.length < 2 && Date.now() < deadline) await sleep(20);"
        "await w.close(); return seen;",
        timeout=60,
    )[-1]
    assert len(seen) >= 2
    assert seen[0] == {"id": first.job_id, "prev": first.due_ms, "count": 1}
    # the next tick after the first (one later if BullMQ picked the first up late)
    assert seen[1]["prev"] > first.due_ms and (seen[1]["prev"] - first.due_ms) % 1000 == 0
    assert seen[1]["count"] == 2 and seen[1]["id"] == f"repeat:each-second:{seen[1]['prev']}"


def test_bullmq_reads_an_echomq_pattern_scheduler(bullmq_peer, connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    start = int(time.time() * 1000) + HOUR
    it = sched.upsert("berlin", {"pattern": "0 9 * * *", "tz": "Europe/Berlin", "limit": 4,
                                  "start_date": start}, "report", {"kind": "daily"}, {"attempts": 2})
    [got] = bullmq_peer.run(js_queue(queue_name) + "const s = await q.getJobSchedulers(); await q.close(); return s;")
    [one] = got
    assert one == {"key": "berlin", "name": "report", "next": it.due_ms, "iterationCount": 1, "limit": 4,
                   "startDate": start, "tz": "Europe/Berlin", "pattern": "0 9 * * *", "offset": 0,
                   "template": {"data": {"kind": "daily"}, "opts": {"attempts": 2}}}
    [job] = bullmq_peer.run(js_queue(queue_name) + f"const j = await q.getJob('{it.job_id}'); await q.close();"
                            "return {opts: j.opts, delay: j.delay, rjk: j.repeatJobKey};")
    assert job["opts"]["prevMillis"] == it.due_ms and job["opts"]["repeat"]["count"] == 1
    assert job["rjk"] == "berlin" and job["delay"] == it.delay


def test_echomq_reads_and_removes_bullmq_schedulers(bullmq_peer, connection, queue_name):
    start = int(time.time() * 1000) + HOUR
    [theirs] = bullmq_peer.run(
        js_queue(queue_name)
        + "await q.upsertJobScheduler('ev', {every: 60000, offset: 1500, limit: 9},"
        "  {name: 'e-job', data: {a: [1, 2]}, opts: {attempts: 4, backoff: {type: 'exponential', delay: 100}}});"
        f"await q.upsertJobScheduler('pat', {{pattern: '*/5 * * * *', tz: 'America/New_York', startDate: {start},"
        f"  endDate: {start + 10 * HOUR}}}, {{name: 'p-job'}});"
        "await q.upsertJobScheduler('bare', {every: 3000});"
        "const s = await q.getJobSchedulers(0, -1, true); await q.close(); return s;"
    )
    sched = JobScheduler(connection, queue_name)
    assert sched.count() == 3
    ours = sched.list(asc=True)
    assert [r.key for r in ours] == [s["key"] for s in theirs]
    for mine, their in zip(ours, theirs):
        assert mine.name == their["name"] and mine.next_millis == their["next"]
        assert mine.iteration_count == their["iterationCount"]
        assert mine.every == their.get("every") and mine.pattern == their.get("pattern")
        assert mine.tz == their.get("tz") and mine.limit == their.get("limit")
        assert mine.start_date == their.get("startDate") and mine.end_date == their.get("endDate")
        assert mine.offset == their.get("offset")
        template = their.get("template", {})
        assert mine.template_data == template.get("data")
    ev = sched.get("ev")
    assert ev.template_opts == {"attempts": 4, "backoff": {"type": "exponential", "delay": 100}}
    assert ev.next_millis % 60_000 == 1500
    assert sched.remove("pat") is True
    [after] = bullmq_peer.run(
        js_queue(queue_name) + "const s = await q.getJobSchedulers(); const one = await q.getJobScheduler('pat');"
        "const n = await q.getJobSchedulersCount(); await q.close();"
        "return {keys: s.map((x) => x.key).sort(), one: one === undefined ? null : one, n};"
    )
    assert after == {"keys": ["bare", "ev"], "one": None, "n": 2}


# -- 4. same sequence, same shape ------------------------------------------------------------------

_MILLIS = re.compile(r"(repeat:[^:]+:)\d{13}")


def _shape_of_json(text: str) -> Any:
    """Keys (recursively) of a JSON object: the structure BullMQ and EchoMQ must agree on."""
    value = json.loads(text)

    def walk(v: Any) -> Any:
        return {k: walk(x) for k, x in sorted(v.items())} if isinstance(v, dict) else type(v).__name__

    return walk(value)


def snapshot(client: redis.Redis, queue: str) -> dict[str, Any]:
    """Every key of the queue: its type, and for hashes the field set (opts/data as JSON shape)."""
    keys = QueueKeys(queue)
    out: dict[str, Any] = {}
    for raw in client.scan_iter(match=keys.all_keys_pattern()):
        key = raw.decode()
        suffix = _MILLIS.sub(r"\1<ms>", key[len(keys.job_prefix):])
        kind = client.type(key).decode()
        if kind == "hash":
            fields = {k.decode(): v.decode() for k, v in client.hgetall(key).items()}
            fields.pop("version", None)  # written by BullMQ's Queue constructor, not by the scripts
            out[suffix] = {name: (_shape_of_json(v) if name == "opts" else None) for name, v in fields.items()}
        elif kind == "stream":
            out[suffix] = [(f[b"event"].decode(), sorted(x.decode() for x in f)) for _i, f in client.xrange(key)]
        elif kind == "zset":
            out[suffix] = sorted(_MILLIS.sub(r"\1<ms>", m.decode()) for m in client.zrange(key, 0, -1))
        elif kind == "list":
            out[suffix] = [_MILLIS.sub(r"\1<ms>", m.decode()) for m in client.lrange(key, 0, -1)]
        else:
            out[suffix] = kind
    return out


def test_same_calls_leave_the_same_shape(bullmq_peer, connection, queue_name):
    ours, theirs = queue_name + "-emq", queue_name + "-bull"
    start = int(time.time() * 1000) + HOUR
    sched = JobScheduler(connection, ours)
    try:
        sched.upsert("every", {"every": 5000}, "tick", {"a": 1}, {"attempts": 3, "remove_on_complete": True})
        sched.upsert("every", {"every": 5000}, "tick", {"a": 2}, {"attempts": 3, "remove_on_complete": True})
        sched.upsert("later", {"every": 60_000, "start_date": start, "end_date": start + HOUR, "limit": 3})
        sched.upsert("cron", {"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, "daily")
        sched.upsert("off", {"every": 60_000, "offset": 1500}, "o", None, {"priority": 2, "lifo": True})
        sched.upsert("imm", {"pattern": "0 0 1 1 *", "immediately": True, "limit": 2})
        sched.upsert("gone", {"every": 1000, "start_date": start})
        sched.remove("gone")
        bullmq_peer.run(
            js_queue(theirs)
            + "await q.upsertJobScheduler('every', {every: 5000}, {name: 'tick', data: {a: 1},"
            "  opts: {attempts: 3, removeOnComplete: true}});"
            "await q.upsertJobScheduler('every', {every: 5000}, {name: 'tick', data: {a: 2},"
            "  opts: {attempts: 3, removeOnComplete: true}});"
            f"await q.upsertJobScheduler('later', {{every: 60000, startDate: {start}, endDate: {start + HOUR},"
            "  limit: 3});"
            "await q.upsertJobScheduler('cron', {pattern: '0 9 * * *', tz: 'Europe/Berlin'}, {name: 'daily'});"
            "await q.upsertJobScheduler('off', {every: 60000, offset: 1500}, {name: 'o',"
            "  opts: {priority: 2, lifo: true}});"
            "await q.upsertJobScheduler('imm', {pattern: '0 0 1 1 *', immediately: true, limit: 2});"
            f"await q.upsertJobScheduler('gone', {{every: 1000, startDate: {start}}});"
            "await q.removeJobScheduler('gone'); await q.close();"
        )
        assert snapshot(connection, ours) == snapshot(connection, theirs)
    finally:
        for name in (ours, theirs):
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern()))
            if stale:
                connection.delete(*stale)


def test_worker_step_writes_what_a_bullmq_worker_writes(bullmq_peer, connection, queue_name):
    """produce_next vs BullMQ's worker: the next iteration's hash and opts have the same shape."""
    ours, theirs = queue_name + "-emq", queue_name + "-bull"
    sched = JobScheduler(connection, ours)
    try:
        for sid, repeat in (("ev", {"every": 2000, "limit": 5}), ("cr", {"pattern": "*/2 * * * * *"})):
            first = sched.upsert(sid, repeat, "job", {"k": 1}, {"attempts": 2, "backoff": 100})
            sched.produce_next(first.job_id)
        bullmq_peer.run(
            js_queue(theirs)
            + "const a = await q.upsertJobScheduler('ev', {every: 2000, limit: 5}, {name: 'job', data: {k: 1},"
            "  opts: {attempts: 2, backoff: {type: 'fixed', delay: 100}}});"
            "const b = await q.upsertJobScheduler('cr', {pattern: '*/2 * * * * *'}, {name: 'job', data: {k: 1},"
            "  opts: {attempts: 2, backoff: {type: 'fixed', delay: 100}}});"
            "const done = new Set();"
            f"const w = new bullmq.Worker('{{{theirs}}}', async (job) => {{ done.add(job.id); }},"
            "  {connection: connection(), prefix, autorun: false});"
            "w.run(); const deadline = Date.now() + 10000;"
            "while (!(done.has(a.id) && done.has(b.id)) && Date.now() < deadline) await sleep(10);"
            "await w.close(); await q.close();"
        )
        for sid in ("ev", "cr"):
            mine = JobScheduler(connection, ours).get(sid)
            their = JobScheduler(connection, theirs).get(sid)
            assert mine.iteration_count == 2 and their.iteration_count >= 2
            mine_job = {k.decode(): v.decode() for k, v in
                        connection.hgetall(QueueKeys(ours).job(f"repeat:{sid}:{mine.next_millis}")).items()}
            their_job = {k.decode(): v.decode() for k, v in
                         connection.hgetall(QueueKeys(theirs).job(f"repeat:{sid}:{their.next_millis}")).items()}
            assert set(mine_job) == set(their_job)
            mine_opts, their_opts = json.loads(mine_job["opts"]), json.loads(their_job["opts"])
            assert _shape_of_json(mine_job["opts"]) == _shape_of_json(their_job["opts"])
            assert mine_opts["repeat"]["count"] == 2 and mine_opts["attempts"] == their_opts["attempts"] == 2
            assert mine_opts["backoff"] == their_opts["backoff"]
    finally:
        for name in (ours, theirs):
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern()))
            if stale:
                connection.delete(*stale)
