"""calculate_next_millis: the contract the job scheduler builds on."""

from __future__ import annotations

import datetime as dt
import time

import pytest

import echomq
from echomq.errors import InvalidScheduleError
from echomq.schedule.next_run import calculate_next_millis

REF = 1_714_560_000_000  # 2024-05-01T10:40:00Z
UTC = dt.timezone.utc


def test_every_adds_the_interval_to_the_reference() -> None:
    assert calculate_next_millis({"every": 60_000}, REF) == REF + 60_000
    assert calculate_next_millis({"every": 5000.0}, REF) == REF + 5_000  # an integral float is a whole number


def test_every_starts_from_a_later_start_date() -> None:
    assert calculate_next_millis({"every": 1000, "start_date": REF + 10_000}, REF) == REF + 11_000


def test_immediately_returns_the_reference() -> None:
    assert calculate_next_millis({"pattern": "0 9 * * *", "immediately": True}, REF) == REF
    assert calculate_next_millis({"every": 1000, "immediately": True}, REF) == REF


def test_pattern_is_strictly_after_the_reference() -> None:
    on_the_minute = 1_714_560_000_000
    assert calculate_next_millis({"pattern": "* * * * *"}, on_the_minute) == on_the_minute + 60_000
    assert calculate_next_millis({"pattern": "* * * * *"}, on_the_minute - 1) == on_the_minute


def test_nine_am_resolves_to_the_next_day_the_pattern_allows() -> None:
    got = calculate_next_millis({"pattern": "0 9 * * *"}, REF)
    assert dt.datetime.fromtimestamp(got / 1000, UTC) == dt.datetime(2024, 5, 2, 9, tzinfo=UTC)
    got = calculate_next_millis({"pattern": "0 9 * * *", "tz": "America/New_York"}, REF)
    assert dt.datetime.fromtimestamp(got / 1000, UTC) == dt.datetime(2024, 5, 1, 13, tzinfo=UTC)


def test_reference_defaults_to_now() -> None:
    before = int(time.time() * 1000)
    got = calculate_next_millis({"pattern": "* * * * * *"})
    assert got is not None and before < got <= int(time.time() * 1000) + 1000


def test_start_date_is_excluded_and_end_date_included() -> None:
    start = REF + 3_600_000  # 11:40
    assert calculate_next_millis({"pattern": "40 11 * * *", "start_date": start}, REF) == start + 86_400_000
    end = REF + 20 * 60_000  # 11:00 exactly
    assert calculate_next_millis({"pattern": "0 11 * * *", "end_date": end}, REF) == end
    assert calculate_next_millis({"pattern": "0 11 * * *", "end_date": end - 1}, REF) is None
    assert calculate_next_millis({"every": 60_000, "end_date": REF + 59_999}, REF) is None


def test_protocol_names_and_datetimes_are_accepted() -> None:
    start = dt.datetime(2024, 6, 1, tzinfo=UTC)
    by_datetime = calculate_next_millis({"pattern": "0 0 * * *", "start_date": start}, REF)
    by_camel = calculate_next_millis({"pattern": "0 0 * * *", "startDate": int(start.timestamp() * 1000)}, REF)
    by_iso = calculate_next_millis({"pattern": "0 0 * * *", "start_date": "2024-06-01T00:00:00Z"}, REF)
    assert by_datetime == by_camel == by_iso == int(start.timestamp() * 1000) + 86_400_000
    assert calculate_next_millis({"pattern": "0 0 * * *", "endDate": REF}, REF) is None


def test_the_zone_is_read_as_bullmq_reads_it() -> None:
    berlin = calculate_next_millis({"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, REF)
    assert calculate_next_millis({"pattern": "0 9 * * *", "tz": "europe/berlin"}, REF) == berlin
    assert calculate_next_millis({"pattern": "0 9 * * *", "tz": "UTC+2"}, REF) == berlin  # CEST is UTC+2 in May
    assert calculate_next_millis({"every": 1000, "tz": "utc-05:30"}, REF) == REF + 1000


@pytest.mark.parametrize(("opts", "fragment"), [
    ({"pattern": "0 9 * * *", "every": 1000}, "not both"),
    ({}, "give every (ms) or pattern (cron)"),
    ({"tz": "UTC"}, "give every (ms) or pattern (cron)"),
    ({"every": 0}, "every=0: must be >= 1"),
    ({"every": -5}, "every=-5: must be >= 1"),
    ({"every": 1.5}, "whole number"),
    ({"every": True}, "every=True: must be an integer"),
    ({"every": "5000"}, "every='5000': must be an integer"),
    ({"pattern": ""}, "pattern='': must be a non-empty"),
    ({"pattern": 5}, "pattern=5: must be a non-empty"),
    ({"pattern": "0 0 * * 8"}, "day-of-week (field 5 of 5) '8'"),
    ({"pattern": "0 9 * * *", "tz": "Mars/Olympus"}, "tz 'Mars/Olympus': unknown time zone"),
    ({"pattern": "0 9 * * *", "tz": ["Europe/Berlin"]}, "tz ['Europe/Berlin']: must be"),
    ({"every": 1000, "tz": "Nowhere/Land"}, "unknown time zone"),
    ({"pattern": "0 9 * * *", "start_date": 1, "startDate": 2}, "given both ways"),
    ({"pattern": "0 9 * * *", "end_date": 1, "endDate": 1}, "given both ways"),
    ({"pattern": "0 9 * * *", "start_date": dt.datetime(2024, 1, 1)}, "naive datetime"),
    ({"pattern": "0 9 * * *", "end_date": "tomorrow"}, "end_date='tomorrow': is not an ISO 8601 date"),
    ({"pattern": "0 9 * * *", "end_date": str(REF)}, "give epoch milliseconds as an int"),
    ({"every": 1000, "limit": 0}, "limit=0: must be >= 1"),
    ({"pattern": "0 9 * * *", "immediately": True, "start_date": 5}, "immediately"),
    ({"pattern": "0 9 * * *", "patern": "x"}, "unknown repeat option"),
    ({"pattern": "0 9 * * *", "ic": 3}, "unknown repeat option"),
])
def test_bad_options_raise_one_error_type_naming_the_field(opts: dict, fragment: str) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        calculate_next_millis(opts, REF)
    assert fragment in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_bad_reference_is_refused() -> None:
    with pytest.raises(InvalidScheduleError, match="reference_time"):
        calculate_next_millis({"every": 1}, "now")  # type: ignore[arg-type]


def test_public_surface() -> None:
    assert echomq.calculate_next_millis is calculate_next_millis
    from echomq.schedule.scheduler import JobScheduler
    assert JobScheduler.calculate_next_millis({"every": 10}, 5) == 15



def test_options_parsed_before_are_remembered_by_value_and_type() -> None:
    from echomq.schedule.spec import RepeatSpec

    assert RepeatSpec.parse({"every": 1}) is RepeatSpec.parse({"every": 1})
    with pytest.raises(InvalidScheduleError, match="every=True: must be an integer"):
        calculate_next_millis({"every": True}, REF)  # equal to {"every": 1} as a key, not as an option
    assert calculate_next_millis({"every": 1.0}, REF) == REF + 1
    assert calculate_next_millis({"every": 5, "tz": "UTC"}, REF) == REF + 5
    with pytest.raises(InvalidScheduleError, match="must be an IANA zone name string"):
        calculate_next_millis({"pattern": "0 9 * * *", "tz": ["Europe/Berlin"]}, REF)  # unhashable: parsed anew
