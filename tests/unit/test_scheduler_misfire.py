"""Missed-run policies as pure functions (echomq/schedule/misfire.py), across every daylight-saving
vector of the cron tests: a 6-hour outage gives exactly the run count each policy says.

The slots a schedule has are the ones cron defines (``next_after`` chained, which
tests/unit/test_cron.py holds to BullMQ 6.7's answers on these same vectors): a skipped local
hour has its runs where cron-parser puts them, a repeated hour has them as often as it does.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from echomq.errors import InvalidScheduleError
from echomq.schedule.misfire import DEFAULT_GRACE_MS, MAX_CATCH_UP, MAX_GRACE_MS, Misfire
from echomq.schedule.spec import RepeatSpec
from echomq.schedule.step import slots_after

VECTORS = Path(__file__).resolve().parents[1] / "data" / "cron_vectors.jsonl"
HOUR = 3_600_000
OUTAGE = 6 * HOUR


def dst_vectors() -> list[tuple[str, str, int]]:
    """(pattern, zone, slot) of every daylight-saving vector with a next run, each slot once."""
    with VECTORS.open() as handle:
        next(handle)
        rows = [json.loads(line) for line in handle]
    return sorted({(r["pattern"], r["tz"], r["next"]) for r in rows
                   if r["cat"].startswith("dst") and r["error"] is None and r["next"] is not None})


def offset(tz: str, millis: int) -> dt.timedelta | None:
    return dt.datetime.fromtimestamp(millis / 1000, ZoneInfo(tz)).utcoffset()


def ticks(spec: RepeatSpec, after: int, until: int) -> list[int]:
    """The slots in (after, until], as cron defines them (the first MAX_CATCH_UP + 1: enough)."""
    out: list[int] = []
    current = spec.next_millis(after)
    while current is not None and current <= until and len(out) <= MAX_CATCH_UP:
        out.append(current)
        current = spec.next_millis(current)
    return out


def runs(policy: Misfire, spec: RepeatSpec, slot: int, now: int) -> int:
    """How many runs a late iteration at ``slot`` taken at ``now`` gives under ``policy``."""
    return int(policy.runs_late(slot, now)) + len(policy.catch_up(slot, now, spec.next_millis))


def test_a_six_hour_outage_across_each_dst_vector_runs_what_each_policy_says() -> None:
    vectors = dst_vectors()
    assert len(vectors) > 4000
    run_once, skip = Misfire(), Misfire("skip", DEFAULT_GRACE_MS)
    run_all, run_all_3h = Misfire("run_all", OUTAGE), Misfire("run_all", 3 * HOUR)
    crossing = 0
    for pattern, tz, slot in vectors:
        spec = RepeatSpec.parse({"pattern": pattern, "tz": tz}, reading=True)
        now = slot + OUTAGE
        crossing += offset(tz, slot) != offset(tz, now)
        assert run_once.runs_late(slot, now) and run_once.catch_up(slot, now, spec.next_millis) == []
        assert not skip.runs_late(slot, now) and skip.catch_up(slot, now, spec.next_millis) == []
        missed = ticks(spec, slot, now)
        caught = run_all.catch_up(slot, now, spec.next_millis)
        assert run_all.runs_late(slot, now) and caught == missed[:MAX_CATCH_UP], (pattern, tz, slot)
        # the grace ends three hours back: the late one does not run, what is within does
        within = ticks(spec, max(slot, now - 3 * HOUR - 1), now)  # where the walk starts (a month-old
        assert not run_all_3h.runs_late(slot, now)                # slot would be a long walk)
        assert run_all_3h.catch_up(slot, now, spec.next_millis) == within[:MAX_CATCH_UP], (pattern, tz, slot)
    assert crossing > 500, "the vectors' outages cross the DST transitions"


@pytest.mark.parametrize(("pattern", "tz", "slot", "expected"), [
    # Berlin springs forward at 01:00Z on 2024-03-31: 02:00 local does not exist, but every real
    # hour still has one :00 -> six runs in six hours
    ("0 * * * *", "Europe/Berlin", 1711839600000, 6),
    # New York falls back at 06:00Z on 2024-11-03: 01:00-02:00 local happens twice
    ("30 1 * * *", "America/New_York", 1730611800000 - HOUR, None),
    # a daily run at 02:30 Berlin: on the spring-forward night cron-parser moves it to 03:30
    ("30 2 * * *", "Europe/Berlin", 1711846799999 - 5 * HOUR, 1),
])
def test_known_dst_nights(pattern: str, tz: str, slot: int, expected: int | None) -> None:
    spec = RepeatSpec.parse({"pattern": pattern, "tz": tz}, reading=True)
    missed = Misfire("run_all", OUTAGE).catch_up(slot, slot + OUTAGE, spec.next_millis)
    assert missed == ticks(spec, slot, slot + OUTAGE)
    if expected is not None:
        assert len(missed) == expected, missed
    if pattern == "30 2 * * *":
        assert missed == [1711848600000]  # 01:30Z = 03:30 CEST, BullMQ's answer in the vectors


def test_every_slots_keep_their_phase() -> None:
    after = slots_after({"repeat": {"every": 1000}}, 5_250)
    assert [after(t) for t in (0, 5_249, 5_250, 5_251, 9_999)] == [5_250, 5_250, 6_250, 6_250, 10_250]
    policy = Misfire("run_all", 2_500)
    assert policy.catch_up(5_250, 10_000, after) == [8_250, 9_250]  # from 7_500 on
    ended = slots_after({"repeat": {"every": 1000, "endDate": 9_000}}, 5_250)
    assert policy.catch_up(5_250, 10_000, ended) == [8_250]


def test_the_grace_edge_is_inclusive_and_run_once_ignores_it() -> None:
    skip = Misfire("skip", 1000)
    assert skip.runs_late(0, 1000) and not skip.runs_late(0, 1001)
    assert Misfire().runs_late(0, 10 ** 12)
    assert Misfire("skip", 0).runs_late(5, 5) and not Misfire("skip", 0).runs_late(5, 6)
    assert Misfire("run_all", 0).catch_up(0, 100, lambda t: t + 1) == [100]  # only the slot at now itself
    assert Misfire().catch_up(0, 10 ** 6, lambda t: t + 1) == []


def test_parse_and_what_is_stored() -> None:
    assert Misfire.parse(None, None) == ("run_once", None)
    assert Misfire.parse("skip", None) == ("skip", DEFAULT_GRACE_MS)
    assert Misfire.parse("run_all", MAX_GRACE_MS).fields() == {"emqMisfire": "run_all",
                                                                "emqMisfireGraceMs": MAX_GRACE_MS}
    assert Misfire.parse("run_once", None).fields() == {}
    for policy, grace, message in (("later", None, "unknown policy"), (1, None, "unknown policy"),
                                   ("skip", -1, "must be within"), ("skip", MAX_GRACE_MS + 1, "must be within"),
                                   ("skip", True, "must be an int"), ("run_once", 5, "applies to")):
        with pytest.raises(InvalidScheduleError, match=message):
            Misfire.parse(policy, grace)
    # what another runtime or version left: read leniently, never raised
    assert Misfire.stored({}) == ("run_once", None)
    assert Misfire.stored({"emqMisfire": "sometimes"}) == ("run_once", None)
    assert Misfire.stored({"emqMisfire": b"skip", "emqMisfireGraceMs": b"x"}) == ("skip", DEFAULT_GRACE_MS)
    assert Misfire.stored({"emqMisfire": "run_all", "emqMisfireGraceMs": "-4"}) == ("run_all", 0)
