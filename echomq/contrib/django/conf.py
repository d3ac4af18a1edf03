"""The ``ECHOMQ`` setting: its keys, their defaults, and the one validator behind ``manage.py
check`` and every use (docs/django.md, "Settings").

Nothing here reads Django's settings at import. :func:`current` reads ``settings.ECHOMQ`` on
first use and keeps the result until the setting changes (``override_settings`` in a test sends
``setting_changed``; the app config connects :func:`forget` to it). :func:`problems` validates a
raw dict without touching Redis: each problem carries the id and hint the system check reports,
and :func:`current` refuses a setting with any (``ImproperlyConfigured``), so a command run with
``--skip-checks`` still cannot start on a bad configuration. What registering a job and
connecting need is read on its own (``REGISTRATION_KEYS``, ``CONNECTION_KEYS``), so that a
``jobs.py`` imports whatever else is wrong, and ``manage.py check`` can report it.
"""

from __future__ import annotations

import difflib
import functools
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import redis
from django.conf import settings  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]
from redis.cluster import RedisCluster

from ...clock import system_clock
from ...errors import InvalidInputError
from ...events.cursor import validate_start_id
from ...events.settings import check_block_ms
from ...protocol.keys import DEFAULT_PREFIX, validate_prefix, validate_queue_name
from ...protocol.limits import DataLimits
from ...protocol.options import dumps_json, encode_job_options
from ...registry import LOCAL_REDIS_URL
from ...schedule.spec import KNOWN_OPTIONS as REPEAT_OPTIONS
from ...transport.connection import open_connection
from ...transport.urls import check_url
from ..schedules_sync import parse_schedules

#: The keys of ``ECHOMQ`` (docs/django.md has the table).
KEYS = ("URL", "CONNECTION", "PREFIX", "DEFAULT_QUEUE", "QUEUES", "SCHEDULES", "EVENTS")
#: The keys of ``ECHOMQ["EVENTS"]``.
EVENTS_KEYS = ("QUEUES", "START", "IN_COMMANDS", "IN_TESTS", "LAST_EVENT_ID", "BLOCK_MS")
#: When the readers of ``EVENTS["QUEUES"]`` start by themselves.
START_MODES = ("request", "manual")
#: The keys of one ``SCHEDULES`` entry besides its repeat options (``every``, ``pattern`` ...).
SCHEDULE_KEYS = ("queue", "name", "data", "opts")

DEFAULT_QUEUE = "default"


class Problem(NamedTuple):
    """One thing wrong with the setting: the system check's id, message and hint."""

    id: str
    message: str
    hint: str


@dataclass(frozen=True)
class EventsSettings:
    """``ECHOMQ["EVENTS"]``: which queues' events this process reads, and where it may start."""

    queues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # queue -> subscriber paths
    start: str = "request"
    in_commands: bool = False
    in_tests: bool = False
    last_event_id: str = "$"
    block_ms: int = 5000


@dataclass(frozen=True)
class EchoMQSettings:
    """``settings.ECHOMQ``, validated, with every default filled in."""

    url: str | None = None
    connection: str | None = None
    prefix: str = DEFAULT_PREFIX
    default_queue: str = DEFAULT_QUEUE
    queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    events: EventsSettings = field(default_factory=EventsSettings)

    def queue_options(self, queue: str) -> dict[str, Any]:
        """The default job options ``QUEUES`` gives ``queue`` (none for an undeclared queue)."""
        return dict(self.queues.get(queue, {}))

    def declared_schedules(self) -> dict[str, dict[str, Any]]:
        """``SCHEDULES`` in the form of ``echomq.contrib.schedules_sync`` (``name`` is its ``job``)."""
        declared: dict[str, dict[str, Any]] = {}
        for scheduler_id, entry in self.schedules.items():
            converted = {key: value for key, value in entry.items() if key != "name"}
            if "name" in entry:
                converted["job"] = entry["name"]
            declared[scheduler_id] = converted
        return declared

    def known_queues(self) -> list[str]:
        """Every queue the setting names (``QUEUES``, ``SCHEDULES``, ``EVENTS``), in that order."""
        names = [*self.queues, *(entry["queue"] for entry in self.schedules.values()), *self.events.queues]
        return list(dict.fromkeys(names))


