"""The host layer's setting rules through Flask: each case of support.host_cases in
``app.config`` (``ECHOMQ_<KEY>``) is refused at ``init_app`` with the shared layer's message as
Flask spells the key, the same words as Django's check (support.host_cases.as_django); a
warning is logged and stops nothing."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from echomq.contrib.flask import EchoMQ
from echomq.contrib.flask import settings as flask_settings
from echomq.contrib.host import settings as host

from support.host_cases import ACCEPTED, CASES, as_django

DJANGO = host.Spelling("ECHOMQ", "", "docs/django.md")


def configured(raw: dict[str, Any]) -> Flask:
    app = Flask("rules")
    app.config.update({f"ECHOMQ_{key}": value for key, value in raw.items()})
    return app


@pytest.mark.parametrize("case", CASES)
def test_each_rule_of_the_host_layer_is_refused_at_init_app_with_the_shared_message(
        case: str, caplog: pytest.LogCaptureFixture) -> None:
    raw, problem_id, fragment, error, warning = CASES[case]
    app = configured(raw)
    [shared] = host.problems(raw, flask_settings.SPELLING, flask_settings.KEYS)
    [as_django_says] = host.problems(raw, DJANGO, (*host.SHARED_KEYS, "EVENTS"))
    assert shared.id == problem_id and fragment in shared.message
    assert as_django(shared.message) == as_django_says.message  # one message, two spellings
    extension = EchoMQ()
    if warning:
        with caplog.at_level(logging.WARNING, logger="echomq.contrib.flask.settings"):
            extension.init_app(app)
        assert [r.getMessage() for r in caplog.records] == [f"EchoMQ: {shared.message} ({shared.hint})"]
        return
    with pytest.raises(error) as refused:
        extension.init_app(app)
    assert str(refused.value) == shared.message
    assert str(refused.value).startswith("app.config")
    assert "echomq" not in app.extensions


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_host_layer_accepts_flask_accepts(case: str) -> None:
    app = configured(ACCEPTED[case])
    EchoMQ().init_app(app)
    assert "echomq" in app.extensions


def test_the_guide_s_table_lists_every_key_and_only_them() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "flask.md").read_text()
    documented = re.findall(r"^\| `(ECHOMQ_[A-Z_]+)` \|", page, re.MULTILINE)
    assert sorted(documented) == sorted(flask_settings.SETTINGS) and len(documented) == len(set(documented))
