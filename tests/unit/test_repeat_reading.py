"""calculate_next_millis reads every repeat option BullMQ 6.7 accepts, as BullMQ reads it.

Options another runtime may have stored (an iteration's ``opts.repeat``, a BullMQ app's calls)
must never stop a schedule: ``tz`` ``local``/``system``/``default`` is the process's own zone
(luxon's SystemZone, read from ``TZ`` as Node reads it), ISO 8601 strings are dates as
JavaScript's ``Date`` parses them (date-only in UTC, a date-time without an offset in local
time), BullMQ's bookkeeping keys (``count``, ``prevMillis``, ``key``, ``jobId``) are read and
ignored, and an end before the start means there is no next run. Numbers are range-checked
(docs/protocol.md §4.1): ids and scores stay exact and within what a JavaScript Date holds.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest

from echomq.errors import InvalidScheduleError
from echomq.schedule.next_run import calculate_next_millis

UTC = dt.timezone.utc
MAX_DATE_MS = 8_640_000_000_000_000  # the largest epoch ms a JavaScript Date holds


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


@pytest.fixture
def local_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Set the process zone through TZ, as an operator would; restored afterwards."""
    yield monkeypatch
    monkeypatch.undo()
    time.tzset()


def set_tz(local_tz: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        local_tz.delenv("TZ", raising=False)
    else:
        local_tz.setenv("TZ", value)
    time.tzset()


# -- tz "local" / "system" / "default": the process's zone ----------------------------------------

@pytest.mark.parametrize("name", ["local", "system", "default", "LOCAL", "System"])
@pytest.mark.parametrize(("process_tz", "expected"), [
    ("America/New_York", "2024-01-15T14:00:00+00:00"),   # 09:00 EST
    ("Asia/Kolkata", "2024-01-16T03:30:00+00:00"),       # 09:00 IST, the next day
    (":Europe/Berlin", "2024-01-16T08:00:00+00:00"),     # a leading ':' names a zone file
    ("/usr/share/zoneinfo/Asia/Tokyo", "2024-01-16T00:00:00+00:00"),
    ("XYZ3", "2024-01-15T12:00:00+00:00"),               # a POSIX rule: 3 hours west
    ("", "2024-01-16T09:00:00+00:00"),                   # empty TZ is UTC
    ("garbage", "2024-01-16T09:00:00+00:00"),            # unreadable: UTC, as glibc and Node
])
def test_the_process_local_zone_is_read_as_node_reads_it(local_tz, name, process_tz, expected) -> None:
    set_tz(local_tz, process_tz)
    got = calculate_next_millis({"pattern": "0 9 * * *", "tz": name}, ms("2024-01-15T10:40:00+00:00"))
    assert got == ms(expected)


def test_the_local_zone_follows_daylight_saving(local_tz) -> None:
    set_tz(local_tz, "Europe/Berlin")
    winter = calculate_next_millis({"pattern": "0 9 * * *", "tz": "local"}, ms("2024-01-15T00:00:00+00:00"))
    summer = calculate_next_millis({"pattern": "0 9 * * *", "tz": "local"}, ms("2024-07-15T00:00:00+00:00"))
    assert (winter, summer) == (ms("2024-01-15T08:00:00+00:00"), ms("2024-07-15T07:00:00+00:00"))


def test_a_local_every_schedule_is_read_too(local_tz) -> None:
    set_tz(local_tz, "America/New_York")
    assert calculate_next_millis({"every": 1000, "tz": "system"}, 5_000) == 6_000


# -- dates as JavaScript's Date reads ISO 8601 strings ----------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("2030-06-01", "2030-06-01T00:00:00+00:00"),               # date-only forms are UTC
    ("2030-06", "2030-06-01T00:00:00+00:00"),
    ("2030", "2030-01-01T00:00:00+00:00"),
    ("2030-06-01T00:00:00", "2030-06-01T04:00:00+00:00"),      # a date-time without offset is local
    ("2030-06-01T00:00", "2030-06-01T04:00:00+00:00"),
    ("2030-06-01 00:00:00", "2030-06-01T04:00:00+00:00"),
    ("2030-06-01T00:00:00.000Z", "2030-06-01T00:00:00+00:00"),  # JSON.stringify(new Date(...))
    ("2030-06-01t00:00:00z", "2030-06-01T00:00:00+00:00"),
    ("2030-06-01T02:00:00+02:00", "2030-06-01T00:00:00+00:00"),
    ("2030-06-01T02:00:00+0200", "2030-06-01T00:00:00+00:00"),
    ("+002030-06-01T00:00:00Z", "2030-06-01T00:00:00+00:00"),
    ("2030-05-31T24:00:00Z", "2030-06-01T00:00:00+00:00"),
])
def test_iso_dates_are_read_as_javascript_reads_them(local_tz, text, expected) -> None:
    set_tz(local_tz, "America/New_York")
    start = ms(expected)
    # every: the first run is start + every, so the start date is visible to the millisecond
    assert calculate_next_millis({"every": 1, "startDate": text}, 0) == start + 1
    assert calculate_next_millis({"every": 1, "start_date": text, "end_date": text}, 0) is None


def test_an_offsetless_start_picks_the_local_day(local_tz) -> None:
    set_tz(local_tz, "America/New_York")
    # 02:00 UTC after local midnight (04:00 UTC) is the next day; after UTC midnight, the same day
    got = calculate_next_millis({"pattern": "0 2 * * *", "startDate": "2030-06-01T00:00:00"}, 0)
    assert got == ms("2030-06-02T02:00:00+00:00")
    assert calculate_next_millis({"pattern": "0 2 * * *", "startDate": "2030-06-01"}, 0) == \
        ms("2030-06-01T02:00:00+00:00")


