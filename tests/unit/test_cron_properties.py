"""Properties of the cron evaluator, checked against a slow brute-force model of the rules.

The model below re-implements the documented semantics (docs/cron.md) the obvious way: scan
every minute of a window, read its wall clock in the zone, and collect the runs, including
the DST rules (gap runs shifted forward by the gap, once; a repeated stretch runs once unless
the hour field is ``*`` or the reference is already in its second pass). The evaluator must
give exactly the model's first run. The same model is the judge where BullMQ's cron-parser is
erratic (Australia/Lord_Howe, Pacific/Chatham): there we give BullMQ's own answer only when it
is a real run that skips no existing one (``real_run_skipping_nothing``), the model's otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq.schedule.cron.evaluate import compile_schedule
from echomq.schedule.cron.parse import CronFields, parse_pattern

UTC = dt.timezone.utc
VECTORS = Path(__file__).resolve().parents[1] / "data" / "cron_vectors.jsonl"
WINDOW = 26 * 3600  # seconds scanned by the model


def day_matches(f: CronFields, day: dt.date) -> bool:
    length = ((day.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)).day
    weekday = day.isoweekday() % 7
    dom = day.day in f.dom_days or (f.dom_last and day.day == length)
    dow = (weekday in f.dow_days and (f.dow_nth == 0 or -(-day.day // 7) == f.dow_nth)) or (
        weekday in f.dow_last and day.day + 7 > length)
    if f.dow_wildcard:
        return dom
    return dow if f.dom_wildcard else dom or dow


def wall_matches(f: CronFields, w: dt.datetime) -> bool:
    return (w.month in f.months and w.hour in f.hours and w.minute in f.minutes and w.second in f.seconds
            and day_matches(f, w.date()))


def _offset(t: int, zone: Any) -> int:
    return int(dt.datetime.fromtimestamp(t, zone).utcoffset().total_seconds())  # type: ignore[union-attr]


def model_runs(pattern: str, tz: str | None, ref_ms: int, window: int = WINDOW) -> list[int]:
    """Every run (epoch seconds) in (ref, ref + window], by brute force over minutes."""
    f = parse_pattern(pattern)
    zone = ZoneInfo(tz) if tz else UTC
    after = ref_ms // 1000
    ref_local = dt.datetime.fromtimestamp(after, zone)
    all_hours = len(f.hours) == 24
    runs: set[int] = set()
    start = after - after % 60
    for minute in range(start, after + window + 60, 60):
        local = dt.datetime.fromtimestamp(minute, zone)
        if not (local.month in f.months and local.hour in f.hours and local.minute in f.minutes
                and day_matches(f, local.date())):
            continue
        for second in f.seconds:
            t = minute + second
            if not after < t <= after + window:
                continue
            if local.fold == 1 and not all_hours and not (ref_local.fold == 1 and t - after < 86400):
                continue  # second pass of a repeated stretch
            runs.add(t)
    # gaps: the first matching wall time inside the gap runs, shifted forward by the gap
    t = after
    while t < after + window:
        if _offset(t + 900, zone) > _offset(t, zone):
            low, high = t, t + 900
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if _offset(mid, zone) == _offset(t, zone) else (low, mid)
            change, before, later = high, _offset(t, zone), _offset(high, zone)
            gap_start = (dt.datetime.fromtimestamp(change - 1, UTC).replace(tzinfo=None)
                         + dt.timedelta(seconds=before + 1))
            for k in range(later - before):
                wall = gap_start + dt.timedelta(seconds=k)
                if wall_matches(f, wall):
                    if after < change + k <= after + window:
                        runs.add(change + k)
                    break
        t += 900
    ordered = sorted(runs)
    # cron-parser's stale "skip the repeated hour" after a fractional reference in the last
    # second before a whole-hour fall-back on a day that does not match (see echomq.schedule.cron.evaluate)
    crossed = dt.datetime.fromtimestamp(after + 1, zone)
    if (ref_ms % 1000 and not all_hours and ref_local.fold == 0 and crossed.fold == 1 and crossed.minute == 0
            and _offset(after, zone) - _offset(after + 1, zone) == 3600
            and not (crossed.month in f.months and day_matches(f, crossed.date()))
            and ordered and dt.datetime.fromtimestamp(ordered[0], zone).hour == crossed.hour):
        day = dt.datetime.fromtimestamp(ordered[0], zone).date()
        ordered = [r for r in ordered if not (dt.datetime.fromtimestamp(r, zone).date() == day
                                              and dt.datetime.fromtimestamp(r, zone).hour == crossed.hour)]
    return ordered


def _odd_transition_between(zone: Any, low: int, high: int) -> bool:
    """An offset change in [low, high] that is not a whole-hour shift at a whole hour of the clock."""
    for t in range(low, high, 900):
        before, after = _offset(t, zone), _offset(t + 900, zone)
        if before != after:
            change = next(c for c in range(t + 1, t + 901) if _offset(c, zone) == after)
            if abs(after - before) != 3600 or (change + before) % 3600:
                return True
    return False


def real_run_skipping_nothing(pattern: str, tz: str, ref_ms: int, got_ms: int) -> bool:
    """BullMQ's answer near a partial-hour transition, accepted by cron_walk: a wall time that
    matches, after the reference, with no matching existing instant before it other than the
    second pass of a repeated stretch (unless the reference is in that second pass)."""
    f = parse_pattern(pattern)
    zone = ZoneInfo(tz)
    after, got = ref_ms // 1000, got_ms // 1000
    if got <= after or got_ms % 1000 or not wall_matches(f, dt.datetime.fromtimestamp(got, zone)):
        return False
    in_second_pass = dt.datetime.fromtimestamp(after, zone).fold == 1
    minute = after - after % 60
    while minute < got:
        local = dt.datetime.fromtimestamp(minute, zone)
        if not (local.month in f.months and local.hour in f.hours and day_matches(f, local.date())):
            minute += 900 - minute % 900  # offsets are whole quarter hours: so are wall hours
            continue
        if (local.fold == 0 or in_second_pass) and local.minute in f.minutes and any(
                after < minute + s < got for s in f.seconds):
            return False
        minute += 60
    return True


def check_against_model(pattern: str, tz: str | None, ref_ms: int, got_ms: int | None) -> None:
    """``got`` is after the reference, is a run, and no run lies between (within the window).

    Within a day of a transition that is not a whole-hour shift at a whole hour (Lord_Howe,
    Chatham), BullMQ's walk may also be the answer when it is a real run skipping nothing
    that exists (see echomq/cron_walk.py); anything else must still be the model's run.
    """
    runs = model_runs(pattern, tz, ref_ms)
    if tz is not None and got_ms is not None and got_ms != (runs[0] * 1000 if runs else None) and (
            _odd_transition_between(ZoneInfo(tz), ref_ms // 1000 - 86400, got_ms // 1000 + 86400)
            and real_run_skipping_nothing(pattern, tz, ref_ms, got_ms)):
        return
    if runs:
        assert got_ms == runs[0] * 1000, (pattern, tz, ref_ms, got_ms, runs[0] * 1000)
        return
    assert got_ms is None or got_ms > ref_ms + WINDOW * 1000 - 1000, (pattern, tz, ref_ms, got_ms)
    if got_ms is not None:  # far away: it must be a run as seen from two hours before it
        assert got_ms // 1000 in model_runs(pattern, tz, got_ms - 7_200_000, 7_200), (pattern, tz, ref_ms, got_ms)


# -- hypothesis --------------------------------------------------------------------------------

ZONES = [None, "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "Europe/London"]
TRANSITIONS = {  # one spring and one autumn transition per zone, epoch seconds
    "Europe/Berlin": [1711846800, 1729990800], "America/New_York": [1710054000, 1730613600],
    "Australia/Lord_Howe": [1743863400, 1759593600], "Pacific/Chatham": [1743857100, 1759070700],
    "Europe/London": [1711846800, 1729990800], None: [1711846800],
}


def _values(lo: int, hi: int) -> st.SearchStrategy[str]:
    single = st.integers(lo, hi).map(str)
    ranged = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*", str(lo)]), st.integers(1, max(1, (hi - lo) // 2))).map(
        lambda p: f"{p[0]}/{p[1]}")
    listed = st.sets(st.integers(lo, hi), min_size=2, max_size=4).map(lambda s: ",".join(map(str, sorted(s))))
    return st.one_of(st.just("*"), single, ranged, stepped, listed)


patterns = st.tuples(
    st.one_of(st.just("0"), _values(0, 59)), _values(0, 59), _values(0, 23),
    st.one_of(_values(1, 31), st.sampled_from(["L", "?", "1,L"])), _values(1, 12),
    st.one_of(st.just("*"), st.just("*"), _values(0, 6), st.sampled_from(["5L", "1#2", "0#5", "MON-FRI", "?"])),
).map(" ".join)


@st.composite
def references(draw: st.DrawFn) -> tuple[str | None, int]:
    tz = draw(st.sampled_from(ZONES))
    center = draw(st.sampled_from(TRANSITIONS[tz]))
    offset = draw(st.one_of(st.integers(-3 * 3600, 3 * 3600), st.sampled_from([-3600, -1, 0, 1, 1800, 3600])))
    return tz, (center + offset) * 1000 + draw(st.sampled_from([0, 0, 1, 500, 999]))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns, where=references())
def test_next_run_is_the_models_first_run(pattern: str, where: tuple[str | None, int]) -> None:
    tz, ref = where
    try:
        schedule = compile_schedule(pattern, tz)
    except ValueError:
        return  # invalid combinations (e.g. day 31 of a 30-day month) are covered elsewhere
    got = schedule.next_after(ref)
    assert got is None or got > ref
    check_against_model(pattern, tz, ref, got)


@settings(max_examples=150, deadline=None)
@given(pattern=patterns, ref=st.integers(0, 4_102_444_800_000))
def test_utc_result_is_after_matches_and_nothing_between(pattern: str, ref: int) -> None:
    try:
        schedule = compile_schedule(pattern, None)
    except ValueError:
        return
    got = schedule.next_after(ref)
    if got is None:
        return
    assert got > ref and got % 1000 == 0
    assert wall_matches(schedule.fields, dt.datetime.fromtimestamp(got // 1000, UTC))
    assert schedule.next_after(ref) == got  # deterministic (the month cache changes nothing)
    check_against_model(pattern, None, ref, got)


# -- the odd zones: where cron-parser is erratic, our answer must be the right one -------------

def _odd_vectors() -> list[dict[str, Any]]:
    with VECTORS.open() as handle:
        next(handle)
        return [case for case in map(json.loads, handle) if case["cat"] == "dst_odd"]


def test_odd_zone_answers_are_correct_even_where_bullmq_differs() -> None:
    from echomq.schedule.next_run import calculate_next_millis

    cases = _odd_vectors()
    assert len(cases) > 1000
    differ = 0
    for case in cases:
        if case["error"] is not None:
            with pytest.raises(ValueError):
                calculate_next_millis({"pattern": case["pattern"], "tz": case["tz"]}, case["ref"])
            continue
        got = calculate_next_millis({"pattern": case["pattern"], "tz": case["tz"]}, case["ref"])
        check_against_model(case["pattern"], case["tz"], case["ref"], got)
        if got != case["next"]:
            differ += 1  # then BullMQ is wrong: no run, a run too early, a skipped run or a foreign time
            bullmq = case["next"]
            assert bullmq is None or bullmq <= case["ref"] or not real_run_skipping_nothing(
                case["pattern"], case["tz"], case["ref"], bullmq), case
    assert differ < len(cases) * 0.05


@pytest.mark.parametrize(("pattern", "tz", "ref_iso", "expected_iso"), [
    # cron-parser: skips 02:30, which exists (Lord_Howe's gap is 02:00-02:30)
    ("30 2 * * *", "Australia/Lord_Howe", "2025-10-05T01:59:00+10:30", "2025-10-05T02:30:00+11:00"),
    # cron-parser: "loop limit exceeded"; 02:00 is in the repeated stretch and runs once
    ("0 2 * * *", "Australia/Lord_Howe", "2025-04-06T01:00:00+11:00", "2025-04-06T02:00:00+10:30"),
    # cron-parser: answers 02:30+13:45, before the reference
    ("30 * * * *", "Pacific/Chatham", "2025-04-06T02:45:00+13:45", "2025-04-06T03:30:00+13:45"),
    # cron-parser: 04:45; 03:45+13:45 exists (Chatham's gap is 02:45-03:45)
    ("45 3 * * *", "Pacific/Chatham", "2025-09-28T00:45:00+12:45", "2025-09-28T03:45:00+13:45"),
    # a time in Chatham's gap runs shifted by the gap (one hour); cron-parser: 04:59, by two
    ("59 2 * * *", "Pacific/Chatham", "2025-09-28T01:45:00+12:45", "2025-09-28T03:59:00+13:45"),
    # as cron-parser: its walk enters hour 02 at 02:30 and runs the first real match, 02:00 is not run
    ("*/20 2 * * *", "Australia/Lord_Howe", "2025-10-05T01:00:00+10:30", "2025-10-05T02:40:00+11:00"),
    ("0 2 * * 0", "Australia/Lord_Howe", "2025-10-05T01:00:00+10:30", "2025-10-12T02:00:00+11:00"),
    # as cron-parser: the second pass of a fixed hour runs when the walk steps into it
    ("30 0-2 * * *", "Australia/Lord_Howe", "2025-04-06T01:59:59.999+11:00", "2025-04-06T01:30:00+10:30"),
    # as cron-parser: hour `*`, but its hour step jumps over the second pass
    ("*/15 * * * *", "Australia/Lord_Howe", "2025-04-06T01:59:59+11:00", "2025-04-06T02:00:00+10:30"),
])
def test_documented_odd_zone_examples(pattern: str, tz: str, ref_iso: str, expected_iso: str) -> None:
    from echomq.schedule.next_run import calculate_next_millis

    ref = int(dt.datetime.fromisoformat(ref_iso).timestamp() * 1000)
    expected = int(dt.datetime.fromisoformat(expected_iso).timestamp() * 1000)
    assert calculate_next_millis({"pattern": pattern, "tz": tz}, ref) == expected
    check_against_model(pattern, tz, ref, expected)
