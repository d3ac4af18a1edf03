"""Every rule of the job options at its edges, with the whole message the user reads.

The messages are the interface: a user who passes a bad option reads which option, the value
as given and what it must be. So each refusal below is checked word for word, each bound on
both sides (the last value accepted, the first refused), and the reading back of what BullMQ
wrote (short keys, camelCase, options this version does not know) key by key.
"""

from __future__ import annotations

from typing import Any

import pytest

from echomq.errors import InvalidJobOptionsError
from echomq.protocol.options import (
    MAX_EPOCH_MS,
    MAX_SAFE_INTEGER,
    PRIORITY_LIMIT,
    backoff_as_dict,
    decode_job_options,
    dumps_json,
    encode_job_options,
    keep_args,
    lookup_job_id,
    validate_job_id,
    validate_job_name,
    validate_keep,
)

SHAPE = "must be {'id': parent job id, 'queue': '<prefix>:{<queue>}'}"
BACKOFF = "must be a delay in ms or {'type': 'fixed'|'exponential', 'delay': ms}"
KEEP = "must be a bool, a count, or {'age': seconds, 'count': n, 'limit': n}"
KEYS = "takes only the keys ['age', 'count', 'limit'] (at least one)"
STRATEGY = "must be 'fixed', 'exponential' or a custom strategy name"
SURROGATE = ("holds a lone surrogate '\\ud800' at index 0, which has no UTF-8 form (Redis stores bytes): "
             "decode the text it came from properly, or drop the character")
TELEMETRY = "must be {'metadata': str, 'omit_context': bool}"

