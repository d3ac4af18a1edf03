"""The ``ECHOMQ_*`` keys of a Flask app's config, read and checked once, at ``init_app``.

This module does not import Flask: it reads any mapping, so the table below is checked (and
documented, docs/flask.md) in one place. A bad value is refused by key, with what is wrong, as
an :class:`~echomq.errors.InvalidInputError` (a ``ValueError``); so is an ``ECHOMQ_`` key that
is none of these (a typo would otherwise be ignored without a word).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import InvalidInputError, InvalidJobOptionsError
from ...protocol.keys import DEFAULT_PREFIX, validate_prefix, validate_queue_name
from ...protocol.options import encode_job_options
from ...registry import ConnectionSource
from ...transport.urls import check_url
from ..schedules_sync import parse_schedules

#: When this process's QueueEvents readers start (``ECHOMQ_EVENTS``).
EVENTS_MODES: tuple[str, ...] = ("auto", "always", "manual")

#: Every key, with what it holds. docs/flask.md shows the same table.
SETTINGS: dict[str, str] = {
    "ECHOMQ_URL": "redis://, rediss:// or unix:// URL (default: $REDIS_URL, else redis://127.0.0.1:6379/0)",
    "ECHOMQ_CONNECTION": "instead of ECHOMQ_URL: a redis.Redis, or a function returning one (called once per process)",
    "ECHOMQ_PREFIX": f"key prefix (default {DEFAULT_PREFIX!r}), as a BullMQ app's `prefix`",
    "ECHOMQ_QUEUES": "queue name -> default job options for that queue's jobs (the decorator's options win)",
    "ECHOMQ_SCHEDULES": "scheduler id -> declared schedule, synced by `flask echomq schedules`",
    "ECHOMQ_EVENTS": "'auto' (default), 'always' or 'manual': when a process starts its QueueEvents readers",
}


@dataclass(frozen=True)
class Settings:
    """An app's EchoMQ configuration, checked."""

    connection: ConnectionSource = None
    prefix: str = DEFAULT_PREFIX
    queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    events: str = "auto"


def read_settings(config: Mapping[str, Any]) -> Settings:
    """The checked ``ECHOMQ_*`` settings of ``config`` (a Flask app's ``app.config``)."""
    unknown = sorted(key for key in config if isinstance(key, str) and key.startswith("ECHOMQ_")
                     and key not in SETTINGS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], SETTINGS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InvalidInputError(f"app.config[{unknown[0]!r}]: not an EchoMQ setting{hint}; the settings are "
                                f"{', '.join(SETTINGS)}")
    return Settings(
        connection=_connection(config.get("ECHOMQ_URL"), config.get("ECHOMQ_CONNECTION")),
        prefix=_checked("ECHOMQ_PREFIX", config.get("ECHOMQ_PREFIX", DEFAULT_PREFIX), validate_prefix),
        queues=_queues(config.get("ECHOMQ_QUEUES") or {}),
        schedules=_checked("ECHOMQ_SCHEDULES", config.get("ECHOMQ_SCHEDULES") or {}, _schedules),
        events=_events(config.get("ECHOMQ_EVENTS", "auto")),
    )


def _checked(key: str, value: Any, check: Callable[[Any], Any]) -> Any:
    """``value`` once ``check`` accepts it; its refusal, named by the config key."""
    try:
        check(value)
    except InvalidInputError as exc:
        raise type(exc)(f"app.config[{key!r}]: {exc}") from None
    return value


def _connection(url: Any, connection: Any) -> ConnectionSource:
    if url is not None and connection is not None:
        raise InvalidInputError("app.config: give ECHOMQ_URL or ECHOMQ_CONNECTION, not both")
    if url is not None:
        if not isinstance(url, str):
            raise InvalidInputError(f"app.config['ECHOMQ_URL']: must be a redis:// URL, got {type(url).__name__}")
        return str(_checked("ECHOMQ_URL", url, check_url))
    if connection is not None and not isinstance(connection, (redis.Redis, RedisCluster)) and not callable(connection):
        raise InvalidInputError(f"app.config['ECHOMQ_CONNECTION']: must be a redis.Redis, a RedisCluster or a "
                                f"function returning one, got {type(connection).__name__}")
    result: ConnectionSource = connection
    return result


def _queues(queues: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(queues, Mapping):
        raise InvalidInputError(f"app.config['ECHOMQ_QUEUES']: must map queue names to job options, got "
                                f"{type(queues).__name__}")
    checked: dict[str, dict[str, Any]] = {}
    for name, options in queues.items():
        where = f"app.config['ECHOMQ_QUEUES'][{name!r}]"
        _checked("ECHOMQ_QUEUES", name, validate_queue_name)
        if not isinstance(options, Mapping):
            raise InvalidJobOptionsError(f"{where}: must be a mapping of job options (attempts, backoff ...), got "
                                         f"{type(options).__name__}")
        try:
            encode_job_options(options)
        except InvalidJobOptionsError as exc:
            raise InvalidJobOptionsError(f"{where}: {exc}") from None
        checked[name] = dict(options)
    return checked


def _schedules(schedules: Any) -> None:
    parse_schedules(schedules)


def _events(mode: Any) -> str:
    if mode not in EVENTS_MODES:
        raise InvalidInputError(f"app.config['ECHOMQ_EVENTS']: {mode!r} is not one of "
                                f"{', '.join(map(repr, EVENTS_MODES))}")
    return str(mode)
