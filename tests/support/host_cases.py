"""The host layer's setting rules as cases, checked once in the shared layer (tests/host) and
once through each framework (tests/django, tests/flask): the same value gives the same problem,
with the same message, spelled as each framework's users write the key.

A case is (canonical settings, problem id, a fragment of the message, the exception class
Flask raises, whether it is only a warning). ``ACCEPTED`` are values both take.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from echomq import InvalidInputError, InvalidJobOptionsError, InvalidQueueNameError, InvalidScheduleError
from echomq.worker.listeners import WorkerListener

NIGHTLY = {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin"}


class Case(NamedTuple):
    raw: dict[str, Any]
    id: str
    fragment: str
    error: type[Exception] = InvalidInputError
    warning: bool = False


class Recorder(WorkerListener):
    """A listener a setting may name (``support.host_cases:Recorder``)."""


CASES: dict[str, Case] = {
    "an unknown key": Case({"QUEUE": {}}, "echomq.E001", "unknown key"),
    "a URL of another scheme": Case({"URL": "http://localhost:6379"}, "echomq.E002", "must start with redis://"),
    "a URL that is no str": Case({"URL": 6379}, "echomq.E002", "must be a redis:// URL (a str), got int"),
    "URL and CONNECTION": Case({"URL": "redis://localhost", "CONNECTION": "redis.Redis"}, "echomq.E002",
                               "not both"),
    "a URL as CONNECTION": Case({"CONNECTION": "redis://localhost"}, "echomq.E003", "is a URL: put it in URL"),
    "a CONNECTION that does not import": Case({"CONNECTION": "no_such_module_x.client"}, "echomq.E003",
                                              "does not import"),
    "a CONNECTION of the wrong type": Case({"CONNECTION": 42}, "echomq.E003",
                                           "must be a redis.Redis, a RedisCluster, a function returning one"),
    "a prefix with braces": Case({"PREFIX": "a{b}"}, "echomq.E004", "must not contain braces"),
    "QUEUES that is a list": Case({"QUEUES": ["mail"]}, "echomq.E005", "must map queue names to job options"),
    "a queue name with a colon": Case({"QUEUES": {"a:b": {}}}, "echomq.E005", "must not contain ':'",
                                      InvalidQueueNameError),
    "queue options that are a number": Case({"QUEUES": {"mail": 3}}, "echomq.E006",
                                            "must be a mapping of job options (attempts, backoff ...) or None",
                                            InvalidJobOptionsError),
    "a misspelt queue option": Case({"QUEUES": {"mail": {"atempts": 3}}}, "echomq.E006",
                                    "unknown job option (did you mean 'attempts'?)", InvalidJobOptionsError),
    "a schedule without a queue": Case({"SCHEDULES": {"nightly": {"pattern": "0 2 * * *"}}}, "echomq.E007",
                                       "schedule 'nightly': names no queue", InvalidScheduleError),
    "a bad cron pattern": Case({"SCHEDULES": {"nightly": {**NIGHTLY, "pattern": "0 25 * * *"}}}, "echomq.E007",
                               "'0 25 * * *'", InvalidScheduleError),
    "an unknown schedule key": Case({"SCHEDULES": {"nightly": {**NIGHTLY, "cron": "x"}}}, "echomq.E007",
                                    "unknown key(s) cron", InvalidScheduleError),
    "the job's name spelt both ways": Case({"SCHEDULES": {"nightly": {**NIGHTLY, "name": "a", "job": "b"}}},
                                           "echomq.E007", "give the job's name once", InvalidScheduleError),
    "a schedule that has ended": Case({"SCHEDULES": {"nightly": {**NIGHTLY, "end_date": 1_000_000}}},
                                      "echomq.W001", "end_date 1000000 is already in the past", InvalidScheduleError,
                                      warning=True),
    "the job's name spelt 'job'": Case({"SCHEDULES": {"nightly": {**NIGHTLY, "job": "build_report"}}},
                                       "echomq.W002", "the key 'job' is deprecated", InvalidScheduleError,
                                       warning=True),
    "LISTENERS that is one string": Case({"LISTENERS": "support.host_cases:Recorder"}, "echomq.E010",
                                         "must be a list, got str"),
    "a listener that does not import": Case({"LISTENERS": ["no_such_module_x:Listener"]}, "echomq.E010",
                                            "no module named 'no_such_module_x'"),
    "a listener that is none": Case({"LISTENERS": ["support.host_cases:NIGHTLY"]}, "echomq.E010",
                                    "is not a WorkerListener"),
    "an empty worker name": Case({"WORKER_NAME": ""}, "echomq.E011", "must be a non-empty str"),
    "a worker name with a space": Case({"WORKER_NAME": "eu 1"}, "echomq.E011", "Redis refuses [' ']"),
    "a test URL of another scheme": Case({"TEST_CONNECTION": "http://localhost"}, "echomq.E012",
                                         "must start with redis://"),
    "a test connection of the wrong type": Case({"TEST_CONNECTION": 3}, "echomq.E012", "must be a redis.Redis"),
    "a negative check interval": Case({"SCHEDULES_CHECK_INTERVAL": -1}, "echomq.E013", "must be a number of seconds"),
    "a check interval as text": Case({"SCHEDULES_CHECK_INTERVAL": "30"}, "echomq.E013", "got '30'"),
}
ACCEPTED: dict[str, dict[str, Any]] = {
    "a queue without default options": {"QUEUES": {"mail": None, "reports": {}}},
    "a schedule naming its job 'name'": {"SCHEDULES": {"nightly": {**NIGHTLY, "name": "build_report"}}},
    "listeners as strings and objects": {"LISTENERS": ["support.host_cases:Recorder", Recorder()]},
    "a worker name": {"WORKER_NAME": "eu-1"},
    "the normal connection in tests": {"TEST_CONNECTION": None},
    "a connection by dotted path": {"CONNECTION": "redis.Redis"},
    "the check turned off": {"SCHEDULES_CHECK_INTERVAL": 0},
}


def as_django(message: str) -> str:
    """A Flask-spelt message as Django spells it (``app.config['ECHOMQ_QUEUES']`` ->
    ``ECHOMQ['QUEUES']``), to compare the two."""
    return message.replace("app.config['ECHOMQ_", "ECHOMQ['").replace("app.config:", "ECHOMQ:").replace(
        "'ECHOMQ_", "'").replace("app.config must", "ECHOMQ must")
