"""The retry rules at their edges (echomq/worker/retry.py, docs/protocol.md §3.4): when a
failed attempt is retried, after how long (BullMQ's formulas, JavaScript's rounding, the jitter
drawn from the worker's random source), what a custom strategy is given, and the stack traces
kept."""

from __future__ import annotations

import logging
import random
import traceback
from types import SimpleNamespace
from typing import Any

import pytest

from echomq.errors import InvalidInputError, UnrecoverableError
from echomq.protocol.options import MAX_SAFE_INTEGER
from echomq.worker.retry import compute_delay, retry_delay, stacktrace_with


class Drawn(random.Random):
    """A random source whose every draw is ``value``: the jitter's arithmetic, exactly."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("backoff", "attempt", "delay"), [
    (None, 1, 0), (False, 3, 0), (0, 1, 0), (1000, 5, 1000),
    ({"type": "fixed"}, 1, 0), ({"delay": 300}, 2, 300),  # a stored backoff without a type is fixed
    ({"type": "fixed", "delay": 250}, 9, 250),
    ({"type": "exponential", "delay": 1000}, 1, 1000), ({"type": "exponential", "delay": 1000}, 2, 2000),
    ({"type": "exponential", "delay": 1000}, 4, 8000), ({"type": "exponential"}, 4, 0),
    # Math.round: 2.5 goes up to 3 (Python's round would give 2), 3.5 to 4
    ({"type": "exponential", "delay": 1.25}, 2, 3), ({"type": "exponential", "delay": 1.75}, 2, 4),
    ({"type": "exponential", "delay": 1.2}, 2, 2),
    # bounded where JavaScript's numbers stop being exact, however many attempts
    ({"type": "exponential", "delay": 1000}, 44, 2**43 * 1000),
    ({"type": "exponential", "delay": 1000}, 45, MAX_SAFE_INTEGER),
    ({"type": "exponential", "delay": 1000}, 5000, MAX_SAFE_INTEGER),
])
def test_the_delay_is_bullmqs(backoff: Any, attempt: int, delay: int) -> None:
    assert compute_delay(backoff, attempt) == delay


@pytest.mark.parametrize(("draw", "jitter", "delay"), [
    (0.0, 0.5, 500), (0.5, 0.5, 750), (0.999, 0.5, 999), (0.25, 1, 250), (0.0, 1, 0), (0.7, 0.1, 970),
])
def test_a_jitter_draws_from_the_band_below_the_delay(draw: float, jitter: float, delay: int) -> None:
    # uniformly in [d * (1 - j), d): floor(r * d * j + d * (1 - j))
    assert compute_delay({"type": "fixed", "delay": 1000, "jitter": jitter}, 1, rng=Drawn(draw)) == delay
    assert compute_delay({"type": "exponential", "delay": 500, "jitter": jitter}, 2, rng=Drawn(draw)) == delay


def test_no_jitter_draws_nothing() -> None:
    class NeverDrawn(random.Random):
        def random(self) -> float:
            raise AssertionError("drew a number for a backoff without jitter")

    assert compute_delay({"type": "fixed", "delay": 1000, "jitter": 0}, 1, rng=NeverDrawn()) == 1000


def test_a_custom_type_asks_the_strategy_with_the_attempt_type_error_and_job() -> None:
    seen: list[tuple[Any, ...]] = []
    error, job = ValueError("boom"), SimpleNamespace(id="7")

    def strategy(attempts_made: int, kind: str, err: BaseException, the_job: Any) -> int:
        seen.append((attempts_made, kind, err, the_job))
        return 1234

    assert compute_delay({"type": "linear", "delay": 5}, 3, error=error, job=job, strategy=strategy) == 1234
    assert seen == [(3, "linear", error, job)]
    compute_delay({"type": "linear"}, 1, strategy=strategy)
    assert type(seen[-1][2]) is Exception  # no error given: a plain one, never None


def test_a_custom_type_without_a_strategy_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInputError) as refused:
        compute_delay({"type": "linear"}, 1)
    assert str(refused.value) == ("backoff type 'linear' is neither 'fixed' nor 'exponential' and the worker "
                                  "has no backoff_strategy for it")


JOB = SimpleNamespace(id="j1", discarded=False)


@pytest.mark.parametrize(("attempts", "made", "retried"), [(3, 0, True), (3, 1, True), (3, 2, False), (1, 0, False),
                                                           (0, 0, False)])
def test_a_job_retries_while_it_has_attempts_left(attempts: int, made: int, retried: bool) -> None:
    assert (retry_delay(JOB, attempts, made, 100, ValueError()) == 100) is retried
    assert (retry_delay(JOB, attempts, made, 100, ValueError()) is None) is not retried


def test_the_retried_attempt_is_counted_from_one() -> None:
    # atm 2 (two attempts made) failing again: the third attempt's exponential wait, 4 x delay
    assert retry_delay(JOB, 5, 2, {"type": "exponential", "delay": 100}, ValueError()) == 400


def test_the_strategy_is_given_the_failure_and_the_job_being_retried() -> None:
    seen: list[tuple[Any, ...]] = []
    error = ValueError("boom")
    assert retry_delay(JOB, 5, 1, {"type": "mine"}, error, strategy=lambda *a: seen.append(a) or 50) == 50
    assert seen == [(2, "mine", error, JOB)]


def test_a_job_without_the_discard_flag_retries() -> None:
    assert retry_delay(SimpleNamespace(id="j3"), 5, 0, 100, ValueError()) == 100


def test_what_never_retries() -> None:
    assert retry_delay(JOB, 5, 0, 100, UnrecoverableError("no")) is None
    assert retry_delay(SimpleNamespace(id="j2", discarded=True), 5, 0, 100, ValueError()) is None
    assert retry_delay(JOB, 5, 0, {"type": "mine"}, ValueError(), strategy=lambda *a: -1) is None


def test_a_strategys_answer_is_bounded() -> None:
    assert retry_delay(JOB, 5, 0, {"type": "mine"}, ValueError(), strategy=lambda *a: -5) == 0
    assert retry_delay(JOB, 5, 0, {"type": "mine"}, ValueError(), strategy=lambda *a: 2**60) == MAX_SAFE_INTEGER


def test_a_backoff_that_cannot_be_computed_fails_the_job_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any) -> int:
        raise RuntimeError("strategy down")

    with caplog.at_level(logging.ERROR, logger="echomq.worker.retry"):
        assert retry_delay(JOB, 5, 0, {"type": "mine"}, ValueError(), strategy=broken) is None
        assert retry_delay(JOB, 5, 0, {"type": "fixed", "delay": "soon"}, ValueError()) is None
        assert retry_delay(object(), 5, 0, {"type": "mine"}, ValueError(), strategy=broken) is None
    assert [r.getMessage() for r in caplog.records] == [
        "job j1: cannot compute its retry delay (RuntimeError: strategy down); failing it",
        "job j1: cannot compute its retry delay (ValueError: could not convert string to float: 'soon'); failing it",
        "job ?: cannot compute its retry delay (RuntimeError: strategy down); failing it",
    ]


def _failure(message: str) -> BaseException:
    try:
        raise KeyError(message)
    except KeyError as exc:
        return exc


def test_the_stored_traces_grow_by_this_failure_and_keep_the_newest() -> None:
    exc = _failure("missing")
    traces = stacktrace_with(["one", "two"], exc, None)
    assert traces[:2] == ["one", "two"] and len(traces) == 3
    assert traces[2] == "".join(traceback.format_exception(exc))
    assert traces[2].startswith("Traceback (most recent call last):\n") and traces[2].endswith("KeyError: 'missing'\n")
    assert "_failure" in traces[2]
    assert stacktrace_with(["one", "two"], exc, 2) == ["two", traces[2]]
    assert stacktrace_with(["one", "two"], exc, 1) == [traces[2]]
    assert stacktrace_with(["one", "two"], exc, 0) == []
    assert stacktrace_with(["one"], exc, 10) == ["one", traces[2]]
    assert stacktrace_with(["one"], exc, -1) == ["one", traces[2]]  # a bad limit stored by anyone: all kept
    assert stacktrace_with(["one"], exc, "3") == ["one", traces[2]]
