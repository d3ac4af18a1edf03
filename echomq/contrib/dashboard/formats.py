"""How the dashboard's pages write values: times, durations, JSON, cut cells, the Redis it reads.

Plain text out (the templates escape it); nothing here reads Redis.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...errors import EchoMQError, InvalidInputError
from ...schedule import calculate_next_millis
from ...transport.connection import Connection
from ...transport.urls import redact_url

#: Where a text cell of a list is cut (the job page shows everything).
CELL_WIDTH = 120
#: How many next runs the schedulers page shows.
NEXT_RUNS = 5


def describe(connection: Connection) -> str:
    """Where the dashboard reads, without a password (a URL's is redacted; a client's never read)."""
    if isinstance(connection, str):
        return redact_url(connection)
    kwargs = getattr(getattr(connection, "connection_pool", None), "connection_kwargs", {})
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    return type(connection).__name__


def page_number(raw: str | None) -> int:
    if raw is None or raw == "":
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= 10**9:
        raise InvalidInputError(f"page {raw!r} must be a number from 1")
    return int(raw)


def next_runs(record: Any) -> list[int]:
    """The scheduler's next runs from its pending one (none past its end or its limit)."""
    if record.next_millis is None:
        return []
    spec: dict[str, Any] = {"pattern": record.pattern, "tz": record.tz} if record.pattern else {"every": record.every}
    if record.end_date is not None:
        spec["end_date"] = record.end_date
    left = NEXT_RUNS if record.limit is None else max(0, min(NEXT_RUNS, record.limit - (record.iteration_count or 0)))
    runs = [record.next_millis][:left]
    try:
        while 0 < len(runs) < left:
            following = calculate_next_millis({k: v for k, v in spec.items() if v is not None}, runs[-1])
            if following is None:
                break
            runs.append(following)
    except EchoMQError:  # a pattern only another runtime reads: its stored next run is still shown
        pass
    return runs


def when(ms: Any) -> str:
    """Epoch ms as UTC (``2024-05-01 10:00:00.123Z``); ``-`` for none or no calendar date."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return "-"
    try:
        moment = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return "-"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def duration(ms: Any) -> str:
    if not isinstance(ms, int) or ms < 0:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def pretty(value: Any) -> str:
    """A value as indented JSON text (escaped later by the template); too deep: a note."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        return "<too deeply nested to show>"


def cut(value: Any, width: int = CELL_WIDTH) -> str:
    shown = value if isinstance(value, str) else pretty(value).replace("\n", " ")
    return shown if len(shown) <= width else shown[: width - 1] + "…"
