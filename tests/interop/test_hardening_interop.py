"""What EchoMQ stores, as BullMQ 6.7 reads it (hardening A.1, A.4, A.5).

* Each retry option alone, added by EchoMQ, is honoured by BullMQ's own Worker: the number of
  attempts it makes and the gaps its backoff leaves (before the fix ``attempts=3`` alone was
  stored as 0 and BullMQ's worker tried once).
* BullMQ's ``getWorkers()`` lists a running EchoMQ worker, and ``Queue.get_workers()`` lists a
  running BullMQ worker: both name their connections the same way.
* meta ``version`` says who wrote last, in BullMQ's shape.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from echomq import Queue, Worker
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import META_VERSION

from support.workers import Running, wait_until


def _bullmq_runs(bullmq_peer: Any, queue_name: str, job_id: str, attempts_expected: int) -> list[dict[str, Any]]:
    """Run a BullMQ Worker that always fails until the job is failed for good; its attempts."""
    return bullmq_peer.run(
        f"const starts = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{"
        f"  starts.push({{at: Date.now(), made: job.attemptsMade, attempts: job.opts.attempts}});"
        f"  throw new Error('always');"
        f"}}, {{connection: connection(), prefix}});"
        f"const done = new Promise((resolve) => w.on('failed', (job) => {{"
        f"  if (job.attemptsMade >= Math.max(1, {attempts_expected})) resolve(); }}));"
        f"await Promise.race([done, sleep(15000)]);"
        f"await w.close();"
        f"return starts;",
        timeout=60,
    )[-1]


@pytest.mark.parametrize("opts,runs,min_gap_ms", [
    ({"attempts": 3}, 3, 0),
    ({"attempts": 2, "backoff": 400}, 2, 350),
    ({"attempts": 3, "backoff": {"type": "exponential", "delay": 150}}, 3, 130),
])
def test_bullmqs_worker_honours_attempts_and_backoff_echomq_stored(bullmq_peer: Any, connection: Any,
                                                                   queue_name: str, opts: dict[str, Any],
                                                                   runs: int, min_gap_ms: int) -> None:
    job = Queue(connection, queue_name).add("retry-me", {"n": 1}, **opts)
    starts = _bullmq_runs(bullmq_peer, queue_name, job.id, runs)
    assert len(starts) == runs, starts
    assert all(start["attempts"] == opts["attempts"] for start in starts)
    gaps = [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= min_gap_ms for gap in gaps), gaps
    if opts.get("backoff", {}) and isinstance(opts["backoff"], dict):
        assert gaps[1] >= 2 * 150 * 0.9, gaps  # exponential: the second wait doubles
    k = QueueKeys(queue_name)
    assert connection.zscore(k.failed, job.id) is not None
    assert connection.hget(k.job(job.id), "atm") == str(runs).encode()


def test_bullmq_lists_echomq_workers_and_echomq_lists_bullmqs(bullmq_peer: Any, connection: Any,
                                                              queue_name: str) -> None:
    with Running(Worker(connection, queue_name, lambda job: None, name="py-1")):
        assert wait_until(lambda: len(Queue(connection, queue_name).get_workers()) == 1)
        listed = bullmq_peer.run(
            f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"
            f"return (await q.getWorkers()).map((w) => w.rawname);"
        )[-1]
        assert listed == [QueueKeys(queue_name).client_name(":w:py-1")]
    node = bullmq_peer.start(
        f"const w = new bullmq.Worker('{{{queue_name}}}', async () => 1,"
        f"  {{connection: connection(), prefix, name: 'node-1'}});"
        f"await w.waitUntilReady(); out('ready'); await sleep(4000); await w.close();"
    )
    try:
        assert node.stdout is not None and json.loads(node.stdout.readline()) == "ready"
        assert wait_until(lambda: any(w["name"] == "node-1" for w in Queue(connection, queue_name).get_workers()))
    finally:
        node.kill()
        node.wait(10)


def test_meta_version_is_written_in_bullmqs_shape_and_read_by_it(bullmq_peer: Any, connection: Any,
                                                                   queue_name: str) -> None:
    Queue(connection, queue_name).add("x")
    version = bullmq_peer.run(
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix, skipMetasUpdate: true}});"
        f"return await q.getVersion();"
    )[-1]
    assert version == META_VERSION
