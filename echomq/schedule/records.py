"""What the scheduler hands back: a scheduler's record, the iteration an upsert created, and
the runs ``history`` reads.

Both are plain frozen dataclasses built from what is in Redis, whoever wrote it (EchoMQ or a
BullMQ 6.7 app): numbers are stored as decimal strings, ``data`` as the producer's JSON text and
``opts`` as the protocol's short-form JSON, which is decoded to EchoMQ's snake_case options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidScheduleError
from ..protocol.codec import int_or_none, json_or_text, text
from ..protocol.options import backoff_as_dict, decode_job_options
from .cron import tzinfo_for
from .misfire import Misfire


def millis_to_datetime(millis: int, tz: str | None = None) -> datetime:
    """An aware datetime for epoch millis, in ``tz`` when it names a zone (read as BullMQ reads
    it), else in UTC; a zone no runtime could read leaves the instant in UTC."""
    moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    if tz:
        try:
            return moment.astimezone(tzinfo_for(tz, local=True))  # "local": this process's zone
        except (InvalidScheduleError, OverflowError, ValueError):  # no zone, or past the year 9999
            return moment
    return moment


@dataclass(frozen=True)
class Iteration:
    """One iteration job a scheduler placed: its id, its relative delay and when it is due.

    ``delay`` is 0 when the iteration went straight to ``wait`` (or ``prioritized``).
    """

    job_id: str
    delay: int
    due_ms: int

    @property
    def due(self) -> datetime:
        return millis_to_datetime(self.due_ms)

    @classmethod
    def from_reply(cls, job_id: str, delay: Any) -> Iteration:
        # The due time is part of the deterministic id: repeat:<scheduler id>:<millis>.
        return cls(job_id=job_id, delay=int(delay), due_ms=int(job_id.rsplit(":", 1)[1]))


_NUMBER_FIELDS = ("ic", "every", "startDate", "endDate", "limit", "offset")


@dataclass(slots=True)
class SchedulerRecord:
    """A job scheduler as stored: how it repeats, what it creates, and its next run.

    ``key`` is what BullMQ's getJobSchedulers reports as ``key`` (the scheduler id) and what
    ``JobScheduler.remove_by_key`` takes. ``next_millis`` is the due time of the pending
    iteration (after the last one, when a limit was reached, it is the last one's time).
    ``template_opts`` are snake_case job options (docs/protocol.md §2.2). ``paused`` is True
    while ``JobScheduler.pause`` holds it (its pending iteration parked, docs/protocol.md §4.6);
    ``next_millis`` is then the parked slot.
    """

    id: str
    name: str
    next_millis: int | None
    iteration_count: int | None = None
    every: int | None = None
    pattern: str | None = None
    tz: str | None = None
    start_date: int | None = None
    end_date: int | None = None
    limit: int | None = None
    offset: int | None = None
    paused: bool = False
    raw: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def misfire(self) -> Misfire:
        """The missed-run policy (``run_once`` unless the upsert gave another, docs/scheduler.md)."""
        return Misfire.stored(self.raw)

    @property
    def template_data(self) -> Any:
        """The iterations' data as stored (decoded JSON), None when the hash has none (``{}``)."""
        stored = self.raw.get("data")
        return json_or_text(stored) if stored else None

    @property
    def template_opts(self) -> dict[str, Any] | None:
        """The iterations' job options in snake_case, None when the hash has none.

        The hash keeps them as given (a bare-number ``backoff`` too, as BullMQ stores it); read
        here in normal form, ``backoff`` as ``{"type", "delay"}`` (docs/protocol.md §2.2).
        """
        stored = self.raw.get("opts")
        if not stored:
            return None
        decoded = json_or_text(stored)
        if not isinstance(decoded, dict):
            return {"raw": decoded}
        options = decode_job_options(decoded)
        backoff = options.get("backoff")
        if isinstance(backoff, (int, float)) and not isinstance(backoff, bool):
            options["backoff"] = backoff_as_dict(backoff)
        return options

    @property
    def template(self) -> dict[str, Any]:
        """``{"data": ..., "opts": ...}`` with only the parts the hash has, as BullMQ reports it."""
        out: dict[str, Any] = {}
        if self.raw.get("data"):
            out["data"] = self.template_data
        if self.raw.get("opts"):
            out["opts"] = self.template_opts
        return out

    @property
    def key(self) -> str:
        return self.id

    @property
    def next_run(self) -> datetime | None:
        """The pending iteration's due time in UTC."""
        return None if self.next_millis is None else millis_to_datetime(self.next_millis)

    @property
    def next_run_local(self) -> datetime | None:
        """The same instant in the scheduler's own zone (UTC when it has none)."""
        return None if self.next_millis is None else millis_to_datetime(self.next_millis, self.tz)

    @classmethod
    def from_hash(cls, scheduler_id: str, raw: dict[str, str], next_millis: int | None,
                  paused: bool = False) -> SchedulerRecord:
        get = raw.get
        try:  # fast path: every number is a plain decimal integer, as both runtimes write them
            numbers = [int(v) if v else None for v in
                       (get("ic"), get("every"), get("startDate"), get("endDate"), get("limit"), get("offset"))]
        except ValueError:
            numbers = [int_or_none(raw.get(name)) for name in _NUMBER_FIELDS]
        ic, every, start, end, limit, offset = numbers
        return cls(scheduler_id, get("name", scheduler_id), next_millis, ic, every, get("pattern") or None,
                   get("tz") or None, start, end, limit, offset, paused, raw)

    @classmethod
    def from_flat(cls, member: Any, score: Any, flat: list[Any], paused: Any = 0) -> SchedulerRecord:
        """From a script reply: the member, its score, a flat HGETALL (bytes or str), paused 1/0."""
        items = iter(flat)
        raw = {text(k): text(v) for k, v in zip(items, items)}
        return cls.from_hash(text(member), raw, int_or_none(text(score)), paused == 1)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the CLI's ``--json``): absent fields are left out, as BullMQ does."""
        out: dict[str, Any] = {"key": self.id, "name": self.name, "next": self.next_millis, "paused": self.paused}
        if self.next_run is not None:
            out["next_utc"] = self.next_run.isoformat()
            if self.tz:
                out["next_local"] = self.next_run_local.isoformat()  # type: ignore[union-attr]
        for name in ("iteration_count", "limit", "start_date", "end_date", "tz", "pattern", "every", "offset"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        template = self.template
        if template:
            out["template"] = template
        misfire = self.misfire
        if misfire.grace_ms is not None:
            out["misfire"], out["misfire_grace_ms"] = misfire.policy, misfire.grace_ms
        return out


#: The returnvalue of an iteration the worker step did not run (its policy skipped it).
SKIPPED_RETURNVALUE_KEY = "echomqMisfireSkipped"


@dataclass(frozen=True)
class ScheduleRun:
    """One run of a scheduler, as its iteration's job hash tells it (``JobScheduler.history``).

    ``slot`` is the time it was due (for a manual run, when ``run_now`` made it); ``start`` and
    ``finish`` are the job's ``processedOn`` and ``finishedOn`` (epoch ms); ``outcome`` is
    ``"completed"``, ``"failed"``, ``"skipped"`` (the missed-run policy did not run it) or
    ``"active"`` (still running); ``duration`` is ``finish - start`` in ms when both are known.
    """

    job_id: str
    slot: int
    start: int | None
    finish: int | None
    outcome: str
    duration: int | None
    manual: bool = False
    failed_reason: str | None = None

    @classmethod
    def from_fields(cls, job_id: str, slot: int, manual: bool, fields: list[Any]) -> ScheduleRun | None:
        """From HMGET processedOn, finishedOn, failedReason, returnvalue and the name of the set
        it was found in (None when it never started: it is no run)."""
        processed, finished, reason, value, where = (None if v is None else text(v) for v in fields)
        start, finish = int_or_none(processed), int_or_none(finished)
        if where == "failed":
            outcome = "failed"
        elif where == "completed":
            outcome = "skipped" if value is not None and SKIPPED_RETURNVALUE_KEY in value else "completed"
        elif start is not None:
            outcome = "active"
        else:
            return None
        duration = finish - start if start is not None and finish is not None else None
        return cls(job_id, slot, start, finish, outcome, duration, manual, reason if outcome == "failed" else None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the CLI's ``--json``)."""
        return {"job_id": self.job_id, "slot": self.slot, "start": self.start, "finish": self.finish,
                "outcome": self.outcome, "duration": self.duration, "manual": self.manual,
                "failed_reason": self.failed_reason}
