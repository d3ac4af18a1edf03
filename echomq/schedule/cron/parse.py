"""Parse a cron pattern in BullMQ 6.7's dialect (cron-parser 5.10.3) into value sets.

The dialect was measured against BullMQ itself (tests/data/make_cron_vectors.py); its quirks
are kept on purpose so a pattern a Node app stored means the same run times here:

* 5 fields, or 6 with seconds first; fewer fields are right-aligned (the missing leading
  fields are ``*``, seconds ``0``); 7 or more is an error.
* ``*`` and ``?`` are textually the field's full range, so ``*/2`` is ``0-59/2`` and ``a/n``
  is ``a-<max>/n``; a range reads its first two numbers the way JavaScript's parseInt does.
* Month and weekday names (3 letters, any case) are accepted in both of those fields.
* Day of week runs 0-7 (7 and 0 are Sunday); a single ``7`` is Sunday, and a stepped range
  reaching 7 also gives Sunday (``1/2`` = Mon, Wed, Fri, Sun).
* A value listed twice in one field (``1,1``, ``0,7``, ``*/15,30``) is an error.
* ``L`` in day of month is its last day; ``nL`` in day of week is the last n-day of the month;
  ``n#k`` is the k-th n-day (1 <= k <= 5) and may not be combined with ``,``, ``-`` or ``/``.
* ``H`` (cron-parser's random "hashed" values) is rejected: a value drawn at random per call
  cannot agree between two runtimes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InvalidScheduleError

NICKNAMES: dict[str, str] = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
    "@minutely": "0 * * * * *",
    "@secondly": "* * * * * *",
    "@weekdays": "0 0 0 * * 1-5",
    "@weekends": "0 0 0 * * 0,6",
}

FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "day-of-month": (1, 31),
           "month": (1, 12), "day-of-week": (0, 7)}
_DEFAULTS = ("0", "*", "*", "*", "*", "*")
_MAX_LENGTH = 1024
_MAX_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

# One table for both name-bearing fields: cron-parser looks a 3-letter word up in the month
# names, then the weekday names, whichever field it is in ("MON" in the month field is 1).
_NAMES = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
for _i, _name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat")):
    _NAMES.setdefault(_name, _i)

_CHARS = {
    "day-of-month": re.compile(r"[?,*0-9L/-]+"),
    "day-of-week": re.compile(r"[?,*0-9L#/-]+"),
}
_PLAIN_CHARS = re.compile(r"[?,*0-9/-]+")
_LAST_TOKEN = re.compile(r"[0-9]{0,2}L")
_WORD = re.compile(r"[a-z]{3}", re.IGNORECASE)
_LEADING_INT = re.compile(r"[0-9]+")
_JS_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)")


@dataclass(frozen=True)
class CronFields:
    """The value sets a pattern allows, and the flags the day rules need."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    dom_days: frozenset[int]
    dom_last: bool          # "L": the month's last day matches
    dom_wildcard: bool      # field was exactly * or ?
    dow_days: frozenset[int]  # 0..6, Sunday 0
    dow_nth: int            # k of n#k, 0 when absent
    dow_last: frozenset[int]  # weekdays whose last occurrence in the month matches (nL)
    dow_wildcard: bool
    expanded: tuple[str, ...]  # the six raw fields after nickname expansion and alignment


class _FieldError(Exception):
    pass


def _js_parse_int(text: str) -> int | None:
    """JavaScript parseInt for the strings that reach it here: leading digits, else NaN."""
    match = _LEADING_INT.match(text)
    return int(match.group()) if match else None


def _js_number(text: str) -> float | None:
    """JavaScript Number() for the nth part of ``n#k`` (so ``1.0`` and ``0x1`` are 1)."""
    if _JS_NUMBER.fullmatch(text):
        return float(text)
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return float(int(text, 16))
    if re.fullmatch(r"0[bB][01]+", text):
        return float(int(text, 2))
    if re.fullmatch(r"0[oO][0-7]+", text):
        return float(int(text, 8))
    return None


def _expand_range(name: str, text: str, step: int | None, lo: int, hi: int) -> list[int | str]:
    parts = text.split("-")
    if len(parts) == 1:
        if text.isdigit():
            return [int(text)]  # single values are range-checked by the caller
        return [text]
    first, last = _js_parse_int(parts[0]), _js_parse_int(parts[1])
    if first is None or last is None or first < lo or last > hi:
        raise _FieldError(f"range {text!r} is outside {lo}-{hi}")
    if first > last:
        raise _FieldError(f"range {text!r} is reversed")
    if step is None or step <= 0:
        raise _FieldError("step must be a positive integer")
    values: list[int | str] = []
    if name == "day-of-week" and last % 7 == 0 and (last - first) % step == 0:
        values.append(0)  # the range reaches 7: Sunday is 0
    for value in range(first, last + 1, step):
        if value not in values:
            values.append(value)
    return values


