"""How the operator commands print: an aligned table (or a list of fields), or JSON with ``--json``.

One home for the rendering, so every command escapes what it prints the same way. Everything a
job carries (its id, name, data, failure) was written by whichever runtime touched it last and
is untrusted: a table cell goes through ``printable`` (a control character shows as a JSON
escape instead of moving the cursor), and JSON output escapes everything but printable ASCII.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from .options import printable

UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

#: Where a cell's text is cut in a table (the full value is in ``--json`` and ``job show``).
CELL_WIDTH = 60


def iso_utc(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2024-05-01T10:00:00.000Z``);
    None for no time, or for a number no calendar date has (another runtime may store anything)."""
    if ms is None:
        return None
    try:
        when = _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text, ASCII only; a structure too deep for the encoder becomes a note."""
    try:
        return json.dumps(value, indent=indent, default=str)
    except (ValueError, RecursionError):
        return json.dumps("<too deeply nested to print>")


def cell(value: Any, width: int | None = CELL_WIDTH) -> str:
    """One table cell: ``-`` for nothing, text escaped, cut to ``width`` (None: never) with an ellipsis."""
    if value is None or value == "":
        return "-"
    shown = printable(value if isinstance(value, str) else json_text(value))
    return shown if width is None or len(shown) <= width else shown[: width - 3] + "..."


def write_table(columns: Sequence[str], rows: Iterable[Sequence[str]], out: TextIO | None = None) -> None:
    """Rows under a header, each column as wide as its widest cell (cells already made by ``cell``)."""
    out = out or sys.stdout
    table = [tuple(columns), *(tuple(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    out.writelines("  ".join(text.ljust(widths[i]) for i, text in enumerate(row)).rstrip() + "\n"
                   for row in table)


def write_fields(fields: Iterable[tuple[str, str]], out: TextIO | None = None) -> None:
    """``label  value`` lines with the values aligned: one record, read top to bottom."""
    out = out or sys.stdout
    pairs = list(fields)
    width = max((len(label) for label, _ in pairs), default=0)
    out.writelines(f"{label.ljust(width)}  {value}".rstrip() + "\n" for label, value in pairs)


def write_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json_text(value, indent=2) + "\n")
