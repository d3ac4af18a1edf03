"""The host layer's setting rules, each once here in the shared layer (with a neutral spelling)
and once through each framework (tests/django/test_django_host_rules.py,
tests/flask/test_flask_host_rules.py), from one table of cases (support.host_cases)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq.contrib.host import settings as host
from echomq.contrib.host.settings import FAKE, Spelling

from support.host_cases import ACCEPTED, CASES, NIGHTLY, Recorder

SPELLING = Spelling("SETTINGS", "", "docs/testing.md")


@pytest.mark.parametrize("case", CASES)
def test_each_bad_value_is_one_problem_with_its_id_where_and_message(case: str) -> None:
    raw, problem_id, fragment, error, warning = CASES[case]
    [problem] = host.problems(raw, SPELLING, host.SHARED_KEYS)
    assert (problem.id, problem.warning, problem.error) == (problem_id, warning, error)
    assert fragment in problem.message
    assert problem.message.startswith("SETTINGS"), problem.message  # where, as the framework spells it
    assert problem.hint
    assert host.refused([problem]) == ([] if warning else [problem])


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_both_frameworks_accept(case: str) -> None:
    assert host.problems(ACCEPTED[case], SPELLING, host.SHARED_KEYS) == []
    host.parse(ACCEPTED[case], SPELLING)


def test_the_defaults_and_what_parse_makes_of_each_key() -> None:
    assert host.parse({}, SPELLING) == host.HostSettings()
    assert (host.HostSettings().test_connection, host.HostSettings().schedules_check_interval) == (FAKE, 30.0)
    parsed = host.parse({"QUEUES": {"mail": None, "reports": {"attempts": 2}},
                         "LISTENERS": ["support.host_cases:Recorder"], "WORKER_NAME": "eu-1",
                         "SCHEDULES": {"nightly": {**NIGHTLY, "name": "build_report"}},
                         "CONNECTION": "redis.Redis", "TEST_CONNECTION": None, "SCHEDULES_CHECK_INTERVAL": 0},
                        SPELLING)
    assert parsed.queues == {"mail": {}, "reports": {"attempts": 2}}
    assert parsed.queue_options("mail") == {} and parsed.queue_options("elsewhere") == {}
    assert parsed.listeners == (Recorder,)
    assert parsed.worker_name == "eu-1"
    assert parsed.connection is redis.Redis  # a dotted path, imported: a factory the registry calls
    assert (parsed.test_connection, parsed.schedules_check_interval) == (None, None)
    assert parsed.known_queues() == ["mail", "reports"]
    assert [s.job_name for s in parsed.declared()] == ["build_report"]


def test_every_problem_of_a_setting_is_reported_not_only_the_first() -> None:
    raw: dict[str, Any] = {"PREFIX": "", "QUEUES": {"a:b": {"attempts": "3"}}, "WORKER_NAME": "", "NOPE": 1}
    assert [p.id for p in host.problems(raw, SPELLING, host.SHARED_KEYS)] == [
        "echomq.E001", "echomq.E004", "echomq.E005", "echomq.E006", "echomq.E011"]
    assert "; " in host.refusal_message(host.problems(raw, SPELLING, host.SHARED_KEYS))


def test_only_some_keys_are_checked_when_asked() -> None:
    raw = {"PREFIX": "{bad}", "SCHEDULES": {"nightly": {"every": 0}}, "NOPE": 1}
    assert [p.id for p in host.problems(raw, SPELLING, host.SHARED_KEYS, only=("QUEUES",))] == []
    assert [p.id for p in host.problems(raw, SPELLING, host.SHARED_KEYS, only=("PREFIX",))] == ["echomq.E004"]
