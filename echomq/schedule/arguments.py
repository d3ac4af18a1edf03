"""The checks every JobScheduler call makes on the ids and times it is given, before any of them
reaches a script (docs/protocol.md §4.1): one home for the scheduler and its operations."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..protocol.codec import utf8_problem
from .dates import MAX_DATE_MS


def validate_scheduler_id(scheduler_id: Any) -> str:
    """A scheduler id: a non-empty str without ``:`` (iteration ids embed it between colons)."""
    if not isinstance(scheduler_id, str) or not scheduler_id:
        raise InvalidInputError(f"scheduler id {scheduler_id!r}: must be a non-empty str")
    if ":" in scheduler_id:
        raise InvalidInputError(
            f"scheduler id {scheduler_id!r}: must not contain ':' (its iterations are repeat:<id>:<millis>)"
        )
    return sendable_id(scheduler_id, "scheduler id")


def scheduler_id_arg(scheduler_id: Any, name: str = "scheduler_id") -> str:
    """A scheduler id to look up or remove: any str (BullMQ-made ids may hold ``:``)."""
    if not isinstance(scheduler_id, str):
        raise InvalidInputError(f"{name}={scheduler_id!r}: must be a str (a scheduler id)")
    return sendable_id(scheduler_id, name)


def sendable_id(scheduler_id: str, name: str) -> str:
    problem = utf8_problem(scheduler_id)
    if problem is not None:
        raise InvalidInputError(f"{name} {scheduler_id!r:.100}: {problem}")
    return scheduler_id


def int_arg(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{name}={value!r}: must be an int")
    return value


def millis_arg(name: str, value: Any) -> int:
    """A time that reaches a script: an int a JavaScript Date holds (docs/protocol.md §4.1)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DATE_MS:
        raise InvalidInputError(f"{name}={value!r}: must be epoch milliseconds (an int in 0..{MAX_DATE_MS})")
    return value


