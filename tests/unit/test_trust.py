"""Job data is untrusted: only JSON is ever decoded, nothing stored in Redis is ever run or
imported, and every reader of a job hash or an event copes with what any runtime may store.

The first part reads the package's source: no pickle-like decoder, no eval/exec/compile, no
import of a module a string names (the modules that use importlib take the names from
literal tables of their own, or from the operator's own command line, and are listed with the
reason). The rest feeds the protocol's
readers what a broken or hostile producer could write.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Any

import pytest

from echomq.errors import InvalidInputError
from echomq.protocol.codec import decode_json, json_or_text
from echomq.protocol.events import EventType, decode_entry
from echomq.protocol.job_hash import take
from echomq.protocol.limits import DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH, DataLimits, nested_deeper_than

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "echomq"

#: Modules that turn bytes into objects by other means than JSON (and may run code doing so).
FORBIDDEN_MODULES = frozenset({
    "pickle", "_pickle", "cPickle", "pickletools", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle",
    "yaml", "msgpack", "xmlrpc", "copyreg",
})
#: Builtins that run or import what a string says.
FORBIDDEN_CALLS = frozenset({"eval", "exec", "compile", "__import__"})
#: importlib, allowed only where the module names come from a literal table in the same module
#: or from the command line the operator typed.
IMPORTLIB_ALLOWED = {
    "echomq/__init__.py": "lazy public names: the module comes from the literal _EXPORTS table",
    "echomq/processes/loading.py": "`echomq worker --processor/--app/--listener MODULE:NAME` imports the module "
                                   "the operator typed on the command line (never a name read from Redis): "
                                   "loading it is the command's job",
    "echomq/testing/__init__.py": "lazy public names: the module comes from the literal _EXPORTS table",
}


def trust_problems(source: str, where: str) -> list[str]:
    """What in ``source`` could decode anything but JSON, or run or import what a string names."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] if not node.level else []
        else:
            modules = []
        for module in modules:
            top = module.split(".")[0]
            if top in FORBIDDEN_MODULES:
                problems.append(f"{where}: imports {module}")
            if top == "importlib" and where not in IMPORTLIB_ALLOWED:
                problems.append(f"{where}: imports {module}")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
            problems.append(f"{where}:{node.lineno}: uses {node.id}")
        if isinstance(node, ast.Attribute) and node.attr in ("literal_eval", "import_module") \
                and where not in IMPORTLIB_ALLOWED:
            problems.append(f"{where}:{node.lineno}: uses .{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr") \
                and any(isinstance(a, ast.Name) and a.id == "builtins" for a in node.args):
            problems.append(f"{where}:{node.lineno}: reaches builtins by name")
    return problems


def package_sources() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}


def test_only_json_is_decoded_and_nothing_named_in_a_string_is_run_or_imported() -> None:
    problems = [p for where, source in sorted(package_sources().items()) for p in trust_problems(source, where)]
    assert problems == []


def test_importlib_is_used_only_where_the_list_says() -> None:
    """The allow-list cannot rot: a module on it that no longer needs importlib must leave it."""
    users = {where for where, source in package_sources().items() if "importlib" in source}
    assert users == set(IMPORTLIB_ALLOWED)


@pytest.mark.parametrize("source", [
    "import pickle",
    "from pickle import loads",
    "import marshal as m",
    "import yaml",
    "import importlib",
    "from importlib import import_module",
    "x = eval('1')",
    "exec('x = 1')",
    "f = compile('1', 'f', 'eval')",
    "m = __import__('os')",
    "import ast\nast.literal_eval('1')",
    "import builtins\ngetattr(builtins, 'ev' + 'al')('1')",
    "def late():\n    import cloudpickle\n",
])
def test_the_check_catches_what_it_guards(source: str) -> None:
    assert trust_problems(source, "echomq/probe.py") != []


def test_the_check_leaves_json_and_regexes_alone() -> None:
    source = "import json\nimport re\njson.loads('{}')\nre.compile('x')\nclient.evalsha('x', 0)\n"
    assert trust_problems(source, "echomq/probe.py") == []


# -- the lenient readers: never a bare Python error ------------------------------------------------

