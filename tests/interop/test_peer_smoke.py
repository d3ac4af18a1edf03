"""The interop rig itself: BullMQ 6.7.0 writes emq:{queue} keys that EchoMQ's key builder names."""

from __future__ import annotations

import redis

from echomq.protocol.keys import QueueKeys


def test_bullmq_writes_the_keys_echomq_builds(bullmq_peer, connection: redis.Redis, queue_name: str) -> None:
    [job] = bullmq_peer.run(
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"
        "const job = await q.add('hello', {n: 1}); await q.close(); return {id: job.id, version: "
        "require('bullmq/package.json').version};"
    )
    assert job["version"] == "6.7.0"
    keys = QueueKeys(queue_name)
    assert connection.hget(keys.job(job["id"]), "name") == b"hello"
    assert connection.lrange(keys.wait, 0, -1) == [job["id"].encode()]
