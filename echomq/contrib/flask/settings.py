"""The ``ECHOMQ_*`` keys of a Flask app's config: Flask's spelling of the host layer's settings,
plus ``ECHOMQ_EVENTS``, read and checked once, at ``init_app``.

The rules and messages are the host layer's (``echomq.contrib.host.settings``), shared with
Django; this module picks the ``ECHOMQ_`` keys of a config, names a key as
``app.config['ECHOMQ_QUEUES']['mail']`` and adds ``ECHOMQ_EVENTS``. It does not import Flask:
it reads any mapping, so the table below is checked (and documented, docs/flask.md) in one
place. A bad value is refused by key, with what is wrong, as an
:class:`~echomq.errors.InvalidInputError` (a ``ValueError``: the problem's own subclass when
there is one); so is an ``ECHOMQ_`` key that is none of these (a typo would otherwise be
ignored without a word). A warning (a schedule that has ended, the old ``job`` key) is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...protocol.keys import DEFAULT_PREFIX
from ..host import settings as host
from ..host.settings import HostSettings, Problem

log = logging.getLogger(__name__)

SPELLING = host.Spelling("app.config", "ECHOMQ_", "docs/flask.md")
#: When this process's QueueEvents readers start (``ECHOMQ_EVENTS``).
EVENTS_MODES: tuple[str, ...] = ("auto", "always", "manual")

#: Every key, with what it holds. docs/flask.md shows the same table.
SETTINGS: dict[str, str] = {
    "ECHOMQ_URL": "redis://, rediss:// or unix:// URL (default: $REDIS_URL, else redis://127.0.0.1:6379/0)",
    "ECHOMQ_CONNECTION": "instead of ECHOMQ_URL: a redis.Redis, a function returning one (called once per process), "
                         "or its dotted path",
    "ECHOMQ_PREFIX": f"key prefix (default {DEFAULT_PREFIX!r}), as a BullMQ app's `prefix`",
    "ECHOMQ_QUEUES": "queue name -> default job options for that queue's jobs (or None; the decorator's options win)",
    "ECHOMQ_SCHEDULES": "scheduler id -> declared schedule, synced by `flask echomq schedules`",
    "ECHOMQ_EVENTS": "'auto' (default), 'always' or 'manual': when a process starts its QueueEvents readers",
    "ECHOMQ_LISTENERS": "WorkerListeners of `flask echomq worker`: 'MODULE:OBJECT' strings or objects",
    "ECHOMQ_WORKER_NAME": "the name `flask echomq worker` gives its workers (echomq workers, bull-board)",
    "ECHOMQ_TEST_CONNECTION": "with app.testing: 'fake' (default: a fresh fakeredis per test), None (the normal "
                              "connection), or a URL, a client or a function returning one",
    "ECHOMQ_DASHBOARD_READ_ONLY": "True: the dashboard of `init_dashboard` shows no button and refuses every action",
    "ECHOMQ_SCHEDULES_CHECK_INTERVAL": "seconds between the worker's checks for lost declared schedules (default 30; "
                                       "0 turns it off)",
}
KEYS = tuple(key.removeprefix("ECHOMQ_") for key in SETTINGS)


@dataclass(frozen=True)
class Settings(host.OnHost):
    """An app's EchoMQ configuration, checked: the shared keys (``host``) and ``ECHOMQ_EVENTS``."""

    host: HostSettings = field(default_factory=HostSettings)
    events: str = "auto"

    @property
    def connection(self) -> Any:
        return self.host.connection if self.host.connection is not None else self.host.url


def problems(config: Mapping[str, Any]) -> list[Problem]:
    """Everything wrong with the ``ECHOMQ_*`` keys of ``config`` (warnings included)."""
    raw = _raw(config)
    found = host.problems(raw, SPELLING, KEYS)
    mode = raw.get("EVENTS", "auto")
    if mode not in EVENTS_MODES:
        found.append(Problem("echomq.E008", f"{SPELLING('EVENTS')}: {mode!r} is not one of "
                                            f"{', '.join(map(repr, EVENTS_MODES))}", "Leave it out for 'auto'."))
    return found


def read_settings(config: Mapping[str, Any]) -> Settings:
    """The checked ``ECHOMQ_*`` settings of ``config`` (a Flask app's ``app.config``)."""
    found = problems(config)
    errors = host.refused(found)
    if errors:
        raise errors[0].error(host.refusal_message(found))
    for problem in found:
        log.warning("EchoMQ: %s (%s)", problem.message, problem.hint)
    raw = _raw(config)
    return Settings(host.parse(raw, SPELLING), str(raw.get("EVENTS", "auto")))


def _raw(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key.removeprefix("ECHOMQ_"): value for key, value in config.items()
            if isinstance(key, str) and key.startswith("ECHOMQ_")}
