"""The next run of a repeating job: by a fixed interval or by a cron pattern.

Pure (no Redis): a job scheduler calls it to place the next iteration, and a BullMQ 6.7 Node
worker computes the same millisecond for the same options, so a schedule advanced by either
runtime stays on one timeline. The options are read by ``spec.RepeatSpec``, the one validator
``JobScheduler.upsert`` uses too; the cron dialect and its DST rules are in ``schedule.cron``.

Without ``tz`` a pattern is read in UTC. (BullMQ Node reads it in the process's local zone,
which is UTC on most servers; pass ``tz`` to be explicit.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..clock import system_clock
from ..errors import InvalidScheduleError
from .spec import RepeatSpec


def calculate_next_millis(repeat_opts: Mapping[str, Any], reference_time: int | None = None) -> int | None:
    """The next run in epoch ms, strictly after the reference for patterns; None when none is left.

    ``every``: reference (or start_date, if later) + every. ``pattern``: the first matching
    whole second after max(reference, start_date). ``immediately``: the reference itself.
    ``end_date`` is inclusive. ``limit`` and ``offset`` belong to the scheduler: they are
    validated, not read. The reference defaults to now.
    """
    if reference_time is None:
        reference_time = system_clock()
    elif isinstance(reference_time, bool) or not isinstance(reference_time, int):
        raise InvalidScheduleError(f"reference_time {reference_time!r}: must be epoch milliseconds (int)")
    return RepeatSpec.parse(repeat_opts).next_millis(reference_time)

