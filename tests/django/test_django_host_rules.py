"""The host layer's setting rules through Django: each case of support.host_cases in
``settings.ECHOMQ`` is one system-check message with its id (an Error, or a Warning that
stops nothing), with the shared layer's message as Django spells the key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from echomq.contrib.django import conf
from echomq.contrib.host import settings as host

from support.host_cases import ACCEPTED, CASES


@pytest.mark.parametrize("case", CASES)
def test_each_rule_of_the_host_layer_is_a_check_with_the_shared_message(case: str, settings: Any) -> None:
    raw, problem_id, fragment, _error, warning = CASES[case]
    settings.ECHOMQ = raw
    [message] = checks.run_checks(tags=["echomq"])
    [shared] = host.problems(raw, conf.SPELLING, conf.KEYS)
    assert (message.id, message.msg, message.hint) == (problem_id, shared.message, shared.hint)
    assert fragment in message.msg
    assert message.msg.startswith("ECHOMQ"), message.msg
    assert isinstance(message, checks.Warning if warning else checks.Error)
    assert message.level == (checks.WARNING if warning else checks.ERROR)
    if warning:
        assert conf.current().host is not None  # a warning stops nothing
    else:
        with pytest.raises(ImproperlyConfigured, match=problem_id):
            conf.current()


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_host_layer_accepts_django_accepts(case: str, settings: Any) -> None:
    settings.ECHOMQ = ACCEPTED[case]
    assert checks.run_checks(tags=["echomq"]) == []
    conf.current()


def test_the_guide_s_tables_list_every_key_and_check_id() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "django.md").read_text()
    settings_table = page[page.index("## Settings"):page.index("## Checks")]
    documented = re.findall(r"^\| `([A-Z_]+)` \|", settings_table, re.MULTILINE)
    assert sorted(documented[:len(conf.KEYS)]) == sorted(conf.KEYS)
    ids = set(re.findall(r"^\| `(echomq\.[EW]\d{3})`", page[page.index("## Checks"):], re.MULTILINE))
    used = {case.id for case in CASES.values()}
    assert used <= ids and {f"echomq.E{n:03}" for n in range(1, 14)} <= ids
