"""Missed-run policies: what a schedule does with the slots that passed while nothing ran it.

A slot is missed when no worker took its iteration in time (an outage of workers, a paused
period, a Redis restart that lost it). When the iteration is finally taken (the worker step),
put back (``resume``) or re-placed (the repair), its scheduler's policy decides (docs/scheduler.md,
"Missed runs"; docs/protocol.md §4.6):

* ``run_once`` (the default, BullMQ 6.7's behaviour): the late iteration runs once, the slots
  missed meanwhile are skipped, the next run is the first slot after now;
* ``skip``: an iteration more than ``grace_ms`` late does not run; the next run is the first slot
  after now;
* ``run_all``: every missed slot no more than ``grace_ms`` late runs, oldest first, at most
  :data:`MAX_CATCH_UP` of them (the oldest within the grace), then the first slot after now.

Pure (no Redis): the slots come from a ``next_slot`` function (the step's own arithmetic for
``every``, the cron for a pattern), so daylight-saving nights count as cron defines them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import InvalidScheduleError

#: The policies, the first being the default.
POLICIES: tuple[str, ...] = ("run_once", "skip", "run_all")
#: The grace when ``skip`` or ``run_all`` is given without one: one minute.
DEFAULT_GRACE_MS = 60_000
#: The longest grace: 31 days (a longer one would make ``run_all`` a backlog, not a catch-up).
MAX_GRACE_MS = 31 * 86_400_000
#: The most missed slots ``run_all`` runs after one outage.
MAX_CATCH_UP = 100
#: The scheduler hash's fields of EchoMQ's own that hold the policy (docs/protocol.md §4.1).
POLICY_FIELD, GRACE_FIELD = "emqMisfire", "emqMisfireGraceMs"


class Misfire(NamedTuple):
    """A scheduler's missed-run policy; ``grace_ms`` is None for ``run_once``."""

    policy: str = "run_once"
    grace_ms: int | None = None

    @classmethod
    def parse(cls, policy: Any, grace_ms: Any) -> Misfire:
        """The policy ``upsert`` was given, checked (InvalidScheduleError names what is wrong)."""
        if policy is None:
            policy = "run_once"
        if not isinstance(policy, str) or policy not in POLICIES:
            raise InvalidScheduleError(f"misfire={policy!r}: unknown policy (known: {', '.join(POLICIES)})")
        if policy == "run_once":
            if grace_ms is not None:
                raise InvalidScheduleError(f"misfire_grace_ms={grace_ms!r}: applies to misfire='skip' and "
                                           "'run_all' only (run_once runs a late iteration however late)")
            return cls()
        if grace_ms is None:
            return cls(policy, DEFAULT_GRACE_MS)
        if isinstance(grace_ms, bool) or not isinstance(grace_ms, int):
            raise InvalidScheduleError(f"misfire_grace_ms={grace_ms!r}: must be an int (milliseconds)")
        if not 0 <= grace_ms <= MAX_GRACE_MS:
            raise InvalidScheduleError(f"misfire_grace_ms={grace_ms!r}: must be within 0..{MAX_GRACE_MS} "
                                       "(31 days)")
        return cls(policy, grace_ms)

    @classmethod
    def stored(cls, scheduler_hash: Mapping[str, Any]) -> Misfire:
        """The policy a scheduler hash holds; ``run_once`` when it holds none (BullMQ wrote it,
        or rewrote it: its upsert keeps no field of ours) or one this version does not know."""
        policy, grace = scheduler_hash.get(POLICY_FIELD), scheduler_hash.get(GRACE_FIELD)
        if isinstance(policy, bytes):
            policy = policy.decode()
        if isinstance(grace, bytes):
            grace = grace.decode()
        if policy not in ("skip", "run_all"):
            return cls()
        try:
            return cls(policy, min(max(int(str(grace)), 0), MAX_GRACE_MS))
        except ValueError:  # none stored, or not a number: the default grace
            return cls(policy, DEFAULT_GRACE_MS)

    def fields(self) -> dict[str, Any]:
        """What the scheduler hash stores for it (nothing for the default)."""
        if self.policy == "run_once":
            return {}
        return {POLICY_FIELD: self.policy, GRACE_FIELD: self.grace_ms}

    def runs_late(self, slot: int, now: int) -> bool:
        """Whether an iteration due at ``slot`` still runs when it is taken at ``now``."""
        return self.grace_ms is None or now - slot <= self.grace_ms

    def catch_up(self, slot: int, now: int, next_slot: Callable[[int], int | None]) -> list[int]:
        """The missed slots after ``slot`` (exclusive) up to ``now`` (inclusive) that run as well,
        oldest first: none but for ``run_all``, and then only those within the grace, the oldest
        :data:`MAX_CATCH_UP` (so the walk is bounded, whatever the pattern). ``next_slot(t)`` is
        the schedule's first slot strictly after ``t``."""
        if self.policy != "run_all" or self.grace_ms is None or slot >= now:
            return []
        earliest = now - self.grace_ms
        slots: list[int] = []
        current: int | None = next_slot(max(slot, earliest - 1))
        while current is not None and current <= now and len(slots) < MAX_CATCH_UP:
            if current > slot and current >= earliest:
                slots.append(current)
            current = next_slot(current)
        return slots

    def describe(self) -> str:
        """``run_once``, or ``skip (grace 60000 ms)``: for listings and log lines."""
        return self.policy if self.grace_ms is None else f"{self.policy} (grace {self.grace_ms} ms)"
