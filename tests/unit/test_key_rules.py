"""The key layout's rules at their edges, messages word for word (docs/protocol.md §1, §6.2):
names and prefixes refused, ids that would land on a queue key, the scripts' key tokens, the
connection names BullMQ's getWorkers reads, and the meta keys discovery keeps."""

from __future__ import annotations

import base64

import pytest

from echomq.errors import InvalidInputError, InvalidQueueNameError
from echomq.protocol.keys import (
    SUFFIXES,
    KeyToken,
    QueueKeys,
    job_key,
    meta_scan_pattern,
    names_queue_key,
    parse_key_token,
    queue_of_meta_key,
    validate_prefix,
    validate_queue_name,
)

SURROGATE = ("holds a lone surrogate '\\ud800' at index 1, which has no UTF-8 form (Redis stores bytes): "
             "decode the text it came from properly, or drop the character")


@pytest.mark.parametrize(("name", "message"), [
    (5, "queue name must be a str, got int"),
    (None, "queue name must be a str, got NoneType"),
    ("", "queue name must not be empty"),
    ("a:b", "queue name 'a:b' must not contain ':'"),
    ("a{b", "queue name 'a{b' must not contain braces: EchoMQ adds the {} hash tag itself"),
    ("a}b", "queue name 'a}b' must not contain braces: EchoMQ adds the {} hash tag itself"),
    ("a\ud800", f"queue name 'a\\ud800': {SURROGATE}"),
])
def test_bad_queue_names_are_refused_naming_why(name: object, message: str) -> None:
    with pytest.raises(InvalidQueueNameError) as refused:
        validate_queue_name(name)  # type: ignore[arg-type]
    assert str(refused.value) == message


@pytest.mark.parametrize("name", ["o", "orders", "a b", "é", "q-1.2_x"])
def test_queue_names_that_make_keys(name: str) -> None:
    assert validate_queue_name(name) == name


