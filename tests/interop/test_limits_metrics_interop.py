"""Global limits and job metrics shared with BullMQ 6.7 (real Redis, prefix emq).

1. Global concurrency: each side reads what the other set and removed; then a BullMQ worker
   and an EchoMQ worker on one queue with global concurrency 1 never run two jobs at once.
2. Global rate limit: the same both ways; then both workers together start no more than
   ``max`` jobs per window.
3. Metrics: EchoMQ's and BullMQ's workers count into the same per-minute data, each carrying
   on from where the other stopped, and ``queue.getMetrics`` and ``Queue.get_metrics`` read the
   same thing.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from typing import Any

from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.worker import Worker

from support.sampling import ActiveSampler
from support.workers import Running, wait_until

MINUTE = 60_000


def js_queue(queue_name: str) -> str:
    return f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"


def node_worker(queue_name: str, body: str, options: str, until: str) -> str:
    """A BullMQ worker running ``body`` (job in scope) until the JS condition ``until`` holds on ``q``."""
    return (
        js_queue(queue_name)
        + f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{ {body} }},"
          f"  {{connection: connection(), prefix, name: 'node', {options}}});"
          "const deadline = Date.now() + 60000;"
          f"while (!({until}) && Date.now() < deadline) await sleep(20);"
          "await w.close();"
    )


def test_global_concurrency_is_shared_and_obeyed_by_both_workers(bullmq_peer, connection, queue_name):
    queue = Queue(connection, queue_name)
    meta = QueueKeys(queue_name).meta
    queue.set_global_concurrency(5)
    ours = connection.hget(meta, "concurrency")
    seen = bullmq_peer.run(
        js_queue(queue_name)
        + "const read = await q.getGlobalConcurrency();"
          "await q.removeGlobalConcurrency(); const removed = await q.getGlobalConcurrency();"
          "await q.setGlobalConcurrency(1); return {read, removed};"
    )[-1]
    assert seen == {"read": 5, "removed": None}
    assert queue.get_global_concurrency() == 1 and connection.hget(meta, "concurrency") == b"1"
    queue.set_global_concurrency(5)
    assert connection.hget(meta, "concurrency") == ours  # the same bytes either way
    queue.set_global_concurrency(1)

    n = 24
    node = bullmq_peer.start(node_worker(
        queue_name,
        "const start = Date.now(); await sleep(40); return {start, end: Date.now(), by: 'node'};",
        "concurrency: 3",
        f"(await q.getCompletedCount()) >= {n}",
    ))
    spans: list[dict[str, Any]] = []

    def process(job: Any) -> Any:
        start = time.time() * 1000
        time.sleep(0.04)
        span = {"start": start, "end": time.time() * 1000, "by": "emq"}
        spans.append(span)
        return span

    try:
        with ActiveSampler(connection, queue_name) as sampler, \
                Running(Worker(connection, queue_name, process, concurrency=3, name="emq")):
            time.sleep(1.0)  # node's worker is up
            for batch in range(n // 3):  # bursts, so that either side may take the first of each
                queue.add_bulk([("job", {"n": batch * 3 + i}) for i in range(3)])
                time.sleep(0.2)
            assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == n, timeout=30)
        _out, err = node.communicate(timeout=60)
        assert node.returncode == 0, err
    finally:
        if node.poll() is None:
            node.kill()
    k = QueueKeys(queue_name)
    runs = sorted((json.loads(connection.hget(k.job(str(i)), "returnvalue")) for i in range(1, n + 1)),
                  key=lambda span: span["start"])
    assert {span["by"] for span in runs} == {"emq", "node"}, runs  # both took part
    # never two at once: each job starts after the one before ended (Node's clock has whole ms)
    assert all(b["start"] >= a["end"] - 1 for a, b in itertools.pairwise(runs)), runs
    assert sampler.most == 1


def test_global_rate_limit_is_shared_and_obeyed_by_both_workers(bullmq_peer, connection, queue_name):
    queue = Queue(connection, queue_name)
    queue.set_global_rate_limit(3, 700)
    seen = bullmq_peer.run(
        js_queue(queue_name)
        + "const read = await q.getGlobalRateLimit();"
          "await q.removeGlobalRateLimit(); const removed = await q.getGlobalRateLimit();"
          "await q.setGlobalRateLimit(2, 500); return {read, removed};"
    )[-1]
    assert seen == {"read": {"max": 3, "duration": 700}, "removed": None}
    assert queue.get_global_rate_limit() == {"max": 2, "duration": 500}

    n = 12
    max_jobs, duration = 2, 500
    node = bullmq_peer.start(node_worker(queue_name, "return 'node';", "concurrency: 3",
                                         f"(await q.getCompletedCount()) >= {n}"))
    try:
        with Running(Worker(connection, queue_name, lambda job: "emq", concurrency=3, name="emq")):
            time.sleep(1.0)
            queue.add_bulk([("job", {"n": i}) for i in range(n)])
            assert wait_until(lambda: queue.get_job_counts("completed")["completed"] == n, timeout=30)
        _out, err = node.communicate(timeout=60)
        assert node.returncode == 0, err
    finally:
        if node.poll() is None:
            node.kill()
    k = QueueKeys(queue_name)
    taken = sorted((int(connection.hget(k.job(str(i)), "processedOn")), connection.hget(k.job(str(i)), "pb"))
                   for i in range(1, n + 1))
    starts = [at for at, _by in taken]
    assert {by for _at, by in taken} == {b"emq", b"node"}, taken
    # Fixed windows of `duration` holding `max_jobs` each, opened by the first job after the
    # last one closed: any 2 * max + 1 consecutive starts span three windows, more than one
    # duration; all n need ceil(n / max) windows. 50 ms of slack between a worker's clock and
    # the script's run.
    assert all(starts[i + 2 * max_jobs] - starts[i] > duration - 50 for i in range(n - 2 * max_jobs)), starts
    assert starts[-1] - starts[0] >= (math.ceil(n / max_jobs) - 1) * duration - 50, starts


def test_both_workers_count_into_the_same_metrics(bullmq_peer, connection, queue_name):
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    minute = int(time.time() * 1000) // MINUTE * MINUTE
    ours_before, node_from, ours_after = minute - 3 * MINUTE + 20_000, minute + 20_000, minute + MINUTE + 20_000

    def run_ours(at: int, jobs: list[dict[str, Any]]) -> None:
        queue.add_bulk([("job", data) for data in jobs])

        def process(job: Any) -> Any:
            if job.data.get("fail"):
                raise RuntimeError("failed here")
            return "emq"

        with Running(Worker(connection, queue_name, process, clock=lambda: at,
                            metrics={"maxDataPoints": 10})) as worker:
            assert wait_until(lambda: worker.processed == len(jobs))

    # 1. EchoMQ, three minutes ago: two completed, one failed
    run_ours(ours_before, [{}, {}, {"fail": True}])
    # 2. BullMQ, this minute (its clock starts at node_from and runs): two completed, one failed
    queue.add_bulk([("job", {}), ("job", {}), ("job", {"fail": True})])
    bullmq_peer.run(
        f"const realNow = Date.now; const shift = {node_from} - realNow(); Date.now = () => realNow() + shift;"
        + node_worker(queue_name, "if (job.data.fail) throw new Error('failed there'); return 'node';",
                      "metrics: {maxDataPoints: 10}",
                      "(await q.getCompletedCount()) + (await q.getFailedCount()) >= 6"),
        timeout=90,
    )
    node_failed_at = int(connection.hget(k.job("6"), "finishedOn"))
    assert connection.hget(k.job("6"), "pb") == b"node" and node_failed_at - node_from < 40_000
    # 3. EchoMQ, next minute: one completed
    run_ours(ours_after, [{}])

    expected = {
        # 2 then 2 then 1 jobs: BullMQ's first closes our minute (2) and the two idle ones; ours
        # then closes BullMQ's minute (2)
        "completed": {"meta": {"count": 5, "prevTS": ours_after, "prevCount": 4}, "data": [2, 0, 0, 2], "count": 4},
        "failed": {"meta": {"count": 2, "prevTS": node_failed_at, "prevCount": 1}, "data": [0, 0, 1], "count": 3},
    }
    assert {kind: queue.get_metrics(kind) for kind in ("completed", "failed")} == expected
    theirs = bullmq_peer.run(
        js_queue(queue_name)
        + "return {completed: await q.getMetrics('completed'), failed: await q.getMetrics('failed'),"
          "        newest: await q.getMetrics('completed', 0, 1)};"
    )[-1]
    assert theirs == {**expected, "newest": {**expected["completed"], "data": [2, 0]}}
    assert queue.get_metrics("completed", 0, 1) == theirs["newest"]
