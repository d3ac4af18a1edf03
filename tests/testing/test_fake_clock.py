"""FakeClock: time that moves only when the test says, in every form a test writes a time."""

from __future__ import annotations

import datetime as dt
import threading
from zoneinfo import ZoneInfo

import pytest

from echomq import InvalidInputError
from echomq.testing import FakeClock, wall_clock

BERLIN = ZoneInfo("Europe/Berlin")


def test_a_clock_starts_where_it_is_told_in_any_form() -> None:
    expected = int(dt.datetime(2027, 3, 27, 11, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)
    for start in (expected, "2027-03-27T12:00:00+01:00", "2027-03-27T11:00:00Z",
                  dt.datetime(2027, 3, 27, 12, 0, tzinfo=BERLIN)):
        clock = FakeClock(start)
        assert clock() == clock.now == expected, start


def test_it_stands_still_until_moved() -> None:
    clock = FakeClock(1_000)
    assert [clock(), clock()] == [1_000, 1_000]
    assert clock.advance(500) == 1_500
    assert clock.advance(seconds=1, minutes=1) == 1_500 + 61_000
    assert clock.advance(dt.timedelta(hours=1)) == 1_500 + 61_000 + 3_600_000
    assert clock.advance(days=1, hours=0.5) == 1_500 + 61_000 + 3_600_000 + 88_200_000
    assert clock.set("1970-01-01T00:00:02Z") == 2_000 == clock()
    assert clock.set(1_000) == 1_000  # back in time: allowed, a test of a clock set back


def test_it_shows_now_in_a_zone() -> None:
    clock = FakeClock("2027-03-28T00:59:59Z")
    assert clock.datetime().isoformat() == "2027-03-28T00:59:59+00:00"
    assert clock.datetime("Europe/Berlin").isoformat() == "2027-03-28T01:59:59+01:00"
    clock.advance(seconds=1)
    assert clock.datetime("Europe/Berlin").isoformat() == "2027-03-28T03:00:00+02:00"  # the gap
    assert clock.datetime(dt.timezone.utc) == dt.datetime(2027, 3, 28, 1, tzinfo=dt.timezone.utc)
    assert repr(clock) == "FakeClock('2027-03-28T01:00:00.000+00:00')"
    assert wall_clock(0, "UTC+1").isoformat() == "1970-01-01T01:00:00+01:00"


@pytest.mark.parametrize(("start", "message"), [
    (dt.datetime(2027, 3, 28, 2, 30), "timezone-aware"),
    ("2027-03-28 02:30", "timezone-aware"),
    ("tomorrow", "not an ISO 8601"),
    (1.5, "epoch milliseconds"),
    (True, "epoch milliseconds"),
    (-1, "between 1970"),
])
def test_a_time_that_names_no_instant_is_refused(start: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        FakeClock(start)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"ms": -1}, "negative"),
    ({"seconds": 0.0005}, "not a whole number"),
    ({"hours": "1"}, "must be a number"),
])
def test_advance_moves_forward_by_whole_milliseconds_only(kwargs: dict[str, object], message: str) -> None:
    clock = FakeClock(0)
    with pytest.raises(InvalidInputError, match=message):
        clock.advance(**kwargs)  # type: ignore[arg-type]
    assert clock() == 0


def test_threads_moving_it_lose_no_step() -> None:
    clock = FakeClock(0)

    def step() -> None:
        for _ in range(1000):
            clock.advance(1)

    threads = [threading.Thread(target=step) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock() == 4000
