"""Reading a job hash ``<base>:<jobId>``, whoever wrote it (docs/protocol.md §2.1).

The rules for each field live here once: a Job built for a producer, an operator or a
processor, and the worker's own bookkeeping of an attempt, read the same field the same way,
with the same fallbacks (``atm`` before the legacy ``attemptsMade``) and the same leniency
(a malformed value never raises: it is read as absent, or kept as its raw text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .codec import decode_json, int_or_none, json_or_text
from .limits import DataLimits


def stored_opts(fields: Mapping[str, str]) -> dict[str, Any]:
    """The ``opts`` JSON object as stored (protocol names); ``{}`` when absent or not an object."""
    raw = fields.get("opts")
    if not raw:
        return {}
    opts = json_or_text(raw)
    return opts if isinstance(opts, dict) else {}


def attempts_made(fields: Mapping[str, str]) -> int:
    """``atm``: attempts that finished (BullMQ 5 and older wrote ``attemptsMade``)."""
    atm = fields.get("atm")
    return int_or_none(atm or fields.get("attemptsMade")) or 0


def json_field(fields: Mapping[str, str], name: str, default: Any = None) -> Any:
    """A field holding JSON text (data, returnvalue, progress, parent); raw text if it is not JSON."""
    raw = fields.get(name)
    return default if raw is None else json_or_text(raw)


def stacktrace(fields: Mapping[str, str]) -> list[str]:
    """The stored stack traces, oldest first; ``[]`` when absent or malformed."""
    traces = json_field(fields, "stacktrace", [])
    return [str(line) for line in traces] if isinstance(traces, list) else []


def parent(fields: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``parent`` link ``{"id", "queueKey", ...}`` of a flow child, or None."""
    link = json_field(fields, "parent")
    return link if isinstance(link, dict) else None


def option_int(value: Any) -> int | None:
    """A number from the opts JSON (``delay``, ``kl`` ...) as any runtime may store it (a
    number, a numeric str); None when it is not a finite number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    return int_or_none(value) if isinstance(value, str) else None


# -- a job a worker is about to run ----------------------------------------------------------

#: What HINCRBY accepts as the counter it increments: Redis's own integer syntax, in 64 bits.
_REDIS_INTEGER = re.compile(r"0|-?[1-9][0-9]{0,18}")
#: Fields every add and scheduler script writes (storeJob): a hash without them was not made
#: by a protocol producer.
_REQUIRED = ("name", "timestamp")
#: Numeric fields, checked when present: what the scripts write are decimal integers.
_NUMBERS = ("timestamp", "delay", "priority", "ats", "stc", "attemptsMade")


class Taken(NamedTuple):
    """A job hash as moveToActive handed it to a worker (docs/protocol.md §2.1, §3.3)."""

    opts: dict[str, Any]
    #: What the processor receives as ``job.data`` (the raw text when ``problem`` is set).
    data: Any
    #: Why the job is failed without running its processor, or None: it may run.
    problem: str | None
    #: ``[field, value ...]`` to store with that failure so the finishing script can run.
    repairs: list[str]


def _shown(raw: str) -> str:
    return repr(raw[:40]) + ("..." if len(raw) > 40 else "")


def _is_number(raw: str) -> bool:
    return (raw.isdigit() and raw.isascii()) or int_or_none(raw) is not None


def _is_count(value: Any) -> bool:
    """``opts.attempts`` as a runtime may store it: a whole number >= 0 (or such a str)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    if isinstance(value, float):
        return math.isfinite(value) and value >= 0 and value.is_integer()
    return isinstance(value, str) and value.isdigit() and value.isascii()


def take(fields: Mapping[str, str], limits: DataLimits) -> Taken:
    """Read the hash of a job about to run, and decide whether it can run at all.

    The hash may come from any runtime, or from no runtime at all: a job whose hash no
    protocol producer would write (no ``name`` or ``timestamp``, a number field that is not
    one, ``opts`` that is not a JSON object, an ``opts.attempts`` that is not a count, ``data``
    that is not JSON) or whose data is over the worker's ``limits`` gets a ``problem``, the
    ``failedReason`` it fails with, without retries. Absent ``data`` and ``opts`` read as ``{}``,
    as BullMQ reads them. The reasons name the field, never the data's content.
    """
    repairs: list[str] = []
    problem: str | None = None
    atm = fields.get("atm")
    if atm is not None and not (_REDIS_INTEGER.fullmatch(atm) and -(2**63) <= int(atm) < 2**63):
        repairs = ["atm", "0"]  # the failure's script counts the attempt with HINCRBY
        problem = f"atm={_shown(atm)} is not an integer"
    for name in _REQUIRED:
        if problem is None and name not in fields:
            problem = f"it has no {name} field"
    for name in _NUMBERS:
        raw = fields.get(name)
        # (the digits test inline: what every script writes, without a call per field)
        if problem is None and raw is not None and not (raw.isdigit() and raw.isascii()) and not _is_number(raw):
            problem = f"{name}={_shown(raw)} is not a number"
    opts: dict[str, Any] = {}
    raw_opts = fields.get("opts")
    if raw_opts:
        try:
            decoded = decode_json(raw_opts)
        except ValueError as exc:
            decoded, problem = None, problem or f"opts is not JSON ({exc})"
        if isinstance(decoded, dict):
            opts = decoded
        elif problem is None:
            problem = f"opts is a JSON {type(decoded).__name__}, not an object"
    attempts = opts.get("attempts")
    if problem is None and attempts is not None and not _is_count(attempts):
        problem = f"opts.attempts={attempts!r:.40} is not a whole number >= 0"
    raw_data = fields.get("data")
    data: Any = {} if raw_data is None else raw_data
    if problem is None and raw_data is not None:
        too_much = limits.problem(raw_data)
        if too_much is not None:
            return Taken(opts, data, f"its data is {too_much} (a Worker limit)", repairs)
        try:
            data = decode_json(raw_data)
        except ValueError as exc:
            problem = f"data is not JSON ({exc})"
    return Taken(opts, data, None if problem is None else f"malformed job hash: {problem}", repairs)
