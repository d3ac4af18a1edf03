"""Values on the wire: JSON as JavaScript writes it, and the lenient readers of what any
runtime stored (docs/protocol.md §2).

Writing. Every JSON value EchoMQ stores goes through :func:`encode_json` (compact, non-ASCII
kept, NaN refused), so what EchoMQ writes is byte for byte what a BullMQ worker's
``JSON.stringify`` writes for the same value. :func:`encode_json_like_js` is the one place that
follows JSON.stringify further and writes NaN and the infinities as ``null``: a processor's
return value must be stored, whatever it is.

Reading. A hash or an event another runtime wrote may hold anything; the readers here never
raise on a malformed value, they return the raw text (or None) so one bad producer cannot
stop a reader.
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
from collections.abc import Mapping
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def encode_json(value: Any, *, ascii_only: bool = False) -> str:
    """Compact JSON; raises ValueError (NaN, infinities) or TypeError (not JSON-able).

    ``ascii_only`` escapes every non-ASCII character: for JSON that only carries values to a
    script (which decodes it before storing anything), so any str arrives, a lone surrogate
    included, and the stored bytes are the same.
    """
    return (_ASCII_ENCODER if ascii_only else _ENCODER).encode(value)


def encode_json_like_js(value: Any) -> str:
    """JSON as ``JSON.stringify`` writes it: NaN and the infinities become ``null``. A str
    holding a lone surrogate (a processor may return what it decoded) is written with
    ``\\uXXXX`` escapes: it is not UTF-8, so it could not be sent as it is."""
    if value is None:  # what most processors return
        return "null"
    try:
        encoded = _ENCODER.encode(value)
    except ValueError:
        value = _finite(value)
        encoded = _ENCODER.encode(value)
    if encoded.isascii() or is_utf8(encoded):
        return encoded
    return _ASCII_ENCODER.encode(value)


def is_utf8(value: str) -> bool:
    """Whether ``value`` can be sent to Redis as UTF-8 (no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent to Redis, or None when it can: a str is sent as UTF-8, and a
    lone surrogate (what ``surrogateescape`` decoding leaves, or a broken UTF-16 pair) has no
    UTF-8 form. For the strings that are stored or keyed as they are (names, ids, queue names):
    JSON values are escaped instead (:func:`encode_json` with ``ascii_only``)."""
    lone = None if value.isascii() else _LONE_SURROGATE.search(value)
    if lone is None:
        return None
    return (f"holds a lone surrogate {lone.group()!r} at index {lone.start()}, which has no UTF-8 form "
            "(Redis stores bytes): decode the text it came from properly, or drop the character")


def sendable_text(value: str) -> str:
    """``value`` with each lone surrogate replaced by ``?``, so that Redis can store it."""
    return value if value.isascii() or is_utf8(value) else value.encode("utf-8", "replace").decode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def text(value: Any) -> str:
    """A reply value as str, whatever the client's ``decode_responses`` (bad UTF-8 -> U+FFFD)."""
    if value.__class__ is bytes:
        return value.decode("utf-8", errors="replace")
    return value if value.__class__ is str else str(value)


def decode_hash(raw: Any) -> dict[str, str]:
    """An HGETALL reply (dict or flat list, bytes or str) as a ``dict[str, str]``."""
    if isinstance(raw, Mapping):
        return {text(k): text(v) for k, v in raw.items()}
    items = list(raw or [])
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def _number(raw: str) -> int | float | None:
    """An int when ``raw`` is one, else a float when it is one, else None."""
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return None


def int_or_none(raw: str | None) -> int | None:
    """A stored integer (``"5"``, also ``"5.0"``); None when absent, empty or not a number."""
    if not raw:
        return None
    try:
        return int(raw)  # what the scripts write: tried first, without a second call
    except ValueError:
        number = _number(raw)
    if number is None or number.__class__ is int:
        return number
    return int(number) if math.isfinite(number) else None


def int_or_text(raw: str) -> int | str:
    """An integer field of an event (``"5"``, ``"5.0"``), or the raw text when it is not one."""
    number = _number(raw)
    if number.__class__ is int:
        return number
    return int(number) if isinstance(number, float) and number.is_integer() else raw


# The C scanner behind json.loads, called directly: json.loads adds two regex passes and
# raw_decode a Python frame, a sizeable share of an event replay's per-event cost.
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def json_or_text(raw: str) -> Any:
    """The JSON value ``raw`` holds, or ``raw`` itself when it is not one JSON value (nested
    too deeply for Python's decoder included: json raises RecursionError there)."""
    try:
        value, end = _scan_json(raw, 0)
    except StopIteration:  # nothing JSON at index 0: leading whitespace, or not JSON at all
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    except (ValueError, RecursionError):
        return raw
    if end != len(raw) and raw[end:].strip():
        return raw  # trailing garbage: not one JSON value
    return value


def decode_json(raw: str) -> Any:
    """The one JSON value ``raw`` holds; ValueError saying why when it holds none (not JSON,
    trailing text, nested too deeply for Python's decoder). For the readers that must tell a
    JSON string from text that is not JSON, which :func:`json_or_text` cannot."""
    try:
        value, end = _scan_json(raw, 0)
    except StopIteration:
        try:
            return json.loads(raw)
        except RecursionError:
            raise ValueError("nested too deeply to decode") from None
    except RecursionError:
        raise ValueError("nested too deeply to decode") from None
    if end != len(raw) and raw[end:].strip():
        raise ValueError(f"text after the JSON value at char {end}")
    return value