@pytest.mark.parametrize("text", ["tomorrow", "2030-13-01", "2030-02-30", "2030-06-01T25:00:00Z",
                                  "2030-06-01T00:00:60Z", "2030-06-01T00Z", "2030-06-01T00:00:00,5Z", ""])
def test_strings_javascript_would_not_read_as_iso_are_refused(text) -> None:
    with pytest.raises(InvalidScheduleError, match="is not an ISO 8601 date"):
        calculate_next_millis({"every": 1000, "end_date": text}, 0)


# -- what BullMQ writes into an iteration's opts.repeat ---------------------------------------------

def test_bullmq_bookkeeping_fields_are_read_and_ignored() -> None:
    repeat = {"pattern": "0 9 * * *", "tz": "Europe/Berlin", "count": 3, "prevMillis": 1_714_550_000_000,
              "key": "legacy:key", "jobId": "j1", "startDate": 1_714_500_000_000}
    plain = {"pattern": "0 9 * * *", "tz": "Europe/Berlin", "startDate": 1_714_500_000_000}
    ref = ms("2024-05-01T10:40:00+00:00")
    assert calculate_next_millis(repeat, ref) == calculate_next_millis(plain, ref) is not None


def test_an_offset_on_a_pattern_is_read_and_ignored() -> None:
    # BullMQ accepts it (and ignores it: only every schedules have a phase)
    ref = ms("2024-05-01T10:40:00+00:00")
    assert calculate_next_millis({"pattern": "0 9 * * *", "offset": 5}, ref) == \
        calculate_next_millis({"pattern": "0 9 * * *"}, ref)


@pytest.mark.parametrize("opts", [
    {"pattern": "0 9 * * *", "start_date": 10, "end_date": 5},
    {"every": 1000, "startDate": "2030-06-02T00:00:00Z", "endDate": "2030-06-01T00:00:00Z"},
])
def test_an_end_before_the_start_has_no_next_run(opts) -> None:
    assert calculate_next_millis(opts, 0) is None


# -- numbers are range-checked --------------------------------------------------------------------------

@pytest.mark.parametrize(("opts", "fragment"), [
    ({"every": 1e300}, "every=1e+300: must be <= 8640000000000000"),
    ({"every": 2**53 + 1}, "every=9007199254740993: must be <= 8640000000000000"),
    ({"every": float("inf")}, "every=inf: must be a whole number"),
    ({"every": float("nan")}, "every=nan: must be a whole number"),
    ({"every": 1000, "limit": 10**30}, "must be <= 9007199254740991"),
    ({"every": 1000, "limit": 2**53}, "limit=9007199254740992: must be <= 9007199254740991"),
    ({"every": 1000, "count": -1}, "count=-1: must be >= 0"),
    ({"every": 1000, "count": 1e300}, "count=1e+300: must be <="),
    ({"every": 1000, "offset": 1e300}, "offset=1e+300: must be"),
    ({"every": 1000, "start_date": 10**20}, "must be <= 8640000000000000"),
    ({"every": 1000, "end_date": MAX_DATE_MS + 1}, "must be <= 8640000000000000"),
    ({"every": 1000, "start_date": -MAX_DATE_MS - 1}, "must be >= -8640000000000000"),
    ({"every": 1000, "end_date": float("nan")}, "must be a whole number"),
    ({"every": 1000, "start_date": "+275761-01-01T00:00:00Z"}, "must be <= 8640000000000000"),
    ({"every": 1000, "prevMillis": 10**17}, "prevMillis=100000000000000000: must be <= 8640000000000000"),
    ({"every": 1000, "key": 5}, "key=5: must be a string"),
])
def test_numbers_out_of_range_are_refused_naming_the_option(opts, fragment) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        calculate_next_millis(opts, 0)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("reference", [MAX_DATE_MS + 1, -MAX_DATE_MS - 1, 10**300])
def test_a_reference_no_date_can_hold_is_refused(reference) -> None:
    with pytest.raises(InvalidScheduleError, match="reference_time"):
        calculate_next_millis({"every": 1000}, reference)


def test_an_every_run_past_what_a_date_holds_is_no_run() -> None:
    assert calculate_next_millis({"every": 1000}, MAX_DATE_MS - 1000) == MAX_DATE_MS
    assert calculate_next_millis({"every": 1000}, MAX_DATE_MS - 999) is None


@pytest.mark.parametrize(("pattern", "tz", "reference"), [
    ("59 23 31 12 *", "Pacific/Honolulu", "9999-12-20T00:00:00+00:00"),
    ("0 9 * * *", "America/New_York", "9999-12-31T20:00:00+00:00"),
    ("* * * * * *", "UTC-5", "9999-12-31T23:59:59+00:00"),
    ("0 20 31 12 *", "America/Los_Angeles", "9999-12-29T00:00:00+00:00"),
    ("0 0 * * *", "Etc/GMT+12", "9999-12-31T13:00:00+00:00"),
])
def test_year_9999_west_of_utc_is_an_invalid_schedule(pattern, tz, reference) -> None:
    with pytest.raises(InvalidScheduleError):
        calculate_next_millis({"pattern": pattern, "tz": tz}, ms(reference))
