"""Every queue of a server, found as a dashboard finds them: by walking the keyspace.

A queue is wherever a meta hash ``<prefix>:{<queue>}:meta`` is (every runtime writes one:
``protocol.keys.meta_scan_pattern``), EchoMQ's and BullMQ's alike. The walk is SCAN on each
master (``transport.keyspace``), so it never blocks the server, however many jobs it holds;
then one batch of plain reads per few hundred queues (the counts per state, meta's ``paused``
and ``version``, the schedulers), planned here as data and sent as pipelines, and one CLIENT
LIST per master for the workers. Read-only: nothing is written, no script runs, so an
operator's read-only user can list (``+scan +llen +zcard +hmget +client|list``).

The counts of one queue are read together but not atomically with each other, as
``Queue.get_job_counts`` reads them: a job moving meanwhile may be counted in both states or in
neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoPermissionError

from ..errors import InvalidInputError
from ..protocol.codec import text
from ..protocol.keys import DEFAULT_PREFIX, QueueKeys, meta_scan_pattern, queue_of_meta_key, validate_prefix
from ..protocol.states import COUNTED, state_key
from ..transport.connection import Connection, close_any, open_connection
from ..transport.keyspace import SCAN_COUNT, Command, masters, run_commands, scan_keys
from ..transport.refusals import refusals


@dataclass(frozen=True)
class QueueSummary:
    """One queue as ``echomq queues`` lists it.

    ``counts`` has a count for each state of ``Queue.get_job_counts()`` (``paused`` is the
    legacy paused list, not whether the queue is paused); ``paused`` is meta ``paused``;
    ``schedulers`` the job schedulers (``repeat`` members); ``workers`` the connected workers,
    EchoMQ's and BullMQ's, or None when the ACL refuses CLIENT LIST; ``version`` who wrote the
    queue last (meta ``version``: ``bullmq:6.7.0``, ``echomq-python:0.1.0``), None if unset.
    """

    name: str
    prefix: str
    counts: dict[str, int]
    paused: bool
    schedulers: int
    workers: int | None
    version: str | None


def find_queues(connection: Connection, prefix: str = DEFAULT_PREFIX, *, scan_count: int = SCAN_COUNT) -> list[str]:
    """The names of every queue under ``prefix`` (sorted), on one Redis or every master of a
    cluster; ``scan_count`` keys looked at per SCAN call."""
    _check(prefix, scan_count)
    client = open_connection(connection)
    try:
        return _names(client, prefix, scan_count)
    finally:
        if isinstance(connection, str):
            close_any(client)


def list_queues(connection: Connection, prefix: str = DEFAULT_PREFIX, *,
                scan_count: int = SCAN_COUNT) -> list[QueueSummary]:
    """Every queue under ``prefix`` with its counts, sorted by name (see the module doc).

    ``connection`` is a client, a ``RedisCluster`` or a URL (closed before returning). An
    empty server is an empty list. InvalidInputError for a bad ``prefix`` or ``scan_count``;
    PermissionDeniedError when the ACL refuses SCAN or a read (CLIENT LIST excepted)."""
    _check(prefix, scan_count)
    client = open_connection(connection)
    try:
        return _summaries(client, _names(client, prefix, scan_count), prefix, "list_queues")
    finally:
        if isinstance(connection, str):
            close_any(client)


def queue_exists(connection: redis.Redis | RedisCluster, name: str, prefix: str = DEFAULT_PREFIX) -> bool:
    """Whether queue ``name`` has a meta hash (what ``find_queues`` looks for), in one EXISTS:
    how a page asked for one queue by name finds it without walking the keyspace."""
    keys = QueueKeys(name, prefix)
    with refusals("queue_exists", [keys.meta]):
        return bool(connection.exists(keys.meta))


def summarize_queues(connection: Connection, names: Sequence[str], prefix: str = DEFAULT_PREFIX) -> list[QueueSummary]:
    """``list_queues``' summaries of the queues ``names`` (in that order), without walking the
    keyspace: what a page that found its queues once (a dashboard caching ``find_queues``) reads
    on every load. A name with no key at all is summarised as an empty queue."""
    validate_prefix(prefix)
    client = open_connection(connection)
    try:
        return _summaries(client, list(names), prefix, "summarize_queues")
    finally:
        if isinstance(connection, str):
            close_any(client)


def _summaries(client: redis.Redis | RedisCluster, names: Sequence[str], prefix: str,
               operation: str) -> list[QueueSummary]:
    all_keys = [QueueKeys(name, prefix) for name in names]
    reads = [command for keys in all_keys for command in summary_reads(keys)]
    with refusals(operation, [all_keys[0].meta] if all_keys else []):
        replies = run_commands(client, reads)
    workers = _worker_counts(client, all_keys)
    per_queue = len(reads) // len(all_keys) if all_keys else 0
    return [_summary(keys, replies[i * per_queue:(i + 1) * per_queue], workers)
            for i, keys in enumerate(all_keys)]


def summary_reads(keys: QueueKeys) -> list[Command]:
    """The plain reads of one queue's summary, in the order ``_summary`` reads their replies."""
    reads: list[Command] = []
    for name in COUNTED:
        state = state_key(name)
        reads.append(("LLEN" if state.kind == "list" else "ZCARD", keys.key(state.suffix)))
    reads.append(("HMGET", keys.meta, "paused", "version"))
    reads.append(("ZCARD", keys.repeat))
    return reads