def _parse_field(name: str, raw: str) -> tuple[list[int | str], int]:
    """Values of one field (ints, or 'nL' strings), and the k of ``n#k`` (0 if none)."""
    lo, hi = _BOUNDS[name]
    nth = 0
    text = raw
    if name == "day-of-week" and "#" in raw:
        pieces = raw.split("#")
        if re.search(r"[,/-]", raw):
            raise _FieldError("'#' cannot be combined with ',', '-' or '/'")
        number = _js_number(pieces[-1])
        if len(pieces) > 2 or number is None or not 1 <= number <= 5 or number != int(number):
            raise _FieldError("the occurrence after '#' must be 1 to 5")
        nth, text = int(number), pieces[0]
    if name in ("month", "day-of-week"):
        def _name(match: re.Match[str]) -> str:
            word = match.group().lower()
            if word not in _NAMES:
                raise _FieldError(f"unknown name {match.group()!r}")
            return str(_NAMES[word])
        text = _WORD.sub(_name, text)
    if "H" in text:
        raise _FieldError("'H' (random hashed values) is not supported")
    if not _CHARS.get(name, _PLAIN_CHARS).fullmatch(text):
        raise _FieldError("invalid characters")
    text = re.sub(r"[*?]", f"{lo}-{hi}", text)
    values: list[int | str] = []
    for item in text.split(","):
        if not item:
            raise _FieldError("empty list item")
        pieces = item.split("/")
        if len(pieces) > 2:
            raise _FieldError(f"{item!r} has more than one '/'")
        if len(pieces) == 2:
            base = pieces[0] if "-" in pieces[0] else f"{pieces[0]}-{hi}"
            values.extend(_expand_range(name, base, _js_parse_int(pieces[1]), lo, hi))
            continue
        got = _expand_range(name, item, 1, lo, hi)
        if len(got) == 1 and "-" not in item:
            value = got[0]
            if isinstance(value, int):
                if not lo <= value <= hi:
                    raise _FieldError(f"value {value} is outside {lo}-{hi}")
                value = value % 7 if name == "day-of-week" else value
            elif name not in _CHARS or not _LAST_TOKEN.fullmatch(value):
                raise _FieldError(f"bad value {value!r}")
            values.append(value)
        else:
            values.extend(got)
    seen: set[int | str] = set()
    for value in values:
        if value in seen:
            also = " (0 and 7 are both Sunday)" if name == "day-of-week" and value == 0 else ""
            raise _FieldError(f"value {value} is listed twice{also}")
        seen.add(value)
    if name == "day-of-week" and "L" in values:
        raise _FieldError("a bare 'L' is not allowed (use nL for the last n-day)")
    return values, nth


def split_fields(pattern: str) -> tuple[str, ...]:
    """The six raw fields (seconds first) of a pattern, after nicknames and right-alignment."""
    if not isinstance(pattern, str):
        raise InvalidScheduleError(f"pattern {pattern!r}: must be a string")
    text = NICKNAMES.get(pattern, pattern)
    if len(text) > _MAX_LENGTH:
        raise InvalidScheduleError(f"pattern {pattern[:40]!r}...: longer than {_MAX_LENGTH} characters")
    atoms = text.split()
    if not atoms:
        raise InvalidScheduleError(f"pattern {pattern!r}: is empty")
    if len(atoms) > 6:
        raise InvalidScheduleError(
            f"pattern {pattern!r}: has {len(atoms)} fields, at most 6 (seconds minutes hours "
            "day-of-month month day-of-week)")
    return _DEFAULTS[: 6 - len(atoms)] + tuple(atoms)


def parse_pattern(pattern: str) -> CronFields:
    """Parse and validate; the error names the field, its position and the reason."""
    fields = split_fields(pattern)
    given = len(NICKNAMES.get(pattern, pattern).split())
    parsed: dict[str, tuple[list[int | str], int]] = {}
    for index, (name, raw) in enumerate(zip(FIELD_NAMES, fields)):
        try:
            parsed[name] = _parse_field(name, raw)
        except _FieldError as exc:
            position = index - (6 - given) + 1
            where = f"field {position} of {given}" if position >= 1 else "implied field"
            raise InvalidScheduleError(
                f"pattern {pattern!r}: {name} ({where}) {raw!r}: {exc}") from None

    def ints(name: str) -> frozenset[int]:
        return frozenset(v for v in parsed[name][0] if isinstance(v, int))

    dom_days = ints("day-of-month")
    months = ints("month")
    if (len(months) == 1 and "L" not in fields[3] and fields[5] in ("*", "?")
            and min(dom_days) > _MAX_DAYS[min(months) - 1]):
        raise InvalidScheduleError(
            f"pattern {pattern!r}: day-of-month {fields[3]!r} never occurs in month {fields[4]!r}")
    dow_values, nth = parsed["day-of-week"]
    dow_raw, dom_raw = fields[5], fields[3]
    dow_last: frozenset[int] = frozenset()
    if "L" in dow_raw:
        dow_last = frozenset(int(str(v)[0]) % 7 for v in dow_values)
    return CronFields(
        seconds=ints("second"), minutes=ints("minute"), hours=ints("hour"), months=months,
        dom_days=dom_days, dom_last="L" in dom_raw, dom_wildcard=dom_raw in ("*", "?"),
        dow_days=frozenset(v for v in ints("day-of-week") if v < 7), dow_nth=nth,
        dow_last=dow_last, dow_wildcard=dow_raw in ("*", "?"), expanded=fields,
    )
