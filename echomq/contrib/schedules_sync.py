"""Declared schedules kept in step with Redis: the diff and the sync behind the hosts' schedule
commands (``flask echomq schedules``, ``manage.py echomq_schedules``), their ``sync_schedules()``
for tests on a fake clock, and the re-creation of lost schedules (``echomq.contrib.host.keeper``).

An application declares its schedules in its configuration, one entry per scheduler id::

    {"nightly-report": {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin",
                        "name": "build_report", "data": {"kind": "daily"}, "opts": {"attempts": 3}}}

``queue`` is required; ``name`` is the iterations' job name (default: the scheduler id; BullMQ's
template calls it ``name`` too, and the scheduler hash stores it so); ``data`` and ``opts`` are
the iterations' data and job options; every other key is a repeat option of
``JobScheduler.upsert`` (``every`` or ``pattern``, ``tz``, ``start_date``, ``end_date``,
``limit``, ``offset``, ``immediately``). ``misfire`` and ``misfire_grace_ms`` are the missed-run
policy (docs/scheduler.md, "Missed runs"); ``paused`` (True or False) is the pause state the sync
keeps: left out, a sync leaves the pause alone (an operator's ``echomq schedulers pause`` during
an incident survives a deploy), given, it pauses or resumes the scheduler to match. ``job``, the
Flask integration's first spelling of ``name``, is still read, with a DeprecationWarning.

A sync compares each declared schedule with the scheduler hash in Redis (docs/protocol.md §4.1)
and upserts only the ones that differ, so an unchanged schedule keeps its pending iteration; with
``prune`` it removes the schedulers of the queues concerned that nothing declares.

All or nothing: every entry is validated, the ended ones refused (an ``end_date`` past, or no
run left before it), the data checked against the queue's limits, and every upsert checked
against Redis (a pattern schedule whose next iteration's job id another job holds would be
refused by the script), all before the first write: a refused sync writes nothing. Only a
connection lost in the middle of the writes stops it part-way; each change is whole, the error
says how many were made, and running the sync again finishes it.
"""

from __future__ import annotations

import difflib
import json
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import redis

from ..clock import system_clock
from ..errors import EchoMQError, InvalidInputError, InvalidScheduleError
from ..protocol.codec import encode_json
from ..protocol.keys import QueueKeys, iteration_job_id, validate_prefix, validate_queue_name
from ..protocol.options import dumps_json, validate_job_name
from ..schedule.arguments import validate_scheduler_id
from ..schedule.misfire import Misfire
from ..schedule.records import SchedulerRecord
from ..schedule.scheduler import JobScheduler
from ..schedule.spec import KNOWN_OPTIONS, RepeatSpec
from ..transport.connection import Connection, Connections
from ..types import Clock

__all__ = ["Change", "DeclaredSchedule", "parse_schedules", "summary", "sync_schedules"]

#: The keys of a declared entry that are not repeat options.
ENTRY_KEYS: tuple[str, ...] = ("queue", "name", "data", "opts", "paused", "misfire", "misfire_grace_ms")
#: The first spelling of ``name`` (the Flask integration's): read, with a DeprecationWarning.
LEGACY_NAME_KEY = "job"

#: Scheduler hash fields a declaration decides (``offset`` only when declared: for an ``every``
#: schedule without one, the hash keeps the phase the first upsert chose).
_REPEAT_FIELDS = ("name", "tz", "pattern", "every", "limit", "startDate", "endDate")

Action = Literal["create", "update", "remove"]
_DONE: dict[str, str] = {"create": "created", "update": "updated", "remove": "removed"}


@dataclass(frozen=True)
class DeclaredSchedule:
    """One validated entry of a declaration (``deprecated``: what it spells the old way)."""

    scheduler_id: str
    queue: str
    job_name: str
    repeat: Mapping[str, Any]
    spec: RepeatSpec = field(repr=False)
    data: Any = None
    opts: Mapping[str, Any] = field(default_factory=dict)
    deprecated: tuple[str, ...] = ()
    paused: bool | None = None
    misfire: Misfire = field(default_factory=Misfire)

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

    def ended(self, now_ms: int) -> str | None:
        """Why the schedule has no run left at ``now_ms`` (None while it has one): its end date
        is past, or no run of it falls before that date. A sync refuses such an entry (an upsert
        would), the keeper leaves it alone, a host's start-up only warns of it."""
        end = self.spec.end_date
        if end is None:
            return None
        if end < now_ms:
            return f"end_date {end} is already in the past"
        if self.spec.pattern is not None and self.spec.next_millis(now_ms) is None:
            return f"no run of pattern {self.spec.pattern!r} falls before end_date {end}"
        every, phase = self.spec.every, self.spec.offset
        if every is not None and phase and self.spec.start_date is None:  # the first slot of that phase
            slot = now_ms // every * every + phase
            if (slot if slot > now_ms else slot + every) > end:
                return f"no slot of every {every} ms at offset {phase} falls before end_date {end}"
        return None


