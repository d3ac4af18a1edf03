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

from support.queue_keys import SCAN_COUNT

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
    for raw in client.scan_iter(match=keys.all_keys_pattern(), count=SCAN_COUNT):
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
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=SCAN_COUNT))
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
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=SCAN_COUNT))
            if stale:
                connection.delete(*stale)


# -- 5. the template is stored as BullMQ stores it ---------------------------------------------------

TEMPLATES = [
    ({"backoff": 1000, "attempts": 2}, "{backoff: 1000, attempts: 2}"),
    ({"backoff": {"type": "exponential", "delay": 50}}, "{backoff: {type: 'exponential', delay: 50}}"),
    ({"remove_on_complete": 10, "remove_on_fail": {"age": 60}, "priority": 3, "lifo": True},
     "{removeOnComplete: 10, removeOnFail: {age: 60}, priority: 3, lifo: true}"),
    ({"keep_logs": 5, "stack_trace_limit": 2, "remove_dependency_on_failure": True},
     "{keepLogs: 5, stackTraceLimit: 2, removeDependencyOnFailure: true}"),
    ({"deduplication": {"id": "d"}}, "{deduplication: {id: 'd'}}"),
]


def test_the_template_hash_fields_are_what_bullmq_stores(bullmq_peer, connection, queue_name):
    ours, theirs = queue_name + "-emq", queue_name + "-bull"
    data = {"to": "a/b", "n": [1, 2.5, None], "s": "é"}
    js = js_queue(theirs)
    sched = JobScheduler(connection, ours)
    try:
        for n, (opts, js_opts) in enumerate(TEMPLATES):
            sched.upsert(f"s{n}", {"every": 60_000}, "job", data, opts)
            js += (f"await q.upsertJobScheduler('s{n}', {{every: 60000}}, {{name: 'job', data: {json.dumps(data)},"
                   f" opts: {js_opts}}});")
        bullmq_peer.run(js + "await q.close();")
        for n in range(len(TEMPLATES)):
            mine = {k.decode(): v.decode() for k, v in connection.hgetall(QueueKeys(ours).scheduler(f"s{n}")).items()}
            their = {k.decode(): v.decode() for k, v in
                     connection.hgetall(QueueKeys(theirs).scheduler(f"s{n}")).items()}
            assert json.loads(mine["opts"]) == json.loads(their["opts"]), TEMPLATES[n]
            assert json.loads(mine["data"]) == json.loads(their["data"]) == data
            # the first iteration carries the template as BullMQ's upsert writes it too
            mine_job = json.loads(connection.hget(QueueKeys(ours).job(f"repeat:s{n}:{mine_score(connection, ours, n)}"),
                                                  "opts"))
            their_job = json.loads(connection.hget(QueueKeys(theirs).job(
                f"repeat:s{n}:{mine_score(connection, theirs, n)}"), "opts"))
            assert mine_job.get("backoff") == their_job.get("backoff")
    finally:
        for name in (ours, theirs):
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=SCAN_COUNT))
            if stale:
                connection.delete(*stale)


def mine_score(connection: redis.Redis, queue: str, n: int) -> int:
    return int(connection.zscore(QueueKeys(queue).repeat, f"s{n}"))


# -- 6. schedules BullMQ wrote are always advanced ----------------------------------------------------

def test_bullmq_dates_given_as_date_objects_and_strings_are_read_and_advanced(bullmq_peer, connection, queue_name):
    start = "2031-01-01T00:00:00.000Z"
    start_ms, end_ms = 1_924_992_000_000, 1_924_992_000_000 + 3_600_000  # 2031-01-01T00:00Z, an hour later
    bullmq_peer.run(
        js_queue(queue_name)
        + f"await q.upsertJobScheduler('as-date', {{every: 60000, startDate: new Date('{start}'),"
        f"  endDate: new Date({end_ms})}}, {{name: 'd'}});"
        f"await q.upsertJobScheduler('as-string', {{pattern: '*/10 * * * *', startDate: '{start}',"
        "  endDate: '2031-01-01T02:00:00+01:00'}, {name: 's'});"
        "await q.close();"
    )
    sched = JobScheduler(connection, queue_name)
    k = QueueKeys(queue_name)
    for sid in ("as-date", "as-string"):
        raw = {a.decode(): b.decode() for a, b in connection.hgetall(k.scheduler(sid)).items()}
        assert raw["startDate"] == str(start_ms)  # BullMQ stores epoch ms, whatever it was given
        record = sched.get(sid)
        assert record.start_date == start_ms and record.end_date == end_ms
    every = sched.get("as-date")
    nxt = sched.produce_next(f"repeat:as-date:{every.next_millis}", now_ms=start_ms)
    assert nxt is not None and nxt.due_ms == start_ms + 60_000
    cron = sched.get("as-string")
    assert cron.next_millis == start_ms + 600_000  # strictly after the start
    nxt = sched.produce_next(f"repeat:as-string:{cron.next_millis}", now_ms=cron.next_millis)
    assert nxt is not None and nxt.due_ms == start_ms + 1_200_000
    opts = json.loads(connection.hget(k.job(nxt.job_id), "opts"))
    assert opts["repeat"]["startDate"] == start_ms and opts["repeat"]["count"] == 2


