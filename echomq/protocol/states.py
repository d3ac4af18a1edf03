"""Job states: which key holds a job in each state, and the orders the protocol uses
(docs/protocol.md §3.1). The one table every state lookup, count, listing and clean reads.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from ..errors import InvalidInputError


class StateKey(NamedTuple):
    """Where jobs of one state live: the per-queue key suffix and its Redis type."""

    suffix: str
    kind: Literal["list", "zset"]


#: State name (BullMQ's) -> its key. ``paused`` is a legacy list: BullMQ 6 keeps paused jobs in
#: wait and gates workers on meta, but older runtimes may have left jobs there.
STATES: dict[str, StateKey] = {
    "completed": StateKey("completed", "zset"),
    "failed": StateKey("failed", "zset"),
    "delayed": StateKey("delayed", "zset"),
    "active": StateKey("active", "list"),
    "waiting": StateKey("wait", "list"),
    "waiting-children": StateKey("waiting-children", "zset"),
    "prioritized": StateKey("prioritized", "zset"),
    "paused": StateKey("paused", "list"),
}

#: Other spellings callers use: the key's own name, and snake_case.
_ALIASES = {"wait": "waiting", "waiting_children": "waiting-children"}

#: The order ``Job.get_state`` checks, as BullMQ's getState does (first hit wins).
LOOKUP_ORDER: tuple[str, ...] = tuple(STATES)

#: What ``Queue.get_job_counts()`` reports when no state is named (BullMQ's getJobCounts).
COUNTED: tuple[str, ...] = ("active", "completed", "delayed", "failed", "paused", "prioritized", "waiting",
                            "waiting-children")

#: What ``Queue.clean`` may clean (cleanJobsInSet knows how to empty each of these keys).
CLEANABLE: tuple[str, ...] = ("completed", "failed", "delayed", "prioritized", "waiting", "paused", "active")


def canonical_state(name: str) -> str:
    """BullMQ's name for a state (``wait`` -> ``waiting``); InvalidInputError if unknown."""
    if isinstance(name, str):
        canonical = _ALIASES.get(name, name)
        if canonical in STATES:
            return canonical
    raise InvalidInputError(f"state {name!r}: must be one of {sorted(STATES)}")


def state_key(name: str) -> StateKey:
    """The key of a state given by any of its spellings."""
    return STATES[canonical_state(name)]
