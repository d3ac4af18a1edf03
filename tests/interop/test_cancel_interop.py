"""Cancel and time limits against BullMQ 6.7.0 on real Redis: what a BullMQ worker does with
them (docs/worker.md, "Time limits and cancel"). A job EchoMQ cancelled before it started
never runs on a BullMQ worker either, which reads it as failed with its reason; the limits stay
in opts, unread; a job cancelled while a BullMQ worker runs it completes as BullMQ would, and
its request goes with its TTL."""

from __future__ import annotations

import json
import threading

import redis

from echomq import Queue

from support.workers import wait_until


def js_queue(queue_name: str) -> str:
    return f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"


def test_a_bullmq_worker_never_runs_a_cancelled_job_and_keeps_the_limits(
        connection: redis.Redis, queue_name: str, bullmq_peer) -> None:
    queue = Queue(connection, queue_name)
    cancelled = queue.add("skip", {}, delay=200, time_limit_ms=5000)
    kept = queue.add("run", {"n": 1}, time_limit_ms=5000, soft_time_limit_ms=4000)
    assert queue.cancel(cancelled.id, "not wanted") is True
    back = bullmq_peer.run(
        f"const ran = []; const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{ ran.push(job.id);"
        "  return job.opts.emqTimeLimit; }, {connection: connection(), prefix});"
        f"{js_queue(queue_name)}"
        "const deadline = Date.now() + 5000;"
        "while ((await q.getCompletedCount()) < 1 && Date.now() < deadline) await sleep(20);"
        "await sleep(400);"  # past the cancelled job's delay: it would have run by now
        "await w.close();"
        f"const c = await q.getJob('{cancelled.id}');"
        "return {ran, state: await c.getState(), reason: c.failedReason};",
        timeout=60,
    )[-1]
    assert back == {"ran": [kept.id], "state": "failed", "reason": "cancelled: not wanted"}
    assert kept.reload().return_value == 5000  # BullMQ kept and handed on EchoMQ's options
    assert json.loads(connection.hget(kept.key, "opts"))["emqSoftTimeLimit"] == 4000


def test_a_job_cancelled_while_a_bullmq_worker_runs_it_completes_and_its_request_expires(
        connection: redis.Redis, queue_name: str, bullmq_peer) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("slow", {})
    node = threading.Thread(target=bullmq_peer.run, args=(
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  await job.updateProgress(1); await sleep(500); return 'done'; },"
        "  {connection: connection(), prefix});"
        f"{js_queue(queue_name)}"
        "const deadline = Date.now() + 10000;"
        "while ((await q.getCompletedCount()) < 1 && Date.now() < deadline) await sleep(20);"
        "await w.close();",), daemon=True)
    node.start()
    assert wait_until(lambda: job.reload().progress == 1, timeout=20)
    assert queue.cancel(job.id, "too late for BullMQ") is True
    node.join(30)
    assert wait_until(lambda: job.reload().get_state() == "completed", timeout=10)
    job.reload()  # the state was read after the hash: read it again
    assert job.return_value == "done"
    assert 0 < connection.pttl(queue.keys.job_cancel(job.id)) <= 3_600_000  # bounded by its TTL
