"""What BullMQ 6.7's ``getWorkers()`` (and so bull-board) shows for ``echomq worker --name``.

BullMQ lists the connections whose CLIENT SETNAME is its queue's worker name, bare or with
``:w:<name>``, and reports each with ``name`` set to the queue's own name (``{orders}``) and the
connection's whole name in ``rawname``: the worker's name is the part after ``:w:``. Each worker
process of ``echomq worker`` names its connection before its first job, so a pool whose every
slot is busy from its start is listed all the same, one entry per process.
"""

from __future__ import annotations

import json
import signal
import socket
from typing import Any

import redis

from echomq.protocol.keys import QueueKeys

from support.worker_cli import WorkerCommand, add_jobs, wait_until


def bullmq_workers(bullmq_peer: Any, queue_name: str) -> list[dict[str, str]]:
    listed: list[dict[str, str]] = bullmq_peer.run(
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"
        f"return (await q.getWorkers()).map((w) => ({{name: w.name, rawname: w.rawname}}));"
    )[-1]
    return sorted(listed, key=lambda w: w["rawname"])


def test_bullmq_lists_each_process_of_a_busy_pool_under_its_name(bullmq_peer: Any, connection: redis.Redis,
                                                                   redis_url: str, queue_name: str) -> None:
    started = f"emq:{{{queue_name}}}:test-started"
    add_jobs(connection, queue_name, 2, name="sleepy", seconds=5, started=started)  # every slot busy at once
    with WorkerCommand(["--processor", "support.sample_jobs:sleepy", "--redis", redis_url, "--processes", "2",
                        "--name", "mail-{process}", queue_name]) as command:
        assert wait_until(lambda: connection.llen(started) == 2), command.stderr
        keys = QueueKeys(queue_name)
        assert bullmq_workers(bullmq_peer, queue_name) == [
            {"name": f"{{{queue_name}}}", "rawname": keys.client_name(":w:mail-1")},
            {"name": f"{{{queue_name}}}", "rawname": keys.client_name(":w:mail-2")},
        ]
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr


def test_bullmq_shows_the_default_name_host_and_pid(bullmq_peer: Any, connection: redis.Redis, redis_url: str,
                                                    queue_name: str) -> None:
    with WorkerCommand(["--processor", "support.sample_jobs:record", "--redis", redis_url, queue_name]) as command:
        expected = QueueKeys(queue_name).client_name(f":w:{socket.gethostname()}:{command.pid}")
        assert wait_until(lambda: [w["rawname"] for w in bullmq_workers(bullmq_peer, queue_name)] == [expected]), \
            (json.dumps(bullmq_workers(bullmq_peer, queue_name)), command.stderr)
        command.signal(signal.SIGTERM)
        assert command.wait(30) == 0, command.stderr
