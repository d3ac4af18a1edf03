"""The next run of a repeating job: by a fixed interval or by a cron pattern.

Pure (no Redis): a job scheduler calls it to place the next iteration, and a BullMQ 6.7 Node
worker computes the same millisecond for the same options, so a schedule advanced by either
runtime stays on one timeline. The options are read by ``spec.RepeatSpec``, the one validator
``JobScheduler.upsert`` uses too; the cron dialect and its DST rules are in ``schedule.cron``.

Without ``tz`` a pattern is read in UTC. (BullMQ Node reads it in the process's local zone,
which is UTC on most servers; pass ``tz`` to be explicit.) The options are *read* the way the
worker step reads what another runtime stored: whatever BullMQ 6.7 accepts is accepted here, as
BullMQ reads it (``tz: "local"``, ISO 8601 strings as JavaScript parses them, an iteration's
whole ``opts.repeat``), so this answers for any schedule a worker may have to advance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clock import system_clock
from ..errors import InvalidScheduleError
from .dates import MAX_DATE_MS
from .spec import RepeatSpec


def calculate_next_millis(repeat_opts: Mapping[str, Any], reference_time: int | None = None) -> int | None:
    """The next run in epoch ms, strictly after the reference for patterns; None when none is left.

    ``every``: reference (or start_date, if later) + every. ``pattern``: the first matching
    whole second after max(reference, start_date). ``immediately``: the reference itself.
    ``end_date`` is inclusive; an end before the start leaves no run. ``limit``, ``offset`` and
    BullMQ's ``count``/``prevMillis``/``key``/``jobId`` belong to the scheduler: they are
    validated, not read. The reference defaults to now; it must be a time a JavaScript Date
    holds (|ms| <= 8.64e15), and a run no date can hold is None for ``every`` and
    InvalidScheduleError for a pattern (past the year 9999).
    """
    if reference_time is None:
        reference_time = system_clock()
    elif isinstance(reference_time, bool) or not isinstance(reference_time, int):
        raise InvalidScheduleError(f"reference_time {reference_time!r}: must be epoch milliseconds (int)")
    if not -MAX_DATE_MS <= reference_time <= MAX_DATE_MS:
        raise InvalidScheduleError(f"reference_time {reference_time!r}: must be within +-{MAX_DATE_MS} "
                                   "(what a JavaScript Date holds)")
    return RepeatSpec.parse(repeat_opts, reading=True).next_millis(reference_time)

