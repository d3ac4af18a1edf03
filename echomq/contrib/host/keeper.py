"""Declared schedules whose Redis data was lost, re-created by the worker processes.

A Redis restarted without persistence, a failover to a replica that had not caught up, a
``FLUSHALL``: the schedulers the settings declare are gone, and nothing else brings them back
(the schedule command runs at deploys). The framework worker commands run a keeper in each
worker process; it notices the loss and re-creates what the declaration says, with a warning
in the log for each schedule.

How it notices: every ``SCHEDULES_CHECK_INTERVAL`` seconds (30 by default), and within a
second of a Worker of its process reporting a Redis error (a restart drops every connection),
one pipelined round trip per declared queue reads the queue's job id counter (``id``) and
whether each declared scheduler is in the queue's ``repeat`` set. A scheduler is re-created
only when it is missing *and the queue's data was lost with it*: the counter this process saw
is gone, or lower than it was (it only ever grows, and every scheduler iteration adds one), or
a producer found it gone back and moved it past its own ids, which it records in meta ``idGap``
(docs/protocol.md §1.4) with the value the counter had gone back to.
That tells a lost schedule from one an operator removed by hand (``echomq schedulers remove``:
the counter stays) and from one never synced (no counter was ever seen): both are left to the
schedule command, and said once in the log (INFO). A schedule that ran out (``limit``,
``end_date``) stays in Redis, so it is never revived. The server's run id would
not do: a persistent server keeps its data across a restart but changes its run id, and a
flush keeps the run id but loses the data.

Re-creating only ever creates: it never rewrites or removes a scheduler, so during a rolling
deploy an old worker cannot put back an old declaration over a new one. A schedule that has
ended is not re-created. Several worker processes may re-create the same schedule at once:
the upsert of an existing scheduler keeps its slot, so they agree.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import redis

from ...clock import system_clock
from ...errors import EchoMQError
from ...protocol.codec import text
from ...protocol.keys import QueueKeys
from ...registry import JobRegistry
from ...transport.connection import PidGuard, queue_client
from ...types import Clock
from ...worker.listeners import WorkerListener
from ..schedules_sync import Change, DeclaredSchedule, parse_schedules, sync_schedules

log = logging.getLogger(__name__)

#: How soon the keeper checks again after a Worker's Redis error or a failed check, in seconds.
RETRY_S = 1.0


def _gap_start(gap: str) -> int | None:
    """The value meta ``idGap`` says the counter had gone back to (``"<back to>:<moved to>"``),
    None when it is not in that shape (written by something else: taken as gone)."""
    start = gap.partition(":")[0]
    return int(start) if start.isdigit() else None


class ScheduleKeeper(WorkerListener):
    """Watches the declared schedules of one registry from one process (see the module doc).

    It is also a WorkerListener: given to the Workers of its process, their Redis errors wake
    it. ``start()`` runs it in a daemon thread of this process (a forked child starts its
    own); ``check()`` is one pass, in the caller's thread."""

    def __init__(self, registry: JobRegistry, schedules: Mapping[str, Mapping[str, Any]], *,
                 interval_s: float, clock: Clock = system_clock) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self.clock = clock
        self._raw = {sid: dict(entry) for sid, entry in schedules.items()}
        self._by_queue: dict[str, list[DeclaredSchedule]] = {}
        for schedule in parse_schedules(self._raw, warn=False):
            self._by_queue.setdefault(schedule.queue, []).append(schedule)
        self._counters: dict[str, int] = {}
        self._gaps: dict[str, str | None] = {}
        self._told: set[tuple[str, str]] = set()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = PidGuard()
        self._lock = threading.Lock()

    # -- one pass -----------------------------------------------------------------------------
    def check(self) -> list[Change]:
        """Look at every declared queue once; re-create the schedules lost with its data and
        return those creations. Raises what Redis raises (the thread retries)."""
        client = self.registry.connection()
        recreated: list[Change] = []
        for queue, schedules in self._by_queue.items():
            keys = QueueKeys(queue, self.registry.prefix)
            pipe = queue_client(client, keys.meta).pipeline(transaction=False)
            pipe.get(keys.id)
            pipe.hget(keys.meta, "idGap")
            for schedule in schedules:
                pipe.zscore(keys.repeat, schedule.scheduler_id)
            counter_raw, gap_raw, *scores = pipe.execute()
            counter = None if counter_raw is None else int(counter_raw)
            gap = None if gap_raw is None else text(gap_raw)
            last = self._counters.get(queue, 0)
            missing = [schedule for schedule, score in zip(schedules, scores, strict=True) if score is None]
            went_back_to = counter
            if last > 0 and gap is not None and gap != self._gaps.get(queue):
                went_back_to = _gap_start(gap)  # a producer moved the counter past its ids since
            lost = last > 0 and (went_back_to is None or went_back_to < last)  # data seen here, then gone
            if missing and lost:
                recreated += self._recreate(client, queue, missing, went_back_to, last)
            for schedule in missing if not lost else ():
                self._tell_missing(schedule, removed=counter is not None)
            self._counters[queue] = counter or 0
            self._gaps[queue] = gap
        return recreated

    def _recreate(self, client: Any, queue: str, missing: list[DeclaredSchedule], counter: int | None,
                  last: int) -> list[Change]:
        now = self.clock()
        alive = [schedule for schedule in missing if schedule.ended(now) is None]
        if not alive:
            return []
        declared = {schedule.scheduler_id: self._raw[schedule.scheduler_id] for schedule in alive}
        changes = sync_schedules(client, self.registry.prefix, declared, create_only=True, clock=self.clock)
        why = ("its job id counter is gone" if counter is None else
               f"its job id counter went back from {last} to {counter}")
        for change in changes:
            log.warning("EchoMQ: schedule %s/%s was gone from Redis with the queue's data (%s: a restart without "
                        "persistence, a failover to a replica behind, a flush); re-created it from the declaration",
                        queue, change.scheduler_id, why)
        return changes

    def _tell_missing(self, schedule: DeclaredSchedule, *, removed: bool) -> None:
        """Said once per schedule: one this process never saw in Redis is the schedule
        command's to create, as is one removed by hand while the queue kept its data."""
        key = (schedule.queue, schedule.scheduler_id)
        if key in self._told:
            return
        self._told.add(key)
        why = ("though the queue's data is (removed by hand?)" if removed else
               "nor any data of its queue (never synced?)")
        log.info("EchoMQ: declared schedule %s/%s is not in Redis, %s; not re-created: the schedule command creates it",
                 *key, why)

    # -- the thread -----------------------------------------------------------------------------
    def start(self) -> None:
        """Run in a daemon thread of this process, checking at once and then every interval
        (idempotent; in a forked child, a thread of its own)."""
        with self._lock:
            if self._guard.foreign():
                self._thread, self._counters, self._told = None, {}, set()
                self._stopping, self._wake = threading.Event(), threading.Event()
            if self._thread is not None:
                return
            self._guard.claim()
            self._thread = threading.Thread(target=self._run, name="echomq-schedule-keeper", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 2.0) -> None:
        with self._lock:
            thread = None if self._guard.foreign() else self._thread
            self._thread = None
        self._stopping.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout)

    def on_redis_error(self, queue_name: str, error: BaseException, *, during: str) -> None:
        """A Worker of this process lost Redis: check as soon as it answers again."""
        self._wake.set()

    def _run(self) -> None:
        delay = 0.0
        first = True
        while not self._stopping.is_set():
            woken = self._wake.wait(delay)
            self._wake.clear()
            if self._stopping.is_set():
                return
            if woken and delay > RETRY_S:  # a Worker's Redis error: give the server a moment
                delay = RETRY_S
                continue
            try:
                self.check()
                delay = self.interval_s
                if first:
                    first = False
                    log.info("EchoMQ: process %d keeps the declared schedules of queue(s) %s (a check every %g s)",
                             os.getpid(), ", ".join(self._by_queue), self.interval_s)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                log.debug("EchoMQ schedule keeper: Redis did not answer (%s); trying again in %g s", exc, RETRY_S)
                delay = RETRY_S  # a restart, a failover: soon back
            except (redis.RedisError, EchoMQError) as exc:  # OOM, READONLY, a refused upsert: said, tried later
                log.warning("EchoMQ schedule keeper: could not check or re-create the declared schedules: %s; "
                            "trying again in %g s", exc, self.interval_s)
                delay = self.interval_s
