"""Job data is untrusted, and so is every hash and stream entry another runtime may write.

At add time, data over ``max_data_bytes`` or ``max_data_depth`` is refused by name and nothing
is written. When a worker takes a job whose hash no producer would write (truncated JSON,
opts that are not JSON, numbers that are not numbers, no name ...) or whose data is over its
limits, the job fails at once with a ``failedReason`` saying what is wrong, and the worker goes
on. ``Queue.get_job`` reads such hashes without raising (raw text where JSON does not decode).
QueueEvents delivers malformed entries as they are and keeps reading. A bounded hypothesis
run then throws random malformed hashes and entries at a running Worker and QueueEvents.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from echomq import EventType, JobScheduler, Queue, QueueEvents, UnrecoverableError, Worker
from echomq.errors import InvalidInputError, InvalidJobOptionsError
from echomq.protocol.keys import QueueKeys

from support.snapshot import queue_snapshot
from support.workers import Running, wait_until

#: What storeJob writes for a job added without options.
BASE = {"name": "n", "data": "{}", "opts": '{"attempts":0}', "timestamp": "1700000000000", "delay": "0",
        "priority": "0"}


def place(client: redis.Redis, queue_name: str, job_id: str, fields: dict[str, Any] | None) -> None:
    """Store ``fields`` as the job's hash (none: no hash at all) and put the id in wait, as a
    runtime that writes what it likes would."""
    k = QueueKeys(queue_name)
    pipe = client.pipeline(transaction=False)
    if fields:
        pipe.hset(k.job(job_id), mapping=fields)
    pipe.lpush(k.wait, job_id)
    pipe.zadd(k.marker, {"0": 0})
    pipe.execute()


def hash_of(client: redis.Redis, queue_name: str, job_id: str) -> dict[str, str]:
    raw = client.hgetall(QueueKeys(queue_name).job(job_id))
    return {k.decode(): v.decode("utf-8", "replace") for k, v in raw.items()}


def proc_threads(queue_name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"echomq-proc-{queue_name}-") and t.is_alive()]


# -- add time: the limits ---------------------------------------------------------------------------

def test_data_over_the_limits_is_refused_by_name_and_nothing_is_written(connection: redis.Redis,
                                                                       queue_name: str) -> None:
    queue = Queue(connection, queue_name, max_data_bytes=1000, max_data_depth=8)
    queue.add("seed", {"n": 1})
    before = queue_snapshot(connection, queue_name)
    big, deep = {"blob": "x" * 1000}, {"a": [[[[[[[[1]]]]]]]]}
    with pytest.raises(InvalidJobOptionsError, match=r"job 'big': its data is 1011 bytes of JSON, over "
                                                     r"max_data_bytes=1000"):
        queue.add("big", big)
    with pytest.raises(InvalidJobOptionsError, match=r"nested deeper than max_data_depth=8"):
        queue.add("deep", deep)
    with pytest.raises(InvalidJobOptionsError, match="max_data_bytes=1000"):
        queue.add_bulk([("fine", {"n": 2}), ("big", big)])  # one bad job: none is written
    with pytest.raises(InvalidJobOptionsError, match="max_data_depth=8"):
        queue.add_flow({"name": "parent", "data": {}}, [{"name": "child", "data": deep}])
    with pytest.raises(InvalidJobOptionsError, match="max_data_bytes=1000"):
        JobScheduler(connection, queue_name, max_data_bytes=1000).upsert("s", {"every": 1000}, "big", big)
    assert queue_snapshot(connection, queue_name) == before
    assert queue.add("at-the-limit", {"blob": "x" * 989}).id  # exactly 1000 bytes: taken


def test_the_defaults_stop_abuse_and_let_real_jobs_through(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    deep: Any = 1
    for _ in range(600):
        deep = [deep]
    before = queue_snapshot(connection, queue_name)
    with pytest.raises(InvalidJobOptionsError, match="max_data_depth=512"):
        queue.add("deep", deep)
    very_deep: Any = 1
    for _ in range(100_000):
        very_deep = [very_deep]
    with pytest.raises(InvalidJobOptionsError, match="nested too deeply to encode"):
        queue.add("deeper", very_deep)  # past Python's own encoder: still a clear error
    with pytest.raises(InvalidJobOptionsError, match="over max_data_bytes=16777216"):
        queue.add("huge", "é" * (8 * 1024 * 1024 + 1))  # 16 MiB + 2 bytes of UTF-8, + the quotes
    assert queue_snapshot(connection, queue_name) == before
    assert Queue(connection, queue_name, max_data_depth=None).add("deep", deep).id  # the limit can be lifted
    rows = {"rows": [{"id": i, "tags": ["a", "b"], "price": {"amount": i, "currency": "EUR"}} for i in range(2000)]}
    assert queue.add("large-but-real", rows).id


@pytest.mark.parametrize("component", ["Queue", "Worker", "JobScheduler"])
@pytest.mark.parametrize("setting", ["max_data_bytes", "max_data_depth"])
def test_a_limit_must_be_a_positive_int_or_none(connection: redis.Redis, queue_name: str, component: str,
                                                 setting: str) -> None:
    make = {"Queue": lambda **kw: Queue(connection, queue_name, **kw),
            "Worker": lambda **kw: Worker(connection, queue_name, lambda job: None, **kw),
            "JobScheduler": lambda **kw: JobScheduler(connection, queue_name, **kw)}[component]
    for bad in (0, -5, "1000", 2.5, True):
        with pytest.raises(InvalidInputError, match=f"{component} {setting}="):
            make(**{setting: bad})
    make(**{setting: None})


# -- run time: hashes no producer would write -----------------------------------------------------------

#: case -> (what the hash gets instead of BASE's fields (None: the field is absent; no dict at
#: all: no hash), the failedReason's telling part).
MALFORMED: dict[str, tuple[dict[str, Any] | None, str]] = {
    "truncated-data": ({"data": '{"to": "a@b'}, "malformed job hash: data is not JSON (Unterminated string"),
    "binary-data": ({"data": b"\xff\xfe\x00{"}, "malformed job hash: data is not JSON"),
    "non-json-opts": ({"opts": "attempts=3"}, "malformed job hash: opts is not JSON"),
    "opts-a-list": ({"opts": "[3]"}, "malformed job hash: opts is a JSON list, not an object"),
    "attempts-abc": ({"opts": '{"attempts":"abc"}'}, "malformed job hash: opts.attempts='abc' is not a whole number"),
    "atm-x": ({"atm": "x"}, "malformed job hash: atm='x' is not an integer"),
    "no-timestamp": ({"timestamp": None}, "malformed job hash: it has no timestamp field"),
    "delay-nan": ({"delay": "NaN"}, "malformed job hash: delay='NaN' is not a number"),
    "ten-mb-data": ({"data": json.dumps("x" * 10_000_000)}, "its data is 10000002 bytes of JSON, over "
                                                             "max_data_bytes=4194304 (a Worker limit)"),
    "deep-data": ({"data": "[" * 100_000 + "]" * 100_000}, "its data is nested deeper than max_data_depth=512"),
    "no-name": ({"name": None}, "malformed job hash: it has no name field"),
    "no-hash": (None, "malformed job hash: it has no name field"),
}


def malformed_fields(change: dict[str, Any] | None) -> dict[str, Any] | None:
    if change is None:
        return None
    return {k: v for k, v in {**BASE, **change}.items() if v is not None}


def test_a_worker_fails_each_malformed_job_with_its_reason_and_goes_on(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    for job_id, (change, _reason) in MALFORMED.items():
        place(connection, queue_name, job_id, malformed_fields(change))
    ran: list[str] = []
    worker = Worker(connection, queue_name, lambda job: ran.append(job.id) or "ok", concurrency=2,
                    max_data_bytes=4 * 1024 * 1024)
    with caplog.at_level(logging.WARNING, logger="echomq"), Running(worker):
        assert wait_until(lambda: connection.zcard(k.failed) == len(MALFORMED), timeout=20), \
            connection.zrange(k.failed, 0, -1)
        normal = Queue(connection, queue_name).add("normal", {"n": 1})
        assert wait_until(lambda: connection.zscore(k.completed, normal.id) is not None, timeout=10)
        assert worker.running and len(proc_threads(queue_name)) == 2
    assert ran == [normal.id]  # no processor ever saw a malformed job
    for job_id, (_change, reason) in MALFORMED.items():
        stored = hash_of(connection, queue_name, job_id)
        assert reason in stored["failedReason"], (job_id, stored["failedReason"])
    assert hash_of(connection, queue_name, "atm-x")["atm"] == "1"  # counted again from 0
    failed_events = [fields for _id, fields in connection.xrange(k.events) if fields[b"event"] == b"failed"]
    assert len(failed_events) == len(MALFORMED)
    assert not [r for r in caplog.records if "could not" in r.getMessage()]  # every failure was recorded


def test_a_ten_megabyte_job_within_the_default_limit_is_processed(connection: redis.Redis, queue_name: str) -> None:
    k = QueueKeys(queue_name)
    place(connection, queue_name, "big", {**BASE, "data": json.dumps({"blob": "x" * 10_000_000})})
    sizes: list[int] = []
    with Running(Worker(connection, queue_name, lambda job: sizes.append(len(job.data["blob"])))):
        assert wait_until(lambda: connection.zscore(k.completed, "big") is not None, timeout=20)
    assert sizes == [10_000_000]


def test_a_bad_backoff_or_an_unsendable_result_fails_the_job_instead_of_stalling_it(
    connection: redis.Redis, queue_name: str,
) -> None:
    k = QueueKeys(queue_name)
    place(connection, queue_name, "backoff", {**BASE, "opts": '{"attempts":3,"backoff":{"type":"fixed","delay":"x"}}'})
    place(connection, queue_name, "surrogate", {**BASE, "name": "echo", "data": '{"s":"\\ud800"}'})
    place(connection, queue_name, "reason", {**BASE, "name": "raise", "data": '{"s":"\\udc00"}'})

    def process(job: Any) -> Any:
        if job.name == "echo":
            return job.data  # a lone surrogate: not UTF-8 as it is
        raise ValueError(job.data.get("s", "plain"))

    with Running(Worker(connection, queue_name, process)):
        assert wait_until(lambda: connection.zcard(k.failed) == 2 and connection.zcard(k.completed) == 1, timeout=10)
    assert hash_of(connection, queue_name, "backoff")["failedReason"] == "plain"
    assert hash_of(connection, queue_name, "surrogate")["returnvalue"] == '{"s":"\\ud800"}'
    assert hash_of(connection, queue_name, "reason")["failedReason"] == "?"


def test_get_job_reads_a_malformed_hash_without_raising(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    k = QueueKeys(queue_name)
    odd_opts = '{"delay":"soon","priority":[1],"kl":"x","attempts":Infinity,"repeat":5,"de":"x"}'
    hashes = {job_id: malformed_fields(change) for job_id, (change, _r) in MALFORMED.items() if change is not None}
    hashes["odd-opts"] = {**BASE, "opts": odd_opts, "progress": "{", "returnvalue": " " + "[" * 100_000,
                          "stacktrace": "[oops", "parent": "nope", "atm": "1e400", "finishedOn": "NaN"}
    for job_id, fields in hashes.items():
        assert fields is not None
        connection.hset(k.job(job_id), mapping=fields)
        connection.lpush(k.wait, job_id)
    for job_id, fields in hashes.items():
        job = queue.get_job(job_id)
        assert job is not None and job.id == job_id and job.name == fields.get("name", "")
        assert job.opts is not None and job.get_state() == "waiting"
        assert job.reload().id == job_id
    assert queue.get_job("truncated-data").data == '{"to": "a@b'  # the raw text where JSON does not decode
    assert queue.get_job("non-json-opts").raw_opts == {}
    assert queue.get_job("delay-nan").delay == 0
    odd = queue.get_job("odd-opts")
    assert odd is not None
    assert (odd.progress, odd.stacktrace, odd.parent, odd.attempts_made, odd.finished_on) == ("{", [], None, 0, None)
    assert odd.return_value == " " + "[" * 100_000 and odd.opts["repeat"] == 5
    assert odd.log("a line") == 1  # kl "x" is no limit, not an error
    assert {job.id for job in queue.get_jobs(["waiting"])} == set(hashes)


# -- QueueEvents: entries no producer would write -------------------------------------------------------

def test_queue_events_delivers_malformed_entries_as_they_are_and_goes_on(
    connection: redis.Redis, queue_name: str, caplog: pytest.LogCaptureFixture,
) -> None:
    k = QueueKeys(queue_name)
    got: list[tuple[Any, dict[str, Any]]] = []
    events = QueueEvents(connection, queue_name, block_ms=100)
    events.subscribe(lambda event_type, data: got.append((event_type, data)))
    deep = " " + "[" * 100_000  # json.loads' own path (leading space): RecursionError there too
    entries: list[dict[Any, Any]] = [
        {"jobId": "1"},
        {"event": "no-such-event", "x": "y"},
        {"event": "delayed", "jobId": "1", "delay": "soon"},
        {"event": "retries-exhausted", "jobId": "1", "attemptsMade": "9" * 5000},
        {"event": "cleaned", "count": "NaN"},
        {"event": "completed", "jobId": "1", "returnvalue": deep},
        {"event": "progress", "jobId": "1", "data": '{"a":'},
        {"event": "failed", "jobId": "1", "failedReason": "x" * 5_000_000},
        {b"event": b"completed", b"\xff\xfe": b"\x00\xff", b"returnvalue": b"\xff"},
        {b"\xff": b"\xfe"},
    ]
    with caplog.at_level(logging.WARNING, logger="echomq"), events:
        ids = [connection.xadd(k.events, fields).decode() for fields in entries]
        normal = Queue(connection, queue_name).add("normal", {"n": 1})
        assert wait_until(lambda: any(t is EventType.ADDED and d.get("jobId") == normal.id for t, d in got), 10)
        assert events.running
    assert [data["event_id"] for _t, data in got[: len(ids)]] == ids
    types = [t for t, _d in got[: len(ids)]]
    assert types == ["", "no-such-event", EventType.DELAYED, EventType.RETRIES_EXHAUSTED, EventType.CLEANED,
                     EventType.COMPLETED, EventType.PROGRESS, EventType.FAILED, EventType.COMPLETED, ""]
    data = [d for _t, d in got[: len(ids)]]
    assert data[2]["delay"] == "soon" and data[3]["attemptsMade"] == "9" * 5000 and data[4]["count"] == "NaN"
    assert data[5]["returnvalue"] == deep and data[6]["data"] == '{"a":'
    assert len(data[7]["failedReason"]) == 5_000_000
    assert data[8] == {"\ufffd\ufffd": "\x00\ufffd", "returnvalue": "\ufffd", "event_id": ids[8]}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- hypothesis: random malformed hashes and entries at a running Worker and QueueEvents ---------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**12) | st.floats(allow_nan=False)
                     | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_ODD = st.sampled_from(["NaN", "-1", "1e400", "1.5", "x", "", "null", "[]", "{}", '"s"', "Infinity", "9" * 30,
                        "0x10", " 5", "true", "\x00", "\ud800", '"\\ud800"', '{"s":"\\udc00"}'])
_GARBAGE = st.one_of(
    st.binary(max_size=24),
    st.text(max_size=24).map(lambda s: s.encode("utf-8")),
    _ODD.map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.builds(lambda value, cut: json.dumps(value)[:cut].encode(), _JSON, st.integers(0, 40)),  # truncated
    st.sampled_from([10, 600, 100_000]).map(lambda n: ("[" * n).encode()),
    st.sampled_from([10, 600, 20_000]).map(lambda n: ("[" * n + "]" * n).encode()),
    st.sampled_from([1000, 300_000]).map(lambda n: json.dumps("x" * n).encode()),
)
_OPT_VALUE = st.one_of(st.integers(-3, 5), _JSON, _ODD, st.sampled_from([
    {"type": "fixed", "delay": "x"}, {"type": 5}, {"type": "exponential", "delay": 1e300}, {"age": "x"},
    {"count": -1, "age": 1e400}, True, False]))
_OPTS = st.dictionaries(st.sampled_from(["attempts", "backoff", "removeOnComplete", "removeOnFail", "lifo",
                                         "stackTraceLimit", "kl", "delay", "priority", "jobId", "repeat", "de",
                                         "tm", "sizeLimit", "fpof", "unknownOption"]), _OPT_VALUE, max_size=5)
_GOOD: dict[str, st.SearchStrategy[bytes]] = {
    "name": st.text(max_size=12).map(lambda s: s.encode()),
    "data": st.one_of(_JSON, _JSON.map(lambda v: {"boom": "retry", "v": v}),
                      _JSON.map(lambda v: {"boom": "fail", "v": v}), st.just("\ud800x"),
                      st.just({"boom": "fail", "s": "\udc00"})).map(lambda v: json.dumps(v).encode()),
    "opts": _OPTS.map(lambda o: json.dumps(o).encode()),
    "timestamp": st.integers(0, 2**53).map(lambda n: str(n).encode()),
    "delay": st.integers(0, 10**6).map(lambda n: str(n).encode()),
    "priority": st.integers(0, 2**21).map(lambda n: str(n).encode()),
    "atm": st.integers(0, 10**6).map(lambda n: str(n).encode()),
}
#: Fields any runtime writes, and how often each is (good, absent, garbage), so that most jobs
#: run and a good share is malformed. Left out: ats, stc, parent and parentKey, on which the
#: scripts themselves abort when malformed.
_FIELDS: dict[str, tuple[int, int, int]] = {
    "name": (17, 1, 2), "timestamp": (17, 1, 2), "data": (6, 1, 3), "opts": (6, 1, 3), "delay": (5, 4, 1),
    "priority": (5, 4, 1), "atm": (4, 5, 1), "defa": (0, 19, 1),
    **dict.fromkeys(("attemptsMade", "progress", "returnvalue", "stacktrace", "failedReason", "processedOn",
                     "finishedOn", "pb", "deid", "rjk", "extra"), (0, 8, 2)),
}


@st.composite
def job_hashes(draw: st.DrawFn) -> dict[str, bytes] | None:
    if draw(st.integers(0, 30)) == 0:
        return None  # an id in wait with no hash at all
    fields: dict[str, bytes] = {}
    for name, (good, absent, garbage) in _FIELDS.items():
        kind = draw(st.sampled_from(["good"] * good + ["absent"] * absent + ["garbage"] * garbage))
        if kind == "good":
            fields[name] = draw(_GOOD[name])
        elif kind == "garbage":
            fields[name] = draw(_GARBAGE)
    return fields


_ENTRY_FIELDS = st.sampled_from(["event", "jobId", "returnvalue", "data", "delay", "attemptsMade", "count",
                                 "failedReason", "prev", "name", "x"]).map(lambda s: s.encode()) | st.binary(max_size=6)
_EVENT_NAMES = st.sampled_from([t.wire_name for t in EventType] + ["", "no-such", "retries_exhausted"])
_ENTRIES = st.lists(st.lists(st.tuples(_ENTRY_FIELDS, _GARBAGE | _EVENT_NAMES.map(str.encode)), min_size=1,
                             max_size=4), max_size=3)


def _process(job: Any) -> Any:
    """A processor that touches everything a job exposes, returns its data (whatever the JSON
    held, a lone surrogate included), and fails some jobs: for good, or once and then for good
    (retried at once: only jobs without a backoff, whose retry waits for nothing)."""
    _ = (job.opts, job.name, job.timestamp, job.delay, job.priority, job.progress, job.attempts_made,
         job.stacktrace, job.parent, job.return_value, job.scheduler_id, repr(job))
    boom = job.data.get("boom") if isinstance(job.data, dict) else None
    if boom == "retry" and job.attempts_made == 0 and "backoff" not in job.raw_opts:
        raise ValueError(f"once {str(job.data)[:30]}")
    if boom:
        raise UnrecoverableError(f"boom {str(job.data)[:30]}")
    return job.data


@pytest.fixture
def running(connection: redis.Redis, queue_name: str) -> Iterator[tuple[Worker, QueueEvents, list[Any]]]:
    got: list[Any] = []
    events = QueueEvents(connection, queue_name, block_ms=100)
    events.subscribe(lambda event_type, data: got.append((event_type, data)))
    worker = Worker(connection, queue_name, _process, concurrency=2, max_data_bytes=100_000, lock_duration=5000,
                    stalled_interval=1000)
    with events, Running(worker):
        yield worker, events, got


def test_random_malformed_hashes_and_entries_never_stop_the_worker_or_the_reader(
    connection: redis.Redis, queue_name: str, running: tuple[Worker, QueueEvents, list[Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker, events, got = running
    k = QueueKeys(queue_name)
    seen: set[str] = set()
    outcome: dict[str, dict[str, Any]] = {}
    read = [0]  # how much of ``got`` was looked at

    def finished(job_ids: list[str], entry_ids: list[str]) -> bool:
        fresh = got[read[0]:]
        read[0] += len(fresh)
        for event_type, data in fresh:
            seen.add(data["event_id"])
            if event_type in (EventType.COMPLETED, EventType.FAILED) and data.get("jobId") in job_ids:
                outcome[data["jobId"]] = {"type": event_type, **data}
        return all(job_id in outcome for job_id in job_ids) and all(entry in seen for entry in entry_ids)

    # No shrinking: each failing example costs a wait, and the first one says enough.
    @settings(max_examples=100, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(hashes=st.lists(job_hashes(), min_size=1, max_size=3), entries=_ENTRIES)
    def one_round(hashes: list[dict[str, bytes] | None], entries: list[list[tuple[bytes, bytes]]]) -> None:
        job_ids = [f"fz-{uuid.uuid4().hex[:12]}" for _ in hashes]
        entry_ids = [connection.execute_command("XADD", k.events, "*", *[x for pair in pairs for x in pair]).decode()
                     for pairs in entries]
        for job_id, fields in zip(job_ids, hashes):
            place(connection, queue_name, job_id, fields)
        assert wait_until(lambda: finished(job_ids, entry_ids), timeout=5), (hashes, entries, outcome)
        for job_id in job_ids:
            result = outcome[job_id]
            if result["type"] is EventType.FAILED:
                assert result["failedReason"], (job_id, result)

    with caplog.at_level(logging.WARNING, logger="echomq"):
        one_round()
        assert worker.running and events.running and len(proc_threads(queue_name)) == 2
        normal = Queue(connection, queue_name).add("normal", {"n": 1})
        assert wait_until(lambda: connection.zscore(k.completed, normal.id) is not None, timeout=10)
        marker = connection.xadd(k.events, {"event": "custom-after", "n": "1"}).decode()
        assert wait_until(lambda: any(d["event_id"] == marker for _t, d in list(got)), timeout=10)
    # Every outcome was recorded at once: no job left to the stalled check, no failed finish, no
    # failed read. (A broken scheduler named by a garbage ``rjk`` is logged, and left alone.)
    trouble = ("could not be finished", "could not finish", "stalled", "read failed", "connection lost")
    assert not [r.getMessage()[:300] for r in caplog.records if any(t in r.getMessage() for t in trouble)]
    # A traceback only where the processor raised: the worker's own refusals (malformed hashes)
    # and its own errors come without one, or are bugs.
    assert not [r.getMessage()[:300] for r in caplog.records if r.exc_info and "next iteration" not in r.getMessage()
                and not str(r.exc_info[1]).startswith(("boom", "once"))]
    assert connection.llen(k.active) == 0
