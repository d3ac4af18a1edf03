"""After a failed attempt: retry or not, after how long, and the stack traces to store
(docs/protocol.md §3.4).

A job retries while ``atm + 1 < attempts``, the error is not an ``UnrecoverableError`` and
the processor did not discard the attempt (``ActiveJob.discard``).
Its ``opts.backoff`` (normal form ``{"type", "delay", "jitter"}``, see
``protocol.options.backoff_as_dict``) sets the wait: ``fixed`` waits ``delay``; ``exponential``
waits ``round(2**(n-1) * delay)`` where n is the 1-based attempt that just failed; a jitter j in
(0, 1] draws the delay uniformly from ``[d*(1-j), d)``. Any other type needs the worker's
custom strategy, which may return -1 for "do not retry".
"""

from __future__ import annotations

import logging
import math
import random
import traceback
from typing import Any

from ..errors import InvalidInputError, UnrecoverableError
from ..protocol.options import MAX_SAFE_INTEGER, backoff_as_dict
from ..types import BackoffStrategy

log = logging.getLogger(__name__)

NO_RETRY = -1


def _js_round(value: float) -> int:
    # Math.round: halves go up (Python's round() goes to even).
    return math.floor(value + 0.5)


def _with_jitter(delay: float, jitter: float, rng: random.Random) -> int:
    if jitter > 0:
        return math.floor(rng.random() * delay * jitter + delay * (1 - jitter))
    return int(delay)


def compute_delay(
    backoff: Any,
    attempts_made: int,
    *,
    error: BaseException | None = None,
    job: Any = None,
    strategy: BackoffStrategy | None = None,
    rng: random.Random | None = None,
) -> int:
    """Milliseconds to wait before the next attempt; 0 retries at once, -1 means no retry.

    ``attempts_made`` is the 1-based number of the attempt that just failed (the hash's
    ``atm`` + 1), which is what the exponential formula counts.
    """
    opts = backoff_as_dict(backoff)
    if opts is None:
        return 0
    kind = str(opts.get("type", "fixed"))
    rng = rng or random._inst
    delay = float(opts.get("delay") or 0)
    jitter = float(opts.get("jitter") or 0)
    if kind == "fixed":
        return _with_jitter(delay, jitter, rng)
    if kind == "exponential":
        # Bounded before rounding: 2**n overflows a float after ~1000 attempts made.
        # Bounded after rounding too: the bound plus the half Math.round adds is 2^53 as a float.
        grown = min(2.0 ** min(attempts_made - 1, 64) * delay, float(MAX_SAFE_INTEGER))
        return _with_jitter(min(_js_round(grown), MAX_SAFE_INTEGER), jitter, rng)
    if strategy is not None:
        return int(strategy(attempts_made, kind, error if error is not None else Exception(), job))
    raise InvalidInputError(
        f"backoff type {kind!r:.60} is neither 'fixed' nor 'exponential' and the worker has no "
        "backoff_strategy for it"
    )


def retry_delay(job: Any, attempts: int, attempts_made: int, backoff: Any, exc: BaseException,
                strategy: BackoffStrategy | None = None) -> int | None:
    """The wait in ms before the next attempt of ``job`` (0: at once), or None when it fails
    for good: no attempts left, an UnrecoverableError, a job its processor discarded
    (``ActiveJob.discard``), a strategy that said -1, a bad backoff
    (any runtime may have stored it: a delay that is not a number, an unknown type), a
    strategy that raised. The wait is at most 2^53 - 1 ms (docs/protocol.md §2.3)."""
    if attempts_made + 1 >= attempts or isinstance(exc, UnrecoverableError) or getattr(job, "discarded", False):
        return None
    try:
        delay = compute_delay(backoff, attempts_made + 1, error=exc, job=job, strategy=strategy)
    except Exception as bad:  # noqa: BLE001 - a bad backoff fails the job, never the thread
        log.error("job %s: cannot compute its retry delay (%s: %s); failing it", getattr(job, "id", "?"),
                  type(bad).__name__, bad)
        return None
    return None if delay == NO_RETRY else min(max(0, delay), MAX_SAFE_INTEGER)


def stacktrace_with(traces: list[str], exc: BaseException, limit: Any) -> list[str]:
    """The stored traces plus this failure's, trimmed to ``opts.stackTraceLimit`` (0: none kept)."""
    traces = [*traces, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    if limit == 0:
        return []
    if isinstance(limit, int) and limit > 0:
        traces = traces[-limit:]
    return traces
