"""The registry's jobs are BullMQ's jobs by name (real Redis, prefix emq, BullMQ 6.7 in Node).

1. A BullMQ producer's ``queue.add('email', {to: ...})`` is run by the registry's worker, which
   routes by name; a name the registry does not know fails for good, and BullMQ reads why.
2. ``enqueue(**data)`` and ``enqueue_with`` are run by a BullMQ Worker routing by ``job.name``,
   which sees the registered name, the keyword data and the default options.
"""

from __future__ import annotations

from typing import Any

from echomq import JobRegistry
from echomq.protocol.keys import QueueKeys

from support.workers import Running, wait_until


def js_queue(queue_name: str) -> str:
    return f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"


def test_the_registry_worker_runs_what_a_bullmq_producer_adds_by_name(bullmq_peer, connection, queue_name):
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name)
    def email(job: Any) -> dict[str, Any]:
        return {"sent": job.data["to"]}

    @registry.job("report", queue=queue_name)
    def build_report(job: Any) -> int:
        return job.data["rows"] * 2

    added = bullmq_peer.run(
        js_queue(queue_name)
        + "const a = await q.add('email', {to: 'a@b.c'});"
          "const b = await q.add('report', {rows: 21}, {attempts: 3});"
          "const c = await q.add('invoice', {n: 1}, {attempts: 3});"
          "return {email: a.id, report: b.id, invoice: c.id};"
    )[-1]
    k = QueueKeys(queue_name)
    with Running(registry.worker(queue_name, drain_delay=0.2, name="emq")):
        assert wait_until(lambda: connection.zcard(k.completed) == 2 and connection.zcard(k.failed) == 1, timeout=15)
    back = bullmq_peer.run(
        js_queue(queue_name)
        + "const res = {};"
        + "".join(f"{{ const j = await q.getJob('{added[key]}');"
                  f"  res['{key}'] = {{state: await j.getState(), rv: j.returnvalue, atm: j.attemptsMade,"
                  f"  reason: j.failedReason, pb: j.processedBy}}; }}"
                  for key in ("email", "report", "invoice"))
        + "return res;"
    )[-1]
    assert (back["email"]["state"], back["email"]["rv"], back["email"]["pb"]) == ("completed", {"sent": "a@b.c"}, "emq")
    assert back["report"]["state"] == "completed" and back["report"]["rv"] == 42
    assert back["invoice"]["state"] == "failed" and back["invoice"]["atm"] == 1  # no retry for an unknown name
    assert back["invoice"]["reason"] == (f"no processor for job name 'invoice' in queue {queue_name!r} "
                                         "(handled: email, report)")


def test_a_bullmq_worker_routing_by_name_runs_what_the_registry_enqueues(bullmq_peer, connection, queue_name):
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name, attempts=3, backoff={"type": "fixed", "delay": 10})
    def email(job: Any) -> None: ...

    @registry.job("report", queue=queue_name, priority=2)
    def build_report(job: Any) -> None: ...

    sent = email.enqueue(to="a@b.c", template="welcome")
    report = build_report.enqueue_with({"attempts": 2}, rows=21)
    seen = bullmq_peer.run(
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        "  out({name: job.name, data: job.data, attempts: job.opts.attempts, priority: job.opts.priority || 0,"
        "       backoff: job.opts.backoff || null});"
        "  switch (job.name) {"
        "    case 'email': if (job.attemptsMade === 0) throw new Error('smtp down'); return {sent: job.data.to};"
        "    case 'report': return job.data.rows * 2;"
        "    default: throw new Error('unknown ' + job.name);"
        "  } }, {connection: connection(), prefix, name: 'node'});"
        f"{js_queue(queue_name)}"
        "const deadline = Date.now() + 15000;"
        "while ((await q.getCompletedCount()) < 2 && Date.now() < deadline) await sleep(20);"
        "await w.close();",
        timeout=60,
    )
    by_name = {line["name"]: line for line in seen}
    assert by_name["email"] == {"name": "email", "data": {"to": "a@b.c", "template": "welcome"}, "attempts": 3,
                                "priority": 0, "backoff": {"type": "fixed", "delay": 10}}
    assert by_name["report"] == {"name": "report", "data": {"rows": 21}, "attempts": 2, "priority": 2,
                                 "backoff": None}
    queue = registry.queue(queue_name)
    done_email, done_report = queue.get_job(sent.id), queue.get_job(report.id)
    assert done_email is not None and done_email.return_value == {"sent": "a@b.c"}
    assert done_email.attempts_made == 2 and done_email.failed_reason == "smtp down"  # retried by its defaults
    assert done_report is not None and done_report.return_value == 42 and done_report.processed_by == "node"
