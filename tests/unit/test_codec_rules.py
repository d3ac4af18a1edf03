"""The wire values' rules at their edges (docs/protocol.md §2): JSON written as JavaScript
writes it, and the lenient readers of what any runtime stored, which never raise."""

from __future__ import annotations

import pytest

from echomq.protocol.codec import (
    decode_hash,
    decode_json,
    encode_json,
    encode_json_like_js,
    int_or_none,
    int_or_text,
    is_utf8,
    json_or_text,
    sendable_text,
    text,
    utf8_problem,
)


def test_json_is_written_compact_with_non_ascii_kept() -> None:
    assert encode_json({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'
    assert encode_json({"a": "é"}, ascii_only=True) == '{"a":"\\u00e9"}'
    with pytest.raises(ValueError):
        encode_json(float("nan"))
    with pytest.raises(TypeError):
        encode_json({1, 2})


@pytest.mark.parametrize(("value", "written"), [
    (None, "null"), (float("nan"), "null"), (float("inf"), "null"),
    ({"a": float("-inf"), "b": 1.5}, '{"a":null,"b":1.5}'),
    ([1, float("nan"), (2, float("inf"))], "[1,null,[2,null]]"), ("é", '"é"'), ("a\ud800", '"a\\ud800"'),
    ({"x": ["é", "\udc00"]}, '{"x":["\\u00e9","\\udc00"]}'), (0, "0"), ("", '""'),
])
def test_a_return_value_is_written_as_json_stringify_writes_it(value: object, written: str) -> None:
    assert encode_json_like_js(value) == written


def test_the_utf8_rules() -> None:
    assert is_utf8("é") and is_utf8("") and not is_utf8("a\ud800")
    assert utf8_problem("plain") is None and utf8_problem("é✓") is None
    assert utf8_problem("ab\udfff") == ("holds a lone surrogate '\\udfff' at index 2, which has no UTF-8 form "
                                        "(Redis stores bytes): decode the text it came from properly, or drop "
                                        "the character")
    assert sendable_text("é") == "é" and sendable_text("a\ud800b") == "a?b" and sendable_text("x") == "x"


def test_reply_values_read_as_text() -> None:
    assert text(b"abc") == "abc" and text("abc") == "abc" and text(5) == "5" and text(b"\xff") == "\ufffd"
    assert decode_hash({b"a": b"1", "b": 2}) == {"a": "1", "b": "2"}
    assert decode_hash([b"a", b"1", b"b", b"2"]) == {"a": "1", "b": "2"}
    assert decode_hash([b"a", b"1", b"odd"]) == {"a": "1"}
    assert decode_hash(None) == {} and decode_hash([]) == {}


@pytest.mark.parametrize(("raw", "number"), [
    (None, None), ("", None), ("5", 5), ("-3", -3), ("5.0", 5), ("5.9", 5), ("1e3", 1000), ("nan", None),
    ("inf", None), ("-inf", None), ("x", None), (" 7 ", 7),
])
def test_a_stored_integer_reads_leniently(raw: str | None, number: int | None) -> None:
    assert int_or_none(raw) == number
    assert number is None or int_or_none(raw).__class__ is int


@pytest.mark.parametrize(("raw", "read"), [
    ("5", 5), ("5.0", 5), ("5.5", "5.5"), ("x", "x"), ("", ""), ("inf", "inf"), ("nan", "nan"), ("1e2", 100),
])
def test_an_events_integer_field_or_its_text(raw: str, read: int | str) -> None:
    assert int_or_text(raw) == read
    assert int_or_text(raw).__class__ is read.__class__


@pytest.mark.parametrize(("raw", "read"), [
    ('{"a":1}', {"a": 1}), ("[1, 2]", [1, 2]), ('"s"', "s"), ("5", 5), ("null", None), (' {"a":1}', {"a": 1}),
    ('{"a":1}  ', {"a": 1}), ('{"a":1} x', '{"a":1} x'), ("not json", "not json"), ("", ""), ("{", "{"),
    (" x", " x"), ("[" * 100_000 + "]" * 100_000, "[" * 100_000 + "]" * 100_000),
    (" " + "[" * 100_000 + "]" * 100_000, " " + "[" * 100_000 + "]" * 100_000),
])
def test_json_or_its_text_never_raises(raw: str, read: object) -> None:
    assert json_or_text(raw) == read


def test_decode_json_says_why_there_is_no_value() -> None:
    assert decode_json('"s"') == "s" and decode_json(' [1]') == [1] and decode_json("[1]  ") == [1]
    for raw, message in [('{"a":1} x', "text after the JSON value at char 7"),
                         ("[" * 100_000 + "]" * 100_000, "nested too deeply to decode"),
                         (" " + "[" * 100_000 + "]" * 100_000, "nested too deeply to decode")]:
        with pytest.raises(ValueError) as refused:
            decode_json(raw)
        assert str(refused.value) == message
    with pytest.raises(ValueError):
        decode_json("not json")
