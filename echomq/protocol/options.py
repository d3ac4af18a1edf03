"""Job options: snake_case in Python, the protocol's names (and short forms) in Redis.

A job hash stores its options as one JSON object under ``opts``. BullMQ 6.7 writes most options
under their camelCase names and a few under short keys (``de``, ``fpof``, ``cpof``, ``idof``,
``rdof``, ``kl``, ``tm``, ``omc``). A Node worker reads that object back, so whatever we store
must be exactly what BullMQ would have stored for the same call. Everything is validated here,
before any script runs, so a rejected add writes nothing.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidJobOptionsError
from .codec import encode_json, utf8_problem
from .keys import names_queue_key
from .limits import TIME_LIMIT_OPTIONS, check_time_limits

#: Highest priority the protocol accepts (BullMQ's PRIORITY_LIMIT, 2**21 - 1).
PRIORITY_LIMIT = 2**21 - 1

#: The largest count, delay or size an option takes: JavaScript's Number.MAX_SAFE_INTEGER.
#: Lua and a Node worker read every stored number as a double; above this they stop being
#: exact, and Redis refuses the ``9.2e+18`` a script would then pass it as an integer
#: (docs/protocol.md §2.3).
MAX_SAFE_INTEGER = 2**53 - 1

#: The latest instant a JavaScript Date holds (epoch ms): the bound of every timestamp and due
#: time, so a Node reader can still turn it into a date.
MAX_EPOCH_MS = 8_640_000_000_000_000

_INTEGER_LIKE = re.compile(r"^-?(0|[1-9][0-9]*)$")

_BOOL_SHORT = {
    "fail_parent_on_failure": "fpof",
    "continue_parent_on_failure": "cpof",
    "ignore_dependency_on_failure": "idof",
    "remove_dependency_on_failure": "rdof",
}

_DEDUP_FIELDS = {"id": "id", "ttl": "ttl", "extend": "extend", "replace": "replace"}
_REPEAT_FIELDS = {
    "every": "every", "pattern": "pattern", "tz": "tz", "utc": "utc", "limit": "limit",
    "start_date": "startDate", "end_date": "endDate", "offset": "offset", "count": "count",
    "immediately": "immediately", "prev_millis": "prevMillis", "key": "key",
}
_KEEP_FIELDS = ("age", "count", "limit")


def _fail(field: str, value: Any, reason: str, label: str = "job option ") -> InvalidJobOptionsError:
    return InvalidJobOptionsError(f"{label}{field}={value!r:.200}: {reason}")


def _int(field: str, value: Any, *, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER,
         label: str = "job option ") -> int:
    """An integer (or an integral float) in range; bools are refused, they are not counts.
    Every number has an upper bound (MAX_SAFE_INTEGER unless tighter): an unbounded one reaches
    Lua as a float and aborts a script half-way."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(field, value, "must be an integer", label)
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise _fail(field, value, "must be a whole number", label)
        value = int(value)
    if value < minimum:
        raise _fail(field, value, f"must be >= {minimum}", label)
    if value > maximum:
        raise _fail(field, value, f"must be between {minimum} and {maximum}", label)
    return int(value)


def _sendable(field: str, value: str, label: str = "job option ") -> str:
    """``value`` when Redis can take it as it is (a key, a hash field, a script argument)."""
    if not value.isascii():
        problem = utf8_problem(value)
        if problem is not None:
            raise InvalidJobOptionsError(f"{label}{field}={value!r:.100}: {problem}")
    return value


def _bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(field, value, "must be True or False")
    return value


def validate_job_id(job_id: Any, field: str = "job_id") -> str:
    """A custom job id as BullMQ accepts it.

    Integer-like ids would collide with the auto ids from the ``id`` counter; a ``:`` is only
    allowed in the three-segment shape of scheduler iterations (``repeat:<id>:<millis>``); an
    id naming one of the queue's keys would overwrite that key (docs/protocol.md §1.4).
    """
    if not isinstance(job_id, str):
        raise _fail(field, job_id, "must be a str (custom ids cannot be integers)")
    if not job_id:
        raise _fail(field, job_id, "must not be empty")
    _sendable(field, job_id)
    if _INTEGER_LIKE.match(job_id):
        raise _fail(field, job_id, "custom ids cannot be integer-like (they would collide with auto ids)")
    if job_id.startswith("0:"):
        raise _fail(field, job_id, "must not start with '0:' (legacy marker shape)")
    if ":" in job_id and len(job_id.split(":")) != 3:
        raise _fail(field, job_id, "may contain ':' only as exactly three ':'-separated segments")
    taken = names_queue_key(job_id)
    if taken is not None:
        raise _fail(field, job_id, f"is the name of one of the queue's own keys ({taken!r}): "
                                   "the job's hash would overwrite it")
    return job_id


