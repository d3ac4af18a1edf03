"""The dashboard over BullMQ 6.7's jobs: what BullMQ wrote shows as EchoMQ's does (counts,
the failed reason and stack trace, a flow's parent and child, a BullMQ worker in the workers
list), and what the dashboard retries and promotes, BullMQ's worker then runs (the flow's parent too, once
its promoted child completed)."""

from __future__ import annotations

import json
import re
from typing import Any

import redis
from werkzeug.test import Client

from echomq import Queue
from echomq.contrib.dashboard import Dashboard

from support.workers import wait_until

JS_WRITE = """
const name = %(queue)s;
const q = new bullmq.Queue(name, {connection: connection(), prefix});
await q.add('charge', {order: 1}, {attempts: 1});
await q.add('later', {order: 2}, {delay: 600000});
const flow = new bullmq.FlowProducer({connection: connection(), prefix});
await flow.add({name: 'invoice', queueName: name, data: {}, opts: {jobId: 'parent'},
  children: [{name: 'line', queueName: name, data: {}, opts: {jobId: 'child', delay: 600000}}]});
await flow.close();
const w = new bullmq.Worker(name, async (job) => {
  if (job.name === 'charge') throw new Error('card <declined>');
  return {ok: job.name};
}, {connection: connection(), prefix, autorun: true});
while ((await q.getFailedCount()) < 1) await sleep(20);
await w.close();
await q.close();
"""

JS_WORK = """
const name = %(queue)s;
const q = new bullmq.Queue(name, {connection: connection(), prefix});
const w = new bullmq.Worker(name, async (job) => ({ok: job.name, by: 'bullmq'}),
  {connection: connection(), prefix, name: 'bull-worker'});
out({ready: true});
while ((await q.getCompletedCount()) < 4) await sleep(20);
await w.close();
await q.close();
out({done: true});
"""


def token_of(body: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', body)
    assert found
    return found.group(1)


def test_bullmq_jobs_shown_retried_and_promoted_then_run_by_bullmq(bullmq_peer: Any, connection: redis.Redis,
                                                                    queue_name: str) -> None:
    bullmq_peer.run(JS_WRITE % {"queue": json.dumps("{" + queue_name + "}")})
    client = Client(Dashboard(connection, queues=[queue_name]))
    overview = client.get("/").get_data(as_text=True)
    assert f">{queue_name}</a>" in overview and "bullmq:6.7.0" in overview
    page = client.get(f"/job?q={queue_name}&id=1").get_data(as_text=True)
    assert "card &lt;declined&gt;" in page and 'class="trace"' in page and "at " in page  # a JS stack
    child = client.get(f"/job?q={queue_name}&id=child").get_data(as_text=True)
    assert f'href="/job?q={queue_name}&amp;id=parent"' in child
    parent = client.get(f"/job?q={queue_name}&id=parent").get_data(as_text=True)
    assert "Children waiting (1)" in parent and f'href="/job?q={queue_name}&amp;id=child"' in parent
    token = token_of(page)
    worker = bullmq_peer.start(JS_WORK % {"queue": json.dumps("{" + queue_name + "}")})
    try:
        assert json.loads(worker.stdout.readline()) == {"ready": True}
        queue = Queue(connection, queue_name)
        assert wait_until(lambda: "bull-worker" in client.get(f"/queue?q={queue_name}").get_data(as_text=True),
                          timeout=10)
        for action, form in (("retry", {"id": "1", "state": "failed"}), ("promote-all", {})):
            done = client.post(f"/action/{action}", data={"queue": queue_name, "csrf": token, **form})
            assert done.status_code == 303
        assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == 4, timeout=10)
        assert json.loads(worker.stdout.readline()) == {"done": True}
    finally:
        worker.wait(10)
    assert queue.get_job("1").return_value == {"ok": "charge", "by": "bullmq"}
    assert queue.get_job("parent").get_state() == "completed"  # its child ran, so BullMQ ran it too