@dataclass(frozen=True)
class Change:
    """One difference between the declaration and Redis: a scheduler to create, to update (with
    the hash fields that differ) or to remove (undeclared, with ``prune``)."""

    action: Action
    queue: str
    scheduler_id: str
    fields: tuple[str, ...] = ()

    def line(self, *, dry_run: bool = False) -> str:
        """The hosts' one line for it: ``updated reports/nightly-report: pattern, tz`` (``would
        update ...`` in a dry run)."""
        verb = f"would {self.action}" if dry_run else _DONE[self.action]
        text = f"{verb} {self.queue}/{self.scheduler_id}"
        return f"{text}: {', '.join(self.fields)}" if self.fields else text

    def __str__(self) -> str:
        return self.line()


def summary(changes: Iterable[Change], declared: int, *, dry_run: bool = False) -> str:
    """The hosts' closing line: ``2 declared: 1 created, 1 updated, 0 unchanged; 0 removed``."""
    listed = list(changes)
    counts = {action: sum(change.action == action for change in listed) for action in _DONE}
    unchanged = declared - counts["create"] - counts["update"]
    if dry_run:
        return (f"{declared} declared: {counts['create']} to create, {counts['update']} to update, {unchanged} "
                f"unchanged; {counts['remove']} to remove (dry run: nothing written)")
    return (f"{declared} declared: {counts['create']} created, {counts['update']} updated, {unchanged} unchanged; "
            f"{counts['remove']} removed")


def parse_schedules(declared: Mapping[str, Mapping[str, Any]], *, warn: bool = True) -> list[DeclaredSchedule]:
    """Validate a declaration (see the module doc) without touching Redis or a clock; an
    InvalidInputError (InvalidScheduleError for the repeat options) names the entry and what is
    wrong with it. ``warn``: a DeprecationWarning for each entry spelling ``job`` (the hosts,
    which report it their own way, pass False)."""
    if not isinstance(declared, Mapping):
        raise InvalidScheduleError(f"schedules must be a mapping of scheduler id to entry, got "
                                   f"{type(declared).__name__}")
    schedules = [_parse_entry(scheduler_id, entry) for scheduler_id, entry in declared.items()]
    if warn:
        for schedule in schedules:
            for note in schedule.deprecated:
                warnings.warn(f"schedule {schedule.scheduler_id!r}: {note}", DeprecationWarning, stacklevel=2)
    return schedules


def _parse_entry(scheduler_id: Any, entry: Any) -> DeclaredSchedule:
    try:
        sid = validate_scheduler_id(scheduler_id)
        if not isinstance(entry, Mapping):
            raise InvalidScheduleError(f"must be a mapping (queue, every or pattern ...), got {type(entry).__name__}")
        known = (*ENTRY_KEYS, *KNOWN_OPTIONS)
        unknown = [str(key) for key in entry if key not in known and key != LEGACY_NAME_KEY]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InvalidScheduleError(f"unknown key(s) {', '.join(sorted(unknown))} ({hint}the keys are "
                                       f"{', '.join(known)})")
        deprecated: tuple[str, ...] = ()
        name = entry.get("name")
        if LEGACY_NAME_KEY in entry:
            if "name" in entry:
                raise InvalidScheduleError(f"give the job's name once: name={entry['name']!r} and the old spelling "
                                           f"job={entry[LEGACY_NAME_KEY]!r} are both set (keep name)")
            name = entry[LEGACY_NAME_KEY]
            deprecated = ("the key 'job' is deprecated: spell the job's name 'name', as BullMQ's template does",)
        if "queue" not in entry:
            raise InvalidScheduleError("names no queue (add \"queue\": \"<name>\")")
        queue = validate_queue_name(entry["queue"])
        repeat = {key: value for key, value in entry.items() if key not in ENTRY_KEYS and key != LEGACY_NAME_KEY}
        spec = RepeatSpec.parse(repeat)
        opts = entry.get("opts") or {}
        paused = entry.get("paused")
        if paused is not None and not isinstance(paused, bool):
            raise InvalidScheduleError(f"paused={paused!r}: must be True or False (or left out: the sync then "
                                       "leaves the pause alone)")
        misfire = Misfire.parse(entry.get("misfire"), entry.get("misfire_grace_ms"))
        schedule = DeclaredSchedule(sid, queue, validate_job_name(sid if name is None else name), repeat, spec,
                                    entry.get("data"), opts, deprecated, paused, misfire)
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
    stored["misfire"], wanted["misfire"] = record.misfire, schedule.misfire
    if schedule.paused is not None:
        stored["paused"], wanted["paused"] = record.paused, schedule.paused
    differing = tuple(name for name in (*_REPEAT_FIELDS, "offset", "data", "opts", "misfire", "paused")
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
                   prune: bool = False, dry_run: bool = False, queues: Iterable[str] = (),
                   clock: Clock = system_clock, create_only: bool = False) -> list[Change]:
    """Bring the schedulers in Redis in line with ``declared`` and return what changed.

    Creates the declared schedulers that are missing, upserts those whose hash differs, leaves
    the others untouched (their pending iteration stays); with ``prune``, removes the
    schedulers nothing declares in the queues the declaration names and in ``queues`` (a host
    passes every queue it knows, so a queue whose last schedule was deleted is pruned too).
    ``dry_run`` computes the same list and writes nothing; ``create_only`` only creates the
    missing ones (what the keeper does: it never rewrites another deploy's declaration).
    ``clock`` is "now" for every slot (a test's ``FakeClock``). All or nothing (module doc).
    """
    validate_prefix(prefix)
    schedules = parse_schedules(declared, warn=False)
    now = clock()
    for schedule in schedules:
        reason = schedule.ended(now)
        if reason is not None:
            raise InvalidScheduleError(f"schedule {schedule.scheduler_id!r}: {reason}: remove it from the "
                                       "declaration (a sync cannot create a schedule with no run left)")
    queue_names = list(dict.fromkeys([*(s.queue for s in schedules), *(validate_queue_name(q) for q in queues)]))
    connections = Connections(connection)
    try:
        schedulers = {name: JobScheduler(connections.routed(QueueKeys(name, prefix).meta), name, prefix=prefix,
                                         clock=clock) for name in queue_names}  # routed: per slot on a cluster
        for schedule in schedules:
            problem = schedulers[schedule.queue].data_limits.problem(dumps_json(schedule.data or {}, "data"))
            if problem is not None:
                raise InvalidScheduleError(f"schedule {schedule.scheduler_id!r}: the job data is {problem}")
        changes = _plan(schedulers, schedules, prune=prune and not create_only)
        if create_only:
            changes = [change for change in changes if change.action == "create"]
        by_id = {(s.queue, s.scheduler_id): s for s in schedules}
        for change in changes:
            if change.action != "remove":
                _refuse_taken_slot(schedulers[change.queue], by_id[change.queue, change.scheduler_id], now)
        if not dry_run:
            _write(schedulers, by_id, changes)
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


