"""``list_queues`` and ``echomq queues`` find the queues BullMQ 6.7 writes under the same
prefix: a queue BullMQ only constructed, one with jobs, a paused one, one with a job scheduler,
and the workers BullMQ runs; a BullMQ queue named without braces is not an EchoMQ queue.

Under a prefix of the test's own (BullMQ takes it as its ``prefix``), on the shared real Redis.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq.cli import main
from echomq.queue.discovery import list_queues

from support.prefixes import delete_prefix, new_prefix
from support.workers import wait_until

WRITE = """
const p = %(prefix)s;
const empty = new bullmq.Queue('{bq-empty}', {connection: connection(), prefix: p});
await empty.waitUntilReady();
const orders = new bullmq.Queue('{bq-orders}', {connection: connection(), prefix: p});
await orders.add('a', {n: 1});
await orders.add('b', {n: 2});
await orders.add('later', {n: 3}, {delay: 3600000});
await orders.add('vip', {n: 4}, {priority: 2});
await orders.pause();
const reports = new bullmq.Queue('{bq-reports}', {connection: connection(), prefix: p});
await reports.upsertJobScheduler('nightly', {pattern: '0 2 * * *'}, {name: 'report'});
const plain = new bullmq.Queue('plain', {connection: connection(), prefix: p});
await plain.add('x', {});
await sleep(100);
return await orders.getVersion();
"""

WORKER = """
const w = new bullmq.Worker('{bq-reports}', async () => 1,
  {connection: connection(), prefix: %(prefix)s, name: 'node-1'});
await w.waitUntilReady(); out('ready'); await sleep(6000); await w.close();
"""


@pytest.fixture
def prefix(connection: redis.Redis) -> Iterator[str]:
    name = new_prefix("bq")
    yield name
    delete_prefix(connection, name)


def test_the_queues_bullmq_writes_are_listed(bullmq_peer: Any, connection: redis.Redis, prefix: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    version = bullmq_peer.run(WRITE % {"prefix": json.dumps(prefix)})[-1]
    assert version.startswith("bullmq:6.7")
    found = {s.name: s for s in list_queues(connection, prefix)}
    assert sorted(found) == ["bq-empty", "bq-orders", "bq-reports"]          # not "plain": no braces
    orders = found["bq-orders"]
    assert (orders.paused, orders.version, orders.schedulers) == (True, version, 0)
    assert {state: n for state, n in orders.counts.items() if n} == {"waiting": 2, "delayed": 1, "prioritized": 1}
    assert (found["bq-reports"].schedulers, found["bq-reports"].counts["delayed"]) == (1, 1)
    assert not any(found["bq-empty"].counts.values()) and found["bq-empty"].version == version

    node = bullmq_peer.start(WORKER % {"prefix": json.dumps(prefix)})
    try:
        assert node.stdout is not None and json.loads(node.stdout.readline()) == "ready"
        assert wait_until(lambda: {s.name: s.workers for s in list_queues(connection, prefix)}["bq-reports"] == 1)
        url = "redis://{host}:{port}/{db}".format(**connection.connection_pool.connection_kwargs)
        assert main(["queues", "--redis", url, "--prefix", prefix, "--json"]) == 0
    finally:
        node.kill()
        node.wait(10)
    listed = json.loads(capsys.readouterr().out)
    assert [(q["queue"], q["paused"], q["workers"]) for q in listed] == [
        ("bq-empty", False, 0), ("bq-orders", True, 0), ("bq-reports", False, 1)]
