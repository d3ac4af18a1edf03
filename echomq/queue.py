"""Queue: the producer's and the operator's handle on one queue.

Every state change runs one of the protocol's transition scripts, so a BullMQ 6.7 worker (or
an EchoMQ one) sees exactly what it would see had BullMQ's own Queue made the call. The Queue
holds no thread and no blocking connection; it is safe to share between threads.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis

from . import queue_admin
from .connection import Connection, resolve_connection, to_str
from .enqueue import AddCall, AddPlanner, check_add_result
from .errors import InvalidInputError
from .job import Job, add_log, change_delay, promote_job, remove_job, update_progress
from .keys import DEFAULT_PREFIX, QueueKeys
from .pipelining import run_calls
from .scripts import script


class Queue:
    """Add jobs to a queue and manage them.

    ``connection`` is a ``redis.Redis`` (or fakeredis) client or a ``redis://`` URL. Options are
    snake_case (``job_id``, ``delay``, ``priority``, ``attempts``, ``backoff``,
    ``remove_on_complete`` ...) and are stored under the protocol's names.
    """

    def __init__(self, connection: Connection, name: str, *, prefix: str = DEFAULT_PREFIX,
                 default_job_options: Mapping[str, Any] | None = None) -> None:
        self._owns_client = isinstance(connection, str)
        self.client: redis.Redis = resolve_connection(connection)
        self.keys = QueueKeys(name, prefix)
        self.name = name
        self.prefix = prefix
        self._planner = AddPlanner(self.keys, default_job_options)

    @property
    def default_job_options(self) -> dict[str, Any]:
        return dict(self._planner.defaults)

    def close(self) -> None:
        """Close the client if this Queue created it from a URL (a passed-in client stays open)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Queue:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, prefix={self.prefix!r})"

    # -- adding -------------------------------------------------------------------------------
    def _job_for(self, call: AddCall, job_id: str) -> Job:
        return Job(self.client, self.keys, job_id, name=call.name, data=call.data,
                   opts=call.stored_opts, timestamp=call.timestamp)

    def add(self, name: str, data: Any = None, **opts: Any) -> Job:
        """Add one job. A custom ``job_id`` that exists, or a deduplication hit, adds nothing and
        returns a Job carrying the existing id (the stream says ``duplicated``/``deduplicated``).
        """
        call = self._planner.prepare(name, data, opts)
        [reply] = run_calls(self.client, [(call.script, call.keys, call.args)])
        if isinstance(reply, Exception):
            raise reply
        return self._job_for(call, check_add_result(reply, call))

    def add_bulk(self, jobs: Iterable[Mapping[str, Any] | Sequence[Any]]) -> list[Job]:
        """Add many jobs, streamed over one connection (not atomic, as BullMQ's addBulk). Each item is ``{"name", "data", "opts"}`` or a
        ``(name, data[, opts])`` tuple. Every job is validated before the first is sent.
        """
        calls = [self._planner.prepare(*_bulk_item(item)) for item in jobs]
        replies = run_calls(self.client, [(call.script, call.keys, call.args) for call in calls])
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return [self._job_for(call, check_add_result(reply, call)) for call, reply in zip(calls, replies)]

    def add_flow(self, parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> Job:
        """Add a parent job that waits (``waiting-children``) until all its children complete.

        Each node is ``{"name", "data", "opts", "children"?, "queue"?}``; a child's ``queue``
        names another queue under the same prefix (not Cluster-safe). Nodes without a
        ``job_id`` get a UUID, as BullMQ 6 gives them. Everything is written in one MULTI.
        """
        if not children:
            raise InvalidInputError("add_flow: children must not be empty (use add for a single job)")
        plans: list[tuple[AddCall, QueueKeys]] = []
        root = self._plan_flow_node(parent, children, None, self._planner, plans)
        pipe = self.client.pipeline(transaction=True)
        for call, _keys in plans:
            call.script(pipe, call.keys, call.args)
        # Children that already existed and had completed leave no pending dependency: such a
        # parent is released at once instead of waiting for children that will never finish.
        release = script("releaseParentIfNoPendingDependencies")
        now = str(int(time.time() * 1000))
        for call, keys in plans:
            if call.script.name == "addParentJob":
                release(pipe, [keys.job(call.custom_id), keys.job_dependencies(call.custom_id)],
                        [keys.base, call.custom_id, now])
        results = pipe.execute(raise_on_error=True)
        for (call, _keys), result in zip(plans, results):
            check_add_result(result, call)
        return root

    def _plan_flow_node(self, node: Mapping[str, Any], children: Sequence[Mapping[str, Any]] | None,
                        parent_ref: dict[str, str] | None, planner: AddPlanner,
                        plans: list[tuple[AddCall, QueueKeys]]) -> Job:
        name, data, opts = _bulk_item(node)
        opts = dict(opts)
        if parent_ref is not None:
            if "parent" in opts:
                raise InvalidInputError(f"add_flow: node {name!r} must not set parent (the tree sets it)")
            opts["parent"] = parent_ref
        call = planner.prepare(name, data, opts, waiting_children=bool(children), generated_id=str(uuid.uuid4()))
        plans.append((call, planner.keys))
        job = Job(self.client, planner.keys, call.custom_id, name=call.name, data=call.data,
                  opts=call.stored_opts, timestamp=call.timestamp)
        ref = {"id": call.custom_id, "queue": planner.keys.base}
        for child in children or ():
            if not isinstance(child, Mapping):
                raise InvalidInputError(f"add_flow: child {child!r} must be a mapping")
            queue_name = child.get("queue", self.name)
            child_planner = planner if queue_name == planner.keys.queue_name else (
                self._planner if queue_name == self.name else AddPlanner(QueueKeys(queue_name, self.prefix)))
            self._plan_flow_node(child, child.get("children"), ref, child_planner, plans)
        return job

    # -- reading ------------------------------------------------------------------------------
    def get_job(self, job_id: str) -> Job | None:
        return Job.fetch(self.client, self.keys, str(job_id))

    def get_job_counts(self, *states: str) -> dict[str, int]:
        return queue_admin.job_counts(self.client, self.keys, states)

    def get_jobs(self, states: str | Sequence[str] = ("waiting",), start: int = 0, end: int = -1,
                 *, asc: bool = False) -> list[Job]:
        return queue_admin.get_jobs(self.client, self.keys, states, start, end, asc)

    def set_events_max_len(self, max_len: int) -> None:
        """Cap the events stream (meta ``opts.maxLenEvents``, what BullMQ's ``streams.events.maxLen``
        sets); every capped XADD from then on trims to about ``max_len`` entries."""
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len <= 0:
            raise InvalidInputError(f"set_events_max_len: max_len={max_len!r} must be an int > 0")
        self.client.hset(self.keys.meta, "opts.maxLenEvents", max_len)

    def get_events_max_len(self) -> int:
        raw = self.client.hget(self.keys.meta, "opts.maxLenEvents")
        return int(to_str(raw)) if raw is not None else 10000

    # -- one job ------------------------------------------------------------------------------
    def remove(self, job_id: str, *, remove_children: bool = True) -> bool:
        """Remove a job from any state. False (nothing removed) while a worker holds its lock."""
        return remove_job(self.client, self.keys, str(job_id), remove_children=remove_children)

    def promote(self, job_id: str) -> None:
        """Move a delayed job to wait (or prioritized) now."""
        promote_job(self.client, self.keys, str(job_id))

    def change_delay(self, job_id: str, delay_ms: int) -> None:
        change_delay(self.client, self.keys, str(job_id), delay_ms)

    def update_progress(self, job_id: str, progress: Any) -> None:
        update_progress(self.client, self.keys, str(job_id), progress)

    def log(self, job_id: str, line: str, keep_logs: int | None = None) -> int:
        return add_log(self.client, self.keys, str(job_id), line, keep_logs)

    # -- the whole queue ----------------------------------------------------------------------
    def pause(self) -> None:
        """Stop workers from taking jobs (meta ``paused``); jobs stay where they are."""
        queue_admin.pause(self.client, self.keys)

    def resume(self) -> None:
        queue_admin.resume(self.client, self.keys)

    def is_paused(self) -> bool:
        return bool(self.client.hexists(self.keys.meta, "paused"))

    def clean(self, grace_ms: int, limit: int = 0, state: str = "completed") -> list[str]:
        """Delete up to ``limit`` (0 = all) jobs of ``state`` older than ``grace_ms``; their ids."""
        return queue_admin.clean(self.client, self.keys, grace_ms, limit, state)

    def drain(self, include_delayed: bool = False) -> int:
        """Delete waiting (and optionally delayed) jobs; schedulers' pending iterations stay."""
        return queue_admin.drain(self.client, self.keys, include_delayed)

    def obliterate(self, *, force: bool = False) -> None:
        """Delete the queue and everything in it (pauses it first). Active jobs need ``force``."""
        queue_admin.obliterate(self.client, self.keys, force)

    def trim_events(self, max_len: int) -> int:
        """Approximately trim the events stream to ``max_len`` entries; returns how many went."""
        return queue_admin.trim_events(self.client, self.keys, max_len)


def _bulk_item(item: Mapping[str, Any] | Sequence[Any]) -> tuple[Any, Any, Mapping[str, Any]]:
    if type(item) is tuple and len(item) == 2:  # the common bulk shape, checked cheaply
        return item[0], item[1], {}
    if isinstance(item, Mapping):
        unknown = set(item) - {"name", "data", "opts", "children", "queue"}
        if unknown or "name" not in item:
            raise InvalidInputError(f"job {item!r}: needs 'name' and takes only 'data' and 'opts'")
        opts = item.get("opts") or {}
        if not isinstance(opts, Mapping):
            raise InvalidInputError(f"job {item.get('name')!r}: opts {opts!r} must be a mapping")
        return item["name"], item.get("data"), opts
    if isinstance(item, (tuple, list)) and 1 <= len(item) <= 3:
        name = item[0]
        data = item[1] if len(item) > 1 else None
        opts = item[2] if len(item) > 2 else {}
        if not isinstance(opts, Mapping):
            raise InvalidInputError(f"job {name!r}: opts {opts!r} must be a mapping")
        return name, data, opts
    raise InvalidInputError(f"job {item!r}: must be a mapping or a (name, data[, opts]) tuple")
