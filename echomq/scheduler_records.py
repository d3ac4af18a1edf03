"""What the scheduler hands back: a scheduler's record and the iteration an upsert created.

Both are plain frozen dataclasses built from what is in Redis, whoever wrote it (EchoMQ or a
BullMQ 6.7 app): numbers are stored as decimal strings, ``data`` as the producer's JSON text and
``opts`` as the protocol's short-form JSON, which is decoded to EchoMQ's snake_case options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .options import decode_job_options


def millis_to_datetime(millis: int, tz: str | None = None) -> datetime:
    """An aware datetime for epoch millis, in ``tz`` when it names a zone, else in UTC."""
    moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    if tz:
        try:
            return moment.astimezone(ZoneInfo(tz))
        except (ZoneInfoNotFoundError, ValueError):
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
    def from_reply(cls, job_id: str, delay: Any) -> "Iteration":
        # The due time is part of the deterministic id: repeat:<scheduler id>:<millis>.
        return cls(job_id=job_id, delay=int(delay), due_ms=int(job_id.rsplit(":", 1)[1]))


def _int_or_none(raw: Mapping[str, str], name: str) -> int | None:
    value = raw.get(name)
    if value in (None, ""):
        return None
    try:
        return int(float(value))  # type: ignore[arg-type]
    except ValueError:
        return None


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class SchedulerRecord:
    """A job scheduler as stored: how it repeats, what it creates, and its next run.

    ``key`` is what BullMQ's getJobSchedulers reports as ``key`` (the scheduler id) and what
    ``JobScheduler.remove_by_key`` takes. ``next_millis`` is the due time of the pending
    iteration (after the last one, when a limit was reached, it is the last one's time).
    ``template_opts`` are snake_case job options (see echomq.options).
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
    template_data: Any = None
    template_opts: dict[str, Any] | None = None
    raw: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

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
    def from_hash(cls, scheduler_id: str, raw: Mapping[str, str], next_millis: int | None) -> "SchedulerRecord":
        opts = raw.get("opts")
        template_opts: dict[str, Any] | None = None
        if opts:
            decoded = _json_or_text(opts)
            template_opts = decode_job_options(decoded) if isinstance(decoded, dict) else {"raw": decoded}
        return cls(
            id=scheduler_id,
            name=raw.get("name", scheduler_id),
            next_millis=next_millis,
            iteration_count=_int_or_none(raw, "ic"),
            every=_int_or_none(raw, "every"),
            pattern=raw.get("pattern") or None,
            tz=raw.get("tz") or None,
            start_date=_int_or_none(raw, "startDate"),
            end_date=_int_or_none(raw, "endDate"),
            limit=_int_or_none(raw, "limit"),
            offset=_int_or_none(raw, "offset"),
            template_data=_json_or_text(raw["data"]) if raw.get("data") else None,
            template_opts=template_opts,
            raw=dict(raw),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the CLI's ``--json``): absent fields are left out, as BullMQ does."""
        out: dict[str, Any] = {"key": self.id, "name": self.name, "next": self.next_millis}
        if self.next_run is not None:
            out["next_utc"] = self.next_run.isoformat()
            if self.tz:
                out["next_local"] = self.next_run_local.isoformat()  # type: ignore[union-attr]
        for name in ("iteration_count", "limit", "start_date", "end_date", "tz", "pattern", "every", "offset"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        template: dict[str, Any] = {}
        if self.template_data is not None:
            template["data"] = self.template_data
        if self.template_opts is not None:
            template["opts"] = self.template_opts
        if template:
            out["template"] = template
        return out
