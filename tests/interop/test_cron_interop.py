"""The cron vectors are still BullMQ's answers, and fresh random cases agree live.

Asks the BullMQ 6.7.0 installed for the interop rig (tests/interop/node_modules) through
``defaultRepeatStrategy``, the call its job schedulers make, and compares with
``calculate_next_millis``. No Redis is touched.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from echomq.errors import InvalidScheduleError
from echomq.schedule.next_run import calculate_next_millis

DATA = Path(__file__).resolve().parent.parent / "data"
sys.path.insert(0, str(DATA))
import make_cron_vectors as corpus

ASK = """
const cases = %s;
return cases.map((c) => {
  try {
    const r = bullmq.defaultRepeatStrategy(c.ref, { pattern: c.pattern, tz: c.tz });
    return r === undefined ? null : r;
  } catch (e) {
    return 'error';
  }
});
"""


def _bullmq(peer: Any, cases: list[dict[str, Any]]) -> list[Any]:
    answers: list[Any] = []
    for start in range(0, len(cases), 400):  # keep each argv well under 128 KiB
        chunk = [{"pattern": c["pattern"], "tz": c["tz"], "ref": c["ref"]} for c in cases[start:start + 400]]
        answers.extend(peer.run(ASK % json.dumps(chunk))[-1])
    return answers


def _ours(case: dict[str, Any]) -> Any:
    try:
        return calculate_next_millis({"pattern": case["pattern"], "tz": case["tz"]}, case["ref"])
    except InvalidScheduleError:
        return "error"


def test_stored_vectors_are_still_bullmqs_answers(bullmq_peer: Any) -> None:
    rng = random.Random(3)
    stored = [c for c in corpus.load() if c.get("tz") and "startDate" not in c and "endDate" not in c]
    sample = rng.sample(stored, 800)
    for case, live in zip(sample, _bullmq(bullmq_peer, sample)):
        expected = "error" if case["error"] is not None else case["next"]
        assert live == expected, case


def test_fresh_random_dst_cases_agree_live(bullmq_peer: Any) -> None:
    seed = random.randrange(1 << 30)  # new cases every run, so the stored corpus cannot be overfitted
    rng = random.Random(seed)
    pool = [(zone, t) for zone in ("Europe/Berlin", "America/New_York", "Europe/London")
            for t in corpus.transitions(zone, 2020, 2030)]
    cases = []
    for _ in range(800):
        zone, t = rng.choice(pool)
        fields = corpus.rand_pattern(rng).split()
        if rng.random() < 0.6:
            h = corpus.hours_for(zone, t)[0]
            fields[-4] = rng.choice([str(h), f"{h},{(h + 1) % 24}", "*", f"*/{rng.randint(1, 3)}"])
        cases.append({"pattern": " ".join(fields), "tz": zone,
                      "ref": t + rng.randint(-3 * 3_600_000, 3 * 3_600_000)})
    differ = [(case, live, _ours(case)) for case, live in zip(cases, _bullmq(bullmq_peer, cases))
              if live != _ours(case)]
    assert not differ, (f"seed {seed}", differ[:5])


def test_odd_transitions_walk_model_and_divergences_live(bullmq_peer: Any) -> None:
    """Around Lord_Howe and Chatham transitions: the walk model gives BullMQ's live answer, and
    where we answer otherwise BullMQ's answer is not a real run skipping nothing (its error)."""
    from echomq.schedule.cron.evaluate import compile_schedule
    from echomq.schedule.cron.walk import accepted, walk_next

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    pool = [(zone, t) for zone in corpus.ODD_ZONES for t in corpus.transitions(zone, 2000, 2035)]
    cases = []
    for _ in range(800):
        zone, t = rng.choice(pool)
        h, h1, hm = corpus.hours_for(zone, t)
        fields = corpus.rand_pattern(rng).split()
        if rng.random() < 0.7:
            fields[-4] = rng.choice([str(h), f"{hm}-{h1}", f"{h},{h1}", "*", f"*/{rng.randint(1, 3)}"])
        if rng.random() < 0.5:
            fields[-5] = rng.choice(["0", "30", "*/15", "*/20", "45", "59"])
        cases.append({"pattern": " ".join(fields), "tz": zone,
                      "ref": t + rng.randint(-3 * 3_600_000, 3 * 3_600_000) + rng.choice([0, 0, 1, 999])})
    walk_differs, wrongly_kept = [], []
    for case, live in zip(cases, _bullmq(bullmq_peer, cases)):
        ours = _ours(case)
        if live == "error" or ours == "error":
            assert live == ours, (f"seed {seed}", case, live, ours)
            continue
        schedule = compile_schedule(case["pattern"], case["tz"])
        walked = walk_next(schedule, schedule.zone, case["ref"])
        if (None if walked is None else walked * 1000) != live:
            walk_differs.append((case, live, walked))
        if ours != live and live is not None and accepted(schedule, schedule.zone, case["ref"], live // 1000):
            wrongly_kept.append((case, live, ours))
    assert not walk_differs, (f"seed {seed}", walk_differs[:5])
    assert not wrongly_kept, (f"seed {seed}", wrongly_kept[:5])


ASK_READ = """
const cases = %s;
return cases.map((c) => {
  try {
    const r = bullmq.defaultRepeatStrategy(c.ref, c.opts);
    return r === undefined ? null : r;
  } catch (e) {
    return 'error';
  }
});
"""


def test_process_local_zones_and_iso_dates_are_read_as_bullmq_reads_them(bullmq_peer: Any, monkeypatch: Any) -> None:
    """tz 'local'/'system'/'default' and ISO 8601 start dates, under the same TZ for Node and us."""
    import time

    rng = random.Random(11)
    patterns = ["0 9 * * *", "30 2 * * *", "*/20 * * * *", "0 0 1 * *", "15 3 * * 0"]
    starts = ["2024-03-10", "2024-03-10T01:30:00", "2024-11-03T01:30", "2024-06-01 00:00:00", "2024-06-01T00:00:00Z",
              "2024-06-01T04:00:00+02:00", "2024-06-01T04:00:00.250-0300"]
    try:
        for process_tz in ("America/New_York", "Asia/Kolkata", "Europe/Berlin", "XYZ3", ""):
            cases = []
            for _ in range(60):
                # always a tz: without one BullMQ reads the process zone and EchoMQ UTC (docs/cron.md)
                opts: dict[str, Any] = {"pattern": rng.choice(patterns),
                                        "tz": rng.choice(["local", "system", "default", "LOCAL"])}
                if rng.random() < 0.5:
                    opts["startDate"] = rng.choice(starts)
                cases.append({"opts": opts, "ref": 1_704_067_200_000 + rng.randint(0, 366 * 86_400_000)})
            peer = type(bullmq_peer)(bullmq_peer.env["REDIS_URL"])
            peer.env["TZ"] = process_tz
            live = peer.run(ASK_READ % json.dumps(cases))[-1]
            monkeypatch.setenv("TZ", process_tz)
            time.tzset()
            for case, theirs in zip(cases, live):
                try:
                    ours: Any = calculate_next_millis(case["opts"], case["ref"])
                except InvalidScheduleError:
                    ours = "error"
                assert ours == theirs, (process_tz, case)
    finally:
        monkeypatch.undo()
        time.tzset()