@pytest.mark.parametrize("raw", ["[" * 100_000, " " + "[" * 100_000, "\n" + '{"a":' * 100_000, '{"a": 1', "\x00\xff",
                                 "[1] trailing", ""])
def test_json_or_text_gives_back_the_text_when_it_is_not_one_json_value(raw: str) -> None:
    assert json_or_text(raw) == raw


@pytest.mark.parametrize("raw, why", [
    ("[" * 100_000, "nested too deeply"), (" " + "[" * 100_000, "nested too deeply"),
    ('{"a": 1', "Expecting"), ("[1] x", "text after"), ("", "Expecting"),
])
def test_decode_json_says_why_and_never_raises_anything_but_value_error(raw: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode_json(raw)


def test_decode_json_tells_a_json_string_from_text() -> None:
    assert decode_json('"abc"') == "abc"
    with pytest.raises(ValueError):
        decode_json("abc")


@pytest.mark.parametrize("fields", [
    ["jobId", "1"],                                                   # no event field
    ["event", "no-such-event", "x", "y"],                             # unknown name
    ["event", "delayed", "jobId", "1", "delay", "soon"],              # a number that is not one
    ["event", "retries-exhausted", "attemptsMade", "9" * 5000],        # past int()'s digit limit
    ["event", "cleaned", "count", "NaN"],
    ["event", "completed", "returnvalue", "[" * 100_000],              # too deep for json
    ["event", "completed", "returnvalue", " " + "[" * 100_000],
    ["event", "progress", "data", '{"a":'],
    [b"event", b"completed", b"returnvalue", b"\xff\xfe\x00"],        # binary garbage
    [b"\xff", b"\x00"],
    ["event", "completed", "odd number of fields"],
    {"event": "failed", "failedReason": "x" * 1_000_000},              # huge field
])
def test_decode_entry_never_raises_on_a_malformed_entry(fields: Any) -> None:
    event_type, data = decode_entry("1-0", fields)
    assert data["event_id"] == "1-0"
    assert isinstance(event_type, (EventType, str))


def test_decode_entry_keeps_the_raw_text_of_what_it_cannot_decode() -> None:
    assert decode_entry("1-0", ["event", "delayed", "delay", "soon"])[1]["delay"] == "soon"
    assert decode_entry("1-0", ["event", "completed", "returnvalue", "[" * 5000])[1]["returnvalue"] == "[" * 5000
    assert decode_entry("1-0", ["jobId", "7"]) == ("", {"jobId": "7", "event_id": "1-0"})


# -- data limits -----------------------------------------------------------------------------------

def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_TRICKY = [1, None, "", "a[b", "]]]", 'q"{[', "\\", '\\"[', "\\\\", '\\\\"', "\u00e9[", "\ud800[", "}{"]


def _random_value(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.15:
        return rng.choice(_TRICKY)
    if rng.random() < 0.5:
        return [_random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    keys = [rng.choice(["k", "[", '"}', "\\", ""]) + str(i) for i in range(rng.randint(0, 3))]
    return {key: _random_value(rng, depth - 1) for key in keys}


def test_the_nesting_check_agrees_with_a_walk_of_the_value() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        value = _random_value(rng, rng.randint(0, 20))
        encoded = json.dumps(value, ensure_ascii=rng.random() < 0.5)
        depth = _depth(value)
        for limit in (1, 2, 3, 5, 8, 9, 13):
            assert nested_deeper_than(encoded, limit) == (depth > limit), (encoded, limit)


@pytest.mark.parametrize("depth, over", [(511, False), (512, False), (513, True), (100_000, True)])
def test_the_nesting_limit_counts_levels(depth: int, over: bool) -> None:
    assert nested_deeper_than("[" * depth + "]" * depth, 512) is over
    assert nested_deeper_than("[" * depth, 512) is over  # malformed text is measured too


def test_brackets_inside_strings_do_not_count() -> None:
    assert not nested_deeper_than(json.dumps(["[" * 5000, "{" * 5000]), 3)


def test_the_limits_name_themselves_and_measure_utf8() -> None:
    limits = DataLimits(max_bytes=10, max_depth=2)
    assert limits.problem('"abcdefgh"') is None  # 10 bytes
    assert limits.problem('"\u00e9\u00e9\u00e9\u00e9\u00e9"') == "12 bytes of JSON, over max_data_bytes=10"
    assert DataLimits(max_depth=2).problem("[[[1]]]") == "nested deeper than max_data_depth=2"
    assert DataLimits(None, None).problem("[" * 100_000) is None
    assert (DEFAULT_MAX_DATA_BYTES, DEFAULT_MAX_DATA_DEPTH) == (16 * 1024 * 1024, 512)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "10"])
def test_a_limit_must_be_a_positive_int_or_none(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="Queue max_data_bytes"):
        DataLimits.checked("Queue", value, None)


# -- a job hash a worker is about to run -------------------------------------------------------------

GOOD = {"name": "email", "data": '{"to":"a@b.c"}', "opts": '{"attempts":2}', "timestamp": "1700000000000",
        "delay": "0", "priority": "0", "ats": "1", "processedOn": "1700000000001"}


def test_a_well_formed_hash_runs() -> None:
    taken = take(GOOD, DataLimits())
    assert taken.problem is None and taken.repairs == []
    assert taken.data == {"to": "a@b.c"} and taken.opts == {"attempts": 2}


def test_absent_data_and_opts_read_as_empty_objects_as_bullmq_reads_them() -> None:
    taken = take({"name": "x", "timestamp": "1"}, DataLimits())
    assert (taken.problem, taken.data, taken.opts) == (None, {}, {})


@pytest.mark.parametrize("change, reason", [
    ({"data": '{"to":"a@b'}, "data is not JSON"),
    ({"data": "[" * 100_000}, "its data is nested deeper than max_data_depth=512 (a Worker limit)"),
    ({"data": "x" * 20}, "data is not JSON"),
    ({"opts": "attempts=3"}, "opts is not JSON"),
    ({"opts": "[1, 2]"}, "opts is a JSON list, not an object"),
    ({"opts": '{"attempts":"abc"}'}, "opts.attempts='abc' is not a whole number"),
    ({"opts": '{"attempts":Infinity}'}, "opts.attempts=inf is not a whole number"),
    ({"opts": '{"attempts":-1}'}, "opts.attempts=-1"),
    ({"atm": "x"}, "atm='x' is not an integer"),
    ({"atm": "1.5"}, "atm='1.5' is not an integer"),
    ({"timestamp": None}, "it has no timestamp field"),
    ({"name": None}, "it has no name field"),
    ({"delay": "NaN"}, "delay='NaN' is not a number"),
    ({"priority": "high"}, "priority='high' is not a number"),
])
def test_a_malformed_hash_gets_a_reason_naming_the_field(change: dict[str, Any], reason: str) -> None:
    fields = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    taken = take(fields, DataLimits())
    assert taken.problem is not None and reason in taken.problem


def test_without_limits_data_too_deep_for_python_is_still_a_reason_not_a_crash() -> None:
    taken = take({**GOOD, "data": " " + "[" * 100_000}, DataLimits(None, None))
    assert taken.problem == "malformed job hash: data is not JSON (nested too deeply to decode)"


def test_a_malformed_attempt_counter_is_reset_so_the_failure_can_be_stored() -> None:
    assert take({**GOOD, "atm": "x"}, DataLimits()).repairs == ["atm", "0"]
    assert take({**GOOD, "atm": "3"}, DataLimits()).repairs == []


def test_data_over_the_workers_limit_is_refused_by_name() -> None:
    big = json.dumps({"blob": "x" * 2000})
    taken = take({**GOOD, "data": big}, DataLimits(max_bytes=1000))
    assert taken.problem == f"its data is {len(big)} bytes of JSON, over max_data_bytes=1000 (a Worker limit)"


def test_a_reason_never_quotes_the_data() -> None:
    secret = "S3cret-card-4111111111111111"
    for data in (f'{{"card":"{secret}"', f'["{secret}"] trailing', f"{secret}"):
        taken = take({**GOOD, "data": data}, DataLimits())
        assert taken.problem is not None and secret not in taken.problem
