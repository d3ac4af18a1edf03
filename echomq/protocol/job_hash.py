"""Reading a job hash ``<base>:<jobId>``, whoever wrote it (docs/protocol.md §2.1).

The rules for each field live here once: a Job built for a producer, an operator or a
processor, and the worker's own bookkeeping of an attempt, read the same field the same way,
with the same fallbacks (``atm`` before the legacy ``attemptsMade``) and the same leniency
(a malformed value never raises: it is read as absent, or kept as its raw text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .codec import int_or_none, json_or_text


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
