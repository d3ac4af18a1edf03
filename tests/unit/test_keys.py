"""The key taxonomy: one builder, a hash tag on every key, queue names validated."""

from __future__ import annotations

import pytest

from echomq.errors import InvalidInputError, InvalidQueueNameError
from echomq.protocol.keys import QueueKeys, iteration_job_id


@pytest.mark.parametrize(
    ("attribute", "key"),
    [
        ("wait", "emq:{orders}:wait"),
        ("delayed", "emq:{orders}:delayed"),
        ("waiting_children", "emq:{orders}:waiting-children"),
        ("stalled_check", "emq:{orders}:stalled-check"),
        ("events", "emq:{orders}:events"),
        ("repeat", "emq:{orders}:repeat"),
        ("marker", "emq:{orders}:marker"),
    ],
)
def test_suffix_keys(attribute: str, key: str) -> None:
    assert getattr(QueueKeys("orders"), attribute) == key


def test_job_scheduler_and_iteration_keys() -> None:
    keys = QueueKeys("orders", prefix="app")
    assert keys.job("42") == "app:{orders}:42"
    assert keys.job_lock("42") == "app:{orders}:42:lock"
    assert keys.scheduler("daily") == "app:{orders}:repeat:daily"
    assert keys.job_prefix == "app:{orders}:"
    assert iteration_job_id("daily", 1735689600000) == "repeat:daily:1735689600000"
    assert keys.job(iteration_job_id("daily", 1735689600000.0)) == "app:{orders}:repeat:daily:1735689600000"


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        QueueKeys("orders").nonsense  # noqa: B018


@pytest.mark.parametrize(
    ("name", "reason"),
    [("", "empty"), ("a:b", "':'"), ("{orders}", "braces"), ("or{ders", "braces"), (7, "str")],
)
def test_bad_queue_names_are_named_in_the_error(name: object, reason: str) -> None:
    with pytest.raises(InvalidQueueNameError, match=reason) as info:
        QueueKeys(name)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_bad_prefix() -> None:
    with pytest.raises(InvalidInputError, match="prefix"):
        QueueKeys("orders", prefix="")