@pytest.mark.parametrize(("prefix", "message"), [
    ("", "prefix must be a non-empty str, got ''"),
    (None, "prefix must be a non-empty str, got None"),
    (7, "prefix must be a non-empty str, got 7"),
    ("a{", "prefix 'a{' must not contain braces"),
    ("}a", "prefix '}a' must not contain braces"),
    ("a\ud800", f"prefix 'a\\ud800': {SURROGATE}"),
])
def test_bad_prefixes_are_refused_naming_why(prefix: object, message: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        validate_prefix(prefix)  # type: ignore[arg-type]
    assert str(refused.value) == message
    with pytest.raises(InvalidInputError):
        QueueKeys("orders", prefix)  # type: ignore[arg-type]


def test_a_prefix_may_hold_colons_and_glob_characters() -> None:
    assert QueueKeys("q", "app:v2").wait == "app:v2:{q}:wait"
    assert validate_prefix("a*b") == "a*b"


@pytest.mark.parametrize(("job_id", "lands_on"), [
    *((suffix, suffix) for suffix in SUFFIXES),
    ("de:x", "de:..."), ("de:a:b", "de:..."), ("metrics:x", "metrics:..."), ("de", None), ("metrics", None),
    ("dex:1", None), ("x:de:1", None), ("waiting", None), ("42", None), ("repeat:s:1", None),
])
def test_an_id_that_would_be_a_queue_key_is_named(job_id: str, lands_on: str | None) -> None:
    assert names_queue_key(job_id) == lands_on


@pytest.mark.parametrize(("token", "parsed"), [
    ("prefix", KeyToken("prefix", "")), ("job", KeyToken("job", "")),
    ("job:lock", KeyToken("job", ":lock")), ("job:unsuccessful", KeyToken("job", ":unsuccessful")),
    ("wait", KeyToken("queue", "wait")), ("metrics:completed", KeyToken("queue", "metrics:completed")),
    ("<finished>", KeyToken("queue", "<finished>")), ("metrics:<finished>", KeyToken("queue", "metrics:<finished>")),
])
def test_the_scripts_key_tokens(token: str, parsed: KeyToken) -> None:
    assert parse_key_token(token) == parsed


def test_a_tokens_choices() -> None:
    assert parse_key_token("metrics:<finished>").choices == ("finished",)
    assert parse_key_token("wait").choices == ()


@pytest.mark.parametrize(("token", "message"), [
    ("job:nope", "job key 'job:nope': the companions are lock, logs, dependencies, processed, unsuccessful, failed, "
     "cancel"),
    ("nope:<x>", "key 'nope:<x>' does not become a per-queue key for any choice"),
    ("nope", "unknown key 'nope' (a per-queue suffix, 'prefix', 'job', 'job:<part>' or '<choice>')"),
    ("Wait", "unknown key 'Wait' (a per-queue suffix, 'prefix', 'job', 'job:<part>' or '<choice>')"),
])
def test_a_token_outside_the_grammar_is_refused(token: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_key_token(token)
    assert str(refused.value) == message


def test_a_token_becomes_its_key() -> None:
    keys = QueueKeys("orders", "app")
    assert keys.for_token(parse_key_token("prefix"), {}) == "app:{orders}:"
    assert keys.for_token(parse_key_token("wait"), {}) == "app:{orders}:wait"
    assert keys.for_token(parse_key_token("<finished>"), {"finished": "failed"}) == "app:{orders}:failed"
    assert keys.for_token(parse_key_token("metrics:<finished>"), {"finished": "completed"}) == \
        "app:{orders}:metrics:completed"


def test_a_token_without_its_choice_or_with_a_bad_one_is_refused() -> None:
    keys = QueueKeys("orders")
    with pytest.raises(InvalidInputError) as refused:
        keys.for_token(parse_key_token("<finished>"), {})
    assert str(refused.value) == "key <finished>: choose it (one of the queue's key suffixes)"
    with pytest.raises(InvalidInputError) as refused:
        keys.for_token(parse_key_token("<finished>"), {"finished": "nope"})
    assert str(refused.value) == "key '<finished>' with {'finished': 'nope'}: 'nope' is not a queue key"
    with pytest.raises(ValueError) as refused_job:
        keys.for_token(parse_key_token("job:lock"), {})
    assert str(refused_job.value) == "a job key is filled in per job, not per queue"


def test_every_key_of_a_job() -> None:
    keys = QueueKeys("orders", "app")
    assert [keys.job_logs("7"), keys.job_dependencies("7"), keys.job_processed("7"), keys.deduplication("d")] == [
        "app:{orders}:7:logs", "app:{orders}:7:dependencies", "app:{orders}:7:processed", "app:{orders}:de:d"]
    assert job_key("app:{other}", "9") == "app:{other}:9"
    assert job_key("app:{other}", "9", "dependencies") == "app:{other}:9:dependencies"


def test_an_attribute_that_is_no_suffix_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError) as missing:
        getattr(QueueKeys("orders"), "waiting")  # noqa: B009 (the lookup is what is tested)
    assert str(missing.value) == "waiting"
    assert QueueKeys("orders").key("schedulers:paused") == "emq:{orders}:schedulers:paused"


def test_connection_names_as_bullmq_names_them() -> None:
    keys = QueueKeys("orders", "app")
    base = "app:" + base64.b64encode(b"{orders}").decode()
    assert keys.client_name() == base
    assert keys.client_name(":w:billing-1") == base + ":w:billing-1"
    assert keys.worker_name_of(base) == ""
    assert keys.worker_name_of(base + ":w:billing-1") == "billing-1"
    assert keys.worker_name_of(base + ":w:") == ""
    assert keys.worker_name_of(base + ":qe") is None
    assert keys.worker_name_of(base + "x") is None
    assert keys.worker_name_of(QueueKeys("other", "app").client_name()) is None
    assert keys.worker_name_of("") is None


def test_discovery_matches_meta_keys_and_keeps_only_real_ones() -> None:
    assert meta_scan_pattern("emq") == "emq:\\{*\\}:meta"
    assert meta_scan_pattern("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\:\\{*\\}:meta"
    with pytest.raises(InvalidInputError):
        meta_scan_pattern("")
    assert queue_of_meta_key("emq", "emq:{orders}:meta") == "orders"
    assert queue_of_meta_key("emq", "emq:{o}:meta") == "o"
    assert queue_of_meta_key("emq", "emq:{Xmas}:meta") == "Xmas"
    for not_one in ("emq:{}:meta", "emq:orders:meta", "emq:{orders}:meta2", "app:{orders}:meta",
                    "emq:{a}:b}:meta", "emq:{a{b}:meta", "emq:{a:b}:meta", "emq:{orders}:wait"):
        assert queue_of_meta_key("emq", not_one) is None, not_one