def _refuse_taken_slot(scheduler: JobScheduler, schedule: DeclaredSchedule, now: int) -> None:
    """What addJobScheduler refuses with -10, checked before anything is written: the next
    iteration of a pattern schedule is a job id another job (a finished iteration kept, a
    running one) holds, and it is not the pending iteration the upsert replaces. (An ``every``
    schedule moves on to the next free slot; only 32 taken in a row would stop it.)"""
    if schedule.spec.pattern is None:
        return
    next_millis = schedule.spec.next_millis(now)
    if next_millis is None:
        return
    keys = scheduler.keys
    job_id = iteration_job_id(schedule.scheduler_id, max(next_millis, now))
    pipe = scheduler.client.pipeline(transaction=False)
    pipe.exists(keys.job(job_id))
    pipe.zscore(keys.repeat, schedule.scheduler_id)
    pipe.zscore(keys.delayed, job_id)
    pipe.zscore(keys.prioritized, job_id)
    pipe.lpos(keys.wait, job_id)
    pipe.zscore(keys.key("schedulers:paused"), schedule.scheduler_id)
    pipe.hexists(keys.job(job_id), "processedOn")
    exists, pending_score, delayed, prioritized, waiting, parked, started = pipe.execute()
    if not exists:
        return
    pending = pending_score is not None and iteration_job_id(schedule.scheduler_id, int(pending_score)) == job_id
    if pending and (delayed is not None or prioritized is not None or waiting is not None):
        return  # the pending iteration itself: the upsert replaces it
    if pending and parked == pending_score and not started:
        return  # a paused scheduler's parked iteration: the upsert replaces it too (§4.6)
    raise InvalidScheduleError(f"schedule {schedule.scheduler_id!r}: its next iteration {job_id!r} is already a job "
                               f"of queue {schedule.queue!r} (running or finished and kept), so Redis would refuse "
                               "the upsert; nothing was written. Remove that job, or let it finish and go")


def _write(schedulers: Mapping[str, JobScheduler], by_id: Mapping[tuple[str, str], DeclaredSchedule],
           changes: list[Change]) -> None:
    done = 0
    try:
        for change in changes:
            scheduler = schedulers[change.queue]
            if change.action == "remove":
                scheduler.remove(change.scheduler_id)
            else:
                schedule = by_id[change.queue, change.scheduler_id]
                if change.fields != ("paused",):  # an upsert keeps a pause, and makes one atomically
                    scheduler.upsert(schedule.scheduler_id, schedule.repeat, schedule.job_name, schedule.data,
                                     schedule.opts, misfire=schedule.misfire.policy,
                                     misfire_grace_ms=schedule.misfire.grace_ms, paused=bool(schedule.paused))
                if schedule.paused is not None:
                    (scheduler.pause if schedule.paused else scheduler.resume)(schedule.scheduler_id)
            done += 1
    except (redis.RedisError, OSError, EchoMQError) as exc:
        if done == 0:
            raise
        made = ", ".join(change.line() for change in changes[:done])
        raise EchoMQError(f"the sync stopped after {done} of {len(changes)} change(s) ({made}): {exc}; run it "
                          "again to finish it (it changes only what still differs)") from exc
