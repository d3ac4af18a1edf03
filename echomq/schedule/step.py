"""The client's half of the worker step: from the iteration that just became active, the
options of the next one (docs/protocol.md §4.4).

Both the step (``JobScheduler.produce_next``) and the maintenance repair (``repair``) plan here,
so a repaired schedule continues exactly as the step would have continued it. The iteration's
``opts.repeat`` may come from any runtime: it is *read* (``spec``'s reading mode), so every
option and zone BullMQ 6.7 accepts advances the schedule, numbers stored as decimal text
included; the next iteration is written as BullMQ's worker writes it (dates as epoch ms, a
bare-number backoff in its normal form, ``attempts`` always present).

The ``every`` slot itself is computed by the script, which sees the current score; a pattern's
next tick is computed here and passed in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..protocol.options import backoff_as_dict
from .dates import MAX_SAFE_INTEGER, to_millis, whole
from .spec import RepeatSpec

_DECIMAL = re.compile(r"-?[0-9]+(?:\.0*)?")


class StepPlan(NamedTuple):
    """What the step (or the repair) sends to its script.

    ``next_arg`` is a pattern's next tick as the script's ARGV takes it ("" for every: the script
    computes the slot); ``opts`` the next iteration's opts (the script sets ``jobId`` and
    ``delay``); ``end_ms`` the end date as read here, for the script's every-slot check when the
    scheduler hash holds none it can read.
    """

    next_arg: str
    opts: dict[str, Any]
    end_ms: int | None


def _number(value: Any) -> Any:
    """A whole number another runtime stored as decimal text (as hashes hold them: ``"5"``,
    ``"5.0"``) read as an int; anything else as it is, for the reader to check."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value.split(".")[0])
    return value


def _date(name: str, value: Any) -> int | None:
    return None if value is None else to_millis(name, _number(value), reading=True)


def plan_next(prev_opts: Mapping[str, Any], scheduler_id: str, now: int, *, base_count: int | None = None,
              same_slot: int | None = None) -> StepPlan | None:
    """The next iteration after one whose opts are ``prev_opts``; None when the schedule has no
    run left (its limit reached, its end date past, no tick before it, an end before its start).

    ``base_count`` overrides the previous ``repeat.count`` (a repair that lost the iteration
    uses the hash's ``ic``). ``same_slot`` plans a re-creation of the iteration due then, with
    the same count, instead of the one after it (a repair of a deleted future iteration).
    Raises InvalidScheduleError when the stored options cannot be read by any runtime.
    """
    stored = prev_opts.get("repeat")
    repeat: dict[str, Any] = dict(stored) if isinstance(stored, Mapping) else {}
    previous = whole("count", _number(repeat.get("count", 0)), 0, MAX_SAFE_INTEGER) if base_count is None \
        else base_count
    count = previous if same_slot is not None else previous + 1
    raw_limit = repeat.get("limit")
    limit = None if raw_limit is None else whole("limit", _number(raw_limit), 0, MAX_SAFE_INTEGER)
    start_ms, end_ms = _date("startDate", repeat.get("startDate")), _date("endDate", repeat.get("endDate"))
    if start_ms is not None and end_ms is not None and start_ms > end_ms:
        return None  # the dates leave no run
    if same_slot is None:
        if limit is not None and count > limit:
            return None
        if end_ms is not None and now > end_ms:
            return None
    prev_millis = _date("prevMillis", prev_opts.get("prevMillis"))
    reference = max(now, prev_millis or 0)

    next_arg = ""
    pattern = repeat.get("pattern")
    if pattern and not repeat.get("every"):
        if same_slot is not None:
            next_arg = str(same_slot)
        else:
            cron = {"pattern": pattern, "tz": repeat.get("tz"), "start_date": start_ms, "end_date": end_ms}
            next_millis = RepeatSpec.parse(cron, reading=True).next_millis(reference)
            if next_millis is None:
                return None
            next_arg = str(max(int(next_millis), reference))

    new_opts = {k: v for k, v in prev_opts.items() if k not in ("repeatJobKey", "prevMillis")}
    new_opts.setdefault("attempts", 0)
    backoff = new_opts.get("backoff")
    if isinstance(backoff, (int, float)) and not isinstance(backoff, bool):
        # A BullMQ worker rebuilds the job in memory, which stores a bare number's normal form.
        new_opts["backoff"] = backoff_as_dict(backoff)
    new_opts["timestamp"] = now
    if next_arg:
        new_opts["prevMillis"] = int(next_arg)
    new_opts["repeatJobKey"] = scheduler_id
    if start_ms is not None:
        repeat["startDate"] = start_ms  # as BullMQ's worker writes them: epoch ms
    if end_ms is not None:
        repeat["endDate"] = end_ms
    new_opts["repeat"] = {**repeat, "count": count}
    return StepPlan(next_arg, new_opts, end_ms)


