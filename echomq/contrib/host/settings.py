"""The settings both framework integrations read, their defaults, and their one set of checks.

An adapter hands :func:`problems` and :func:`parse` its configuration under the canonical key
names (Django: ``settings.ECHOMQ`` as it is; Flask: the ``ECHOMQ_*`` keys of ``app.config``
without the ``ECHOMQ_``) and a :class:`Spelling`, which names a key the way its users write
it (``ECHOMQ['QUEUES']['mail']``, ``app.config['ECHOMQ_QUEUES']['mail']``). The rules and the
messages are the same in both: only the spelling differs.

Each :class:`Problem` carries the id Django's system check reports (docs/django.md, "Checks"),
a hint, the exception class Flask raises for it, and whether it is only a warning: a schedule
whose end date has passed, or that spells the job's name the old way, does not keep an app or a
worker from starting (a calendar date must not break a deploy that worked the day before); the
schedule command refuses the ended one when asked to create it.

Nothing here connects to Redis; a ``CONNECTION`` or ``LISTENERS`` dotted path is imported.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from ...clock import system_clock
from ...errors import InvalidInputError, InvalidJobOptionsError, InvalidScheduleError
from ...processes.loading import StartupError, load_object
from ...protocol.keys import DEFAULT_PREFIX, validate_prefix, validate_queue_name
from ...protocol.limits import DataLimits
from ...protocol.options import dumps_json, encode_job_options
from ...transport.urls import check_url
from ...worker.listeners import WorkerListener
from ...worker.options import WorkerOptions
from ..schedules_sync import DeclaredSchedule, parse_schedules

#: The keys both integrations read (docs/django.md and docs/flask.md have the tables).
SHARED_KEYS: tuple[str, ...] = ("URL", "CONNECTION", "PREFIX", "QUEUES", "SCHEDULES", "LISTENERS", "WORKER_NAME",
                                "TEST_CONNECTION", "SCHEDULES_CHECK_INTERVAL")
#: ``TEST_CONNECTION``'s default: an in-memory fakeredis, a fresh one for every test.
FAKE = "fake"
#: ``SCHEDULES_CHECK_INTERVAL``'s default, in seconds (``echomq.contrib.host.keeper``).
DEFAULT_CHECK_INTERVAL_S = 30.0


@dataclass(frozen=True)
class Spelling:
    """How a framework's users write a key: ``root[prefix + KEY][path]...``."""

    root: str
    key_prefix: str
    docs: str

    def name(self, key: str) -> str:
        """The key as the user types it: ``QUEUES`` (Django), ``ECHOMQ_QUEUES`` (Flask)."""
        return self.key_prefix + key

    def __call__(self, key: str, *path: Any) -> str:
        return f"{self.root}[{self.name(key)!r}]" + "".join(f"[{part!r}]" for part in path)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a setting: the check id, the message, a hint, the exception an
    adapter that raises uses, and whether it is only a warning."""

    id: str
    message: str
    hint: str
    error: type[InvalidInputError] = InvalidInputError
    warning: bool = False

    def exception(self) -> InvalidInputError:
        return self.error(self.message)


@dataclass(frozen=True)
class HostSettings:
    """The shared keys, checked, with every default filled in."""

    url: str | None = None
    connection: Any = None  # a client, or a zero-argument function returning one
    prefix: str = DEFAULT_PREFIX
    queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schedules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # as declared
    listeners: tuple[Any, ...] = ()  # WorkerListener instances or subclasses
    worker_name: str | None = None
    test_connection: Any = FAKE  # FAKE, a URL, a client, a function returning one, or None
    schedules_check_interval: float | None = DEFAULT_CHECK_INTERVAL_S

    def queue_options(self, queue: str) -> dict[str, Any]:
        """The default job options ``QUEUES`` gives ``queue`` (none for an undeclared queue)."""
        return dict(self.queues.get(queue) or {})

    def declared(self) -> list[DeclaredSchedule]:
        return parse_schedules(self.schedules, warn=False)

    def known_queues(self) -> list[str]:
        """Every queue the shared keys name (``QUEUES``, then the schedules')."""
        return list(dict.fromkeys([*self.queues, *(schedule.queue for schedule in self.declared())]))


class OnHost:
    """The shared keys of an integration's settings object, read from its ``host`` field."""

    host: HostSettings

    @property
    def url(self) -> str | None:
        return self.host.url

    @property
    def prefix(self) -> str:
        return self.host.prefix

    @property
    def queues(self) -> Mapping[str, Mapping[str, Any]]:
        return self.host.queues

    @property
    def schedules(self) -> Mapping[str, Mapping[str, Any]]:
        return self.host.schedules

    def queue_options(self, queue: str) -> dict[str, Any]:
        return self.host.queue_options(queue)


# -- checking -------------------------------------------------------------------------------------

def problems(raw: Any, spell: Spelling, known: Sequence[str], *, only: Sequence[str] | None = None) -> list[Problem]:
    """Everything wrong with ``raw`` (only with the keys of ``only`` when given; then unknown
    keys are not reported), without connecting to Redis."""
    if not isinstance(raw, Mapping):
        return [Problem("echomq.E001", f"{spell.root} must be a dict, got {type(raw).__name__}",
                        f"The keys are {', '.join(map(spell.name, known))} ({spell.docs}).")]
    keys = tuple(SHARED_KEYS if only is None else only)
    found = unknown_keys(raw, spell, known) if only is None else []
    for key, check in _CHECKS.items():
        if key in keys and raw.get(key) is not None:
            found += check(raw[key], spell)
    if ("URL" in keys or "CONNECTION" in keys) and raw.get("URL") is not None and raw.get("CONNECTION") is not None:
        found.insert(0, Problem("echomq.E002", f"{spell('URL')} and {spell('CONNECTION')}: give one, not both",
                                "URL is a redis:// URL; CONNECTION a client, a function returning one, or the "
                                "dotted path of such a function."))
    return found


def unknown_keys(raw: Mapping[Any, Any], spell: Spelling, known: Sequence[str],
                 problem_id: str = "echomq.E001") -> list[Problem]:
    """A problem for each key of ``raw`` that is none of ``known`` (a typo would otherwise be
    ignored without a word), with the closest known key."""
    found = []
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            guess = f" (did you mean {spell.name(close[0])!r}?)" if close else ""
            found.append(Problem(problem_id, f"{spell.root}: unknown key {spell.name(str(key))!r}{guess}",
                                 f"The keys are {', '.join(map(spell.name, known))} ({spell.docs})."))
    return found


def caught(problem_id: str, where: str, check: Callable[[], object], hint: str, *,
           error: type[InvalidInputError] | None = None) -> list[Problem]:
    """``check()``'s refusal as a Problem about ``where`` (none when it passes)."""
    try:
        check()
    except InvalidInputError as exc:
        return [Problem(problem_id, f"{where}: {exc}", hint, error or type(exc))]
    return []


def queue_name_problems(where: str, name: Any) -> list[Problem]:
    return caught("echomq.E005", where, functools.partial(validate_queue_name, name),
                  "A queue name is a non-empty str without ':', '{' or '}'.")


def _url_problems(url: Any, spell: Spelling) -> list[Problem]:
    if not isinstance(url, str):
        return [Problem("echomq.E002", f"{spell('URL')} must be a redis:// URL (a str), got {type(url).__name__}",
                        "For example 'redis://localhost:6379/0'.")]
    return caught("echomq.E002", spell("URL"), lambda: check_url(url),
                  "A redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL, e.g. "
                  "'redis://localhost:6379/0' (docs/deployment.md).")


def resolve_connection(value: Any, where: str) -> Any:
    """A ``CONNECTION`` value as the registry takes it: a client as is, a function as is, a
    dotted path (``pkg.mod.func`` or ``pkg.mod:func``) imported. InvalidInputError otherwise."""
    if isinstance(value, str):
        if "://" in value:
            raise InvalidInputError(f"{where} {value!r} is a URL: put it in URL, or give a function returning "
                                    "a client")
        spec = value if ":" in value else ".".join(value.split(".")[:-1]) + ":" + value.split(".")[-1]
        try:
            value = load_object(spec, where)
        except StartupError as exc:
            raise InvalidInputError(f"{exc} (it does not import)") from None
        except ImportError as exc:
            raise InvalidInputError(f"{where} {spec!r} does not import: {exc}") from None
        if not callable(value) and not isinstance(value, (redis.Redis, RedisCluster)):
            raise InvalidInputError(f"{where} {spec!r} is not callable")
        return value
    if isinstance(value, (redis.Redis, RedisCluster)) or callable(value):
        return value
    raise InvalidInputError(f"{where} must be a redis.Redis, a RedisCluster, a function returning one or its "
                            f"dotted path, got {type(value).__name__}")


def _connection_problems(value: Any, spell: Spelling) -> list[Problem]:
    return caught("echomq.E003", spell("CONNECTION"), lambda: resolve_connection(value, spell("CONNECTION")),
                  "A function taking no argument and returning a redis.Redis (or its dotted path, e.g. "
                  "'myproject.redis.client'), or a client.")


def _prefix_problems(prefix: Any, spell: Spelling) -> list[Problem]:
    return caught("echomq.E004", spell("PREFIX"), lambda: validate_prefix(prefix),
                  "A non-empty str without braces; leave it out for the default 'emq'.")


def _queues_problems(queues: Any, spell: Spelling) -> list[Problem]:
    hint = "{'orders': {'attempts': 3}, 'reports': None}: queue name -> default job options (or None)."
    if not isinstance(queues, Mapping):
        return [Problem("echomq.E005", f"{spell('QUEUES')} must map queue names to job options, got "
                                       f"{type(queues).__name__}", hint)]
    found: list[Problem] = []
    for name, options in queues.items():
        found += queue_name_problems(spell("QUEUES", name), name)
        if options is not None and not isinstance(options, Mapping):
            found.append(Problem("echomq.E006", f"{spell('QUEUES', name)}: must be a mapping of job options "
                                                f"(attempts, backoff ...) or None, got {type(options).__name__}",
                                 hint, InvalidJobOptionsError))
            continue
        found += caught("echomq.E006", spell("QUEUES", name), functools.partial(encode_job_options, options or {}),
                        "The options of Queue.add, snake_case (docs/queue.md).")
    return found


def schedules_problems(schedules: Any, spell: Spelling, *, now_ms: int | None = None) -> list[Problem]:
    """The entries' problems (refusals as for a sync) and warnings: an entry that has ended, an
    entry spelling the job's name ``job``."""
    hint = (f"{{'nightly-report': {{'queue': 'reports', 'pattern': '0 2 * * *', 'tz': 'Europe/Berlin', "
            f"'name': 'build_report'}}}} ({spell.docs}, Schedules).")
    if not isinstance(schedules, Mapping):
        return [Problem("echomq.E007", f"{spell('SCHEDULES')} must map scheduler ids to entries, got "
                                       f"{type(schedules).__name__}", hint, InvalidScheduleError)]
    found: list[Problem] = []
    now = system_clock() if now_ms is None else now_ms
    limits = DataLimits()
    for scheduler_id, entry in schedules.items():
        try:
            [schedule] = parse_schedules({scheduler_id: entry}, warn=False)
            too_much = limits.problem(dumps_json({} if schedule.data is None else schedule.data, "data"))
            if too_much is not None:
                raise InvalidScheduleError(f"schedule {scheduler_id!r}: the job data is {too_much}")
        except InvalidInputError as exc:
            found.append(Problem("echomq.E007", f"{spell('SCHEDULES')}: {exc}", hint, type(exc)))
            continue
        ended = schedule.ended(now)
        if ended is not None:
            found.append(Problem("echomq.W001", f"{spell('SCHEDULES')}: schedule {scheduler_id!r}: {ended}",
                                 "It will never run again: remove it from the declaration (the schedule command "
                                 "refuses to create it).", InvalidScheduleError, warning=True))
        found.extend(Problem("echomq.W002", f"{spell('SCHEDULES')}: schedule {scheduler_id!r}: {note}",
                             "Rename the key 'job' to 'name'; both work until the next major release.",
                             InvalidScheduleError, warning=True) for note in schedule.deprecated)
    return found


def resolve_listener(value: Any, where: str) -> Any:
    """A ``LISTENERS`` item: a WorkerListener instance or subclass, or its ``MODULE:OBJECT``."""
    listener = value
    if isinstance(value, str):
        try:
            listener = load_object(value, where)
        except StartupError as exc:
            raise InvalidInputError(str(exc)) from None
    if isinstance(listener, WorkerListener) or (isinstance(listener, type) and issubclass(listener, WorkerListener)):
        return listener
    raise InvalidInputError(f"{where}: {value!r:.100} is not a WorkerListener (an instance or a subclass of "
                            "echomq.WorkerListener, or its 'MODULE:OBJECT')")


def _listeners_problems(listeners: Any, spell: Spelling) -> list[Problem]:
    hint = "A list of 'MODULE:OBJECT' strings or objects, each a WorkerListener instance or subclass (docs/worker.md)."
    if isinstance(listeners, (str, bytes)) or not isinstance(listeners, Sequence):
        return [Problem("echomq.E010", f"{spell('LISTENERS')} must be a list, got {type(listeners).__name__}", hint)]
    found: list[Problem] = []
    for index, item in enumerate(listeners):
        found += caught("echomq.E010", spell("LISTENERS", index), functools.partial(
            resolve_listener, item, spell("LISTENERS", index)), hint)
    return found


def _worker_name_problems(name: Any, spell: Spelling) -> list[Problem]:
    hint = "A name for `echomq workers`, BullMQ's getWorkers and bull-board: printable ASCII without spaces."
    if not isinstance(name, str) or not name:
        return [Problem("echomq.E011", f"{spell('WORKER_NAME')} must be a non-empty str, got {name!r:.60}", hint)]
    return caught("echomq.E011", spell("WORKER_NAME"), lambda: WorkerOptions(name=name), hint)


def _test_connection_problems(value: Any, spell: Spelling) -> list[Problem]:
    if value == FAKE:
        return []
    if isinstance(value, str) and "://" in value:
        return caught("echomq.E012", spell("TEST_CONNECTION"), lambda: check_url(value), "'fake' or a redis:// URL.")
    return caught("echomq.E012", spell("TEST_CONNECTION"), lambda: resolve_connection(value, spell("TEST_CONNECTION")),
                  "'fake' (the default), None (the normal connection), a redis:// URL, a client, or a function "
                  "returning one (or its dotted path).")


def _interval_problems(value: Any, spell: Spelling) -> list[Problem]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        return [Problem("echomq.E013", f"{spell('SCHEDULES_CHECK_INTERVAL')} must be a number of seconds >= 0, got "
                                       f"{value!r:.60}", "30 (the default); 0 or None turns the check off.")]
    return []


_CHECKS: dict[str, Callable[[Any, Spelling], list[Problem]]] = {
    "URL": _url_problems, "CONNECTION": _connection_problems, "PREFIX": _prefix_problems,
    "QUEUES": _queues_problems, "SCHEDULES": schedules_problems, "LISTENERS": _listeners_problems,
    "WORKER_NAME": _worker_name_problems, "TEST_CONNECTION": _test_connection_problems,
    "SCHEDULES_CHECK_INTERVAL": _interval_problems,
}


def refused(found: Sequence[Problem]) -> list[Problem]:
    """The problems that are errors (not warnings)."""
    return [problem for problem in found if not problem.warning]


def parse(raw: Mapping[str, Any], spell: Spelling, *, only: Sequence[str] | None = None) -> HostSettings:
    """The settings of ``raw`` (checked first by :func:`problems`; keys not in ``only`` keep
    their defaults)."""
    keys = SHARED_KEYS if only is None else only
    values: dict[str, Any] = {}
    if "URL" in keys:
        values["url"] = raw.get("URL")
    if "CONNECTION" in keys and raw.get("CONNECTION") is not None:
        values["connection"] = resolve_connection(raw["CONNECTION"], spell("CONNECTION"))
    if "PREFIX" in keys and raw.get("PREFIX") is not None:
        values["prefix"] = raw["PREFIX"]
    if "QUEUES" in keys:
        values["queues"] = {name: dict(options or {}) for name, options in (raw.get("QUEUES") or {}).items()}
    if "SCHEDULES" in keys:
        values["schedules"] = {sid: dict(entry) for sid, entry in (raw.get("SCHEDULES") or {}).items()}
    if "LISTENERS" in keys:
        values["listeners"] = tuple(resolve_listener(item, spell("LISTENERS", index))
                                    for index, item in enumerate(raw.get("LISTENERS") or ()))
    if "WORKER_NAME" in keys:
        values["worker_name"] = raw.get("WORKER_NAME")
    if "TEST_CONNECTION" in keys and "TEST_CONNECTION" in raw:
        test = raw["TEST_CONNECTION"]
        is_url = isinstance(test, str) and "://" in test
        values["test_connection"] = test if test in (None, FAKE) or is_url else resolve_connection(
            test, spell("TEST_CONNECTION"))
    if "SCHEDULES_CHECK_INTERVAL" in keys and "SCHEDULES_CHECK_INTERVAL" in raw:
        values["schedules_check_interval"] = raw["SCHEDULES_CHECK_INTERVAL"] or None
    return HostSettings(**values)


def refusal_message(found: Sequence[Problem]) -> str:
    """Every error of ``found`` in one message (a Flask refusal, a Django ImproperlyConfigured)."""
    return "; ".join(problem.message for problem in refused(found))

