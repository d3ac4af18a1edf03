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
from echomq.repeat import calculate_next_millis

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
