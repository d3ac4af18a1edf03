"""JobScheduler.upsert and calculate_next_millis read repeat options the same way: one table of
inputs, fed to both entry points, must give the same verdict, the same error word for word,
and for a pattern the same first run.

Two differences are by design. The check that depends on "now": an ``end_date`` already past
makes ``upsert`` refuse to create a schedule that has ended, and ``calculate_next_millis``
answer that there is no next run. And what only another runtime writes: ``calculate_next_millis``
*reads* options as the worker step reads a stored schedule, so whatever BullMQ 6.7 accepts
(``tz: "local"``, BullMQ's ``count``/``prevMillis``, an end before the start ...) is read there,
while ``upsert`` refuses to write it (docs/protocol.md §4).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import redis

from echomq import InvalidScheduleError, JobScheduler, calculate_next_millis

from support.queue_keys import SCAN_COUNT

NOW = 1_714_560_000_000  # 2024-05-01T10:40:00Z
UTC = dt.timezone.utc
LATER = NOW + 86_400_000
LATER_ISO = "2024-05-02T10:40:00Z"
BERLIN = dt.timezone(dt.timedelta(hours=2))

ACCEPTED: list[Any] = [
    pytest.param({"every": 1000}, id="every"),
    pytest.param({"every": 1000.0}, id="every-integral-float"),
    pytest.param({"every": 60_000, "offset": 5000}, id="every-offset"),
    pytest.param({"every": 1000, "limit": 3}, id="every-limit"),
    pytest.param({"every": 1000, "tz": None}, id="none-is-not-given"),
    pytest.param({"every": 1000, "tz": "europe/berlin"}, id="every-tz-any-case"),
    pytest.param({"every": 1000, "tz": "UTC+2"}, id="every-tz-offset"),
    pytest.param({"pattern": "0 9 * * *"}, id="pattern-utc"),
    pytest.param({"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, id="tz-iana"),
    pytest.param({"pattern": "0 9 * * *", "tz": "europe/berlin"}, id="tz-lower"),
    pytest.param({"pattern": "0 9 * * *", "tz": "EUROPE/BERLIN"}, id="tz-upper"),
    pytest.param({"pattern": "0 9 * * *", "tz": "UTC+2"}, id="tz-utc-plus"),
    pytest.param({"pattern": "0 9 * * *", "tz": "utc-05:30"}, id="tz-utc-minus-minutes"),
    pytest.param({"pattern": "0 9 * * *", "tz": "GMT"}, id="tz-gmt"),
    pytest.param({"pattern": "0 9 * * *", "tz": "US/Eastern"}, id="tz-link"),
    pytest.param({"pattern": "30 2 * * *", "tz": "Europe/Berlin"}, id="pattern-in-a-dst-zone"),
    pytest.param({"pattern": "@hourly"}, id="nickname"),
    pytest.param({"pattern": "0 9 * * *", "immediately": True}, id="immediately"),
    pytest.param({"pattern": "0 9 * * *", "start_date": LATER}, id="start-ms"),
    pytest.param({"pattern": "0 9 * * *", "startDate": LATER}, id="start-camel"),
    pytest.param({"pattern": "0 9 * * *", "start_date": dt.datetime(2024, 5, 2, 10, 40, tzinfo=UTC)}, id="start-dt"),
    pytest.param({"pattern": "0 9 * * *", "start_date": LATER_ISO}, id="start-iso-z"),
    pytest.param({"pattern": "0 9 * * *", "start_date": "2024-05-02T12:40:00+02:00"}, id="start-iso-offset"),
    pytest.param({"pattern": "0 9 * * *", "end_date": LATER}, id="end-ms"),
    pytest.param({"pattern": "0 9 * * *", "endDate": dt.datetime(2024, 5, 2, 12, 40, tzinfo=BERLIN)}, id="end-dt"),
    pytest.param({"pattern": "0 9 * * *", "end_date": LATER_ISO}, id="end-iso"),
    pytest.param({"pattern": "0 9 * * *", "start_date": NOW + 1, "end_date": LATER}, id="start-and-end"),
    pytest.param({"pattern": "0 0 1 1 *", "end_date": NOW + 60_000}, id="no-run-before-the-end"),
]

REFUSED: list[Any] = [
    pytest.param({"every": 1000, "pattern": "* * * * *"}, "give either every or pattern, not both", id="both-kinds"),
    pytest.param({"tz": "UTC"}, "give every (ms) or pattern (cron)", id="neither-kind"),
    pytest.param({"every": 0}, "every=0: must be >= 1", id="every-zero"),
    pytest.param({"every": -5}, "every=-5: must be >= 1", id="every-negative"),
    pytest.param({"every": 1.5}, "every=1.5: must be a whole number", id="every-fraction"),
    pytest.param({"every": "1000"}, "every='1000': must be an integer", id="every-str"),
    pytest.param({"every": True}, "every=True: must be an integer", id="every-bool"),
    pytest.param({"pattern": ""}, "pattern='': must be a non-empty cron expression", id="pattern-empty"),
    pytest.param({"pattern": 5}, "pattern=5: must be a non-empty cron expression", id="pattern-int"),
    pytest.param({"pattern": "61 * * * *"}, "pattern '61 * * * *': minute (field 1 of 5)", id="pattern-range"),
    pytest.param({"pattern": "0 0 * * 8"}, "day-of-week (field 5 of 5) '8'", id="pattern-dow"),
    pytest.param({"pattern": "0 9 * * *", "tz": "Mars/Olympus"}, "tz 'Mars/Olympus': unknown time zone",
                 id="tz-unknown"),
    pytest.param({"every": 1000, "tz": "Nowhere/Land"}, "tz 'Nowhere/Land': unknown time zone", id="every-tz-unknown"),
    pytest.param({"pattern": "0 9 * * *", "tz": ["Europe/Berlin"]}, "must be an IANA zone name string", id="tz-list"),
    pytest.param({"pattern": "0 9 * * *", "tz": "UTC+25"}, "offset out of range", id="tz-offset-range"),
    pytest.param({"pattern": "0 9 * * *", "tz": ""}, "tz '': unknown time zone", id="tz-empty"),
    pytest.param({"pattern": "0 9 * * *", "start_date": str(LATER)}, "give epoch milliseconds as an int",
                 id="start-digit-string"),
    pytest.param({"pattern": "0 9 * * *", "start_date": "tomorrow"}, "is not an ISO 8601 date", id="start-words"),
    pytest.param({"pattern": "0 9 * * *", "start_date": dt.datetime(2024, 6, 1)}, "a naive datetime is ambiguous",
                 id="start-naive"),
    pytest.param({"pattern": "0 9 * * *", "end_date": True}, "end_date=True: must be an integer", id="end-bool"),
    pytest.param({"pattern": "0 9 * * *", "start_date": LATER, "startDate": LATER}, "given both ways",
                 id="start-two-spellings"),
    pytest.param({"pattern": "0 9 * * *", "end_date": LATER, "endDate": LATER + 1}, "given both ways",
                 id="end-two-spellings"),
    pytest.param({"pattern": "0 9 * * *", "immediately": True, "start_date": LATER},
                 "immediately and start_date cannot be used together", id="immediately-start"),
    pytest.param({"pattern": "0 9 * * *", "immediately": "yes"}, "immediately='yes': must be True or False",
                 id="immediately-str"),
    pytest.param({"every": 1000, "limit": 0}, "limit=0: must be >= 1", id="limit-zero"),
    pytest.param({"every": 1000, "limit": 1.5}, "limit=1.5: must be a whole number", id="limit-fraction"),
    pytest.param({"every": 1000, "every_ms": 3}, "every_ms=3: unknown repeat option", id="unknown"),
    pytest.param({"pattern": "0 9 * * *", "ic": 3}, "ic=3: unknown repeat option", id="hash-field"),
    pytest.param([("every", 1000)], "repeat_opts must be a mapping, got list", id="not-a-mapping"),
]

#: Refused by upsert (it never writes them), read by calculate_next_millis: another runtime may
#: have stored them, and the worker step must still advance such a schedule.
READ_NOT_WRITTEN: list[Any] = [
    pytest.param({"pattern": "0 9 * * *", "tz": "local"}, "the process-local zone is not supported", id="tz-local"),
    pytest.param({"pattern": "0 9 * * *", "start_date": -1}, "start_date=-1: must be >= 0", id="start-negative"),
    pytest.param({"pattern": "0 9 * * *", "start_date": LATER + 1, "end_date": LATER},
                 "is after end_date: the schedule would never run", id="start-after-end"),
    pytest.param({"pattern": "0 9 * * *", "offset": 5}, "offset=5: applies to every schedules only",
                 id="offset-pattern"),
    pytest.param({"every": 1000, "offset": 1000}, "offset=1000: must be smaller than every (1000)", id="offset-big"),
    pytest.param({"every": 1000, "offset": -1}, "offset=-1: must be >= 0", id="offset-negative"),
    pytest.param({"every": 1000, "count": 3}, "count=3: unknown repeat option", id="runtime-field-count"),
    pytest.param({"every": 1000, "prevMillis": NOW}, "unknown repeat option", id="runtime-field-prev"),
]

ENDED: list[Any] = [
    pytest.param({"every": 1000, "end_date": NOW - 1}, id="every-ms"),
    pytest.param({"pattern": "0 9 * * *", "end_date": "2024-05-01T00:00:00Z"}, id="pattern-iso"),
]


@pytest.fixture
def scheduler(connection: redis.Redis, queue_name: str) -> JobScheduler:
    return JobScheduler(connection, queue_name, clock=lambda: NOW)


def written(connection: redis.Redis, scheduler: JobScheduler) -> list[Any]:
    return list(connection.scan_iter(match=scheduler.keys.all_keys_pattern(), count=SCAN_COUNT))


@pytest.mark.parametrize("repeat_opts", ACCEPTED)
def test_both_accept_and_a_pattern_starts_where_the_function_says(scheduler: JobScheduler,
                                                                   repeat_opts: dict[str, Any]) -> None:
    expected = calculate_next_millis(repeat_opts, NOW)
    iteration = scheduler.upsert("s", repeat_opts)
    if "pattern" in repeat_opts:
        assert (None if iteration is None else iteration.due_ms) == expected
    else:
        assert iteration is not None and expected is not None
    assert scheduler.get("s") is not None or iteration is None


@pytest.mark.parametrize(("repeat_opts", "message"), REFUSED)
def test_both_refuse_with_the_same_error(connection: redis.Redis, scheduler: JobScheduler, repeat_opts: Any,
                                         message: str) -> None:
    with pytest.raises(InvalidScheduleError) as by_function:
        calculate_next_millis(repeat_opts, NOW)
    with pytest.raises(InvalidScheduleError) as by_upsert:
        scheduler.upsert("s", repeat_opts)
    assert str(by_upsert.value) == str(by_function.value)
    assert message in str(by_function.value)
    assert isinstance(by_function.value, ValueError)
    assert written(connection, scheduler) == []


@pytest.mark.parametrize("repeat_opts", ENDED)
def test_an_end_already_past_has_no_next_run_and_cannot_be_created(connection: redis.Redis,
                                                                    scheduler: JobScheduler,
                                                                    repeat_opts: dict[str, Any]) -> None:
    assert calculate_next_millis(repeat_opts, NOW) is None
    with pytest.raises(InvalidScheduleError, match=r"end_date=.*: is already in the past"):
        scheduler.upsert("s", repeat_opts)
    assert written(connection, scheduler) == []


@pytest.mark.parametrize(("repeat_opts", "message"), READ_NOT_WRITTEN)
def test_what_only_another_runtime_writes_is_read_but_not_written(connection: redis.Redis, scheduler: JobScheduler,
                                                                  repeat_opts: Any, message: str) -> None:
    ends_before_start = repeat_opts.get("start_date", 0) > repeat_opts.get("end_date", float("inf"))
    assert (calculate_next_millis(repeat_opts, NOW) is None) == ends_before_start  # read: a run, or none left
    with pytest.raises(InvalidScheduleError, match=re.escape(message)):
        scheduler.upsert("s", repeat_opts)
    assert written(connection, scheduler) == []
