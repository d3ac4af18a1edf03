"""Helpers for the worker tests: seed jobs without depending on Queue, and run a Worker.

``seed_job`` stores and places a job with the shared includes (storeJob + enqueueStoredJob),
exactly what the add scripts do, so worker tests exercise only the worker side.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from echomq.protocol.keys import QueueKeys
from echomq.transport.scripts import inline_includes, lua_root

_SEED = """
-- @include "getOrSetMaxEvents"
-- @include "storeJob"
-- @include "enqueueStoredJob"
local q = {wait = KEYS[1], delayed = KEYS[2], prioritized = KEYS[3], pc = KEYS[4], marker = KEYS[5],
           meta = KEYS[6], active = KEYS[7], events = KEYS[8]}
local jobId = ARGV[1]
if jobId == "" then
  jobId = tostring(redis.call("INCR", KEYS[9]))
end
local maxEvents = getOrSetMaxEvents(q.meta)
storeJob(q.events, ARGV[7] .. jobId, jobId, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[8], ARGV[9])
enqueueStoredJob(q, jobId, ARGV[5], ARGV[6], ARGV[8], ARGV[10] == "1", maxEvents)
return jobId
"""

_source: str | None = None


def seed_job(client: redis.Redis, queue_name: str, name: str = "job", data: Any = None, *,
             opts: dict[str, Any] | None = None, delay: int = 0, priority: int = 0,
             job_id: str = "", rjk: str = "", now_ms: int | None = None) -> str:
    global _source
    if _source is None:
        _source = inline_includes(_SEED, lua_root() / "includes", "seed")
    k = QueueKeys(queue_name)
    opts = {"attempts": 0, **(opts or {})}
    if delay:
        opts["delay"] = delay
    ts = now_ms if now_ms is not None else int(time.time() * 1000)
    result = client.eval(
        _source, 9, k.wait, k.delayed, k.prioritized, k.pc, k.marker, k.meta, k.active, k.events, k.id,
        job_id, name, json.dumps({} if data is None else data), json.dumps(opts), ts, delay, k.job_prefix,
        priority, rjk, "1" if opts.get("lifo") else "0",
    )
    return result.decode() if isinstance(result, bytes) else str(result)


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def events(client: redis.Redis, queue_name: str) -> list[dict[str, str]]:
    """The queue's stream entries as decoded dicts, oldest first."""
    out = []
    for _id, fields in client.xrange(QueueKeys(queue_name).events):
        out.append({(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                    for k, v in fields.items()})
    return out


class Running:
    """A worker running in a thread for the length of a ``with`` block."""

    def __init__(self, worker: Any, close_timeout: float | None = 10.0) -> None:
        self.worker = worker
        self.close_timeout = close_timeout
        self.thread = threading.Thread(target=worker.run, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        return self.worker

    def __exit__(self, *exc: object) -> None:
        self.worker.close(self.close_timeout)
        self.thread.join(30)
        assert not self.thread.is_alive(), "worker.run() did not return after close()"