def raw_setting() -> Any:
    """``settings.ECHOMQ`` as given (an empty dict when the project has none)."""
    return getattr(settings, "ECHOMQ", {})


# -- reading, once ------------------------------------------------------------------------------

#: What registering a job needs (``@job`` runs at the import of a ``jobs.py``, and Django's URL
#: check imports views, which import jobs: were registering to need every key, a bad schedule
#: would crash ``manage.py check`` instead of being reported by it).
REGISTRATION_KEYS = ("PREFIX", "DEFAULT_QUEUE", "QUEUES")
#: What connecting needs (checked when the registry first connects, not when it is built).
CONNECTION_KEYS = ("URL", "CONNECTION")


class _Cache:
    """The setting as last read, by the keys read (empty until read, and after it changed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read: dict[tuple[str, ...], EchoMQSettings] = {}


_cache = _Cache()


def current(keys: tuple[str, ...] = KEYS) -> EchoMQSettings:
    """The setting, read on first use: ImproperlyConfigured naming every problem of ``keys``
    (default: all of them, unknown keys included). Keys not asked for keep their defaults."""
    known = _cache.read.get(keys)
    if known is not None:
        return known
    with _cache.lock:
        if keys not in _cache.read:
            raw = raw_setting()
            found = problems(raw, keys)
            if found:
                raise ImproperlyConfigured("ECHOMQ setting: " + "; ".join(f"{p.message} ({p.id})" for p in found))
            _cache.read[keys] = _parse(raw, keys)
        return _cache.read[keys]


def forget(*, setting: str = "ECHOMQ", **_: Any) -> None:
    """Read the setting again on next use (a ``setting_changed`` receiver: tests override it)."""
    if setting == "ECHOMQ":
        with _cache.lock:
            _cache.read = {}


def connect() -> redis.Redis | RedisCluster:
    """A new client as the setting says (the registry's connection factory, called once per
    process): the URL's, the ``CONNECTION`` factory's, else ``REDIS_URL``'s or the local Redis'."""
    settings = current(CONNECTION_KEYS)
    if settings.connection is not None:
        client: redis.Redis = import_string(settings.connection)()
        return client
    return open_connection(settings.url or os.environ.get("REDIS_URL") or LOCAL_REDIS_URL)


def _parse(raw: Mapping[str, Any], keys: tuple[str, ...]) -> EchoMQSettings:
    parsed: dict[str, Any] = {}
    if "URL" in keys:
        parsed.update(url=raw.get("URL"), connection=raw.get("CONNECTION"))
    if "PREFIX" in keys:
        parsed["prefix"] = raw.get("PREFIX", DEFAULT_PREFIX)
    if "DEFAULT_QUEUE" in keys:
        parsed["default_queue"] = raw.get("DEFAULT_QUEUE", DEFAULT_QUEUE)
    if "QUEUES" in keys:
        parsed["queues"] = {name: dict(options or {}) for name, options in (raw.get("QUEUES") or {}).items()}
    if "SCHEDULES" in keys:
        parsed["schedules"] = {sid: dict(entry) for sid, entry in (raw.get("SCHEDULES") or {}).items()}
    if "EVENTS" in keys:
        events = raw.get("EVENTS") or {}
        parsed["events"] = EventsSettings(
            queues={name: tuple(paths or ()) for name, paths in (events.get("QUEUES") or {}).items()},
            start=events.get("START", "request"), in_commands=events.get("IN_COMMANDS", False),
            in_tests=events.get("IN_TESTS", False), last_event_id=events.get("LAST_EVENT_ID", "$"),
            block_ms=events.get("BLOCK_MS", 5000))
    return EchoMQSettings(**parsed)


# -- validating -----------------------------------------------------------------------------------

def problems(raw: Any, keys: tuple[str, ...] = KEYS) -> list[Problem]:
    """Everything wrong with a raw ``ECHOMQ`` value (only with ``keys``, when given fewer than
    all), checked as Queue.add, JobScheduler.upsert and QueueEvents check their input, without
    connecting to Redis."""
    if not isinstance(raw, Mapping):
        return [Problem("echomq.E001", f"ECHOMQ must be a dict, got {type(raw).__name__}",
                        "Set ECHOMQ = {'URL': 'redis://localhost:6379/0', ...} in settings.py.")]
    found = _unknown_keys("ECHOMQ", raw, KEYS, "echomq.E001") if keys == KEYS else []
    if "URL" in keys:
        found += _connection_problems(raw)
    if "PREFIX" in keys and "PREFIX" in raw:
        found += _caught("echomq.E004", "ECHOMQ['PREFIX']", lambda: validate_prefix(raw["PREFIX"]),
                         "A non-empty str without braces; leave it out for the default 'emq'.")
    if "DEFAULT_QUEUE" in keys and "DEFAULT_QUEUE" in raw:
        found += _queue_name_problems("ECHOMQ['DEFAULT_QUEUE']", [raw["DEFAULT_QUEUE"]])
    sections = (("QUEUES", _queues_problems), ("SCHEDULES", _schedules_problems), ("EVENTS", _events_problems))
    for key, check in sections:
        if key in keys:
            found += check(raw.get(key, {}))
    return found


def _unknown_keys(where: str, raw: Mapping[Any, Any], known: tuple[str, ...], problem_id: str) -> list[Problem]:
    found = []
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            found.append(Problem(problem_id, f"{where}: unknown key {key!r}",
                                 f"{hint}The keys are {', '.join(known)} (docs/django.md)."))
    return found


def _caught(problem_id: str, where: str, check: Callable[[], object], hint: str) -> list[Problem]:
    try:
        check()
    except InvalidInputError as exc:
        return [Problem(problem_id, f"{where}: {exc}", hint)]
    return []


def _connection_problems(raw: Mapping[str, Any]) -> list[Problem]:
    if "URL" in raw and "CONNECTION" in raw:
        return [Problem("echomq.E002", "ECHOMQ: give URL or CONNECTION, not both",
                        "URL is a redis:// URL; CONNECTION the dotted path of a function returning a client.")]
    url = raw.get("URL")
    if "URL" in raw and not isinstance(url, str):
        return [Problem("echomq.E002", f"ECHOMQ['URL'] must be a str, got {type(url).__name__}",
                        "For example 'redis://localhost:6379/0'.")]
    if url is not None:
        return _caught("echomq.E002", "ECHOMQ['URL']", lambda: check_url(url),
                       "A redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL, "
                       "e.g. 'redis://localhost:6379/0' (docs/deployment.md).")
    if "CONNECTION" not in raw:
        return []
    path = raw["CONNECTION"]
    hint = ("The dotted path of a function taking no argument and returning a redis.Redis, "
            "e.g. 'myproject.redis.client'.")
    if not isinstance(path, str):
        return [Problem("echomq.E003", f"ECHOMQ['CONNECTION'] must be a dotted path (str), got {type(path).__name__}",
                        hint)]
    try:
        factory = import_string(path)
    except ImportError as exc:
        return [Problem("echomq.E003", f"ECHOMQ['CONNECTION'] {path!r} does not import: {exc}", hint)]
    if not callable(factory):
        return [Problem("echomq.E003", f"ECHOMQ['CONNECTION'] {path!r} is not callable", hint)]
    return []


def _queue_name_problems(where: str, names: list[Any]) -> list[Problem]:
    found: list[Problem] = []
    for name in names:
        found += _caught("echomq.E005", where, functools.partial(validate_queue_name, name),
                         "A queue name is a non-empty str without ':', '{' or '}'.")
    return found


def _queues_problems(queues: Any) -> list[Problem]:
    if not isinstance(queues, Mapping):
        return [Problem("echomq.E005", f"ECHOMQ['QUEUES'] must be a dict, got {type(queues).__name__}",
                        "{'orders': {'attempts': 3}, 'reports': {}}: queue name -> default job options.")]
    found: list[Problem] = []
    for name, options in queues.items():
        where = f"ECHOMQ['QUEUES'][{name!r}]"
        found += _queue_name_problems(where, [name])
        if options is not None and not isinstance(options, Mapping):
            found.append(Problem("echomq.E006", f"{where} must be a dict of job options, got {type(options).__name__}",
                                 "For example {'attempts': 3, 'backoff': {'type': 'exponential', 'delay': 1000}}."))
            continue
        found += _caught("echomq.E006", where, functools.partial(encode_job_options, options or {}),
                         "The options of Queue.add, snake_case (docs/queue.md).")
    return found


def _schedules_problems(schedules: Any) -> list[Problem]:
    hint = ("{'nightly-report': {'queue': 'reports', 'pattern': '0 2 * * *', 'tz': 'Europe/Berlin', "
            "'name': 'build_report'}} (docs/django.md, Schedules).")
    if not isinstance(schedules, Mapping):
        return [Problem("echomq.E007", f"ECHOMQ['SCHEDULES'] must be a dict, got {type(schedules).__name__}", hint)]
    found: list[Problem] = []
    now = system_clock()
    limits = DataLimits()
    for scheduler_id, entry in schedules.items():
        where = f"ECHOMQ['SCHEDULES'][{scheduler_id!r}]"
        if isinstance(entry, Mapping):
            unknown = _unknown_keys(where, entry, (*SCHEDULE_KEYS, *REPEAT_OPTIONS), "echomq.E007")
            if unknown:
                found += unknown
                continue
        try:
            [schedule] = parse_schedules(EchoMQSettings(schedules={scheduler_id: entry}).declared_schedules()
                                         if isinstance(entry, Mapping) else {scheduler_id: entry})
            schedule.spec.refuse_ended(now)
            too_much = limits.problem(dumps_json({} if schedule.data is None else schedule.data, "data"))
            if too_much is not None:
                raise InvalidInputError(f"schedule {scheduler_id!r}: the job data is {too_much}")
        except InvalidInputError as exc:
            found.append(Problem("echomq.E007", f"{where}: {exc}", hint))
    return found


def _events_problems(events: Any) -> list[Problem]:
    if not isinstance(events, Mapping):
        return [Problem("echomq.E008", f"ECHOMQ['EVENTS'] must be a dict, got {type(events).__name__}",
                        "{'QUEUES': {'orders': ['myapp.events.on_order_event']}} (docs/django.md, Events).")]
    found = _unknown_keys("ECHOMQ['EVENTS']", events, EVENTS_KEYS, "echomq.E008")
    if events.get("START", "request") not in START_MODES:
        found.append(Problem("echomq.E008", f"ECHOMQ['EVENTS']['START'] {events['START']!r} is not a start mode",
                             f"One of {', '.join(map(repr, START_MODES))}."))
    for key in ("IN_COMMANDS", "IN_TESTS"):
        if not isinstance(events.get(key, False), bool):
            found.append(Problem("echomq.E008", f"ECHOMQ['EVENTS'][{key!r}] must be True or False",
                                 "Leave it out for False."))
    if "LAST_EVENT_ID" in events:
        found += _caught("echomq.E008", "ECHOMQ['EVENTS']['LAST_EVENT_ID']",
                         lambda: validate_start_id(events["LAST_EVENT_ID"]), "'$' (new events only) or '0'.")
    if "BLOCK_MS" in events:
        found += _caught("echomq.E008", "ECHOMQ['EVENTS']['BLOCK_MS']", lambda: check_block_ms(events["BLOCK_MS"]),
                         "Milliseconds, e.g. 5000.")
    queues = events.get("QUEUES", {})
    if not isinstance(queues, Mapping):
        return [*found, Problem("echomq.E008", "ECHOMQ['EVENTS']['QUEUES'] must be a dict",
                                "Queue name -> list of subscribers' dotted paths.")]
    for name, paths in queues.items():
        where = f"ECHOMQ['EVENTS']['QUEUES'][{name!r}]"
        found += _queue_name_problems(where, [name])
        found += _subscriber_problems(where, paths)
    return found


def _subscriber_problems(where: str, paths: Any) -> list[Problem]:
    hint = "Dotted paths of functions fn(event_type, event_data), or of objects with a put() (a queue.Queue)."
    if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
        return [Problem("echomq.E009", f"{where} must be a list of dotted paths, got {type(paths).__name__}", hint)]
    found = []
    for path in paths:
        try:
            subscriber = import_string(path)
        except (ImportError, TypeError, AttributeError) as exc:
            found.append(Problem("echomq.E009", f"{where}: subscriber {path!r} does not import: {exc}", hint))
            continue
        if not callable(subscriber) and not callable(getattr(subscriber, "put", None)):
            found.append(Problem("echomq.E009", f"{where}: subscriber {path!r} is neither callable nor has put()",
                                 hint))
    return found

