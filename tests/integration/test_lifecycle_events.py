"""Every event type of the protocol, written by EchoMQ's own scripts and read by QueueEvents.

One story on one queue: a producer adds, a Worker processes (progress, completion, failure
with retries exhausted, a flow whose parent is released), the stalled check recovers a job,
an operator pauses, resumes, removes and cleans. QueueEvents started before all of it must
have seen each of the 17 event types at least once, with the fields the protocol gives them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from echomq.events.queue_events import QueueEvents
from echomq.protocol.events import EventType
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.worker.maintenance import LockRegistry, Maintenance
from echomq.worker.options import WorkerOptions
from echomq.worker.transitions import Transitions
from echomq.worker.worker import Worker

from support.workers import Running, wait_until


def test_queue_events_sees_every_event_type(connection: redis.Redis, queue_name: str) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    lock = threading.Lock()

    def collect(event_type: Any, data: dict[str, Any]) -> None:
        with lock:
            seen.append((str(getattr(event_type, "value", event_type)), dict(data)))

    def of(kind: str) -> list[dict[str, Any]]:
        with lock:
            return [d for t, d in seen if t == kind]

    k = QueueKeys(queue_name)
    events = QueueEvents(connection, queue_name, block_ms=200)
    events.subscribe(collect)
    events.start()
    queue = Queue(connection, queue_name)
    try:
        # stalled: a worker takes the first job and dies without renewing its lock
        stalled_id = queue.add("orphan", {}).id
        tr = Transitions(connection, k, WorkerOptions(lock_duration=30000))
        m = Maintenance(tr, LockRegistry(), stalled_interval=1000)
        assert tr.move_to_active("dead-worker", int(time.time() * 1000)).job_id == stalled_id
        m.check_stalled(int(time.time() * 1000))
        connection.delete(k.job_lock(stalled_id), k.stalled_check)
        assert m.check_stalled(int(time.time() * 1000)) == [stalled_id]  # waiting prev=active, stalled

        # producer side
        queue.add("report", {"n": 1}, job_id="daily")            # added, waiting
        queue.add("report", {"n": 1}, job_id="daily")            # duplicated
        queue.add("mail", {}, deduplication={"id": "mail-1"})
        queue.add("mail", {}, deduplication={"id": "mail-1"})    # deduplicated
        later = queue.add("later", {}, delay=60_000)              # delayed
        queue.add_flow({"name": "parent", "data": {}},            # waiting-children
                       [{"name": "child", "data": {"c": 1}}])
        queue.add("broken", {}, attempts=1)
        queue.remove(later.id)                                    # removed (prev=delayed)

        def process(job: Any) -> Any:
            if job.name == "broken":
                raise RuntimeError("cannot")                      # failed, retries-exhausted
            job.update_progress({"step": 1})                      # progress
            return {"ok": job.name}                               # completed

        with Running(Worker(connection, queue_name, process)):   # active, drained
            assert wait_until(lambda: bool(of("drained")), timeout=10)
        queue.pause()                                             # paused
        queue.resume()                                            # resumed
        queue.clean(0, 0, "completed")                            # cleaned
        assert wait_until(lambda: bool(of("cleaned")), timeout=5)
    finally:
        events.close()
        queue.close()

    kinds = {t for t, _ in seen}
    assert {e.value for e in EventType} <= kinds, {e.value for e in EventType} - kinds
    assert len(EventType) == 17
    # a few fields, as the protocol gives them
    assert {"jobId": "daily", "name": "report"}.items() <= of("added")[1].items()
    assert int(of("retries_exhausted")[0]["attemptsMade"]) == 1
    assert of("failed")[0]["failedReason"] == "cannot"
    assert any(d.get("prev") == "waiting-children" for d in of("waiting"))  # the parent's release
    assert of("stalled")[0]["jobId"] == stalled_id
    assert {"jobId": later.id, "prev": "delayed"}.items() <= of("removed")[0].items()
    assert int(of("cleaned")[0]["count"]) == 5  # orphan, daily, mail, child, parent
    completed = of("completed")
    assert {"ok": "report"} in [d["returnvalue"] for d in completed]
