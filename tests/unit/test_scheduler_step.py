"""Which errors of the worker step are worth retrying (docs/protocol.md §4.4, "A failed step"):
the ones that say "not now", never a refusal that would fail again."""

from __future__ import annotations

import pytest
import redis

from echomq.errors import InvalidScheduleError
from echomq.schedule.repair import is_transient_step_error


@pytest.mark.parametrize("exc", [
    redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
    redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
    redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
    redis.exceptions.TryAgainError("Multiple keys request during rehashing of slot"),
    redis.exceptions.ClusterDownError("The cluster is down"),
    redis.exceptions.ConnectionError("Connection reset by peer"),
    redis.exceptions.TimeoutError("Timeout reading from socket"),
    redis.ResponseError("BUSY Redis is busy running a script."),
    redis.ResponseError("NOREPLICAS Not enough good replicas to write."),
    redis.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's unable to persist"),
])
def test_errors_that_say_not_now_are_transient(exc: BaseException) -> None:
    assert is_transient_step_error(exc)


@pytest.mark.parametrize("exc", [
    redis.ResponseError("ERR updateJobScheduler: ARGV[1] next millis must be whole ms a Date holds"),
    redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    redis.exceptions.NoPermissionError("this user has no permissions to run the 'evalsha' command"),
    InvalidScheduleError("repeat option pattern='61 * * * *': minute"),
    ValueError("a bug of ours"),
])
def test_refusals_that_would_fail_again_are_not(exc: BaseException) -> None:
    assert not is_transient_step_error(exc)
