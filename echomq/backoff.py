"""A job's retry delay, computed as BullMQ computes it (protocol §3, "Retry rules and backoff").

The job's ``opts.backoff`` is a number (shorthand for ``fixed``) or ``{"type", "delay",
"jitter"}``. ``fixed`` waits ``delay``; ``exponential`` waits ``round(2**(n-1) * delay)``
where n is the 1-based attempt that just failed. A jitter j in (0, 1] draws the delay
uniformly from ``[d*(1-j), d)``. Any other type needs a custom strategy from the worker,
which may return -1 for "do not retry".
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from .errors import InvalidInputError

#: ``strategy(attempts_made, backoff_type, error, job) -> delay ms`` (-1: do not retry).
BackoffStrategy = Callable[[int, str, BaseException, Any], int]

NO_RETRY = -1


def normalize_backoff(backoff: Any) -> dict[str, Any] | None:
    """The stored backoff option as a dict, or None when the job has none."""
    if backoff is None or backoff is False:
        return None
    if isinstance(backoff, bool):
        raise InvalidInputError(f"backoff must be a number or a dict, got {backoff!r}")
    if isinstance(backoff, (int, float)):
        return {"type": "fixed", "delay": backoff}
    if isinstance(backoff, Mapping):
        return dict(backoff)
    raise InvalidInputError(f"backoff must be a number or a dict, got {backoff!r}")


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
    opts = normalize_backoff(backoff)
    if opts is None:
        return 0
    kind = str(opts.get("type", "fixed"))
    rng = rng or random._inst  # type: ignore[attr-defined]
    delay = float(opts.get("delay") or 0)
    jitter = float(opts.get("jitter") or 0)
    if kind == "fixed":
        return _with_jitter(delay, jitter, rng)
    if kind == "exponential":
        return _with_jitter(_js_round(2 ** (attempts_made - 1) * delay), jitter, rng)
    if strategy is not None:
        return int(strategy(attempts_made, kind, error if error is not None else Exception(), job))
    raise InvalidInputError(
        f"backoff type {kind!r} is neither 'fixed' nor 'exponential' and the worker has no "
        "backoff_strategy for it"
    )
