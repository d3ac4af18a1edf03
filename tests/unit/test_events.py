"""The events contract without Redis: type names, wire names and field decoding."""

from __future__ import annotations

import pytest

from echomq.protocol.events import (
    EventType,
    GapNotice,
    decode_entry,
    parse_event_type,
)

from support.wire import WIRE_TABLE


def test_the_table_covers_all_17_event_types() -> None:
    assert {row[1] for row in WIRE_TABLE} == set(EventType)
    assert len(EventType) == 17


@pytest.mark.parametrize("fields,expected_type,expected", WIRE_TABLE,
                         ids=[" ".join(r[0][:2]) + f"-{i}" for i, r in enumerate(WIRE_TABLE)])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_decode_entry(fields: list[str], expected_type: EventType, expected: dict[str, object], as_bytes: bool) -> None:
    raw = [f.encode() for f in fields] if as_bytes else fields
    entry_id = b"1-0" if as_bytes else "1-0"
    event_type, data = decode_entry(entry_id, raw)
    assert event_type is expected_type
    assert data == {**expected, "event_id": "1-0"}


def test_decode_entry_accepts_a_dict_of_fields() -> None:
    event_type, data = decode_entry("5-1", {b"event": b"cleaned", b"count": b"7"})
    assert (event_type, data) == (EventType.CLEANED, {"count": 7, "event_id": "5-1"})


@pytest.mark.parametrize(
    "fields,expected",
    [
        (["event", "completed", "jobId", "1", "returnvalue", "{not json", "prev", "active"],
         {"jobId": "1", "returnvalue": "{not json", "prev": "active"}),
        (["event", "progress", "jobId", "1", "data", ""], {"jobId": "1", "data": ""}),
        (["event", "progress", "jobId", "1", "data", "42x"], {"jobId": "1", "data": "42x"}),
        (["event", "progress", "jobId", "1", "data", " 42 "], {"jobId": "1", "data": 42}),
        (["event", "delayed", "jobId", "1", "delay", "soon"], {"jobId": "1", "delay": "soon"}),
        (["event", "delayed", "jobId", "1", "delay", "1764400000000.0"], {"jobId": "1", "delay": 1764400000000}),
        (["event", "retries-exhausted", "jobId", "1", "attemptsMade", "x"], {"jobId": "1", "attemptsMade": "x"}),
        (["event", "cleaned", "count", "1.5"], {"count": "1.5"}),
    ],
    ids=["bad-json", "empty-json", "trailing-garbage", "padded-json", "bad-delay", "float-delay", "bad-attempts",
         "fractional-count"],
)
def test_malformed_values_stay_raw_strings(fields: list[str], expected: dict[str, object]) -> None:
    _, data = decode_entry("1-0", fields)
    assert data == {**expected, "event_id": "1-0"}


def test_custom_and_unknown_events_pass_through_as_plain_strings() -> None:
    event_type, data = decode_entry("1-0", ["event", "custom-thing", "foo", "bar", "n", "7", "count", "3"])
    assert event_type == "custom-thing" and not isinstance(event_type, EventType)
    assert data == {"foo": "bar", "n": "7", "count": "3", "event_id": "1-0"}  # no int decoding for custom fields
    event_type, data = decode_entry("1-0", ["event", "debounced", "jobId", "1", "debounceId", "d"])
    assert event_type == "debounced" and data["debounceId"] == "d"


def test_entry_without_event_field_is_kept() -> None:
    event_type, data = decode_entry("1-0", ["jobId", "1"])
    assert event_type == "" and data == {"jobId": "1", "event_id": "1-0"}


@pytest.mark.parametrize(
    "wire,expected",
    [("retries-exhausted", EventType.RETRIES_EXHAUSTED), ("waiting-children", EventType.WAITING_CHILDREN),
     ("completed", EventType.COMPLETED), (b"drained", EventType.DRAINED)],
)
def test_parse_event_type_maps_wire_names(wire: str | bytes, expected: EventType) -> None:
    assert parse_event_type(wire) is expected


@pytest.mark.parametrize("wire", ["retries_exhausted", "debounced", "Completed", "custom-thing", ""])
def test_parse_event_type_passes_other_names_through(wire: str) -> None:
    parsed = parse_event_type(wire)
    assert parsed == wire and type(parsed) is str


def test_event_type_values_wire_names_and_formatting() -> None:
    assert EventType.RETRIES_EXHAUSTED.value == "retries_exhausted"
    assert EventType.RETRIES_EXHAUSTED.wire_name == "retries-exhausted"
    assert EventType.WAITING_CHILDREN.wire_name == "waiting-children"
    assert str(EventType.COMPLETED) == "completed" and f"on_{EventType.COMPLETED}" == "on_completed"
    assert EventType.COMPLETED == "completed"  # a str Enum compares with its value
    assert all(t.wire_name == t.value.replace("_", "-") for t in EventType)


def test_gap_notice_is_not_an_event() -> None:
    notice = GapNotice("q", "1-0", "9-0", 7)
    assert not isinstance(notice, str)
    assert notice not in set(EventType)
    assert notice.as_dict() == {"queue_name": "q", "from_id": "1-0", "to_id": "9-0", "approx_lost": 7,
                                "reason": "trimmed", "retracted": [], "exact": True, "detail": ""}