REFUSED: list[tuple[dict[str, Any], str]] = [
    # counts: an integer, not a bool or a str; whole; within 0 .. 2^53 - 1 unless tighter
    ({"attempts": "3"}, "attempts='3': must be an integer"),
    ({"attempts": True}, "attempts=True: must be an integer"),
    ({"attempts": -1}, "attempts=-1: must be >= 0"),
    ({"attempts": 1.5}, "attempts=1.5: must be a whole number"),
    ({"attempts": float("inf")}, "attempts=inf: must be a whole number"),
    ({"attempts": float("nan")}, "attempts=nan: must be a whole number"),
    ({"attempts": MAX_SAFE_INTEGER + 1}, "attempts=9007199254740992: must be between 0 and 9007199254740991"),
    ({"delay": -1}, "delay=-1: must be >= 0"),
    ({"priority": PRIORITY_LIMIT + 1}, "priority=2097152: must be between 0 and 2097151"),
    ({"priority": -1}, "priority=-1: must be >= 0"),
    ({"timestamp": MAX_EPOCH_MS + 1}, "timestamp=8640000000000001: must be between 0 and 8640000000000000"),
    ({"prev_millis": MAX_EPOCH_MS + 1}, "prev_millis=8640000000000001: must be between 0 and 8640000000000000"),
    ({"size_limit": 0}, "size_limit=0: must be >= 1"),
    ({"keep_logs": -1}, "keep_logs=-1: must be >= 0"),
    ({"stack_trace_limit": "x"}, "stack_trace_limit='x': must be an integer"),
    # flags
    ({"lifo": 1}, "lifo=1: must be True or False"),
    ({"fail_parent_on_failure": "yes"}, "fail_parent_on_failure='yes': must be True or False"),
    ({"fail_parent_on_failure": True, "ignore_dependency_on_failure": True, "remove_dependency_on_failure": True},
     "fail_parent_on_failure=True: cannot be used together with ignore_dependency_on_failure, "
     "remove_dependency_on_failure"),
    ({"continue_parent_on_failure": True, "remove_dependency_on_failure": True},
     "continue_parent_on_failure=True: cannot be used together with remove_dependency_on_failure"),
    # backoff
    ({"backoff": True}, f"backoff=True: {BACKOFF}"),
    ({"backoff": "1000"}, f"backoff='1000': {BACKOFF}"),
    ({"backoff": -5}, "backoff=-5: must be >= 0"),
    ({"backoff": {"type": "fixed", "x": 1}}, "backoff={'type': 'fixed', 'x': 1}: unknown keys ['x']"),
    ({"backoff": {"delay": 5}}, f"backoff.type=None: {STRATEGY}"),
    ({"backoff": {"type": ""}}, f"backoff.type='': {STRATEGY}"),
    ({"backoff": {"type": 5}}, f"backoff.type=5: {STRATEGY}"),
    ({"backoff": {"type": "fixed", "delay": -1}}, "backoff.delay=-1: must be >= 0"),
    ({"backoff": {"type": "fixed", "jitter": 1.000001}}, "backoff.jitter=1.000001: must be a number between 0 and 1"),
    ({"backoff": {"type": "fixed", "jitter": -0.1}}, "backoff.jitter=-0.1: must be a number between 0 and 1"),
    ({"backoff": {"type": "fixed", "jitter": True}}, "backoff.jitter=True: must be a number between 0 and 1"),
    ({"backoff": {"type": "fixed", "jitter": "0.5"}}, "backoff.jitter='0.5': must be a number between 0 and 1"),
    # keep rules
    ({"remove_on_complete": "yes"}, f"remove_on_complete='yes': {KEEP}"),
    ({"remove_on_complete": -1}, "remove_on_complete=-1: must be >= 0"),
    ({"remove_on_complete": {}}, f"remove_on_complete={{}}: {KEYS}"),
    ({"remove_on_complete": {"age": 1, "x": 2}}, f"remove_on_complete={{'age': 1, 'x': 2}}: {KEYS}"),
    ({"remove_on_fail": {"count": -2}}, "remove_on_fail.count=-2: must be >= 0"),
    ({"remove_on_fail": {"limit": 1.5}}, "remove_on_fail.limit=1.5: must be a whole number"),
    ({"remove_on_fail": 2.5}, "remove_on_fail=2.5: must be a whole number"),
    # deduplication
    ({"deduplication": "abc"}, "deduplication='abc': must be a mapping with at least an 'id'"),
    ({"deduplication": {"id": "a", "x": 1}},
     "deduplication={'id': 'a', 'x': 1}: unknown keys ['x'] (known: ['extend', 'id', 'replace', 'ttl'])"),
    ({"deduplication": {"id": ""}}, "deduplication.id='': must be a non-empty str"),
    ({"deduplication": {"id": 5}}, "deduplication.id=5: must be a non-empty str"),
    ({"deduplication": {}}, "deduplication.id=None: must be a non-empty str"),
    ({"deduplication": {"id": "a", "ttl": 0}}, "deduplication.ttl=0: must be >= 1"),
    ({"deduplication": {"id": "a", "extend": 1}}, "deduplication.extend=1: must be True or False"),
    ({"deduplication": {"id": "a", "replace": "no"}}, "deduplication.replace='no': must be True or False"),
    ({"deduplication": {"id": "\ud800"}}, f"deduplication.id='\\ud800': {SURROGATE}"),
    ({"deduplication": {"id": "a"}, "parent": {"id": "1", "queue": "emq:{q}"}},
     "deduplication={'id': 'a'}: cannot be used together with parent"),
    # parent
    ({"parent": "p"}, f"parent='p': {SHAPE}"),
    ({"parent": {"id": "1"}}, f"parent={{'id': '1'}}: {SHAPE}"),
    ({"parent": {"id": "1", "queue": "emq:{q}", "x": 1}},
     f"parent={{'id': '1', 'queue': 'emq:{{q}}', 'x': 1}}: {SHAPE}"),
    ({"parent": {"id": "", "queue": "emq:{q}"}}, "parent.id='': must be a non-empty str"),
    ({"parent": {"id": 5, "queue": "emq:{q}"}}, "parent.id=5: must be a non-empty str"),
    ({"parent": {"id": "1", "queue": ""}}, "parent.queue='': must be the parent queue's qualified name"),
    ({"parent": {"id": "1", "queue": 7}}, "parent.queue=7: must be the parent queue's qualified name"),
    ({"parent": {"id": "\ud800", "queue": "emq:{q}"}}, f"parent.id='\\ud800': {SURROGATE}"),
    ({"parent": {"id": "1", "queue": "\ud800"}}, f"parent.queue='\\ud800': {SURROGATE}"),
    # repeat, telemetry, strings
    ({"repeat": 5}, "repeat=5: must be a mapping"),
    ({"repeat": {"every": 5, "cron": "x"}}, "repeat={'every': 5, 'cron': 'x'}: unknown key 'cron'"),
    ({"repeat": {"pattern": "\ud800"}},
     "repeat={'pattern': '\\ud800'}: holds a lone surrogate '\\ud800' (the scripts read options back)"),
    ({"telemetry": "x"}, f"telemetry='x': {TELEMETRY}"),
    ({"telemetry": {"x": 1}}, f"telemetry={{'x': 1}}: {TELEMETRY}"),
    ({"telemetry": {"metadata": 5}}, "telemetry.metadata=5: must be a str"),
    ({"telemetry": {"omit_context": "yes"}}, "telemetry.omit_context='yes': must be True or False"),
    ({"repeat_job_key": ""}, "repeat_job_key='': must be a non-empty str"),
    ({"repeat_job_key": 5}, "repeat_job_key=5: must be a non-empty str"),
    ({"repeat_job_key": "\ud800"}, f"repeat_job_key='\\ud800': {SURROGATE}"),
    # custom ids
    ({"job_id": 5}, "job_id=5: must be a str (custom ids cannot be integers)"),
    ({"job_id": ""}, "job_id='': must not be empty"),
    ({"job_id": "12"}, "job_id='12': custom ids cannot be integer-like (they would collide with auto ids)"),
    ({"job_id": "-3"}, "job_id='-3': custom ids cannot be integer-like (they would collide with auto ids)"),
    ({"job_id": "0"}, "job_id='0': custom ids cannot be integer-like (they would collide with auto ids)"),
    ({"job_id": "0:x"}, "job_id='0:x': must not start with '0:' (legacy marker shape)"),
    ({"job_id": "a:b"}, "job_id='a:b': may contain ':' only as exactly three ':'-separated segments"),
    ({"job_id": "a:b:c:d"}, "job_id='a:b:c:d': may contain ':' only as exactly three ':'-separated segments"),
    ({"job_id": "meta"},
     "job_id='meta': is the name of one of the queue's own keys ('meta'): the job's hash would overwrite it"),
    ({"job_id": "\ud800"}, f"job_id='\\ud800': {SURROGATE}"),
    # names
    ({"debounce": {"id": "x"}}, "debounce={'id': 'x'}: was removed in BullMQ 6: use deduplication={'id': ...}"),
    ({"atempts": 3}, "atempts=3: unknown job option (did you mean 'attempts'?)"),
    ({"zzzzqqq": 1}, "zzzzqqq=1: unknown job option"),
    ({7: 1}, "7=1: unknown job option"),
]


