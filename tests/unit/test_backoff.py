"""Retry delays as BullMQ computes them (docs/protocol.md §3.4)."""

from __future__ import annotations

import random

import pytest

from echomq.errors import InvalidInputError
from echomq.protocol.options import backoff_as_dict
from echomq.worker.retry import compute_delay


@pytest.mark.parametrize(
    ("backoff", "attempt", "expected"),
    [
        (None, 1, 0),
        (500, 1, 500),
        (500, 4, 500),
        ({"type": "fixed", "delay": 1000}, 3, 1000),
        ({"type": "exponential", "delay": 1000}, 1, 1000),
        ({"type": "exponential", "delay": 1000}, 2, 2000),
        ({"type": "exponential", "delay": 1000}, 3, 4000),
        # Math.round: 2**-1 * 5 = 2.5 rounds up to 3 (Python's round() would give 2)
        ({"type": "exponential", "delay": 5}, 0, 3),
    ],
)
def test_delay_matches_the_protocol(backoff: object, attempt: int, expected: int) -> None:
    assert compute_delay(backoff, attempt) == expected


def test_a_number_is_fixed_shorthand() -> None:
    assert backoff_as_dict(250) == {"type": "fixed", "delay": 250}


@pytest.mark.parametrize("kind", ["fixed", "exponential"])
def test_jitter_draws_within_the_window(kind: str) -> None:
    rng = random.Random(7)
    full = compute_delay({"type": kind, "delay": 1000}, 3)
    draws = [compute_delay({"type": kind, "delay": 1000, "jitter": 0.5}, 3, rng=rng) for _ in range(500)]
    assert all(full * 0.5 <= d < full for d in draws)
    assert len(set(draws)) > 100  # really random, not a constant


def test_custom_type_uses_the_workers_strategy() -> None:
    calls = []

    def strategy(attempts_made: int, kind: str, err: BaseException, job: object) -> int:
        calls.append((attempts_made, kind, str(err)))
        return -1

    assert compute_delay({"type": "mine"}, 2, error=ValueError("x"), strategy=strategy) == -1
    assert calls == [(2, "mine", "x")]


def test_unknown_type_without_strategy_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match="'mine'"):
        compute_delay({"type": "mine", "delay": 1}, 1)


@pytest.mark.parametrize("bad", [True, "100", [100]])
def test_bad_backoff_values_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="backoff"):
        backoff_as_dict(bad)
