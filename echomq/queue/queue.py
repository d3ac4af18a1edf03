"""Queue: the producer's and the operator's handle on one queue.

Every state change runs one of the protocol's transition scripts, so a BullMQ 6.7 worker (or
an EchoMQ one) sees exactly what it would see had BullMQ's own Queue made the call. The Queue
holds no thread and no blocking connection; it is safe to share between threads.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis

from ..clock import system_clock
from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.keys import DEFAULT_PREFIX, META_VERSION, QueueKeys
from ..protocol.limits import DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH, DataLimits
from ..protocol.options import lookup_job_id
from ..transport.connection import Connection, Connections
from ..types import Clock, JobOptions
from . import admin, cancel, edits, global_limits, metrics, operations
from .adding import JobAdder
from .enqueue import AddPlanner
from .job import Job, add_log, change_delay, promote_job, remove_job, update_progress
from .replication import checked_replicas

if TYPE_CHECKING:
    from typing_extensions import Unpack


#: What this library writes to meta ``version`` (BullMQ writes ``bullmq:<version>``).


class Queue:
    """Add jobs to a queue and manage them.

    ``connection`` is a ``redis.Redis`` (or fakeredis) client, a ``redis.cluster.RedisCluster``
    or a URL (then the Queue owns the client and ``close()`` closes it; docs/deployment.md).
    Options are snake_case (``job_id``, ``delay``, ``priority``, ``attempts``, ``backoff``,
    ``remove_on_complete`` ...) and are stored under the protocol's names. ``clock`` (epoch ms)
    stamps every timestamp the Queue writes: job timestamps, delay due times, the clean cutoff.
    ``max_data_bytes`` (bytes of JSON, default 16 MiB) and ``max_data_depth`` (nesting, default
    512) bound every job's data, flows included (``None``: no limit); data over them is refused
    with InvalidJobOptionsError naming the limit, and nothing is written (``protocol.limits``).
    ``wait_replicas`` (default 0: off; ``"all"``: every replica the master has) makes every add
    wait, up to ``wait_timeout_ms``, until that many replicas that could be promoted hold it,
    and raise ReplicationError when fewer did (``queue.replication``, docs/deployment.md).
    """

    def __init__(self, connection: Connection, queue_name: str | None = None, *, prefix: str = DEFAULT_PREFIX,
                 default_job_options: JobOptions | Mapping[str, Any] | None = None,
                 clock: Clock = system_clock, name: str | None = None,
                 max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES,
                 max_data_depth: int | None = DEFAULT_MAX_DATA_DEPTH,
                 wait_replicas: int | str = 0, wait_timeout_ms: int = 1000) -> None:
        if name is not None:
            if queue_name is not None:
                raise InvalidInputError("Queue: give queue_name only (name is its old spelling)")
            warnings.warn("Queue(name=...) is deprecated: the argument is queue_name, as in every other "
                          "constructor", DeprecationWarning, stacklevel=2)
            queue_name = name
        if queue_name is None:
            raise InvalidInputError("Queue: queue_name is required")
        self.keys = QueueKeys(queue_name, prefix)
        self.name = queue_name
        self.prefix = prefix
        self.clock = clock
        self.data_limits = DataLimits.checked("Queue", max_data_bytes, max_data_depth)
        self.wait_replicas, self.wait_timeout_ms = checked_replicas(wait_replicas, wait_timeout_ms)
        self._planner = AddPlanner(self.keys, default_job_options, clock=clock, limits=self.data_limits)
        self._connections = Connections(connection, route_key=self.keys.meta)
        self.client: redis.Redis = self._connections.client
        self._adder = JobAdder(self.client, self.keys, self._planner, clock=clock, data_limits=self.data_limits,
                               meta_version=META_VERSION, wait_replicas=self.wait_replicas,
                               wait_timeout_ms=self.wait_timeout_ms, describe=self.__repr__)

    @property
    def lost_job_ids(self) -> list[str]:
        """Ids of adds this Queue acknowledged that a failover or a restart lost, as far as it
        could tell (the newest :data:`~echomq.queue.add_book._LOST_KEPT`); each was also logged
        as a WARNING (docs/deployment.md, "What a failover can lose")."""
        return list(self._adder.book.lost_job_ids)

    @property
    def queue_name(self) -> str:
        return self.name

    @property
    def default_job_options(self) -> dict[str, Any]:
        return dict(self._planner.defaults)

    def close(self) -> None:
        """Close the client if this Queue created it from a URL (a passed-in client stays open)."""
        self._connections.close()

    def __enter__(self) -> Queue:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, prefix={self.prefix!r})"

    # -- adding (queue/adding.py) -------------------------------------------------------------
    def add(self, name: str, data: Any = None, **opts: Unpack[JobOptions]) -> Job:
        """Add one job. A custom ``job_id`` that exists, or a deduplication hit, adds nothing and
        returns a Job carrying the existing id (the stream says ``duplicated``/``deduplicated``).
        A reply lost with the connection raises AddOutcomeUnknownError: the job may have been
        added (docs/deployment.md, "When an add is sent again").
        """
        return self._adder.add(name, data, opts)

    def add_bulk(self, jobs: Iterable[Mapping[str, Any] | Sequence[Any]]) -> list[Job]:
        """Add many jobs, streamed over one connection (not atomic, as BullMQ's addBulk).

        Each item is ``{"name", "data", "opts"}`` or a ``(name, data[, opts])`` tuple. Every job
        is validated before the first is sent: a bad one raises naming its index (``jobs[7]``)
        and nothing is written. When the server refuses some jobs (a missing parent, out of
        memory) or the run is cut after some were written (a lost connection), BulkWriteError
        tells which were written, refused, unknown (sent, no reply) and not sent.
        """
        return self._adder.add_bulk(jobs)

    def add_flow(self, parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> Job:
        """Add a parent job that waits (``waiting-children``) until all its children complete.

        Each node is ``{"name", "data", "opts", "children"?, "queue"?}``; a child's ``queue``
        names another queue under the same prefix (on a Redis Cluster, one in the same slot).
        Nodes without a ``job_id`` get a UUID, as BullMQ 6 gives them. The flow is written by
        one script, whole or not at all: a node the server would refuse (its id is a job with
        another parent, its parent is missing) refuses the flow before anything is written.
        """
        return self._adder.add_flow(self.name, parent, children)

    # -- reading ------------------------------------------------------------------------------
    def get_job(self, job_id: str) -> Job | None:
        job = Job.fetch(self.client, self.keys, lookup_job_id(job_id, "get_job"), clock=self.clock)
        if job is not None:
            job.data_limits = self.data_limits  # its update_data is bounded as this Queue's adds
        return job

    def get_job_counts(self, *states: str) -> dict[str, int]:
        return admin.job_counts(self.client, self.keys, states)

    def get_jobs(self, states: str | Sequence[str] = ("waiting",), start: int = 0, end: int = -1,
                 *, asc: bool = False) -> list[Job]:
        jobs = admin.get_jobs(self.client, self.keys, states, start, end, asc, self.clock)
        for job in jobs:
            job.data_limits = self.data_limits
        return jobs

    def get_workers(self) -> list[dict[str, str]]:
        """The workers of this queue connected now, EchoMQ's and BullMQ's alike: one entry per
        named worker connection in CLIENT LIST (docs/protocol.md §1.1), with that line's fields
        (``addr``, ``age``, ``idle`` ...), ``name`` the worker's name (``""`` when it has none)
        and ``rawname`` the connection's name."""
        return admin.get_workers(self.client, self.keys)

    def set_events_max_len(self, max_len: int) -> None:
        """Cap the events stream (meta ``opts.maxLenEvents``, what BullMQ's ``streams.events.maxLen``
        sets); every capped XADD from then on trims to about ``max_len`` entries."""
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len <= 0:
            raise InvalidInputError(f"set_events_max_len: max_len={max_len!r} must be an int > 0")
        self.client.hset(self.keys.meta, "opts.maxLenEvents", max_len)

    def get_events_max_len(self) -> int:
        raw = self.client.hget(self.keys.meta, "opts.maxLenEvents")
        return int(text(raw)) if raw is not None else 10000

    # -- one job ------------------------------------------------------------------------------
    def remove(self, job_id: str, *, remove_children: bool = True) -> bool:
        """Remove a job from any state. False (nothing removed) while a worker holds its lock."""
        _check_flag("remove", "remove_children", remove_children)
        return remove_job(self.client, self.keys, lookup_job_id(job_id, "remove"), remove_children=remove_children)

    def cancel(self, job_id: str, reason: str | None = None) -> bool:
        """Cancel a job (docs/worker.md, "Time limits and cancel"). A waiting, prioritized or
        delayed job is taken out and fails for good at once, never to run; a running one's
        worker is told through Redis and ends it within a fraction of a second. Either way it
        ends failed with ``failedReason`` ``cancelled: <reason>``, not retried. True when it
        did one of these; False, writing nothing, for a job that finished already, a cancel
        under way, a flow parent waiting for its children, or an unknown id."""
        return cancel.cancel_job(self.client, self.keys, lookup_job_id(job_id, "cancel"), reason, self.clock()).done

    def promote(self, job_id: str) -> None:
        """Move a delayed job to wait (or prioritized) now."""
        promote_job(self.client, self.keys, lookup_job_id(job_id, "promote"))

    def retry_job(self, job_id: str, state: str = "failed", *, reset_attempts_made: bool = False,
                  reset_attempts_started: bool = False) -> None:
        """``Job.retry`` by id: a failed (or completed) job goes back to wait."""
        operations.retry_job(self.client, self.keys, lookup_job_id(job_id, "retry"), state,
                             reset_attempts_made=reset_attempts_made, reset_attempts_started=reset_attempts_started)

    def change_delay(self, job_id: str, delay_ms: int) -> None:
        change_delay(self.client, self.keys, lookup_job_id(job_id, "change_delay"), delay_ms, self.clock())

    def update_progress(self, job_id: str, progress: Any) -> None:
        update_progress(self.client, self.keys, lookup_job_id(job_id, "update_progress"), progress)

    def log(self, job_id: str, line: str, keep_logs: int | None = None) -> int:
        return add_log(self.client, self.keys, lookup_job_id(job_id, "log"), line, keep_logs)

    # -- changing a job (docs/queue.md, "Changing a job") ---------------------------------------
    def change_priority(self, job_id: str, priority: int | None = None, lifo: bool = False) -> None:
        """``Job.change_priority`` by id: a waiting or prioritized job is placed again now."""
        edits.change_priority(self.client, self.keys, lookup_job_id(job_id, "change_priority"), priority, lifo)

    def update_data(self, job_id: str, data: Any) -> None:
        """Replace a job's data, bounded by this Queue's ``max_data_bytes``/``max_data_depth``."""
        edits.update_data(self.client, self.keys, lookup_job_id(job_id, "update_data"), data, self.data_limits)

    def get_job_logs(self, job_id: str, start: int = 0, end: int = -1, asc: bool = True) -> dict[str, Any]:
        """``{"logs": [...], "count": N}``: lines ``start..end`` of the job's log (``asc=False``:
        counted from the newest, newest first) and how many lines it holds, as BullMQ's
        getJobLogs; a job without a log (or without a hash) gives ``{"logs": [], "count": 0}``."""
        logs, count = edits.read_logs(self.client, self.keys, lookup_job_id(job_id, "get_job_logs"),
                                      start, end, asc)
        return {"logs": logs, "count": count}

    def get_deduplication_job_id(self, dedup_id: str) -> str | None:
        """The id of the job that owns the deduplication id now, or None when it is free."""
        return edits.deduplication_job_id(self.client, self.keys, dedup_id)

    def remove_deduplication_key(self, dedup_id: str) -> int:
        """Free a deduplication id whichever job owns it: 1 if it was taken, 0 if it was free."""
        return edits.remove_deduplication_key(self.client, self.keys, dedup_id)

    # -- the whole queue ----------------------------------------------------------------------
    def pause(self) -> None:
        """Stop workers from taking jobs (meta ``paused``); jobs stay where they are."""
        admin.pause(self.client, self.keys)

    def resume(self) -> None:
        admin.resume(self.client, self.keys)

    def is_paused(self) -> bool:
        return bool(self.client.hexists(self.keys.meta, "paused"))

    def clean(self, grace_ms: int, limit: int = 0, state: str = "completed") -> list[str]:
        """Delete up to ``limit`` (0 = all) jobs of ``state`` older than ``grace_ms``; their ids."""
        return admin.clean(self.client, self.keys, grace_ms, limit, state, self.clock())

    def retry_jobs(self, state: str = "failed", count: int = operations.DEFAULT_BATCH,
                   timestamp: int | None = None, *, limit: int | None = None) -> int:
        """Retry every job of ``state`` (``"failed"``/``"completed"``) that finished at or before
        ``timestamp`` (epoch ms, None: now), oldest first, ``count`` per round trip, at most
        ``limit`` (None: all); how many."""
        return operations.retry_jobs(self.client, self.keys, state, count, timestamp, self.clock(), limit)

    def promote_jobs(self, count: int = operations.DEFAULT_BATCH, *, limit: int | None = None) -> int:
        """Move every delayed job to wait (or prioritized) now, the earliest due first, ``count``
        per round trip, at most ``limit`` (None: all that are delayed when it starts); how many."""
        return operations.promote_jobs(self.client, self.keys, count, limit)

    def drain(self, include_delayed: bool = False) -> int:
        """Delete waiting (and optionally delayed) jobs; schedulers' pending iterations stay."""
        _check_flag("drain", "include_delayed", include_delayed)
        return admin.drain(self.client, self.keys, include_delayed)

    def obliterate(self, *, force: bool = False) -> None:
        """Delete the queue and everything in it (pauses it first). Active jobs need ``force``."""
        _check_flag("obliterate", "force", force)
        admin.obliterate(self.client, self.keys, force)
        self._adder.reset()

    def trim_events(self, max_len: int) -> int:
        """Approximately trim the events stream to ``max_len`` entries; returns how many went."""
        return admin.trim_events(self.client, self.keys, max_len)

    # -- global limits and metrics (docs/queue.md, "Global limits", "Metrics") -----------------
    def set_global_concurrency(self, concurrency: int) -> None:
        """At most ``concurrency`` jobs active at once across every worker of the queue (meta
        ``concurrency``, what BullMQ's setGlobalConcurrency writes); an int >= 1."""
        global_limits.set_concurrency(self.client, self.keys, concurrency)

    def get_global_concurrency(self) -> int | None:
        return global_limits.get_concurrency(self.client, self.keys)

    def remove_global_concurrency(self) -> None:
        global_limits.remove_concurrency(self.client, self.keys)

    def set_global_rate_limit(self, max: int, duration: int) -> None:
        """At most ``max`` jobs taken per ``duration`` ms window across every worker of the
        queue (meta ``max``/``duration``); it overrides a worker's own ``limiter.max``."""
        global_limits.set_rate_limit(self.client, self.keys, max, duration)

    def get_global_rate_limit(self) -> dict[str, int] | None:
        """``{"max": jobs, "duration": ms}``, or None unless both are set."""
        return global_limits.get_rate_limit(self.client, self.keys)

    def remove_global_rate_limit(self) -> None:
        global_limits.remove_rate_limit(self.client, self.keys)

    def get_metrics(self, kind: str, start: int = 0, end: int = -1) -> dict[str, Any]:
        """The per-minute counts of ``kind`` ("completed" or "failed") jobs that workers with
        ``metrics=`` recorded, as BullMQ's getMetrics: ``{"meta": {"count", "prevTS",
        "prevCount"}, "data": [newest first, start..end], "count": points stored}``."""
        return metrics.get_metrics(self.client, self.keys, kind, start, end)


def _check_flag(operation: str, name: str, value: Any) -> None:
    """A flag must be a bool: ``drain("yes")`` is a mistake, not a truthy yes."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"{operation}: {name}={value!r} must be True or False")
