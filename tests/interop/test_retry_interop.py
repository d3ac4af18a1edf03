"""Retry and promote against BullMQ 6.7, both ways, on twin queues.

One runtime writes two identical queues and finishes their jobs (failed, completed, a failed
flow child whose parent waits, delayed jobs). Then BullMQ retries and promotes on queue A
(job.retry, queue.retryJobs, queue.promoteJobs) while EchoMQ does the same calls on queue B
(Job.retry, Queue.retry_jobs, Queue.promote_jobs). The two queues must then hold the same
data and the same new events, save the differences docs/protocol.md §7 states. Finally the
*other* runtime's worker runs each queue's retried jobs: an EchoMQ Worker runs what BullMQ
retried, a BullMQ Worker what EchoMQ retried, and both end in the same state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import ActiveJob, Queue, QueueEvents
from echomq.errors import JobFailedError
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.worker.worker import Worker

from support.workers import Running, wait_until

#: Jobs by name, with the auto ids both writers give them (adds in this order).
SPECS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("f1", {"n": 1, "fail": True}, {}),
    ("f2", {"n": 2, "fail": True}, {"lifo": True, "attempts": 2}),
    ("f3", {"n": 3, "fail": True}, {"priority": 5}),
    ("c1", {"n": 4}, {}),
    ("f4", {"n": 5, "fail": True}, {}),
    ("f5", {"n": 6, "fail": True}, {}),
    ("c2", {"n": 7}, {}),
    ("d1", {"n": 8}, {"delay": 600_000}),
    ("d2", {"n": 9}, {"delay": 600_000, "priority": 2}),
]
IDS = {name: str(n) for n, (name, _, _) in enumerate(SPECS, start=1)}
ALL_IDS = [*IDS.values(), "p", "k"]
#: Finished for good after the first run: everything but the delayed jobs and the flow parent.
FINISHED_FIRST = 8
TIMES = {"timestamp", "processedOn", "finishedOn"}

_JS_OPTS = {"lifo": "lifo", "attempts": "attempts", "priority": "priority", "delay": "delay"}

JS_WRITE = """
for (const name of %(queues)s) {
  const q = new bullmq.Queue(name, {connection: connection(), prefix});
  for (const [jobName, data, opts] of %(specs)s) await q.add(jobName, data, opts);
  const flow = new bullmq.FlowProducer({connection: connection(), prefix});
  await flow.add({name: 'p', queueName: name, data: {n: 10}, opts: {jobId: 'p'},
    children: [{name: 'k', queueName: name, data: {n: 11, fail: true}, opts: {jobId: 'k'}}]});
  await flow.close();
  const w = new bullmq.Worker(name, async (job) => {
    if (job.data.fail) throw new Error('fail ' + job.data.n);
    return {n: job.data.n};
  }, {connection: connection(), prefix});
  while ((await q.getCompletedCount()) + (await q.getFailedCount()) < %(finished)d) await sleep(20);
  await w.close();
  await q.close();
}
"""

JS_RETRY = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
await (await q.getJob('1')).retry('failed');
await (await q.getJob('2')).retry('failed', {resetAttemptsMade: true, resetAttemptsStarted: true});
await (await q.getJob('3')).retry();
await (await q.getJob('4')).retry('completed');
await (await q.getJob('k')).retry();
await q.retryJobs({state: 'failed'});
await q.retryJobs({state: 'completed'});
await q.promoteJobs();
await q.close();
"""

JS_WORK = """
const q = new bullmq.Queue(%(queue)s, {connection: connection(), prefix});
const w = new bullmq.Worker(%(queue)s, async (job) => ({n: job.data.n}), {connection: connection(), prefix});
const deadline = Date.now() + 20000;
while ((await q.getCompletedCount()) < %(count)d) {
  if (Date.now() > deadline) throw new Error('only ' + (await q.getCompletedCount()) + ' completed');
  await sleep(20);
}
await w.close();
await q.close();
"""


def _js(queue_name: str) -> str:
    return json.dumps("{" + queue_name + "}")


@pytest.fixture
def twin(connection: redis.Redis, queue_name: str) -> Iterator[str]:
    name = queue_name + "-twin"
    yield name
    keys = list(connection.scan_iter(match=QueueKeys(name).all_keys_pattern(), count=1000))
    if keys:
        connection.delete(*keys)


