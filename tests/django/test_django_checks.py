"""``manage.py check`` reports each bad ``ECHOMQ`` setting with its id and a hint, without Redis."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from echomq.contrib.django import conf

from support.django_site import manage


def project_setting(**changes: Any) -> dict[str, Any]:
    echomq = copy.deepcopy(django_settings.ECHOMQ)
    echomq.update(changes)
    return echomq


def reported(settings: Any, echomq: Any) -> list[tuple[str, str, str]]:
    settings.ECHOMQ = echomq
    return [(message.id, message.msg, message.hint) for message in checks.run_checks(tags=["echomq"])]


NIGHTLY = {"queue": "reports", "pattern": "0 2 * * *"}

BAD_SETTINGS = {
    "an unknown key": (project_setting(QUEUE={}), "echomq.E001", "unknown key 'QUEUE' (did you mean 'QUEUES'?)",
                       "The keys are URL, CONNECTION"),
    "not a dict": (["redis://localhost"], "echomq.E001", "ECHOMQ must be a dict", "The keys are URL"),
    "a URL of another scheme": ({"URL": "http://localhost:6379"}, "echomq.E002", "must start with redis://",
                                "redis://localhost:6379/0"),
    "URL and CONNECTION": ({"URL": "redis://localhost", "CONNECTION": "djsite.redis_client.make_client"},
                           "echomq.E002", "not both", "dotted path"),
    "a CONNECTION that does not import": ({"CONNECTION": "djsite.no_such_module.client"}, "echomq.E003",
                                          "does not import", "returning a redis.Redis"),
    "a CONNECTION that is not callable": ({"CONNECTION": "djsite.settings.SECRET_KEY"}, "echomq.E003",
                                          "is not callable", "function taking no argument"),
    "a prefix with braces": ({"PREFIX": "{emq}"}, "echomq.E004", "must not contain braces", "without braces"),
    "a queue name with a colon": ({"QUEUES": {"orders:eu": {}}}, "echomq.E005", "must not contain ':'",
                                  "without ':'"),
    "a default queue that is empty": ({"DEFAULT_QUEUE": ""}, "echomq.E005", "must not be empty", "non-empty"),
    "a bad default option": ({"QUEUES": {"orders": {"attempt": 3}}}, "echomq.E006",
                             "unknown job option (did you mean 'attempts'?)", "options of Queue.add"),
    "a priority out of range": ({"QUEUES": {"orders": {"priority": -1}}}, "echomq.E006", "priority=-1",
                                "snake_case"),
    "a bad cron pattern": ({"SCHEDULES": {"nightly": {**NIGHTLY, "pattern": "0 25 * * *"}}}, "echomq.E007",
                           "'0 25 * * *'", "docs/django.md"),
    "a schedule without a queue": ({"SCHEDULES": {"nightly": {"every": 60000}}}, "echomq.E007", "names no queue",
                                   "'queue': 'reports'"),
    "every and pattern": ({"SCHEDULES": {"nightly": {**NIGHTLY, "every": 1000}}}, "echomq.E007",
                          "either every or pattern", "Schedules"),
    "an unknown zone": ({"SCHEDULES": {"nightly": {**NIGHTLY, "tz": "Mars/Olympus"}}}, "echomq.E007",
                        "Mars/Olympus", "Schedules"),
    "Celery's key for the job name": ({"SCHEDULES": {"nightly": {**NIGHTLY, "task": "build_report"}}},
                                      "echomq.E007", "unknown key(s) task (the keys are queue, name, data", "'name'"),
    "a scheduler id with a colon": ({"SCHEDULES": {"nightly:eu": NIGHTLY}}, "echomq.E007", "must not contain ':'",
                                    "Schedules"),
    "a START mode that is none": ({"EVENTS": {"START": "ready"}}, "echomq.E008", "'ready' is not a start mode",
                                  "'request', 'manual'"),
    "a flag that is not a bool": ({"EVENTS": {"IN_TESTS": "yes"}}, "echomq.E008", "must be True or False",
                                  "False"),
    "an unknown events key": ({"EVENTS": {"QUEUE": {}}}, "echomq.E008", "unknown key 'QUEUE' (did you mean 'QUEUES'?)",
                              "QUEUES, START"),
    "a bad start id": ({"EVENTS": {"LAST_EVENT_ID": "latest"}}, "echomq.E008", "must be '$'", "'0'"),
    "a subscriber that does not import": ({"EVENTS": {"QUEUES": {"orders": ["echoshop.events.nobody"]}}},
                                          "echomq.E009", "'echoshop.events.nobody' does not import", "Dotted paths"),
    "subscribers as one string": ({"EVENTS": {"QUEUES": {"orders": "echoshop.events.remember"}}}, "echomq.E009",
                                  "must be a list of dotted paths", "put()"),
}


@pytest.mark.parametrize("case", BAD_SETTINGS)
def test_each_bad_setting_is_reported_with_its_id_and_a_hint(case: str, settings: Any) -> None:
    echomq, problem_id, in_message, in_hint = BAD_SETTINGS[case]
    [(found_id, message, hint)] = reported(settings, echomq)
    assert found_id == problem_id
    assert in_message in message
    assert in_hint in hint
    with pytest.raises(ImproperlyConfigured, match=problem_id):  # and nothing can use it
        conf.current()


@pytest.mark.parametrize("url", ["redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
                                 "redis+sentinel://10.0.0.1:26379/mymaster", "rediss://cache.example.com:6380/1"])
def test_cluster_and_sentinel_urls_pass_the_check_without_connecting(settings: Any, url: str) -> None:
    # Nothing listens on 10.0.0.x: a check that connected would hang or fail.
    assert reported(settings, {"URL": url}) == []
    assert conf.current().url == url


def test_the_project_setting_passes_and_each_problem_is_reported(settings: Any) -> None:
    assert reported(settings, django_settings.ECHOMQ) == []
    assert reported(settings, {}) == []  # every key has a default
    many = {"PREFIX": "", "QUEUES": {"a:b": {"attempts": "3"}}, "EVENTS": {"START": "never"}}
    assert [problem_id for problem_id, _, _ in reported(settings, many)] == [
        "echomq.E004", "echomq.E005", "echomq.E006", "echomq.E008"]


def test_manage_py_check_fails_on_a_bad_setting_and_names_it() -> None:
    result = manage("check", env={"SHOP_REPORT_PATTERN": "0 2 * * * * *"})
    assert result.returncode == 1
    assert "(echomq.E007)" in result.stderr and "nightly-report" in result.stderr
    assert "HINT:" in result.stderr
    worker = manage("echomq_worker", "--burst", env={"SHOP_REPORT_PATTERN": "0 2 * * * * *"})
    assert worker.returncode == 1 and "(echomq.E007)" in worker.stderr  # the worker does not start
