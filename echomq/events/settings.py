"""QueueEvents' settings, checked at construction so that none of them can fail at run time.

A setting that Redis or the socket layer would refuse only once the reader runs (a block no
socket timeout can hold, a COUNT past a 64-bit integer, a start id that is not one) would make
the reader's loop log and retry forever; refused here, it raises :class:`InvalidInputError`
naming the argument before anything is opened or written. The start id itself is checked by
``cursor.validate_start_id``.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError

#: The longest ``block_ms``: about 24.8 days (2**31 - 1 ms, the longest timer BullMQ's Node
#: runtime allows). Far longer blocks overflow the socket timeout (block + margin) or Redis.
MAX_BLOCK_MS = 2**31 - 1

#: The largest ``count``: Redis parses COUNT as a signed 64-bit integer.
MAX_COUNT = 2**63 - 1


def _positive_int(name: str, value: Any, maximum: int, unit: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= maximum:
        raise InvalidInputError(f"{name} {value!r} must be a positive int{unit} of at most {maximum}")
    return value


def check_block_ms(value: Any) -> int:
    return _positive_int("block_ms", value, MAX_BLOCK_MS, " (milliseconds)")


def check_count(value: Any) -> int:
    return _positive_int("count", value, MAX_COUNT)


#: The largest ``history``: ten million remembered entries (gigabytes of memory).
MAX_HISTORY = 10_000_000


def check_history(value: Any) -> int:
    """How many delivered entries a reader remembers; 0 remembers none (docs/events.md)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_HISTORY:
        raise InvalidInputError(f"history {value!r} must be an int from 0 to {MAX_HISTORY} (delivered entries kept)")
    return value


def check_handler(handler: Any) -> Any:
    """None, or an object whose ``handle_event`` can be called for each event."""
    if handler is not None and not callable(getattr(handler, "handle_event", None)):
        raise InvalidInputError(f"handler {handler!r} must have a handle_event(event_type, event_data) method")
    return handler