def _write_with_echomq(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    for name, data, opts in SPECS:
        queue.add(name, data, **opts)
    queue.add_flow({"name": "p", "data": {"n": 10}, "opts": {"job_id": "p"}},
                   [{"name": "k", "data": {"n": 11, "fail": True}, "opts": {"job_id": "k"}}])

    def run(job: ActiveJob) -> Any:
        if job.data.get("fail"):
            raise RuntimeError(f"fail {job.data['n']}")
        return {"n": job.data["n"]}

    k = QueueKeys(queue_name)
    with Running(Worker(connection, queue_name, run, drain_delay=0.2)):
        assert wait_until(lambda: connection.zcard(k.completed) + connection.zcard(k.failed) == FINISHED_FIRST)


def _retry_with_echomq(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    queue.get_job(IDS["f1"]).retry("failed")
    queue.get_job(IDS["f2"]).retry("failed", reset_attempts_made=True, reset_attempts_started=True)
    queue.retry_job(IDS["f3"])
    queue.get_job(IDS["c1"]).retry("completed")
    queue.retry_job("k")
    assert queue.retry_jobs(state="failed") == 2
    assert queue.retry_jobs(state="completed") == 1
    assert queue.promote_jobs() == 2


def _work_with_echomq(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    with Running(Worker(connection, queue_name, lambda job: {"n": job.data["n"]}, drain_delay=0.2)):
        assert wait_until(lambda: connection.zcard(k.completed) == len(ALL_IDS), timeout=20)


def _newest(connection: redis.Redis, queue_name: str) -> str:
    newest = connection.xrevrange(QueueKeys(queue_name).events, count=1)
    return text(newest[0][0]) if newest else "0-0"


def _view(connection: redis.Redis, queue_name: str, since: str) -> dict[str, Any]:
    """What the retry calls left, without times: each job's fields, the lists, the new events."""
    k = QueueKeys(queue_name)
    jobs = {}
    for job_id in ALL_IDS:
        fields = {text(f): text(v) for f, v in connection.hgetall(k.job(job_id)).items()}
        for name in TIMES & set(fields):
            fields[name] = "<time>"
        if "stacktrace" in fields:
            fields["stacktrace"] = f"<{len(json.loads(fields['stacktrace']))} traces>"
        if "returnvalue" in fields:
            fields["returnvalue"] = json.loads(fields["returnvalue"])
        jobs[job_id] = {f: v.replace(queue_name, "<queue>") if isinstance(v, str) else v for f, v in fields.items()}
    events = [{text(f): text(v) for f, v in entry.items()}
              for entry_id, entry in connection.xrange(k.events, since, "+") if text(entry_id) != since]
    return {
        "jobs": jobs,
        "wait": [text(x) for x in connection.lrange(k.wait, 0, -1)],
        "prioritized": [text(x) for x in connection.zrange(k.prioritized, 0, -1)],
        "completed": sorted(text(x) for x in connection.zrange(k.completed, 0, -1)),
        "failed": sorted(text(x) for x in connection.zrange(k.failed, 0, -1)),
        "delayed": [text(x) for x in connection.zrange(k.delayed, 0, -1)],
        "ready marker": connection.zscore(k.marker, "0") is not None,
        "pending of p": sorted(text(x).replace(queue_name, "<queue>")
                               for x in connection.smembers(k.job_dependencies("p"))),
        "events": events,
    }


def _documented_differences(by_bullmq: dict[str, Any], by_echomq: dict[str, Any]) -> None:
    """docs/protocol.md §7: promote_jobs sets delay = 0 and places a job with a priority in
    prioritized, as promote does; BullMQ's promoteJobs keeps the delay and LPUSHes it to wait.
    Assert them, then take them out of the comparison."""
    d1, d2 = IDS["d1"], IDS["d2"]
    assert [by_bullmq["jobs"][j]["delay"] for j in (d1, d2)] == ["600000", "600000"]
    assert [by_echomq["jobs"][j]["delay"] for j in (d1, d2)] == ["0", "0"]
    assert d2 in by_bullmq["wait"] and d2 not in by_bullmq["prioritized"]
    assert by_echomq["prioritized"] == [d2, IDS["f3"]]
    for view in (by_bullmq, by_echomq):
        for job_id in (d1, d2):
            view["jobs"][job_id].pop("delay")
        view["wait"] = [j for j in view["wait"] if j != d2]
        view["prioritized"] = [j for j in view["prioritized"] if j != d2]


@pytest.mark.parametrize("writer", ["bullmq", "echomq"])
def test_retry_and_promote_leave_what_bullmq_leaves_and_the_other_runtime_runs_them(
        bullmq_peer: Any, connection: redis.Redis, queue_name: str, twin: str, writer: str) -> None:
    retried_by_bullmq, retried_by_echomq = queue_name, twin
    if writer == "bullmq":
        specs = [[name, data, {_JS_OPTS[o]: v for o, v in opts.items()}] for name, data, opts in SPECS]
        bullmq_peer.run(JS_WRITE % {"queues": json.dumps(["{" + q + "}" for q in (queue_name, twin)]),
                                    "specs": json.dumps(specs), "finished": FINISHED_FIRST})
    else:
        _write_with_echomq(connection, retried_by_bullmq)
        _write_with_echomq(connection, retried_by_echomq)
    first = _view(connection, retried_by_bullmq, "0-0")
    assert first["failed"] == sorted([IDS["f1"], IDS["f2"], IDS["f3"], IDS["f4"], IDS["f5"], "k"])
    assert first["pending of p"] == [QueueKeys("<queue>").job("k")]

    since = {q: _newest(connection, q) for q in (retried_by_bullmq, retried_by_echomq)}
    bullmq_peer.run(JS_RETRY % {"queue": _js(retried_by_bullmq)})
    _retry_with_echomq(connection, retried_by_echomq)
    by_bullmq = _view(connection, retried_by_bullmq, since[retried_by_bullmq])
    by_echomq = _view(connection, retried_by_echomq, since[retried_by_echomq])
    assert by_echomq["events"] == [
        {"event": "waiting", "jobId": job_id, "prev": prev}
        for job_id, prev in ((IDS["f1"], "failed"), (IDS["f2"], "failed"), (IDS["f3"], "failed"),
                             (IDS["c1"], "completed"), ("k", "failed"), (IDS["f4"], "failed"), (IDS["f5"], "failed"),
                             (IDS["c2"], "completed"), (IDS["d1"], "delayed"), (IDS["d2"], "delayed"))]
    assert "atm" not in by_echomq["jobs"][IDS["f2"]] and "ats" not in by_echomq["jobs"][IDS["f2"]]
    _documented_differences(by_bullmq, by_echomq)
    assert by_echomq == by_bullmq

    # Each queue's retried jobs run on the other runtime's worker, and end alike.
    _work_with_echomq(connection, retried_by_bullmq)
    bullmq_peer.run(JS_WORK % {"queue": _js(retried_by_echomq), "count": len(ALL_IDS)})
    done_by_echomq = _view(connection, retried_by_bullmq, "0-0")
    done_by_bullmq = _view(connection, retried_by_echomq, "0-0")
    for view in (done_by_echomq, done_by_bullmq):
        assert view["completed"] == sorted(ALL_IDS) and view["failed"] == [] and view["wait"] == []
        assert view["pending of p"] == []
    for job_id in ALL_IDS:
        ours, theirs = done_by_echomq["jobs"][job_id], done_by_bullmq["jobs"][job_id]
        assert ours["returnvalue"] == theirs["returnvalue"], job_id
        assert (ours.get("atm"), ours.get("ats")) == (theirs.get("atm"), theirs.get("ats")), job_id
    assert done_by_echomq["jobs"][IDS["f1"]]["atm"] == "2"  # one attempt more than before the retry
    assert done_by_echomq["jobs"][IDS["f2"]]["atm"] == "1"  # counted again from zero
    assert done_by_echomq["jobs"]["p"]["returnvalue"] == {"n": 10}


def test_echomq_waits_for_a_job_a_bullmq_worker_runs(bullmq_peer: Any, connection: redis.Redis,
                                                     queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    good = queue.add("good", {"n": 3})
    bad = queue.add("bad", {"n": 4})
    node = bullmq_peer.start(
        f"const w = new bullmq.Worker({_js(queue_name)}, async (job) => {{"
        "  if (job.name === 'bad') throw new Error('no ' + job.data.n); return {n: job.data.n * 2}; },"
        "  {connection: connection(), prefix});"
        "await sleep(8000); await w.close();")
    try:
        with QueueEvents(connection, queue_name) as events:
            assert good.wait_until_finished(events, timeout=15) == {"n": 6}
            with pytest.raises(JobFailedError) as failed:
                bad.wait_until_finished(events, timeout=15)
        assert failed.value.failed_reason == "no 4"
    finally:
        node.kill()
        node.wait(10)