def lookup_job_id(job_id: Any, operation: str) -> str:
    """A job id given to look a job up (``get_job``, ``remove`` ...): a non-empty str, or an
    int for an auto id. Anything else (None above all) is a caller's mistake, not "no such job"."""
    if isinstance(job_id, int) and not isinstance(job_id, bool) and job_id >= 0:
        return str(job_id)
    if isinstance(job_id, str) and job_id:
        return _sendable("job_id", job_id, f"{operation}: ")
    raise InvalidJobOptionsError(f"{operation}: job_id={job_id!r:.100} must be a non-empty str (or an int auto id)")


def backoff_as_dict(value: Any) -> dict[str, Any] | None:
    """A stored ``backoff`` in its normal form ``{"type", "delay"?, "jitter"?}``; None for none.

    A bare number is BullMQ's shorthand for a fixed backoff. BullMQ normalises it before storing
    and again whenever a worker rebuilds a job, so every reader and writer here uses this form.
    """
    if value is None or value is False:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"type": "fixed", "delay": value}
    if isinstance(value, Mapping):
        return dict(value)
    raise InvalidJobOptionsError(f"backoff must be a number or a dict, got {value!r}")


def _backoff(value: Any) -> dict[str, Any]:
    if isinstance(value, bool) or not isinstance(value, (int, float, Mapping)):
        raise _fail("backoff", value, "must be a delay in ms or {'type': 'fixed'|'exponential', 'delay': ms}")
    if not isinstance(value, Mapping):
        shorthand = backoff_as_dict(_int("backoff", value))
        assert shorthand is not None
        return shorthand
    unknown = set(value) - {"type", "delay", "jitter"}
    if unknown:
        raise _fail("backoff", value, f"unknown keys {sorted(unknown)}")
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        raise _fail("backoff.type", kind, "must be 'fixed', 'exponential' or a custom strategy name")
    out: dict[str, Any] = {"type": kind}
    if value.get("delay") is not None:
        out["delay"] = _int("backoff.delay", value["delay"])
    if value.get("jitter") is not None:
        jitter = value["jitter"]
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 1:
            raise _fail("backoff.jitter", jitter, "must be a number between 0 and 1")
        out["jitter"] = jitter
    return out


def validate_keep(subject: str, value: Any) -> bool | int | dict[str, int]:
    """removeOnComplete/removeOnFail: True (remove at once), False (keep all), a count to keep,
    or ``{"age": s, "count": n, "limit": n}``. ``subject`` names the option in the error
    (``job option remove_on_fail``, ``Worker remove_on_fail``): both are checked by this rule."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _int(subject, value, label="")
    if not isinstance(value, Mapping):
        raise _fail(subject, value, "must be a bool, a count, or {'age': seconds, 'count': n, 'limit': n}",
                    label="")
    unknown = set(value) - set(_KEEP_FIELDS)
    if unknown or not value:
        raise _fail(subject, value, f"takes only the keys {list(_KEEP_FIELDS)} (at least one)", label="")
    return {k: _int(f"{subject}.{k}", value[k], label="") for k in _KEEP_FIELDS if value.get(k) is not None}


def keep_args(keep: Any) -> tuple[str, str, str]:
    """A stored keep rule as the finishing script's ARGV (keep count, keep age s, keep limit):
    True deletes at once (count 0); False or None keeps all (count -1)."""
    if keep is None or keep is False:
        return "-1", "", ""
    if keep is True:
        return "0", "", ""
    if isinstance(keep, (int, float)):
        return _keep_number(keep, "-1"), "", ""
    if isinstance(keep, Mapping):
        return (_keep_number(keep.get("count"), "-1"), _keep_number(keep.get("age"), ""),
                _keep_number(keep.get("limit"), ""))
    return "-1", "", ""


def _keep_number(value: Any, unbounded: str) -> str:
    """One number of a stored keep rule as a script argument. Any runtime may have stored it:
    what is not a whole number within 0 .. 2^53 - 1 reads as "no bound" (docs/protocol.md §2.3)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return unbounded
    if not (0 <= value <= MAX_SAFE_INTEGER) or value != int(value):
        return unbounded
    return str(int(value))


