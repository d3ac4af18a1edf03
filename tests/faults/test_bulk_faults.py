"""``echomq jobs retry|promote`` while Redis misbehaves, on a redis-server of the test's own:

- **out of memory** (maxmemory flipping between almost nothing and unlimited, noeviction): Redis
  refuses a script's writes only until its first one, and each bulk call's first write is the
  ZREM that takes a job out of its set (a write that frees memory, allowed), so every call goes
  through whole: the command completes and moves each job once;
- **connections cut** (CLIENT KILL of every other client, every few ms): a run cut short says
  so in one line and leaves each job either moved or where it was (each call is one script);
  running the command again moves the rest, and each job is moved once in all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import Queue, Worker
from echomq.cli import main
from echomq.protocol.keys import QueueKeys

from support.disturb import cut_connections, memory_pulses
from support.queues import read_events
from support.workers import Running, wait_until

HOUR_MS = 3_600_000
JOBS = 120


def _until_done(capsys: Any, argv: list[str], url: str, disturb: Any) -> tuple[int, list[str]]:
    """Run the command (as ``echomq`` runs it, in this process) while ``disturb`` runs, until it
    exits 0; (the jobs its last run says it moved, the error line of each run cut short)."""
    capsys.readouterr()  # what came before (a worker's log lines) is not the command's
    stop = threading.Event()
    pulses = threading.Thread(target=disturb, args=(url, stop, 7), daemon=True)
    pulses.start()
    errors: list[str] = []
    try:
        for _ in range(200):
            code = main([*argv, "--redis", url, "--batch", "10", "--json"])
            out, err = capsys.readouterr()
            if code == 0:
                return json.loads(out)["retried" if argv[1] == "retry" else "promoted"], errors
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 1 and out == "" and len(lines) == 1 and "Traceback" not in err, (code, out, err)
            errors.append(lines[0])
    finally:
        stop.set()
        pulses.join()
    raise AssertionError(f"the command never got through: {errors[-3:]}")


def _failed_queue(client: redis.Redis) -> Queue:
    queue = Queue(client, "bulk")
    for n in range(JOBS):
        queue.add("charge", {"n": n}, attempts=1)

    def fail(job: Any) -> None:
        raise RuntimeError("down")

    with Running(Worker(client, "bulk", fail, concurrency=4)):
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == JOBS, timeout=60)
    return queue


def _moved(client: redis.Redis, prev: str) -> list[str]:
    return sorted(data["jobId"] for event, data in read_events(client, "bulk")
                  if event == "waiting" and data.get("prev") == prev)


def _whole(client: redis.Redis) -> None:
    """Every job is where one state puts it: retried ones have no outcome left, failed ones have it."""
    keys = QueueKeys("bulk")
    failed = {j.decode() for j in client.zrange(keys.failed, 0, -1)}
    waiting = {j.decode() for j in client.lrange(keys.wait, 0, -1)}
    assert failed | waiting == {str(n) for n in range(1, JOBS + 1)} and not failed & waiting
    for job_id in waiting:
        assert client.hmget(keys.job(job_id), "failedReason", "finishedOn") == [None, None], job_id
    for job_id in failed:
        assert client.hget(keys.job(job_id), "failedReason") == b"down", job_id


@pytest.fixture
def client(redis_server_factory: Any) -> Iterator[redis.Redis]:
    server = redis_server_factory(persistent=False)
    connection = redis.Redis.from_url(server.url)
    connection.config_set("maxmemory-policy", "noeviction")
    yield connection
    connection.close()


def _url(client: redis.Redis) -> str:
    return "redis://127.0.0.1:{port}/0".format(**client.connection_pool.connection_kwargs)


def test_out_of_memory_does_not_stop_a_retry_or_a_promote(client: redis.Redis, capsys: Any) -> None:
    queue = _failed_queue(client)
    retried, errors = _until_done(capsys, ["jobs", "retry", "--queue", "bulk"], _url(client), memory_pulses)
    assert (retried, errors) == (JOBS, [])
    _whole(client)
    assert _moved(client, "failed") == sorted(str(n) for n in range(1, JOBS + 1))
    client.delete(queue.keys.wait)
    client.zadd(queue.keys.delayed, {str(n): (4_000_000_000_000 + n) * 4096 for n in range(1, JOBS + 1)})
    promoted, errors = _until_done(capsys, ["jobs", "promote", "--queue", "bulk"], _url(client), memory_pulses)
    assert (promoted, errors) == (JOBS, [])
    assert queue.get_job_counts("delayed", "waiting") == {"delayed": 0, "waiting": JOBS}


def test_cut_connections_leave_each_job_whole_and_a_rerun_moves_the_rest(client: redis.Redis, capsys: Any) -> None:
    _failed_queue(client)
    _retried, errors = _until_done(capsys, ["jobs", "retry", "--queue", "bulk"], _url(client), cut_connections)
    assert all(line.startswith("echomq jobs retry: ") for line in errors), errors
    _whole(client)
    assert _moved(client, "failed") == sorted(str(n) for n in range(1, JOBS + 1))   # each job once
    assert Queue(client, "bulk").get_job_counts("failed", "waiting") == {"failed": 0, "waiting": JOBS}