def test_a_process_local_zone_is_read_as_bullmq_reads_it(bullmq_peer, connection, queue_name, monkeypatch):
    """BullMQ's tz 'local' is the Node process's zone; EchoMQ's worker step reads it as its own."""
    zone = "America/New_York"
    peer = type(bullmq_peer)(bullmq_peer.env["REDIS_URL"])
    peer.env["TZ"] = zone
    [ticks] = peer.run(
        js_queue(queue_name)
        + "await q.upsertJobScheduler('local', {pattern: '0 9 * * *', tz: 'local'}, {name: 'l'});"
        "const s = await q.getJobScheduler('local');"
        "const next = bullmq.defaultRepeatStrategy(s.next + 1, {pattern: '0 9 * * *', tz: 'local'});"
        "await q.close(); return {first: s.next, second: next};"
    )
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        sched = JobScheduler(connection, queue_name)
        record = sched.get("local")
        assert record.tz == "local" and record.next_millis == ticks["first"]
        assert sched.calculate_next_millis({"pattern": "0 9 * * *", "tz": "local"}, ticks["first"] - 1) == \
            ticks["first"]
        nxt = sched.produce_next(f"repeat:local:{ticks['first']}", now_ms=ticks["first"])
        assert nxt is not None and nxt.due_ms == ticks["second"]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_bullmq_advances_what_echomq_read_from_it(bullmq_peer, connection, queue_name):
    """The iteration EchoMQ's step wrote from a BullMQ-made ISO-dated schedule is one BullMQ's
    worker continues: dates stored as epoch ms, the count going on."""
    start = int(time.time() * 1000) + 1500
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start / 1000)) + f".{start % 1000:03d}Z"
    bullmq_peer.run(js_queue(queue_name) + f"await q.upsertJobScheduler('mix', {{every: 500, startDate: '{iso}'}},"
                    " {name: 'm'}); await q.close();")
    sched = JobScheduler(connection, queue_name)
    first = sched.get("mix").next_millis
    assert first == start
    nxt = sched.produce_next(f"repeat:mix:{first}", now_ms=first)
    assert nxt is not None and nxt.due_ms == first + 500
    seen = bullmq_peer.run(
        "const seen = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  seen.push({id: job.id, count: job.opts.repeat.count, start: job.opts.repeat.startDate}); },"
        "  {connection: connection(), prefix});"
        "const deadline = Date.now() + 10000;"
        f"while (!seen.some((s) => s.id === '{nxt.job_id}') && Date.now() < deadline) await sleep(20);"
        "await sleep(700); await w.close(); return seen;",
        timeout=60,
    )[-1]
    mine = next(s for s in seen if s["id"] == nxt.job_id)
    assert mine == {"id": nxt.job_id, "count": 2, "start": start}
    assert sched.get("mix").iteration_count >= 3  # BullMQ's worker went on from it


def _hand_written_iteration(client: redis.Redis, queue: str, due: int, repeat: dict[str, Any]) -> str:
    """A scheduler and its current iteration, waiting, as another runtime may have left them."""
    k = QueueKeys(queue)
    job_id = f"repeat:iso:{due}"
    client.zadd(k.repeat, {"iso": due})
    client.hset(k.scheduler("iso"), mapping={"name": "iso", "every": 1000, "offset": due % 1000, "ic": 1})
    opts = {"attempts": 0, "jobId": job_id, "delay": 0, "timestamp": due, "repeatJobKey": "iso", "repeat": repeat}
    client.hset(k.job(job_id), mapping={"name": "iso", "data": "{}", "opts": json.dumps(opts), "timestamp": due,
                                         "delay": 0, "priority": 0, "rjk": "iso"})
    client.lpush(k.wait, job_id)
    client.zadd(k.marker, {"0": 0})
    return job_id


def test_iso_dates_in_an_iteration_are_read_as_bullmqs_worker_reads_them(bullmq_peer, connection, queue_name,
                                                                          monkeypatch):
    """Offsetless date-times are local time, a date alone is UTC, for both runtimes' steps; both
    write the next iteration's dates as epoch ms."""
    zone = "America/New_York"
    ours, theirs = queue_name + "-emq", queue_name + "-bull"
    repeat = {"every": 1000, "startDate": "2020-01-01T00:00:00", "endDate": "2040-01-01", "count": 1}
    due = int(time.time() * 1000)
    try:
        mine_id = _hand_written_iteration(connection, ours, due, repeat)
        _hand_written_iteration(connection, theirs, due, repeat)
        peer = type(bullmq_peer)(bullmq_peer.env["REDIS_URL"])
        peer.env["TZ"] = zone
        peer.run(
            "let done = false;"
            f"const w = new bullmq.Worker('{{{theirs}}}', async () => {{ done = true; }},"
            "  {connection: connection(), prefix});"
            "const deadline = Date.now() + 10000;"
            "while (!done && Date.now() < deadline) await sleep(20);"
            "await w.close();"
        )
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        nxt = JobScheduler(connection, ours).produce_next(mine_id)
        assert nxt is not None
        their_next = JobScheduler(connection, theirs).get("iso").next_millis
        their_opts = json.loads(connection.hget(QueueKeys(theirs).job(f"repeat:iso:{their_next}"), "opts"))
        mine_opts = json.loads(connection.hget(QueueKeys(ours).job(nxt.job_id), "opts"))
        expected = {"every": 1000, "startDate": 1_577_854_800_000, "endDate": 2_208_988_800_000, "count": 2}
        assert {k: v for k, v in their_opts["repeat"].items() if k != "offset"} == expected
        assert mine_opts["repeat"] == expected
    finally:
        monkeypatch.undo()
        time.tzset()
        for name in (ours, theirs):
            stale = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=SCAN_COUNT))
            if stale:
                connection.delete(*stale)