def _deduplication(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail("deduplication", value, "must be a mapping with at least an 'id'")
    unknown = set(value) - set(_DEDUP_FIELDS)
    if unknown:
        raise _fail("deduplication", value, f"unknown keys {sorted(unknown)} (known: {sorted(_DEDUP_FIELDS)})")
    dedup_id = value.get("id")
    if not isinstance(dedup_id, str) or not dedup_id:
        raise _fail("deduplication.id", dedup_id, "must be a non-empty str")
    _sendable("deduplication.id", dedup_id)
    out: dict[str, Any] = {"id": dedup_id}
    if value.get("ttl") is not None:
        out["ttl"] = _int("deduplication.ttl", value["ttl"], minimum=1)
    for flag in ("extend", "replace"):
        if value.get(flag) is not None:
            out[flag] = _bool(f"deduplication.{flag}", value[flag])
    return out


def _parent(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or set(value) != {"id", "queue"}:
        raise _fail("parent", value, "must be {'id': parent job id, 'queue': '<prefix>:{<queue>}'}")
    if not isinstance(value["id"], str) or not value["id"]:
        raise _fail("parent.id", value["id"], "must be a non-empty str")
    if not isinstance(value["queue"], str) or not value["queue"]:
        raise _fail("parent.queue", value["queue"], "must be the parent queue's qualified name")
    _sendable("parent.id", value["id"])
    _sendable("parent.queue", value["queue"])
    return {"id": value["id"], "queue": value["queue"]}


def _repeat(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail("repeat", value, "must be a mapping")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in _REPEAT_FIELDS:
            raise _fail("repeat", value, f"unknown key {key!r}")
        if item is not None:
            out[_REPEAT_FIELDS[key]] = item
    return out


def _telemetry(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or set(value) - {"metadata", "omit_context"}:
        raise _fail("telemetry", value, "must be {'metadata': str, 'omit_context': bool}")
    out: dict[str, Any] = {}
    if value.get("metadata") is not None:
        if not isinstance(value["metadata"], str):
            raise _fail("telemetry.metadata", value["metadata"], "must be a str")
        out["tm"] = value["metadata"]
    if value.get("omit_context") is not None:
        out["omc"] = _bool("telemetry.omit_context", value["omit_context"])
    return out


def _str(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(field, value, "must be a non-empty str")
    return _sendable(field, value)


# python name -> (protocol name, converter). Order of this table = order written to opts.
_SIMPLE: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "attempts": ("attempts", lambda v: _int("attempts", v)),
    "job_id": ("jobId", validate_job_id),
    "delay": ("delay", lambda v: _int("delay", v)),
    "priority": ("priority", lambda v: _int("priority", v, maximum=PRIORITY_LIMIT)),
    "lifo": ("lifo", lambda v: _bool("lifo", v)),
    "timestamp": ("timestamp", lambda v: _int("timestamp", v, maximum=MAX_EPOCH_MS)),
    "backoff": ("backoff", _backoff),
    "remove_on_complete": ("removeOnComplete", lambda v: validate_keep("job option remove_on_complete", v)),
    "remove_on_fail": ("removeOnFail", lambda v: validate_keep("job option remove_on_fail", v)),
    "stack_trace_limit": ("stackTraceLimit", lambda v: _int("stack_trace_limit", v)),
    "keep_logs": ("kl", lambda v: _int("keep_logs", v)),
    "size_limit": ("sizeLimit", lambda v: _int("size_limit", v, minimum=1)),
    "deduplication": ("de", _deduplication),
    "parent": ("parent", _parent),
    "repeat_job_key": ("repeatJobKey", lambda v: _str("repeat_job_key", v)),
    "prev_millis": ("prevMillis", lambda v: _int("prev_millis", v, maximum=MAX_EPOCH_MS)),
    "repeat": ("repeat", _repeat),
    **TIME_LIMIT_OPTIONS,  # EchoMQ's own (docs/protocol.md §2.2)
    **{name: (short, functools.partial(_bool, name)) for name, short in _BOOL_SHORT.items()},
}
KNOWN_OPTIONS: tuple[str, ...] = (*_SIMPLE, "telemetry")


def encode_job_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """Validate snake_case options and return the dict to store (as JSON) under the hash's ``opts``.

    ``None`` values mean "not given" and are dropped, as BullMQ drops ``undefined``. Raises
    InvalidJobOptionsError naming the option, its value and the reason.
    """
    out: dict[str, Any] = {}
    for name, value in opts.items():
        if value is None:
            continue
        if name == "debounce":
            raise _fail(name, value, "was removed in BullMQ 6: use deduplication={'id': ...}")
        if name == "telemetry":
            out.update(_telemetry(value))
            continue
        entry = _SIMPLE.get(name)
        if entry is None:
            close = difflib.get_close_matches(str(name), KNOWN_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _fail(str(name), value, f"unknown job option{hint}")
        protocol_name, convert = entry
        out[protocol_name] = convert(value)
    flags = [name for name, short in _BOOL_SHORT.items() if out.get(short)]
    if len(flags) > 1:
        raise _fail(flags[0], True, f"cannot be used together with {', '.join(flags[1:])}")
    check_time_limits("job option ", out.get("emqSoftTimeLimit"), out.get("emqTimeLimit"), InvalidJobOptionsError)
    if "de" in out and "parent" in out:
        raise _fail("deduplication", opts.get("deduplication"), "cannot be used together with parent")
    try:
        encoded = encode_json(out)
    except (TypeError, ValueError) as exc:
        raise _fail("opts", dict(opts), f"not JSON-serialisable ({exc})") from None
    for name, value in opts.items() if not encoded.isascii() else ():
        # The scripts read options back (cjson), which refuse a lone surrogate even as a JSON escape.
        problem = utf8_problem(encode_json(value)) if value is not None else None
        if problem is not None:
            raise _fail(str(name), value, problem.split(" at index")[0] + " (the scripts read options back)")
    return out


def dumps_json(value: Any, field: str) -> str:
    """A job's data, progress or opts as the JSON to store; NaN and non-JSON objects are refused.

    A str holding a lone surrogate (what ``surrogateescape`` decoding leaves) is not UTF-8, so
    redis-py could not send it: such JSON is written with ``\\uXXXX`` escapes instead, which
    JSON.parse and json.loads both turn back into the same string.
    """
    try:
        encoded = encode_json(value)
    except RecursionError:
        raise InvalidJobOptionsError(f"job {field}: nested too deeply to encode as JSON (past Python's "
                                     "recursion limit; see max_data_depth)") from None
    except (TypeError, ValueError) as exc:
        raise InvalidJobOptionsError(f"job {field} {value!r:.200}: not JSON-serialisable ({exc})") from None
    if not encoded.isascii():
        try:
            encoded.encode("utf-8")
        except UnicodeEncodeError:
            return encode_json(value, ascii_only=True)
    return encoded


def validate_job_name(name: Any) -> str:
    """A job name: any str Redis can store as it is (the hash's ``name``, the ``added`` event)."""
    if name.__class__ is not str or not name.isascii():  # the common case passes in one check
        problem = utf8_problem(name) if isinstance(name, str) else "must be a str"
        if problem is not None:
            raise InvalidJobOptionsError(f"job name {name!r:.100}: {problem}")
    return name  # type: ignore[no-any-return]


# -- decoding -------------------------------------------------------------------------------------

_DECODE_TOP = {protocol: python for python, (protocol, _c) in _SIMPLE.items()}
_DECODE_REPEAT = {protocol: python for python, protocol in _REPEAT_FIELDS.items()}
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub(lambda m: "_" + m.group(1).lower(), name)


def decode_job_options(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The reverse of encode_job_options, for hashes any runtime wrote.

    Lenient on purpose: an option this version does not know (a newer BullMQ's) is kept under
    its snake_case name instead of being dropped or refused.
    """
    out: dict[str, Any] = {}
    telemetry: dict[str, Any] = {}
    for key, value in stored.items():
        if key == "tm":
            telemetry["metadata"] = value
        elif key == "omc":
            telemetry["omit_context"] = value
        elif key == "repeat" and isinstance(value, Mapping):
            out["repeat"] = {_DECODE_REPEAT.get(k, _snake(k)): v for k, v in value.items()}
        elif key == "de" and isinstance(value, Mapping):
            out["deduplication"] = {_snake(k): v for k, v in value.items()}
        elif key == "debounce":
            out["deduplication"] = dict(value) if isinstance(value, Mapping) else value
        else:
            out[_DECODE_TOP.get(key, _snake(key))] = value
    if telemetry:
        out["telemetry"] = telemetry
    return out
