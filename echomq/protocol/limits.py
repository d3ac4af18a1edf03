"""How large and how deeply nested a job's data may be, checked on its JSON text.

A job's ``data`` (docs/protocol.md §2.1) comes from whoever called ``add``, often from a web
request: it is untrusted. A Queue and a JobScheduler refuse data over these limits before
anything is written; a Worker fails, without running it, a job whose stored data is over them
(another runtime may have written it). Both limits are EchoMQ's own: BullMQ has neither, and
its per-job ``size_limit`` option still applies on top.

The defaults are far above what a real job carries and well below what hurts: 16 MiB of JSON
(Redis itself takes up to 512 MB in one value, which would stall the server and every
reader), and 512 levels of nesting (Python's own JSON encoder and decoder give up at about
1000 levels, the recursion limit, and Lua cjson at 1000; no real payload nests past a few
dozen). ``None`` switches a limit off.

Both checks cost next to nothing for ordinary data: the size is the text's length (an exact
UTF-8 count only when four bytes per character could pass the limit), and nesting is bounded
by the text's length and by its number of brackets, so only a large text with more brackets
than the limit is scanned, in a few passes of C-speed regular expressions and no Python-level
walk of the value.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from ..errors import InvalidInputError, InvalidJobOptionsError

#: The default most bytes of JSON a job's data may take.
DEFAULT_MAX_DATA_BYTES = 16 * 1024 * 1024

#: The default deepest nesting of arrays and objects in a job's data (``[]`` is 1 deep).
DEFAULT_MAX_DATA_DEPTH = 512

#: Every byte but the quote and the brackets, deleted from the text before nesting is measured.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
_STEP = {ord("["): 1, ord("]"): -1}
#: Passes that peel the innermost empty pairs before the prefix-sum scan: ordinary data is a
#: few levels deep and vanishes in them.
_PEEL_PASSES = 8


def nested_deeper_than(encoded: str, max_depth: int) -> bool:
    """True when the JSON text ``encoded`` nests arrays and objects more than ``max_depth`` deep.

    Any text is accepted (malformed JSON included, as another runtime may store it); brackets
    inside strings do not count. Each step is one pass of a C loop over the text.
    """
    if len(encoded) <= max_depth:  # every level takes a character (two, in well-formed JSON)
        return False
    if encoded.count("[") + encoded.count("{") <= max_depth:
        return False
    raw = encoded.encode("utf-8", "surrogatepass")
    if b"\\" in raw:  # escaped backslashes first, then escaped quotes: JSON's own reading
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = raw.translate(_ONE_KIND, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:  # strings holding brackets: drop what lies between quotes
        structure = b"".join(structure.split(b'"')[::2])
    depth_left = max_depth
    for _ in range(_PEEL_PASSES):
        peeled = structure.replace(b"[]", b"")  # one level less, everywhere
        if depth_left == 0 or len(peeled) == len(structure):
            break
        structure = peeled
        depth_left -= 1
    return max(accumulate(map(_STEP.__getitem__, structure)), default=0) > depth_left


def utf8_length(encoded: str) -> int:
    return len(encoded) if encoded.isascii() else len(encoded.encode("utf-8", "surrogatepass"))


def _limit(owner: str, name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{owner} {name}={value!r}: must be an int >= 1, or None for no limit")
    return value


@dataclass(frozen=True)
class DataLimits:
    """``max_data_bytes`` and ``max_data_depth`` of one component (None: no limit)."""

    max_bytes: int | None = DEFAULT_MAX_DATA_BYTES
    max_depth: int | None = DEFAULT_MAX_DATA_DEPTH
    #: The longest text within both limits whatever it holds (4 bytes a character, a level a
    #: character): the hot path's one comparison, ``len(text) <= limits.certainly_within``.
    certainly_within: int = dataclasses.field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        bounds = [bound for bound in ((self.max_bytes or 0) // 4 if self.max_bytes is not None else None,
                                      self.max_depth) if bound is not None]
        object.__setattr__(self, "certainly_within", min(bounds) if bounds else 2**63)

    @classmethod
    def checked(cls, owner: str, max_bytes: Any, max_depth: Any) -> DataLimits:
        """The limits ``owner`` (``"Queue"``, ``"Worker"`` ...) was given, or InvalidInputError."""
        return cls(_limit(owner, "max_data_bytes", max_bytes), _limit(owner, "max_data_depth", max_depth))

    def problem(self, encoded: str) -> str | None:
        """What in the JSON text ``encoded`` is over a limit, naming the limit; None if nothing."""
        if len(encoded) <= self.certainly_within:
            return None
        limit = self.max_bytes
        if limit is not None and len(encoded) * 4 > limit:  # a character is at most 4 bytes
            size = utf8_length(encoded)
            if size > limit:
                return f"{size} bytes of JSON, over max_data_bytes={limit}"
        if self.max_depth is not None and nested_deeper_than(encoded, self.max_depth):
            return f"nested deeper than max_data_depth={self.max_depth}"
        return None


#: The longest time limit (ms) a job or a worker takes: 2**31 - 1, a Worker's longest period
#: (worker/options.py MAX_MS), so every limit fits a timer on each runtime.
TIME_LIMIT_MAX_MS = 2**31 - 1


def _time_limit(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= TIME_LIMIT_MAX_MS:
        raise InvalidJobOptionsError(f"job option {field}={value!r:.100}: must be an integer between 1 and "
                                     f"{TIME_LIMIT_MAX_MS} (ms)")
    return value


#: The time limit job options (docs/protocol.md §2.2): python name -> (stored name, check).
#: Names of EchoMQ's own: BullMQ 6.7 has no time limit and keeps them in opts unread.
TIME_LIMIT_OPTIONS: dict[str, tuple[str, Callable[[Any], int]]] = {
    "time_limit_ms": ("emqTimeLimit", functools.partial(_time_limit, "time_limit_ms")),
    "soft_time_limit_ms": ("emqSoftTimeLimit", functools.partial(_time_limit, "soft_time_limit_ms")),
}


def check_time_limits(label: str, soft: int | None, hard: int | None, error: type[Exception]) -> None:
    """The one rule between the two limits: a soft limit at or past the hard one would never
    be seen (the hard limit stops the attempt first), so it is refused, naming both."""
    if soft is not None and hard is not None and soft >= hard:
        raise error(f"{label}soft_time_limit_ms={soft!r}: must be below time_limit_ms={hard!r} (the hard limit "
                    "would stop the job first)")

#: How long a cancel request (``<job>:cancel``, docs/protocol.md §1.3) lives at most: deleted
#: when the job finishes, this TTL bounds it when a runtime that does not know it finishes the job.
CANCEL_TTL_MS = 3_600_000