def _summary(keys: QueueKeys, replies: Sequence[Any], workers: dict[str, int] | None) -> QueueSummary:
    counts = {name: int(count) for name, count in zip(COUNTED, replies)}
    paused, version = replies[len(COUNTED)]
    return QueueSummary(name=keys.queue_name, prefix=keys.prefix, counts=counts, paused=paused is not None,
                        schedulers=int(replies[len(COUNTED) + 1]),
                        workers=None if workers is None else workers.get(keys.queue_name, 0),
                        version=None if version is None else text(version))


def _check(prefix: str, scan_count: int) -> None:
    validate_prefix(prefix)
    if isinstance(scan_count, bool) or not isinstance(scan_count, int) or scan_count < 1:
        raise InvalidInputError(f"list_queues: scan_count={scan_count!r} must be an int >= 1 (keys per SCAN call)")


def _names(client: redis.Redis | RedisCluster, prefix: str, scan_count: int) -> list[str]:
    """The queues whose meta hash a SCAN of each master finds, sorted, each once (SCAN may give
    a key twice; a slot moving during the walk may show its keys on two masters)."""
    pattern = meta_scan_pattern(prefix)
    found: set[str] = set()
    for node in masters(client):
        with refusals("list_queues", []):
            for key in scan_keys(node, pattern, scan_count):
                name = queue_of_meta_key(prefix, key)
                if name is not None:
                    found.add(name)
    return sorted(found)


def _worker_counts(client: redis.Redis | RedisCluster, all_keys: Sequence[QueueKeys]) -> dict[str, int] | None:
    """Queue name -> workers connected now, from CLIENT LIST on every master (a worker's
    connections are on its queue's master), by the names of docs/protocol.md §1.1; None when
    the ACL refuses CLIENT LIST."""
    if not all_keys:
        return {}
    by_client_name = {keys.client_name(): keys.queue_name for keys in all_keys}
    counts: dict[str, int] = {}
    try:
        entries = [entry for node in masters(client) for entry in node.client_list()]
    except NoPermissionError:
        return None
    for entry in entries:
        queue_name = _worker_of(text(entry.get("name", "")), by_client_name)
        if queue_name is not None:
            counts[queue_name] = counts.get(queue_name, 0) + 1
    return counts


def _worker_of(client_name: str, by_client_name: dict[str, str]) -> str | None:
    """The queue a connection named ``client_name`` works for (``<base>`` or ``<base>:w:<name>``,
    the rule of ``QueueKeys.worker_name_of``), or None."""
    found = by_client_name.get(client_name)
    at = client_name.find(":w:")
    while found is None and at >= 0:
        found = by_client_name.get(client_name[:at])
        at = client_name.find(":w:", at + 1)
    return found