@pytest.mark.parametrize(("opts", "message"), REFUSED, ids=[m.split(":")[0][:60] for _, m in REFUSED])
def test_each_refusal_names_the_option_its_value_and_the_rule(opts: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidJobOptionsError) as refused:
        encode_job_options(opts)
    assert str(refused.value) == f"job option {message}"


def test_a_value_is_shown_cut_at_200_characters() -> None:
    with pytest.raises(InvalidJobOptionsError) as refused:
        encode_job_options({"attempts": "x" * 500})
    assert str(refused.value) == f"job option attempts='{'x' * 199}: must be an integer"


def test_options_that_are_not_json_are_refused_naming_the_cause() -> None:
    with pytest.raises(InvalidJobOptionsError) as refused:
        encode_job_options({"repeat": {"every": {1, 2}}})
    assert str(refused.value) == ("job option opts={'repeat': {'every': {1, 2}}}: not JSON-serialisable "
                                  "(Object of type set is not JSON serializable)")


ACCEPTED: list[tuple[dict[str, Any], dict[str, Any]]] = [
    # the edges of every bound, on the side accepted
    ({"attempts": 0}, {"attempts": 0}),
    ({"attempts": MAX_SAFE_INTEGER}, {"attempts": MAX_SAFE_INTEGER}),
    ({"attempts": 3.0}, {"attempts": 3}),
    ({"priority": PRIORITY_LIMIT}, {"priority": PRIORITY_LIMIT}),
    ({"timestamp": MAX_EPOCH_MS}, {"timestamp": MAX_EPOCH_MS}),
    ({"prev_millis": MAX_EPOCH_MS}, {"prevMillis": MAX_EPOCH_MS}),
    ({"size_limit": 1}, {"sizeLimit": 1}),
    ({"keep_logs": 0, "stack_trace_limit": 0}, {"kl": 0, "stackTraceLimit": 0}),
    ({"backoff": 0}, {"backoff": {"type": "fixed", "delay": 0}}),
    ({"backoff": {"type": "exponential", "delay": 1000, "jitter": 0}},
     {"backoff": {"type": "exponential", "delay": 1000, "jitter": 0}}),
    ({"backoff": {"type": "fixed", "jitter": 1}}, {"backoff": {"type": "fixed", "jitter": 1}}),
    ({"backoff": {"type": "mine", "delay": None, "jitter": None}}, {"backoff": {"type": "mine"}}),
    ({"remove_on_complete": 0}, {"removeOnComplete": 0}),
    ({"remove_on_fail": {"age": 0, "count": None}}, {"removeOnFail": {"age": 0}}),
    ({"deduplication": {"id": "d", "ttl": 1, "extend": False, "replace": True}},
     {"de": {"id": "d", "ttl": 1, "extend": False, "replace": True}}),
    ({"job_id": "repeat:s:1700000000000"}, {"jobId": "repeat:s:1700000000000"}),
    ({"job_id": "a-1"}, {"jobId": "a-1"}),
    ({"repeat": {"start_date": 5, "prev_millis": 6, "tz": None}}, {"repeat": {"startDate": 5, "prevMillis": 6}}),
    ({"telemetry": {"metadata": "m", "omit_context": True}}, {"tm": "m", "omc": True}),
    ({"telemetry": {}}, {}),
    ({"fail_parent_on_failure": True, "ignore_dependency_on_failure": False}, {"fpof": True, "idof": False}),
    ({"lifo": False, "delay": None}, {"lifo": False}),
]