def slots_after(prev_opts: Mapping[str, Any], slot: int) -> Callable[[int], int | None]:
    """The schedule's "first slot strictly after t" of an iteration due at ``slot``, from its
    opts as the step reads them: ``every`` keeps the phase of ``slot`` (as the scripts'
    catch-up does, docs/protocol.md §4.2), a pattern ticks as cron defines it in its zone."""
    stored = prev_opts.get("repeat")
    repeat: Mapping[str, Any] = stored if isinstance(stored, Mapping) else {}
    every = _number(repeat.get("every"))
    end_ms = _date("endDate", repeat.get("endDate"))
    if every:
        period = whole("every", every, 1, MAX_SAFE_INTEGER)

        def after_every(t: int) -> int | None:
            nxt = slot + (max(t - slot, -1) // period + 1) * period
            return None if end_ms is not None and nxt > end_ms else nxt
        return after_every
    cron = RepeatSpec.parse({"pattern": repeat.get("pattern"), "tz": repeat.get("tz"),
                             "start_date": _date("startDate", repeat.get("startDate")), "end_date": end_ms},
                            reading=True)
    return cron.next_millis


def iterations_at(plan: StepPlan, slots: list[int], first_count: int, *, limit: int | None = None
                  ) -> list[dict[str, Any]]:
    """The ``{"at", "opts"}`` placements of new iterations at ``slots`` (oldest first), their
    ``repeat.count`` going on from ``first_count``, cut where ``limit`` would be passed: the
    opts are the plan's, with each one's slot as ``prevMillis`` for a pattern."""
    placements: list[dict[str, Any]] = []
    for offset, at in enumerate(slots):
        count = first_count + offset
        if limit is not None and count > limit:
            break
        opts = {**plan.opts, "repeat": {**plan.opts["repeat"], "count": count}}
        if "prevMillis" in opts:
            opts["prevMillis"] = at
        placements.append({"at": at, "opts": opts})
    return placements


def catch_up_placements(plan: StepPlan, slots: list[int], limit: int | None) -> list[dict[str, Any]]:
    """The placements of a ``run_all`` policy's missed ``slots`` before the plan's next iteration,
    as many as ``limit`` leaves room for beside it; the plan's own ``repeat.count`` moves past
    them (docs/protocol.md §4.6)."""
    first = plan.opts["repeat"]["count"]
    room = len(slots) if limit is None else max(0, min(len(slots), limit - first))
    placements = iterations_at(plan, slots[:room], first)
    plan.opts["repeat"]["count"] = first + room
    return placements


def stored_limit(prev_opts: Mapping[str, Any]) -> int | None:
    """The ``repeat.limit`` of an iteration's opts, read as the step reads it."""
    stored = prev_opts.get("repeat")
    raw = stored.get("limit") if isinstance(stored, Mapping) else None
    return None if raw is None else whole("limit", _number(raw), 0, MAX_SAFE_INTEGER)


def stored_count(prev_opts: Mapping[str, Any]) -> int:
    """The ``repeat.count`` of an iteration's opts (0 when it has none)."""
    stored = prev_opts.get("repeat")
    raw = stored.get("count", 0) if isinstance(stored, Mapping) else 0
    return whole("count", _number(raw), 0, MAX_SAFE_INTEGER)
