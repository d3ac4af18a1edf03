"""Declared schedules kept in step with Redis: the diff and the sync behind the frameworks'
schedule commands (``flask echomq schedules``, ``manage.py echomq_schedules``).

An application declares its schedules in its configuration, one entry per scheduler id::

    {"nightly-report": {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin",
                        "job": "build_report", "data": {"kind": "daily"}, "opts": {"attempts": 3}}}

``queue`` is required; ``job`` is the iterations' job name (default: the scheduler id); ``data``
and ``opts`` are the iterations' data and job options; every other key is a repeat option of
``JobScheduler.upsert`` (``every`` or ``pattern``, ``tz``, ``start_date``, ``end_date``,
``limit``, ``offset``, ``immediately``).

A sync compares each declared schedule with the scheduler hash in Redis (docs/protocol.md §4.1)
and upserts only the ones that differ, so an unchanged schedule keeps its pending iteration; with
``prune`` it removes the schedulers of the queues concerned that nothing declares. Everything
is validated before the first write: a bad entry is refused by name and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..clock import system_clock
from ..errors import InvalidInputError, InvalidScheduleError
from ..protocol.codec import encode_json
from ..protocol.keys import QueueKeys, validate_prefix, validate_queue_name
from ..protocol.options import dumps_json, validate_job_name
from ..schedule.records import SchedulerRecord
from ..schedule.scheduler import JobScheduler, validate_scheduler_id
from ..schedule.spec import KNOWN_OPTIONS, RepeatSpec
from ..transport.connection import Connection, Connections
from ..types import Clock

__all__ = ["Change", "DeclaredSchedule", "parse_schedules", "sync_schedules"]

#: The keys of a declared entry that are not repeat options.
ENTRY_KEYS: tuple[str, ...] = ("queue", "job", "data", "opts")

#: Scheduler hash fields a declaration decides (``offset`` only when declared: for an ``every``
#: schedule without one, the hash keeps the phase the first upsert chose).
_REPEAT_FIELDS = ("name", "tz", "pattern", "every", "limit", "startDate", "endDate")


@dataclass(frozen=True)
class DeclaredSchedule:
    """One validated entry of a declaration."""

    scheduler_id: str
    queue: str
    job_name: str
    repeat: Mapping[str, Any]
    spec: RepeatSpec = field(repr=False)
    data: Any = None
    opts: Mapping[str, Any] = field(default_factory=dict)

    def hash_fields(self) -> dict[str, Any]:
        """What the scheduler hash should hold for this entry, decoded: the repeat fields as the
        hash stores them (decimal text), ``data`` and ``opts`` as JSON values."""
        stored = {name: str(value) for name, value in self.spec.scheduler_fields(self.job_name).items()}
        fields: dict[str, Any] = {name: stored[name] for name in _REPEAT_FIELDS if name in stored}
        if "offset" in stored:
            fields["offset"] = stored["offset"]
        fields["data"] = json.loads(dumps_json({} if self.data is None else self.data, "data"))
        fields["opts"] = json.loads(encode_json(JobScheduler._encode_template(self.opts)))
        return fields


@dataclass(frozen=True)
class Change:
    """One difference between the declaration and Redis: a scheduler to create, to update (with
    the hash fields that differ) or to remove (undeclared, with ``prune``)."""

    action: Literal["create", "update", "remove"]
    queue: str
    scheduler_id: str
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.queue}/{self.scheduler_id}"
        return f"{self.action} {where}" + (f" ({', '.join(self.fields)})" if self.fields else "")


def parse_schedules(declared: Mapping[str, Mapping[str, Any]]) -> list[DeclaredSchedule]:
    """Validate a declaration (see the module doc) without touching Redis or a clock; an
    InvalidInputError (InvalidScheduleError for the repeat options) names the entry and what is
    wrong with it. Hosts call it when they read their configuration, so a bad entry is refused
    at start-up rather than at the first sync."""
    if not isinstance(declared, Mapping):
        raise InvalidScheduleError(f"schedules must be a mapping of scheduler id to entry, got "
                                   f"{type(declared).__name__}")
    return [_parse_entry(scheduler_id, entry) for scheduler_id, entry in declared.items()]


def _parse_entry(scheduler_id: Any, entry: Any) -> DeclaredSchedule:
    try:
        sid = validate_scheduler_id(scheduler_id)
        if not isinstance(entry, Mapping):
            raise InvalidScheduleError(f"must be a mapping (queue, every or pattern ...), got {type(entry).__name__}")
        unknown = sorted(str(key) for key in entry if key not in ENTRY_KEYS and key not in KNOWN_OPTIONS)
        if unknown:
            raise InvalidScheduleError(f"unknown key(s) {', '.join(unknown)} (known: "
                                       f"{', '.join((*ENTRY_KEYS, *KNOWN_OPTIONS))})")
        if "queue" not in entry:
            raise InvalidScheduleError("names no queue (add \"queue\": \"<name>\")")
        queue = validate_queue_name(entry["queue"])
        repeat = {key: value for key, value in entry.items() if key not in ENTRY_KEYS}
        spec = RepeatSpec.parse(repeat)
        opts = entry.get("opts") or {}
        schedule = DeclaredSchedule(sid, queue, validate_job_name(entry.get("job", sid)), repeat, spec,
                                    entry.get("data"), opts)
        schedule.hash_fields()  # data that is not JSON, options no job may carry: refused here
    except InvalidInputError as exc:
        raise type(exc)(f"schedule {scheduler_id!r}: {exc}") from None
    return schedule


def diff(schedule: DeclaredSchedule, record: SchedulerRecord | None) -> Change | None:
    """The change that brings ``record`` (None: no such scheduler) to ``schedule``, None if none."""
    if record is None:
        return Change("create", schedule.queue, schedule.scheduler_id)
    stored: dict[str, Any] = {name: record.raw[name] for name in _REPEAT_FIELDS if name in record.raw}
    wanted = schedule.hash_fields()
    if "offset" in wanted:
        stored["offset"] = record.raw.get("offset")
    stored["data"] = _json_field(record.raw, "data")
    stored["opts"] = _json_field(record.raw, "opts")
    differing = tuple(name for name in (*_REPEAT_FIELDS, "offset", "data", "opts")
                      if stored.get(name) != wanted.get(name))
    return Change("update", schedule.queue, schedule.scheduler_id, differing) if differing else None


def _json_field(raw: Mapping[str, str], name: str) -> Any:
    """A template field as JSON (the hash leaves out ``{}``); text that is no JSON stays text, so
    it differs from any declaration and gets rewritten."""
    value = raw.get(name)
    if not value:
        return {}
    try:
        return json.loads(value)
    except ValueError:
        return value


def sync_schedules(connection: Connection, prefix: str, declared: Mapping[str, Mapping[str, Any]], *,
                   prune: bool, dry_run: bool, queues: Iterable[str] = (),
                   clock: Clock = system_clock) -> list[Change]:
    """Bring the schedulers in Redis in line with ``declared`` and return what changed.

    Creates the declared schedulers that are missing, upserts those whose hash differs, leaves
    the others untouched (their pending iteration stays); with ``prune``, removes the
    schedulers nothing declares in the queues the declaration names and in ``queues`` (a host
    passes every queue it knows, so a queue whose last schedule was deleted is pruned too).
    ``dry_run`` computes the same list and writes nothing. Every entry is validated, and the
    ended ones refused, before the first write.
    """
    validate_prefix(prefix)
    schedules = parse_schedules(declared)
    now = clock()
    for schedule in schedules:
        try:
            schedule.spec.refuse_ended(now)
        except InvalidScheduleError as exc:
            raise InvalidScheduleError(f"schedule {schedule.scheduler_id!r}: {exc}") from None
    queue_names = list(dict.fromkeys([*(s.queue for s in schedules), *(validate_queue_name(q) for q in queues)]))
    connections = Connections(connection)
    try:
        schedulers = {name: JobScheduler(connections.routed(QueueKeys(name, prefix).meta), name, prefix=prefix,
                                         clock=clock) for name in queue_names}  # routed: per slot on a cluster
        for schedule in schedules:
            problem = schedulers[schedule.queue].data_limits.problem(dumps_json(schedule.data or {}, "data"))
            if problem is not None:
                raise InvalidScheduleError(f"schedule {schedule.scheduler_id!r}: the job data is {problem}")
        changes = _plan(schedulers, schedules, prune=prune)
        if not dry_run:
            by_id = {(s.queue, s.scheduler_id): s for s in schedules}
            for change in changes:
                scheduler = schedulers[change.queue]
                if change.action == "remove":
                    scheduler.remove(change.scheduler_id)
                    continue
                schedule = by_id[change.queue, change.scheduler_id]
                scheduler.upsert(schedule.scheduler_id, schedule.repeat, schedule.job_name, schedule.data,
                                 schedule.opts)
        return changes
    finally:
        connections.close()


def _plan(schedulers: Mapping[str, JobScheduler], schedules: list[DeclaredSchedule], *,
          prune: bool) -> list[Change]:
    """The changes, queue by queue: creates and updates in declaration order, then removals."""
    changes: list[Change] = []
    for queue, scheduler in schedulers.items():
        existing = {record.id: record for record in scheduler.list(asc=True)}
        mine = [schedule for schedule in schedules if schedule.queue == queue]
        for schedule in mine:
            change = diff(schedule, existing.get(schedule.scheduler_id))
            if change is not None:
                changes.append(change)
        if prune:
            declared_ids = {schedule.scheduler_id for schedule in mine}
            changes.extend(Change("remove", queue, sid) for sid in sorted(existing) if sid not in declared_ids)
    return changes