@pytest.mark.parametrize(("opts", "stored"), ACCEPTED)
def test_the_accepted_edges_are_stored_as_bullmq_stores_them(opts: dict[str, Any], stored: dict[str, Any]) -> None:
    assert encode_job_options(opts) == stored


def test_options_are_stored_in_the_tables_order_whatever_order_they_came_in() -> None:
    stored = encode_job_options({"delay": 5, "attempts": 2, "priority": 1, "job_id": "x"})
    assert list(stored) == ["delay", "attempts", "priority", "jobId"]


def test_what_bullmq_wrote_reads_back_key_by_key() -> None:
    stored = {"tm": "m", "omc": False, "kl": 3, "fpof": True, "de": {"id": "d", "ttl": 5},
              "repeat": {"startDate": 1, "prevMillis": 2, "newRepeatKey": 3}, "removeOnFail": {"age": 9},
              "someNewOption": {"x": 1}, "jobId": "j"}
    assert decode_job_options(stored) == {
        "telemetry": {"metadata": "m", "omit_context": False}, "keep_logs": 3, "fail_parent_on_failure": True,
        "deduplication": {"id": "d", "ttl": 5},
        "repeat": {"start_date": 1, "prev_millis": 2, "new_repeat_key": 3}, "remove_on_fail": {"age": 9},
        "some_new_option": {"x": 1}, "job_id": "j"}


def test_bullmq_5s_debounce_and_odd_shapes_read_back_as_they_are() -> None:
    stored = {"debounce": {"id": "d"}}
    decoded = decode_job_options(stored)
    assert decoded == {"deduplication": {"id": "d"}}
    assert decoded["deduplication"] is not stored["debounce"]  # a copy: editing it leaves the read alone
    assert decode_job_options({"debounce": "d"}) == {"deduplication": "d"}
    assert decode_job_options({"repeat": 5, "de": "x"}) == {"repeat": 5, "deduplication": "x"}
    assert decode_job_options({"omc": True}) == {"telemetry": {"omit_context": True}}
    assert decode_job_options({}) == {}


