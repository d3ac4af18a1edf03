"""How ``echomq worker`` configures logging: the library only logs, the command decides the shape.

``text``: one line per record, ``<time> <LEVEL> <logger> [<pid>] <message>`` (a traceback, when
the record has one, follows on the lines after). ``json``: one JSON object per line, ``time``,
``level``, ``logger``, ``pid``, ``message`` and ``exc_info`` (the formatted traceback) when
the record carries one, for a log shipper to parse. The time is UTC with milliseconds either way,
and the pid tells a supervisor's worker processes apart in one stream.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

#: ``--log-level`` choices, lowest first.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

#: ``--log-format`` choices.
FORMATS = ("text", "json")


def _utc(created: float) -> str:
    when = dt.datetime.fromtimestamp(created, dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """``2024-05-01T10:00:00.123Z INFO echomq.worker.processing [4242] job 7 completed ...``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside the message are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": _utc(record.created), "level": record.levelname, "logger": record.name,
                 "pid": record.process, "message": record.getMessage()}
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc_info"] = record.exc_text
        return json.dumps(entry, default=str)


def configure_logging(level: str, log_format: str) -> None:
    """Send every record at ``level`` and above to stderr in ``log_format``, replacing whatever
    handlers the root logger had (the ``echomq`` entry point's default included)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
