"""The ``ECHOMQ`` setting: Django's spelling of the host layer's settings, plus ``DEFAULT_QUEUE``
and ``EVENTS`` (docs/django.md, "Settings").

The keys both integrations read, their defaults and their checks are the host layer's
(``echomq.contrib.host.settings``); this module reads ``settings.ECHOMQ``, names a key as
``ECHOMQ['QUEUES']['mail']``, and adds the two keys only Django has. Nothing here reads Django's
settings at import. :func:`current` reads ``settings.ECHOMQ`` on first use and keeps the result
until the setting changes (``override_settings`` in a test sends ``setting_changed``; the app
config connects :func:`forget` to it). :func:`problems` validates a raw dict without touching
Redis: each problem carries the id and hint the system check reports, and :func:`current`
refuses a setting with any error (``ImproperlyConfigured``), so a command run with
``--skip-checks`` still cannot start on a bad configuration; warnings (an ended schedule, the
old ``job`` key) do not stop it. What registering a job and connecting need is read on its own
(``REGISTRATION_KEYS``, ``CONNECTION_KEYS``), so that a ``jobs.py`` imports whatever else is
wrong, and ``manage.py check`` can report it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from ...events.cursor import validate_start_id
from ...events.settings import check_block_ms
from ..host import settings as host
from ..host.settings import HostSettings, Problem, caught, queue_name_problems, unknown_keys

SPELLING = host.Spelling("ECHOMQ", "", "docs/django.md")
#: The keys of ``ECHOMQ`` (docs/django.md has the table).
KEYS = (*host.SHARED_KEYS, "DEFAULT_QUEUE", "EVENTS")
#: The keys of ``ECHOMQ["EVENTS"]``.
EVENTS_KEYS = ("QUEUES", "START", "IN_COMMANDS", "IN_TESTS", "LAST_EVENT_ID", "BLOCK_MS")
#: When the readers of ``EVENTS["QUEUES"]`` start by themselves.
START_MODES = ("request", "manual")

DEFAULT_QUEUE = "default"

#: What registering a job needs (``@job`` runs at the import of a ``jobs.py``, and Django's URL
#: check imports views, which import jobs: were registering to need every key, a bad schedule
#: would crash ``manage.py check`` instead of being reported by it).
REGISTRATION_KEYS = ("PREFIX", "DEFAULT_QUEUE", "QUEUES")
#: What connecting needs (checked when the registry first connects, not when it is built).
CONNECTION_KEYS = ("URL", "CONNECTION", "TEST_CONNECTION")


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
class EchoMQSettings(host.OnHost):
    """``settings.ECHOMQ``, validated, with every default filled in: the shared keys (``host``)
    and Django's own."""

    host: HostSettings = field(default_factory=HostSettings)
    default_queue: str = DEFAULT_QUEUE
    events: EventsSettings = field(default_factory=EventsSettings)

    def known_queues(self) -> list[str]:
        """Every queue the setting names (``QUEUES``, ``SCHEDULES``, ``EVENTS``), in that order."""
        return list(dict.fromkeys([*self.host.known_queues(), *self.events.queues]))


def raw_setting() -> Any:
    """``settings.ECHOMQ`` as given (an empty dict when the project has none)."""
    return getattr(settings, "ECHOMQ", {})


# -- reading, once ------------------------------------------------------------------------------

class _Cache:
    """The setting as last read, by the keys read (empty until read, and after it changed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read: dict[tuple[str, ...], EchoMQSettings] = {}


_cache = _Cache()


def current(keys: tuple[str, ...] = KEYS) -> EchoMQSettings:
    """The setting, read on first use: ImproperlyConfigured naming every error of ``keys``
    (default: all of them, unknown keys included). Keys not asked for keep their defaults."""
    known = _cache.read.get(keys)
    if known is not None:
        return known
    with _cache.lock:
        if keys not in _cache.read:
            raw = raw_setting()
            found = host.refused(problems(raw, keys))
            if found:
                raise ImproperlyConfigured("ECHOMQ setting: " + "; ".join(f"{p.message} ({p.id})" for p in found))
            _cache.read[keys] = _parse(raw, keys)
        return _cache.read[keys]


def forget(*, setting: str = "ECHOMQ", **_: Any) -> None:
    """Read the setting again on next use (a ``setting_changed`` receiver: tests override it)."""
    if setting == "ECHOMQ":
        with _cache.lock:
            _cache.read = {}


def _parse(raw: Mapping[str, Any], keys: tuple[str, ...]) -> EchoMQSettings:
    shared = tuple(key for key in keys if key in host.SHARED_KEYS)
    parsed: dict[str, Any] = {"host": host.parse(raw, SPELLING, only=shared)}
    if "DEFAULT_QUEUE" in keys:
        parsed["default_queue"] = raw.get("DEFAULT_QUEUE", DEFAULT_QUEUE)
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
    connecting to Redis: the host layer's rules, then Django's own keys."""
    shared = tuple(key for key in keys if key in host.SHARED_KEYS)
    found = host.problems(raw, SPELLING, KEYS, only=None if keys == KEYS else shared)
    if not isinstance(raw, Mapping):
        return found
    if "DEFAULT_QUEUE" in keys and "DEFAULT_QUEUE" in raw:
        found += queue_name_problems(SPELLING("DEFAULT_QUEUE"), raw["DEFAULT_QUEUE"])
    if "EVENTS" in keys and raw.get("EVENTS") is not None:
        found += _events_problems(raw["EVENTS"])
    return found


def _events_problems(events: Any) -> list[Problem]:
    if not isinstance(events, Mapping):
        return [Problem("echomq.E008", f"ECHOMQ['EVENTS'] must be a dict, got {type(events).__name__}",
                        "{'QUEUES': {'orders': ['myapp.events.on_order_event']}} (docs/django.md, Events).")]
    found = unknown_keys(events, host.Spelling("ECHOMQ['EVENTS']", "", "docs/django.md"), EVENTS_KEYS, "echomq.E008")
    if events.get("START", "request") not in START_MODES:
        found.append(Problem("echomq.E008", f"ECHOMQ['EVENTS']['START'] {events['START']!r} is not a start mode",
                             f"One of {', '.join(map(repr, START_MODES))}."))
    for key in ("IN_COMMANDS", "IN_TESTS"):
        if not isinstance(events.get(key, False), bool):
            found.append(Problem("echomq.E008", f"ECHOMQ['EVENTS'][{key!r}] must be True or False",
                                 "Leave it out for False."))
    if "LAST_EVENT_ID" in events:
        found += caught("echomq.E008", "ECHOMQ['EVENTS']['LAST_EVENT_ID']",
                        lambda: validate_start_id(events["LAST_EVENT_ID"]), "'$' (new events only) or '0'.")
    if "BLOCK_MS" in events:
        found += caught("echomq.E008", "ECHOMQ['EVENTS']['BLOCK_MS']", lambda: check_block_ms(events["BLOCK_MS"]),
                        "Milliseconds, e.g. 5000.")
    queues = events.get("QUEUES", {})
    if not isinstance(queues, Mapping):
        return [*found, Problem("echomq.E008", "ECHOMQ['EVENTS']['QUEUES'] must be a dict",
                                "Queue name -> list of subscribers' dotted paths.")]
    for name, paths in queues.items():
        where = f"ECHOMQ['EVENTS']['QUEUES'][{name!r}]"
        found += queue_name_problems(where, name)
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