@pytest.mark.parametrize(("keep", "args"), [
    (None, ("-1", "", "")), (False, ("-1", "", "")), (True, ("0", "", "")), (0, ("0", "", "")), (5, ("5", "", "")),
    (5.0, ("5", "", "")), (5.5, ("-1", "", "")), (-1, ("-1", "", "")),
    (MAX_SAFE_INTEGER, (str(MAX_SAFE_INTEGER), "", "")), (MAX_SAFE_INTEGER + 1, ("-1", "", "")),
    ({"count": 2, "age": 60, "limit": 10}, ("2", "60", "10")), ({"age": 60}, ("-1", "60", "")),
    ({"count": True, "age": "x"}, ("-1", "", "")), ("junk", ("-1", "", "")),
])
def test_a_stored_keep_rule_becomes_the_scripts_arguments(keep: Any, args: tuple[str, str, str]) -> None:
    assert keep_args(keep) == args


def test_keep_rules_name_the_setting_they_came_from() -> None:
    assert validate_keep("Worker remove_on_fail", {"count": 1}) == {"count": 1}
    assert validate_keep("Worker remove_on_fail", True) is True
    for value, message in [([1], KEEP), ({"count": "a"}, "must be an integer"),
                           (MAX_SAFE_INTEGER + 1, "must be between 0 and 9007199254740991")]:
        with pytest.raises(InvalidJobOptionsError) as refused:
            validate_keep("Worker remove_on_fail", value)
        field = "Worker remove_on_fail.count" if isinstance(value, dict) else "Worker remove_on_fail"
        shown = "'a'" if isinstance(value, dict) else repr(value)
        assert str(refused.value) == f"{field}={shown}: {message}"


def test_a_looked_up_id_is_a_str_or_an_auto_id() -> None:
    assert lookup_job_id(7, "get_job") == "7"
    assert lookup_job_id(0, "get_job") == "0"
    assert lookup_job_id("a", "get_job") == "a"
    for bad in (None, "", -1, True, 1.0):
        with pytest.raises(InvalidJobOptionsError) as refused:
            lookup_job_id(bad, "remove")
        assert str(refused.value) == f"remove: job_id={bad!r} must be a non-empty str (or an int auto id)"
    with pytest.raises(InvalidJobOptionsError) as refused:
        lookup_job_id("\ud800", "remove")
    assert str(refused.value) == f"remove: job_id='\\ud800': {SURROGATE}"


def test_validate_job_id_names_the_field_it_checks() -> None:
    with pytest.raises(InvalidJobOptionsError) as refused:
        validate_job_id(5, "parent_id")
    assert str(refused.value) == "job option parent_id=5: must be a str (custom ids cannot be integers)"


def test_backoff_shorthands_normalise_as_bullmq_normalises_them() -> None:
    assert backoff_as_dict(None) is None and backoff_as_dict(False) is None
    assert backoff_as_dict(0) == {"type": "fixed", "delay": 0}
    assert backoff_as_dict(1.5) == {"type": "fixed", "delay": 1.5}
    assert backoff_as_dict({"type": "exponential"}) == {"type": "exponential"}
    with pytest.raises(InvalidJobOptionsError) as refused:
        backoff_as_dict(True)
    assert str(refused.value) == "backoff must be a number or a dict, got True"


def test_job_names_and_json_fields() -> None:
    assert validate_job_name("email") == "email" and validate_job_name("é") == "é"
    with pytest.raises(InvalidJobOptionsError) as refused:
        validate_job_name(5)
    assert str(refused.value) == "job name 5: must be a str"
    with pytest.raises(InvalidJobOptionsError) as refused:
        validate_job_name("\ud800")
    assert str(refused.value) == f"job name '\\ud800': {SURROGATE}"
    assert dumps_json({"a": "é"}, "data") == '{"a":"é"}'
    assert dumps_json({"a": "\ud800"}, "data") == '{"a":"\\ud800"}'
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidJobOptionsError) as refused:
        dumps_json(deep, "data")
    assert str(refused.value) == ("job data: nested too deeply to encode as JSON (past Python's recursion limit; "
                                  "see max_data_depth)")
    with pytest.raises(InvalidJobOptionsError) as refused:
        dumps_json({"a": float("nan")}, "data")
    assert str(refused.value).startswith("job data {'a': nan}: not JSON-serialisable (")
