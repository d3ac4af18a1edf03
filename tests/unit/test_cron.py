"""The cron dialect and its next-run computation, checked against BullMQ 6.7's own answers.

``tests/data/cron_vectors.jsonl`` holds 14,000 cases answered by BullMQ 6.7.0 (cron-parser
5.10.3) through ``tests/data/make_cron_vectors.py``. Outside the odd DST zones we must give
the same millisecond, the same "nothing", the same "error or not", case for case.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from echomq.errors import InvalidScheduleError
from echomq.schedule.cron.evaluate import compile_schedule, resolve_zone
from echomq.schedule.next_run import calculate_next_millis

VECTORS = Path(__file__).resolve().parents[1] / "data" / "cron_vectors.jsonl"
UTC = dt.timezone.utc
# Categories where BullMQ's answer is the contract; dst_odd (Lord_Howe, Chatham near their
# transitions) is judged by the model in test_cron_properties.py, BullMQ being erratic there.
EXACT = {"syntax", "invalid", "random", "dom_dow", "month_end", "dst_hour", "dst_random", "dst_midnight",
         "bounds", "tz_names", "exact", "exact_bounds", "odd_uniform"}


def _load() -> list[dict[str, Any]]:
    with VECTORS.open() as handle:
        header = json.loads(next(handle))
        assert header["oracle"]["bullmq"] == "6.7.0" and header["oracle"]["cron-parser"] == "5.10.3"
        return [json.loads(line) for line in handle]


def _ours(case: dict[str, Any]) -> tuple[int | None, bool]:
    opts = {k: case[k] for k in ("pattern", "tz", "startDate", "endDate") if k in case and case[k] is not None}
    if case.get("tz") == "":
        opts["tz"] = ""
    try:
        return calculate_next_millis(opts, case["ref"]), False
    except InvalidScheduleError:
        return None, True


def _agrees(case: dict[str, Any], got: tuple[int | None, bool]) -> bool:
    if case["error"] is not None or got[1]:
        return (case["error"] is not None) == got[1]
    return got[0] == case["next"]


def test_vectors_agree_with_bullmq() -> None:
    cases = _load()
    assert len(cases) >= 12000
    total: Counter[str] = Counter()
    agree: Counter[str] = Counter()
    wrong = []
    for case in cases:
        got = _ours(case)
        ok = _agrees(case, got)
        total[case["cat"]] += 1
        agree[case["cat"]] += ok
        if not ok and case["cat"] in EXACT:
            wrong.append((case, got))
        if got[0] is not None:
            assert got[0] > case["ref"] and got[0] > case.get("startDate", case["ref"]), case
    assert not wrong, wrong[:5]
    assert set(total) == EXACT | {"dst_odd"}
    overall = sum(agree.values()) / sum(total.values())
    assert overall >= 0.995, overall
    assert agree["dst_odd"] / total["dst_odd"] >= 0.95, agree["dst_odd"] / total["dst_odd"]


def test_walk_model_gives_every_zoned_answer_bullmq_gave() -> None:
    """echomq.schedule.cron.walk models cron-parser's search; it must reproduce BullMQ exactly, errors
    and all, on every stored case with a zone (we only give its answer where it is right)."""
    from echomq.schedule.cron.evaluate import compile_schedule
    from echomq.schedule.cron.walk import walk_next

    checked = 0
    for case in _load():
        if case["error"] is not None or not case.get("tz") or "startDate" in case or "endDate" in case:
            continue
        schedule = compile_schedule(case["pattern"], case["tz"])
        if isinstance(schedule.zone, int):
            continue
        walked = walk_next(schedule, schedule.zone, case["ref"])
        assert (None if walked is None else walked * 1000) == case["next"], case
        checked += 1
    assert checked > 8000


# -- the dialect, rule by rule (each rule was checked against the oracle) ---------------------

def _ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def _next(pattern: str, ref: str, tz: str | None = None) -> str | None:
    got = compile_schedule(pattern, tz).next_after(_ms(ref))
    if got is None:
        return None
    zone = resolve_zone(tz)
    assert not isinstance(zone, int) or zone == 0
    when = dt.datetime.fromtimestamp(got / 1000, UTC if isinstance(zone, int) else zone)
    return when.isoformat()


@pytest.mark.parametrize(("pattern", "ref", "expected"), [
    ("0 9 * * *", "2024-05-01T09:00:00+00:00", "2024-05-02T09:00:00+00:00"),  # strictly after
    ("0 9 * * *", "2024-05-01T08:59:59.999+00:00", "2024-05-01T09:00:00+00:00"),
    ("0 0 * * 1/2", "2024-05-04T12:00:00+00:00", "2024-05-05T00:00:00+00:00"),  # steps reach 7 = Sunday
    ("0 0 * * */2", "2024-05-05T12:00:00+00:00", "2024-05-07T00:00:00+00:00"),  # 0,2,4,6
    ("0 0 * * 7", "2024-05-01T00:00:00+00:00", "2024-05-05T00:00:00+00:00"),
    ("5", "2024-05-01T00:00:00+00:00", "2024-05-03T00:00:00+00:00"),  # right-aligned: day of week 5
    # 4 fields are hour, day, month, weekday (minute is *): every minute of 00:xx on Jan 12
    ("0 12 1 *", "2024-05-01T00:00:00+00:00", "2025-01-12T00:00:00+00:00"),
    ("? ? ? ? ?", "2024-05-01T00:00:30+00:00", "2024-05-01T00:01:00+00:00"),  # ? is *
    ("0 0 13 * 5", "2024-09-01T00:00:00+00:00", "2024-09-06T00:00:00+00:00"),  # DOM or DOW
    ("0 0 */1 * 1", "2024-05-01T12:00:00+00:00", "2024-05-02T00:00:00+00:00"),  # */1 is restricted: OR
    ("0 0 L 2 *", "2100-02-01T00:00:00+00:00", "2100-02-28T00:00:00+00:00"),  # 2100 is not leap
    ("0 0 29 2 *", "2097-03-01T00:00:00+00:00", "2104-02-29T00:00:00+00:00"),
    ("0 0 L 2 *", "2000-02-01T00:00:00+00:00", "2000-02-29T00:00:00+00:00"),
    ("0 0 * * 5L", "2024-05-01T00:00:00+00:00", "2024-05-31T00:00:00+00:00"),  # last Friday
    ("0 0 * * 1#5", "2024-05-01T00:00:00+00:00", "2024-07-29T00:00:00+00:00"),
    ("@weekdays", "2024-05-04T00:00:00+00:00", "2024-05-06T00:00:00+00:00"),
    ("30 15 10 * * *", "2024-05-01T00:00:00+00:00", "2024-05-01T10:15:30+00:00"),  # seconds first
    ("0 0 31 4,6 *", "2024-01-01T00:00:00+00:00", None),  # never: BullMQ finds nothing either
])
def test_dialect_rules(pattern: str, ref: str, expected: str | None) -> None:
    assert _next(pattern, ref) == expected


@pytest.mark.parametrize(("pattern", "tz", "ref", "expected"), [
    # gap: a time inside the skipped hour runs shifted by the gap, once
    ("30 2 * * *", "Europe/Berlin", "2024-03-31T01:00:00+01:00", "2024-03-31T03:30:00+02:00"),
    ("15,45 2 * * *", "Europe/Berlin", "2024-03-31T01:00:00+01:00", "2024-03-31T03:15:00+02:00"),
    ("15,45 2 * * *", "Europe/Berlin", "2024-03-31T03:15:00+02:00", "2024-04-01T02:15:00+02:00"),
    # ... and not at all once the reference is past the transition
    ("30 2 * * *", "Europe/Berlin", "2024-03-31T03:10:00+02:00", "2024-04-01T02:30:00+02:00"),
    # overlap: a fixed hour runs once (first pass) ...
    ("30 2 * * *", "Europe/Berlin", "2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"),
    # ... unless the reference is already in the second pass
    ("45 2 * * *", "Europe/Berlin", "2024-10-27T02:10:00+01:00", "2024-10-27T02:45:00+01:00"),
    # ... and an hour field of * runs in both passes
    ("30 * * * *", "Europe/Berlin", "2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00"),
    ("0 1 * * *", "America/New_York", "2024-11-03T01:00:00-04:00", "2024-11-04T01:00:00-05:00"),
    # a day that starts with a gap: BullMQ jumps to its first real second
    ("0 0 * * *", "America/Havana", "2024-03-09T21:00:00-05:00", "2024-03-11T00:00:00-04:00"),
])
def test_daylight_saving_rules(pattern: str, tz: str, ref: str, expected: str) -> None:
    assert _next(pattern, ref, tz) == expected


def test_midnight_gap_shift_is_not_carried_to_a_later_day() -> None:
    # Nuuk skips 23:00-00:00. BullMQ shifts 23:30 onto the next day only if that day matches;
    # otherwise it runs 00:30 on the next matching day, a time the pattern does not name. We
    # run the next time the pattern names instead (a documented divergence).
    assert _next("30 22,23 * * *", "2024-03-30T22:40:00-02:00", "America/Nuuk") == "2024-03-31T00:30:00-01:00"
    assert _next("30 22,23 30 * *", "2024-03-30T22:40:00-02:00", "America/Nuuk") == "2024-04-30T22:30:00-01:00"
    assert _next("30 23 * * *", "2024-03-30T22:40:00-02:00", "America/Nuuk") == "2024-03-31T23:30:00-01:00"


def test_the_fall_back_quirk_of_cron_parser_is_kept() -> None:
    # a fractional reference in the last second before the fall-back, on a Sunday that does
    # not match: BullMQ skips Monday's 02:00 too (and so do we, to stay on one timeline)
    assert _next("0 2 * * 1-5", "2024-10-27T02:59:59.999+02:00", "Europe/Berlin") == "2024-10-29T02:00:00+01:00"
    assert _next("0 2 * * 1-5", "2024-10-27T02:59:59+02:00", "Europe/Berlin") == "2024-10-28T02:00:00+01:00"


@pytest.mark.parametrize(("pattern", "fragment"), [
    ("61 0 * * *", "minute (field 1 of 5) '61': value 61 is outside 0-59"),
    ("0 0 * * * * *", "7 fields"),
    ("* * * * 0,7", "listed twice (0 and 7 are both Sunday)"),
    ("*/15,30 * * * *", "30 is listed twice"),
    ("* 5-1 * * *", "hour (field 2 of 5) '5-1': range '5-1' is reversed"),
    ("* * 1W * *", "day-of-month (field 3 of 5) '1W': invalid characters"),
    ("* * * * 1,2#2", "'#' cannot be combined"),
    ("* * * * 1#6", "occurrence after '#' must be 1 to 5"),
    ("* * * * L", "bare 'L'"),
    ("@DAILY", "unknown name 'DAI'"),
    ("@midnight", "unknown name 'mid'"),
    ("H * * * *", "'H' (random hashed values) is not supported"),
    ("0 0 30 2 *", "never occurs in month"),
    ("*/0 * * * *", "step must be a positive integer"),
    ("", "is empty"),
    ("   ", "is empty"),
    ("0 0 * JANUARY *", "unknown name 'UAR'"),
    ("1,,2 * * * *", "empty list item"),
])
def test_bad_patterns_name_field_and_reason(pattern: str, fragment: str) -> None:
    with pytest.raises(InvalidScheduleError) as caught:
        compile_schedule(pattern, None)
    assert fragment in str(caught.value)
    assert repr(pattern) in str(caught.value) or not pattern.strip()


@pytest.mark.parametrize(("name", "nine_am"), [
    ("europe/berlin", "2024-07-01T07:00:00+00:00"),  # names are read without regard to case
    ("EUROPE/BERLIN", "2024-07-01T07:00:00+00:00"),
    ("utc", "2024-07-01T09:00:00+00:00"),
    ("GMT", "2024-07-01T09:00:00+00:00"),
    ("UTC+1", "2024-07-01T08:00:00+00:00"),  # a fixed offset, east of Greenwich
    ("utc-05:30", "2024-07-01T14:30:00+00:00"),
    ("US/Eastern", "2024-07-01T13:00:00+00:00"),  # the old alias, on summer time (UTC-4)
])
def test_zone_names_are_read_like_luxon(name: str, nine_am: str) -> None:
    # 9:00 on the wall clock of the zone the name means: each answer is the cron oracle's
    # (BullMQ 6.7's luxon), asked at the same reference
    got = compile_schedule("0 9 * * *", name).next_after(_ms("2024-07-01T00:00:00+00:00"))
    assert got is not None
    assert dt.datetime.fromtimestamp(got / 1000, UTC).isoformat() == nine_am


@pytest.mark.parametrize("name", ["", "Mars/Olympus", "local", "system", "UTC+25", "+01:00", "Factory",
                                  "posixrules", "localtime", "posix/Europe/Berlin", "Europe/Berlin ", "../etc/passwd"])
def test_bad_zone_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidScheduleError, match="tz"):
        compile_schedule("0 9 * * *", name)


def test_fixed_offset_zone() -> None:
    assert _next("0 9 * * *", "2024-05-01T00:00:00+00:00", None) == "2024-05-01T09:00:00+00:00"
    got = compile_schedule("0 9 * * *", "UTC+2").next_after(_ms("2024-05-01T00:00:00+00:00"))
    assert got == _ms("2024-05-01T07:00:00+00:00")


def test_compiled_schedules_are_cached_and_listable() -> None:
    first = compile_schedule("*/5 * * * *", "Europe/Berlin")
    assert compile_schedule("*/5 * * * *", "Europe/Berlin") is first
    runs = []
    for run in first.runs_after(_ms("2024-05-01T00:00:00+00:00")):
        runs.append(run)
        if len(runs) == 3:
            break
    assert [b - a for a, b in itertools.pairwise(runs)] == [300_000, 300_000]


def test_negative_and_far_references() -> None:
    assert _next("0 0 1 1 *", "1969-06-01T00:00:00+00:00") == "1970-01-01T00:00:00+00:00"
    assert _next("0 0 1 1 *", "9999-06-01T00:00:00+00:00") is None
    assert _next("0 0 * * *", "9999-12-29T12:00:00+00:00", "Europe/Berlin") == "9999-12-30T00:00:00+01:00"
    for ref in (-10**14, 253402300799000, 10**17):
        with pytest.raises(InvalidScheduleError, match="outside the years 1-9999"):
            compile_schedule("0 0 * * *", "Europe/Berlin").next_after(ref)
