"""Job options: snake_case in, the protocol's stored names out, and every bad value refused."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq.errors import InvalidJobOptionsError
from echomq.protocol.options import PRIORITY_LIMIT, decode_job_options, encode_job_options


def test_every_option_is_stored_under_the_protocol_name() -> None:
    stored = encode_job_options({
        "job_id": "order-7", "delay": 5000, "priority": 3, "lifo": True, "attempts": 4,
        "backoff": {"type": "exponential", "delay": 1000, "jitter": 0.5},
        "remove_on_complete": {"age": 3600, "count": 10}, "remove_on_fail": 5,
        "stack_trace_limit": 3, "keep_logs": 20, "size_limit": 1024, "timestamp": 1700000000000,
        "deduplication": {"id": "d", "ttl": 100, "extend": True},
        "fail_parent_on_failure": True, "repeat_job_key": "sched", "prev_millis": 1700000000000,
        "repeat": {"every": 1000, "start_date": 5, "count": 2},
        "telemetry": {"metadata": "tm", "omit_context": True},
    })
    assert stored == {
        "jobId": "order-7", "delay": 5000, "priority": 3, "lifo": True, "attempts": 4,
        "backoff": {"type": "exponential", "delay": 1000, "jitter": 0.5},
        "removeOnComplete": {"age": 3600, "count": 10}, "removeOnFail": 5,
        "stackTraceLimit": 3, "kl": 20, "sizeLimit": 1024, "timestamp": 1700000000000,
        "de": {"id": "d", "ttl": 100, "extend": True},
        "fpof": True, "repeatJobKey": "sched", "prevMillis": 1700000000000,
        "repeat": {"every": 1000, "startDate": 5, "count": 2},
        "tm": "tm", "omc": True,
    }


def test_parent_is_stored_as_id_and_qualified_queue() -> None:
    parent = {"id": "p", "queue": "emq:{other}"}
    assert encode_job_options({"parent": parent}) == {"parent": parent}


@pytest.mark.parametrize("flag,short", [
    ("fail_parent_on_failure", "fpof"), ("continue_parent_on_failure", "cpof"),
    ("ignore_dependency_on_failure", "idof"), ("remove_dependency_on_failure", "rdof"),
])
def test_parent_failure_flags_use_short_keys(flag: str, short: str) -> None:
    assert encode_job_options({flag: True}) == {short: True}
    assert decode_job_options({short: True}) == {flag: True}


def test_backoff_number_is_a_fixed_backoff_as_bullmq_normalises_it() -> None:
    assert encode_job_options({"backoff": 250}) == {"backoff": {"type": "fixed", "delay": 250}}


def test_remove_on_complete_accepts_bool_count_and_keep_rules() -> None:
    assert encode_job_options({"remove_on_complete": True})["removeOnComplete"] is True
    assert encode_job_options({"remove_on_complete": 0})["removeOnComplete"] == 0
    assert encode_job_options({"remove_on_fail": {"count": 3}})["removeOnFail"] == {"count": 3}


def test_none_means_not_given() -> None:
    assert encode_job_options({"delay": None, "priority": None}) == {}


def test_decode_is_the_inverse_and_keeps_unknown_fields() -> None:
    python = {"job_id": "x", "keep_logs": 2, "deduplication": {"id": "d", "ttl": 5, "replace": True},
              "remove_on_fail": {"age": 60}, "telemetry": {"metadata": "m"}}
    assert decode_job_options(encode_job_options(python)) == python
    # A newer BullMQ field survives as snake_case instead of being dropped.
    assert decode_job_options({"attempts": 0, "someNewOption": 1}) == {"attempts": 0, "some_new_option": 1}
    # BullMQ stores keepLastIfActive inside de.
    assert decode_job_options({"de": {"id": "a", "keepLastIfActive": True}}) == {
        "deduplication": {"id": "a", "keep_last_if_active": True}}


BAD: list[tuple[dict[str, Any], str]] = [
    ({"delay": -1}, "delay"),
    ({"delay": 1.5}, "delay"),
    ({"delay": "10"}, "delay"),
    ({"priority": -1}, "priority"),
    ({"priority": PRIORITY_LIMIT + 1}, "priority"),
    ({"priority": 2.5}, "priority"),
    ({"attempts": True}, "attempts"),
    ({"attempts": -2}, "attempts"),
    ({"job_id": "42"}, "job_id"),
    ({"job_id": "-3"}, "job_id"),
    ({"job_id": "0"}, "job_id"),
    ({"job_id": 42}, "job_id"),
    ({"job_id": ""}, "job_id"),
    ({"job_id": "a:b"}, "job_id"),
    ({"job_id": "0:x:y"}, "job_id"),
    ({"lifo": 1}, "lifo"),
    ({"backoff": {"type": "fixed", "delay": -5}}, "backoff.delay"),
    ({"backoff": {"type": ""}}, "backoff.type"),
    ({"backoff": {"type": "fixed", "jitter": 2}}, "backoff.jitter"),
    ({"backoff": "soon"}, "backoff"),
    ({"remove_on_complete": {"age": -1}}, "remove_on_complete.age"),
    ({"remove_on_complete": {"ages": 1}}, "remove_on_complete"),
    ({"remove_on_fail": "yes"}, "remove_on_fail"),
    ({"deduplication": {"ttl": 5}}, "deduplication.id"),
    ({"deduplication": {"id": "x", "ttl": 0}}, "deduplication.ttl"),
    ({"deduplication": {"id": "x", "keep_last": True}}, "deduplication"),
    ({"deduplication": "x"}, "deduplication"),
    ({"debounce": {"id": "x"}}, "debounce"),
    ({"delya": 5}, "delya"),
    ({"keep_logs": math.nan}, "keep_logs"),
    ({"parent": {"id": "p"}}, "parent"),
    ({"fail_parent_on_failure": True, "ignore_dependency_on_failure": True}, "fail_parent_on_failure"),
    ({"deduplication": {"id": "d"}, "parent": {"id": "p", "queue": "emq:{q}"}}, "deduplication"),
    ({"repeat": {"evry": 5}}, "repeat"),
]


@pytest.mark.parametrize("opts,field", BAD, ids=[str(o) for o, _ in BAD])
def test_bad_options_name_the_field_and_value(opts: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidJobOptionsError) as info:
        encode_job_options(opts)
    message = str(info.value)
    assert f"job option {field}=" in message
    assert isinstance(info.value, ValueError)


def test_unknown_option_suggests_the_close_name() -> None:
    with pytest.raises(InvalidJobOptionsError, match="did you mean 'delay'"):
        encode_job_options({"delya": 5})


def test_custom_ids_bullmq_accepts_are_accepted() -> None:
    for job_id in ("order-1", "012", "repeat:s:1700000000000", "a b", "1.5"):
        assert encode_job_options({"job_id": job_id}) == {"jobId": job_id}

_ids = st.text(alphabet="abcdefgh-_", min_size=1, max_size=8)
_valid = st.fixed_dictionaries({}, optional={
    "job_id": _ids.filter(lambda s: not s.lstrip("-").isdigit()),
    "delay": st.integers(0, 10**12),
    "priority": st.integers(0, PRIORITY_LIMIT),
    "lifo": st.booleans(),
    "attempts": st.integers(0, 100),
    "backoff": st.fixed_dictionaries({"type": st.sampled_from(["fixed", "exponential"]),
                                      "delay": st.integers(0, 10**6)}),
    "remove_on_complete": st.one_of(st.booleans(), st.integers(0, 10**4),
                                    st.fixed_dictionaries({"age": st.integers(0, 10**6)})),
    "keep_logs": st.integers(0, 1000),
    "deduplication": st.fixed_dictionaries({"id": _ids}, optional={"ttl": st.integers(1, 10**6),
                                                                   "extend": st.booleans()}),
})


@given(_valid)
def test_valid_options_round_trip(opts: dict[str, Any]) -> None:
    assert decode_job_options(encode_job_options(opts)) == opts
