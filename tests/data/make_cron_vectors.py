#!/usr/bin/env python3
"""Build the cron test vectors: a broad corpus of cases, answered by BullMQ 6.7 itself.

BullMQ answers through ``tests/data/bullmq_next_runs.js``, which calls BullMQ's own
``defaultRepeatStrategy`` (the call its job schedulers make) with the process zone pinned to
UTC. It loads the BullMQ 6.7.0 pinned by the interop rig in ``tests/interop/package.json``.
From the repository root (Node >= 18 on the PATH):

    (cd tests/interop && npm ci --ignore-scripts --no-audit --no-fund)   # once, if node_modules is missing
    .venv/bin/python tests/data/make_cron_vectors.py --make                 # rewrites cron_vectors.jsonl
    .venv/bin/python tests/data/make_cron_vectors.py --compare              # agreement table
    .venv/bin/python tests/data/make_cron_vectors.py --probe 30000 --seed 1 # live DST cases, not stored

The corpus is deterministic (fixed seed). Each line of ``cron_vectors.jsonl`` is one case:
``cat`` (category), ``pattern``, ``tz``, ``ref`` (epoch ms), optional ``startDate``/``endDate``,
and BullMQ's answer: ``next`` (epoch ms or null) and ``error`` (BullMQ's message or null).
``--compare`` scores echomq, croniter, cronsim and python-crontab against those answers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

HERE = Path(__file__).resolve().parent
VECTORS = HERE / "cron_vectors.jsonl"
ORACLE = ("node", str(HERE / "bullmq_next_runs.js"))  # BullMQ 6.7.0 from tests/interop/node_modules
UTC = dt.timezone.utc

HOUR_ZONES = ("Europe/Berlin", "America/New_York", "Europe/London", "Australia/Sydney")
ODD_ZONES = ("Australia/Lord_Howe", "Pacific/Chatham")  # 30- and 45-minute DST
MIDNIGHT_ZONES = ("America/Havana", "America/Santiago", "Asia/Beirut", "America/Asuncion", "America/Nuuk")
FLAT_ZONES = ("Asia/Tokyo", "Asia/Kolkata", "Asia/Kathmandu", "America/Phoenix")

MONTHS = ["jan", "FEB", "Mar", "apr", "MAY", "jun", "Jul", "aug", "SEP", "oct", "Nov", "DEC"]
DAYS = ["sun", "MON", "Tue", "wed", "THU", "fri", "Sat"]


def ms(*parts: int, tz: Any = UTC) -> int:
    return int(dt.datetime(*parts, tzinfo=tz).timestamp() * 1000)


def transitions(zone: str, first_year: int, last_year: int) -> list[int]:
    """Epoch ms of each offset change of a zone between two years (found by bisection)."""
    tz = ZoneInfo(zone)

    def offset(t: int) -> Any:
        return dt.datetime.fromtimestamp(t, tz).utcoffset()

    out = []
    t = int(dt.datetime(first_year, 1, 1, tzinfo=UTC).timestamp())
    stop = int(dt.datetime(last_year + 1, 1, 1, tzinfo=UTC).timestamp())
    step = 6 * 3600
    while t < stop:
        if offset(t) != offset(t + step):
            low, high = t, t + step
            while high - low > 1:
                mid = (low + high) // 2
                if offset(mid) == offset(t):
                    low = mid
                else:
                    high = mid
            out.append(high * 1000)
        t += step
    return out


# -- pattern generators ------------------------------------------------------------------------

def rand_field(rng: random.Random, lo: int, hi: int, kind: str) -> str:
    roll = rng.random()
    if roll < 0.28:
        return "*"
    if roll < 0.45:
        return str(rng.randint(lo, hi))
    if roll < 0.55:
        values = sorted(rng.sample(range(lo, hi + 1), rng.randint(2, 4)))
        return ",".join(map(str, values))
    if roll < 0.65:
        a = rng.randint(lo, hi)
        b = rng.randint(a, hi)
        return f"{a}-{b}"
    if roll < 0.75:
        return f"*/{rng.randint(1, max(1, (hi - lo) // 2 + 2))}"
    if roll < 0.82:
        return f"{rng.randint(lo, hi)}/{rng.randint(1, max(2, hi // 3))}"
    if roll < 0.88:
        a = rng.randint(lo, hi)
        b = rng.randint(a, hi)
        return f"{a}-{b}/{rng.randint(1, 5)}"
    if kind == "month" and roll < 0.95:
        a = rng.randint(0, 11)
        b = rng.randint(a, 11)
        return f"{MONTHS[a]}-{MONTHS[b]}" if rng.random() < 0.5 else MONTHS[a]
    if kind == "dow":
        pick = rng.random()
        if pick < 0.3:
            a = rng.randint(0, 6)
            return f"{DAYS[a]}-{DAYS[rng.randint(a, 6)]}"
        if pick < 0.5:
            return f"{rng.randint(0, 7)}#{rng.randint(1, 5)}"
        if pick < 0.7:
            return f"{rng.randint(0, 7)}L"
        if pick < 0.85:
            return "?"
        return ",".join(sorted({DAYS[rng.randint(0, 6)] for _ in range(3)}))
    if kind == "dom":
        pick = rng.random()
        if pick < 0.35:
            return "L"
        if pick < 0.55:
            return "?"
        return f"{rng.randint(1, 20)},L"
    return str(rng.randint(lo, hi))


def rand_pattern(rng: random.Random, six: bool | None = None) -> str:
    six = rng.random() < 0.35 if six is None else six
    fields = []
    if six:
        fields.append(rand_field(rng, 0, 59, "second"))
    fields += [rand_field(rng, 0, 59, "minute"), rand_field(rng, 0, 23, "hour"),
               rand_field(rng, 1, 31, "dom"), rand_field(rng, 1, 12, "month"),
               rand_field(rng, 0, 7, "dow")]
    return " ".join(fields)


def rand_ref(rng: random.Random) -> int:
    return rng.randint(ms(1995, 1, 1), ms(2045, 1, 1)) + (rng.choice([0, 0, 1, 999, rng.randint(0, 999)]))


# -- the corpus ---------------------------------------------------------------------------------

SYNTAX = [
    # lists, ranges, steps, names
    "0 9 * * *", "*/5 * * * *", "5/15 * * * *", "10-40/7 * * * *", "0 0-23/5 * * *", "0 9-17 * * 1-5",
    "0 9 * * MON-FRI", "0 9 * * mon,wed,FRI", "0 0 1 jan,jul *", "0 0 1 JAN-MAR/2 *", "0 0 * dec sun",
    "0 0 1 */3 *", "0 12 1-7 * *", "15,45 * * * *", "0 0 * * 7", "0 0 * * 0", "0 0 * * 0-7",
    "0 0 * * */2", "0 0 * * 1/2", "0 0 * * */3", "0 0 * * */7", "0 0 * * 5-7", "0 0 * * 6-7/1",
    "0 0 * * 7-7", "0 0 * * 1-7/2", "0 0 * * 2-7/2", "0 0 * * 0-7/7",
    # ? everywhere, seconds
    "? ? ? ? ?", "0 ? * * *", "0 0 ? * 1", "0 0 1 * ?", "*/10 * * * * *", "30 */2 * * * *",
    "0 0 12 * * *", "15 30 8 * * 1-5", "0-10/5 * * * * *", "59 59 23 31 12 *", "* * * * * *",
    # right-aligned short patterns
    "5", "1-5", "* *", "0 1", "12 1 *", "0 12 1 *", "*/2", "MON", "jan *",
    # L, nL, #
    "0 0 L * *", "0 0 L 2 *", "0 0 1,L * *", "0 0 15,L * *", "0 0 * * 5L", "0 0 * * 0L", "0 0 * * 7L",
    "0 0 * * 1#1", "0 0 * * 1#5", "0 0 * * 5#3", "0 0 * * fri#2", "0 0 * * SUN#1", "0 0 * * 0#5",
    "0 10 * * 6#4", "0 0 L * 5L", "0 0 13 * 5", "0 0 * 2 1#5", "0 0 * * 3L", "0 0 1 * 1#1",
    # nicknames
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly", "@minutely", "@secondly",
    "@weekdays", "@weekends",
    # quirks kept for agreement
    "0 0 * * 10L", "0 0 * * 8L", "0 0 5L * *", "0 0 15L * *", "0 0 5L-6 * *", "0 1-5-7 * * *",
    "0 0 * * 1#1.0", "0 0 * * MON#+2", "0 0 1 mon *", "0 0 * * jan", "0 0 1-5L * *", "0 0 * * 5L#2",
    "0 0 */1 * 1", "0 0 1 * */1", "0 0 1-31 * 1", "0 0 1 * 0-6", "00 09 * * *", "0 0 07 * *",
    "0  0\t*  * *", " 0 0 * * * ", "0 0 31 * *", "0 0 30 2 *", "0 0 31 4,6 *", "0 0 29 2 *",
    "0 0 29 2 1", "0 0 31 2 *", "0 0 30,31 2 *",
]

INVALID = [
    "", "   ", "0 0 * * * * *", "0 0 * * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
    "* * * 13 *", "* * * 0 *", "* * * * 8", "1,1 * * * *", "* * * * 0,7", "*/15,30 * * * *",
    "5-1 * * * *", "* * * * 5-1", "* * * * 1#6", "* * * * 1#0", "* * * * 1#2,3", "* * * * 1,2#2",
    "* * * * 1-2#2", "* * * * 1#2#3", "* * 1W * *", "* * LW * *", "* * * * L", "* * * * 1,L", "@midnight",
    "@reboot", "@DAILY", "@Daily", "@every 5m", "*/0 * * * *", "*/ * * * *", "/5 * * * *", "5/ * * * *",
    "1/2/3 * * * *", "a * * * *", "* * * * funday", "* * * january *", "* * * * mo", "1, * * * *",
    ",1 * * * *", "1,,2 * * * *", "1-2-x * * * *", "-5 * * * *", "5- * * * *", "** * * * *",
    "* * * * 1-", "0 0 L-2 * *", "0 0 L/2 * *", "0 0 LL * *", "0 0 123L * *", "0 0 * L *",
    "0 0 * * 1L-2", "1.5 * * * *", "* * * * *#1", "0 0 * * 1#x", "0 0 * * #2", "0 0 1-7,1 * *",
    "0 0 * * 5-7,0", "0 0 * 1,jan *", "0 0 * * sun,0", "0 0 * * 7,0", "x", "@yearly *",
    "0 0 0 0 0 0", "*/60 * * * * *", "0 * * * * * 2024", "0 0 ? ? ? ?", "0 0 1 1 1 1 1",
]

DST_PATTERNS = {
    # the hour that is skipped or repeated, as {h}; {h1} the hour after, {hm} the hour before
    "hour": ["30 {h} * * *", "0 {h} * * *", "15,45 {h} * * *", "*/20 {h} * * *", "0 {h},{h1} * * *",
             "30 {hm}-{h1} * * *", "0 * * * *", "*/15 * * * *", "30 * * * *", "0 0 {h} * * *",
             "30 30 {h} * * *", "* {h} * * *", "0 */2 * * *", "0 1/2 * * *", "*/30 * * * * *",
             "0 {h} * * 0", "59 {hm} * * *", "0 {h1} * * *", "0 0-5 * * *", "*/7 {hm}-{h1} * * *",
             "0 {h} * * 1-5", "45 {h} * * *", "0 0 * * *", "0 12 * * *", "0,30 * * * *",
             "10 {hm},{h} * * *", "0 {h}-{h1} * * *", "59 59 {h} * * *", "0 {hm}-23 * * *",
             "0 0-{h} * * *"],
}


def hours_for(zone: str, t_ms: int) -> tuple[int, int, int]:
    """The hour a transition skips (gap) or repeats (overlap), the hour after and the one before."""
    tz = ZoneInfo(zone)
    before = dt.datetime.fromtimestamp(t_ms // 1000 - 1, tz)
    after = dt.datetime.fromtimestamp(t_ms // 1000, tz)
    gap = after.utcoffset() > before.utcoffset()  # type: ignore[operator]
    h = (before.hour + 1) % 24 if gap else after.hour
    return h, (h + 1) % 24, (h - 1) % 24


def build_cases(seed: int = 20240331) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []

    def add(cat: str, pattern: str, tz: str | None, ref: int, **extra: Any) -> None:
        cases.append({"cat": cat, "pattern": pattern, "tz": tz, "ref": ref, **extra})

    for pattern in SYNTAX:
        for _ in range(8):
            add("syntax", pattern, rng.choice([None, None, "Europe/Berlin", "Asia/Tokyo"]), rand_ref(rng))
    for pattern in INVALID:
        add("invalid", pattern, None, rand_ref(rng))
        add("invalid", pattern, "America/New_York", rand_ref(rng))
    for _ in range(2200):
        add("random", rand_pattern(rng), rng.choice([None, None, None, *FLAT_ZONES]), rand_ref(rng))
    # day-of-month x day-of-week
    doms = ["*", "?", "1", "15", "L", "1-7", "*/2", "1-31", "13", "29,30,31", "*/1"]
    dows = ["*", "?", "1", "5", "0,6", "1-5", "*/2", "0-7", "5L", "1#2", "*/1", "0-6"]
    for dom in doms:
        for dow in dows:
            for _ in range(4):
                add("dom_dow", f"0 0 {dom} * {dow}", rng.choice([None, "America/New_York"]), rand_ref(rng))
    # month ends and Feb 29 across centuries
    ends = ["0 0 29 2 *", "0 0 L 2 *", "0 0 28 2 *", "0 0 L * *", "0 0 31 * *", "0 0 30 * *",
            "0 12 29 2 1", "59 59 23 L 2 *", "0 0 * 2 1#5", "0 0 29 2 0#5", "0 0 L 2 2L", "0 0 1 3 *"]
    for pattern in ends:
        for year in (1900, 1996, 1999, 2000, 2023, 2024, 2096, 2099, 2100, 2101, 2103, 2399, 2400):
            for ref in (ms(year, 2, 27, 12), ms(year, 2, 28, 23, 59, 59) + 999, ms(year, 1, 1), ms(year, 3, 1)):
                add("month_end", pattern, None, ref)
    # daylight saving time, whole-hour zones and the odd ones
    offsets_ms = [-3 * 3600_000, -2 * 3600_000, -3600_000 - 1, -3600_000, -1800_000, -60_000, -1001,
                  -1000, -1, 0, 1, 999, 1000, 60_000, 1800_000, 2700_000, 3600_000 - 1, 3600_000,
                  3600_000 + 1, 5400_000, 2 * 3600_000, 12 * 3600_000, -12 * 3600_000]
    for zones, cat in ((HOUR_ZONES, "dst_hour"), (ODD_ZONES, "dst_odd")):
        for zone in zones:
            years = (2024, 2025) if zone in ("Europe/Berlin", "America/New_York") else (2025,)
            near = [t for t in transitions(zone, 2024, 2025) if dt.datetime.fromtimestamp(t / 1000, UTC).year in years]
            for t in near:
                h, h1, hm = hours_for(zone, t)
                for template in DST_PATTERNS["hour"]:
                    pattern = template.format(h=h, h1=h1, hm=hm)
                    for off in rng.sample(offsets_ms, 9 if cat == "dst_hour" else 7):
                        add(cat, pattern, zone, t + off)
    # random patterns around random transitions of many years, hour often the transition's
    for zones, cat, count in ((HOUR_ZONES, "dst_random", 1600), (ODD_ZONES, "dst_odd", 500)):
        pool = [(zone, t) for zone in zones for t in transitions(zone, 1996, 2040)]
        for _ in range(count):
            zone, t = rng.choice(pool)
            h, h1, hm = hours_for(zone, t)
            fields = rand_pattern(rng).split()
            if rng.random() < 0.6:
                fields[-4] = rng.choice([str(h), f"{hm}-{h1}", f"{h},{h1}", f"{hm},{h}", "*", f"*/{rng.randint(1, 3)}"])
            ref = t + rng.randint(-3 * 3600_000, 3 * 3600_000) if rng.random() < 0.7 else t + rng.choice(offsets_ms)
            add(cat, " ".join(fields), zone, ref)
    # zones whose transitions touch midnight (a day that starts with a gap or a repeated hour)
    for zone in MIDNIGHT_ZONES:
        for t in transitions(zone, 2024, 2025):
            h, h1, hm = hours_for(zone, t)
            for template in rng.sample(DST_PATTERNS["hour"], 12):
                for off in rng.sample(offsets_ms, 4):
                    add("dst_midnight", template.format(h=h, h1=h1, hm=hm), zone, t + off)
    # the odd zones away from their transitions: refs spread over the years
    for _ in range(400):
        add("odd_uniform", rand_pattern(rng), rng.choice(ODD_ZONES), rand_ref(rng))
    # start/end dates
    for _ in range(500):
        pattern = rng.choice([*SYNTAX[:40], rand_pattern(rng)])
        ref = rand_ref(rng)
        extra: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.4:
            extra["startDate"] = ref + rng.choice([-86400_000, 1, 60_000, 3600_000, 86400_000 * 3, 86400_000 * 40])
        if roll > 0.25:
            extra["endDate"] = ref + rng.choice([-1, 0, 1000, 60_000, 3600_000, 86400_000, 86400_000 * 30,
                                                 86400_000 * 400])
        if "startDate" in extra and "endDate" in extra and extra["endDate"] < extra["startDate"]:
            extra["endDate"] = extra["startDate"] + rng.choice([0, 1000, 86400_000 * 10])
        add("bounds", pattern, rng.choice([None, "Europe/Berlin"]), ref, **extra)
    # zone names
    names = ["UTC", "utc", "GMT", "Etc/UTC", "europe/berlin", "EUROPE/BERLIN", "America/new_york",
             "UTC+1", "UTC-5", "utc+05:30", "UTC+14", "Asia/Kolkata", "US/Eastern", "Etc/GMT+5", "EST5EDT",
             "Mars/Olympus", "", "Europe/Berlinx", "+01:00", "CET", "Europe/Kyiv", "Asia/Calcutta"]
    for name in names:
        for pattern in ("0 9 * * *", "30 2 * * *", "*/10 * * * * *"):
            for _ in range(3):
                add("tz_names", pattern, name, rand_ref(rng))
    return cases


def run_oracle(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("pattern", "tz", "ref", "startDate", "endDate", "every")
    lines = "".join(json.dumps({k: c[k] for k in keys if k in c}) + "\n" for c in cases)
    out = subprocess.run(ORACLE, input=lines, capture_output=True, text=True, check=True).stdout.splitlines()
    if len(out) != len(cases):
        raise SystemExit(f"oracle answered {len(out)} of {len(cases)} cases")
    return [json.loads(line) for line in out]


def exact_cases(rng: random.Random, answered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """References exactly on a run BullMQ gave, and one millisecond either side."""
    picks = [c for c in answered if c["next"] is not None and c["cat"] in ("syntax", "random", "dst_hour", "dom_dow")]
    out = [{"cat": "exact", "pattern": case["pattern"], "tz": case["tz"], "ref": case["next"] + delta}
           for case in rng.sample(picks, min(300, len(picks))) for delta in (-1, 0, 1)]
    # start and end dates exactly on a run and one millisecond either side
    for case in rng.sample(picks, min(120, len(picks))):
        base = {"cat": "exact_bounds", "pattern": case["pattern"], "tz": case["tz"], "ref": case["ref"]}
        for delta in (-1, 0, 1):
            out.append({**base, "endDate": case["next"] + delta})
            out.append({**base, "startDate": case["next"] + delta})
    return out


def make() -> None:
    info = subprocess.run([*ORACLE, "--info"], capture_output=True, text=True, check=True).stdout.strip()
    cases = build_cases()
    for case, answer in zip(cases, run_oracle(cases)):
        case.update(next=answer["next"], error=answer["error"])
    extra = exact_cases(random.Random(7), cases)
    for case, answer in zip(extra, run_oracle(extra)):
        case.update(next=answer["next"], error=answer["error"])
    cases += extra
    with VECTORS.open("w") as handle:
        handle.write(json.dumps({"oracle": json.loads(info), "cases": len(cases)}) + "\n")
        for case in cases:
            handle.write(json.dumps(case, separators=(",", ":")) + "\n")
    print(f"wrote {len(cases)} cases to {VECTORS}: {dict(Counter(c['cat'] for c in cases))}")


# -- agreement of candidate libraries ---------------------------------------------------------

def load() -> list[dict[str, Any]]:
    with VECTORS.open() as handle:
        next(handle)
        return [json.loads(line) for line in handle]


def _start(case: dict[str, Any]) -> int:
    return max(case["ref"], case.get("startDate") or case["ref"])


def _bounded(case: dict[str, Any], got: int | None) -> int | None:
    end = case.get("endDate")
    return None if got is None or (end is not None and got > end) else got


def ours(case: dict[str, Any]) -> tuple[int | None, bool]:
    from echomq.errors import InvalidScheduleError
    from echomq.schedule.next_run import calculate_next_millis
    opts = {k: case[k] for k in ("pattern", "tz", "startDate", "endDate") if case.get(k) is not None}
    if case.get("tz") == "":
        opts["tz"] = ""
    try:
        return calculate_next_millis(opts, case["ref"]), False
    except InvalidScheduleError:
        return None, True


def _zone(case: dict[str, Any]) -> Any:
    return ZoneInfo(case["tz"]) if case.get("tz") else UTC


def croniter_next(case: dict[str, Any]) -> tuple[int | None, bool]:
    from croniter import croniter
    try:
        start = dt.datetime.fromtimestamp(_start(case) / 1000, _zone(case))
        it = croniter(case["pattern"], start, second_at_beginning=True)
        return _bounded(case, int(it.get_next(float) * 1000)), False
    except Exception:
        return None, True


def cronsim_next(case: dict[str, Any]) -> tuple[int | None, bool]:
    from cronsim import CronSim
    try:
        start = dt.datetime.fromtimestamp(_start(case) / 1000, _zone(case)).replace(microsecond=0)
        fields = case["pattern"].split()
        if len(fields) == 6:  # cronsim reads the 6th field as seconds: move ours (first) there
            fields = fields[1:] + fields[:1]
        got = next(CronSim(" ".join(fields), start))
        return _bounded(case, int(got.timestamp() * 1000)), False
    except Exception:
        return None, True


def crontab_next(case: dict[str, Any]) -> tuple[int | None, bool]:
    from crontab import CronTab
    try:
        job = CronTab(tab="").new(command="true")
        job.setall(case["pattern"])
        if not job.is_valid():
            return None, True
        start = dt.datetime.fromtimestamp(_start(case) / 1000, _zone(case))
        got = job.schedule(date_from=start).get_next()
        got = got.replace(tzinfo=start.tzinfo) if got.tzinfo is None else got
        return _bounded(case, int(got.timestamp() * 1000)), False
    except Exception:
        return None, True


CANDIDATES: dict[str, Callable[[dict[str, Any]], tuple[int | None, bool]]] = {
    "echomq": ours, "croniter 7.0": croniter_next, "cronsim 2.8": cronsim_next, "python-crontab 3.4": crontab_next,
}


def agrees(case: dict[str, Any], got: tuple[int | None, bool]) -> bool:
    value, error = got
    if case["error"] is not None or error:
        return (case["error"] is not None) == error
    return value == case["next"]


def compare() -> None:
    cases = load()
    cats = sorted({c["cat"] for c in cases})
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for name, fn in CANDIDATES.items():
        for case in cases:
            ok = agrees(case, fn(case))
            for key in (case["cat"], "ALL", "ALL but dst_odd" if case["cat"] != "dst_odd" else None):
                if key:
                    table[name][key][0] += ok
                    table[name][key][1] += 1
    header = ["category", "cases", *CANDIDATES]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cat in [*cats, "ALL but dst_odd", "ALL"]:
        row = [cat, str(table["echomq"][cat][1])]
        row += [f"{100 * table[n][cat][0] / table[n][cat][1]:.1f}%" for n in CANDIDATES]
        print("| " + " | ".join(row) + " |")


def divergence_kind(case: dict[str, Any], ours_ms: int | None) -> str:
    """Why BullMQ's answer differs from ours (only asked where they differ).

    Near a transition that is not a whole hour we give BullMQ's answer whenever it is a real
    run skipping no existing one (echomq/cron_walk.py), so every other answer falls in one of
    the error classes below; "walk model" would mean our model of cron-parser's walk is off.
    """
    from echomq.schedule.cron.evaluate import compile_schedule
    from echomq.schedule.cron.walk import skips_existing_run, walk_next
    oracle, ref = case["next"], case["ref"]
    schedule = compile_schedule(case["pattern"], case.get("tz"))
    if not isinstance(schedule.zone, int):
        walked = walk_next(schedule, schedule.zone, ref)
        if (None if walked is None else walked * 1000) != oracle:
            return "walk model differs from BullMQ"
    if oracle is not None and oracle <= ref:
        return "BullMQ answers at or before the reference"
    if oracle is None:
        return "BullMQ gives up (loop limit) on a satisfiable pattern"
    if not isinstance(schedule.zone, int) and skips_existing_run(schedule, schedule.zone, ref, oracle // 1000):
        return "BullMQ skips a run whose wall time exists"
    tz = ZoneInfo(case["tz"]) if case.get("tz") else UTC
    local = dt.datetime.fromtimestamp(oracle / 1000, tz)
    if not schedule.matches_wall((local.year, local.month, local.day, local.hour, local.minute, local.second)):
        return "BullMQ runs a gap time shifted by more than the gap (a time the pattern does not name)"
    return "other"


def divergences() -> None:
    from echomq.schedule.next_run import calculate_next_millis  # noqa: F401 - imports the package path
    kinds: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    for case in load():
        got = ours(case)
        if agrees(case, got):
            continue
        kind = f"{case['cat']}: {divergence_kind(case, got[0])}"
        kinds[kind] += 1
        examples.setdefault(kind, {**case, "ours": got[0]})
    for kind, count in kinds.most_common():
        ex = examples[kind]
        print(f"{count:4d}  {kind}\n      e.g. {ex['pattern']!r} {ex['tz']} ref {_show(ex['ref'], ex['tz'])}: "
              f"BullMQ {_show(ex['next'], ex['tz'])}, echomq {_show(ex['ours'], ex['tz'])}")


def _show(value: int | None, tz: str) -> str:
    return "none" if value is None else dt.datetime.fromtimestamp(value / 1000, ZoneInfo(tz)).isoformat()


PROBE_ZONES = ("Europe/Berlin", "America/New_York", "Europe/London", "Australia/Sydney", "America/Chicago",
               "America/Los_Angeles", "Europe/Paris", "Pacific/Auckland", "America/Havana", "America/Santiago",
               "Asia/Beirut", "America/Asuncion", "America/Nuuk", "Europe/Dublin", "Africa/Casablanca",
               "America/St_Johns", "Australia/Adelaide", "America/Sao_Paulo", "Asia/Tehran", "Europe/Moscow",
               "America/Mexico_City", "Asia/Jerusalem", "Europe/Chisinau", "Antarctica/Troll")


def probe(count: int, seed: int) -> None:
    """Random DST cases in many zones (2000-2030), asked live, not stored: report disagreements."""
    rng = random.Random(seed)
    pool = [(zone, t) for zone in PROBE_ZONES for t in transitions(zone, 2000, 2030)]
    cases = []
    for _ in range(count):
        zone, t = rng.choice(pool)
        h, h1, hm = hours_for(zone, t)
        fields = rand_pattern(rng).split()
        if rng.random() < 0.6:
            fields[-4] = rng.choice([str(h), f"{hm}-{h1}", f"{h},{h1}", "*", f"*/{rng.randint(1, 3)}", f"{h}-23"])
        ref = t + rng.choice([rng.randint(-4 * 3600_000, 4 * 3600_000), rng.randint(-40 * 86400_000, 40 * 86400_000),
                              rng.randint(-3, 3) * 3600_000 + rng.choice([-1000, -999, -1, 0, 1, 500])])
        cases.append({"cat": "probe", "pattern": " ".join(fields), "tz": zone, "ref": ref})
    for case, answer in zip(cases, run_oracle(cases)):
        case.update(next=answer["next"], error=answer["error"])
    differ: Counter[str] = Counter()
    for case in cases:
        got = ours(case)
        if not agrees(case, got):
            differ[case["tz"]] += 1
            print(f"{case['tz']} {case['pattern']!r} ref {_show(case['ref'], case['tz'])}: "
                  f"BullMQ {_show(case['next'], case['tz'])}, echomq {_show(got[0], case['tz'])}")
    print(f"{count} cases in {len(PROBE_ZONES)} zones: {sum(differ.values())} differ {dict(differ)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make", action="store_true", help="ask BullMQ and rewrite cron_vectors.jsonl")
    parser.add_argument("--compare", action="store_true", help="score the candidate libraries on the vectors")
    parser.add_argument("--probe", type=int, metavar="N", help="N random live DST cases asked of BullMQ, not stored")
    parser.add_argument("--seed", type=int, default=1, help="seed for --probe")
    args = parser.parse_args()
    if args.probe:
        sys.path.insert(0, str(HERE.parent.parent))
        probe(args.probe, args.seed)
        return 0
    if args.make:
        make()
    if args.compare:
        sys.path.insert(0, str(HERE.parent.parent))
        compare()
        divergences()
    if not (args.make or args.compare):
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
