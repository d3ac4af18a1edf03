"""The reader's position and the trimmed-gap arithmetic, from XINFO STREAM replies alone."""

from __future__ import annotations

from typing import Any

import pytest

from echomq.errors import InvalidInputError
from echomq.events.cursor import StreamCursor, info_dict, parse_stream_id
from echomq.protocol.events import GapNotice, GapReason


def info(added: int, length: int, first: str | None, last: str, max_deleted: str = "0-0") -> dict[str, Any]:
    return {"entries-added": added, "length": length, "first-entry": [first, ["event", "x"]] if first else None,
            "last-generated-id": last, "max-deleted-entry-id": max_deleted}


def test_tail_resolution_and_advance() -> None:
    cursor = StreamCursor("$")
    assert cursor.id is None
    cursor.resolve_tail(info(10, 10, "1-0", "10-0"))
    assert (cursor.id, cursor.index) == ("10-0", 10)
    cursor.advance("12-0", 2)
    assert (cursor.id, cursor.index) == ("12-0", 12)
    missing = StreamCursor("$")
    missing.resolve_tail(None)
    assert (missing.id, missing.index) == ("0-0", 0)


def test_known_position_gives_the_exact_loss() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(info(10, 10, "1-0", "10-0"))
    # 100 more were added and the stream was trimmed to the newest 20: 80 after us are gone.
    notice = cursor.check_gap(info(110, 20, "91-0", "110-0"), "91-0", "q")
    assert notice == GapNotice("q", "10-0", "91-0", 80)
    assert cursor.index == 90
    cursor.advance("110-0", 20)
    assert cursor.check_gap(info(110, 20, "91-0", "110-0"), None, "q") is None


def test_trimming_behind_the_cursor_is_not_a_gap() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(info(100, 100, "1-0", "100-0"))
    assert cursor.check_gap(info(150, 20, "131-0", "150-0"), "101-0", "q") is not None  # passed us
    behind = StreamCursor("$")
    behind.resolve_tail(info(100, 100, "1-0", "100-0"))
    assert behind.check_gap(info(110, 20, "91-0", "110-0"), "101-0", "q") is None  # still ahead of the front


def test_explicit_start_gives_an_upper_bound() -> None:
    cursor = StreamCursor("5-0")
    notice = cursor.check_gap(info(100, 10, "91-0", "100-0"), "91-0", "q")
    assert notice == GapNotice("q", "5-0", "91-0", 90)
    inside = StreamCursor("95-0")
    assert inside.check_gap(info(100, 10, "91-0", "100-0"), "96-0", "q") is None


def test_replay_from_zero_ignores_what_was_trimmed_before() -> None:
    cursor = StreamCursor("0")
    assert cursor.check_gap(info(100, 10, "91-0", "100-0"), "91-0", "q") is None
    assert cursor.index == 90


def test_xdel_after_the_cursor_is_reported_once() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(info(10, 10, "1-0", "10-0"))
    notice = cursor.check_gap(info(15, 14, "1-0", "15-0", max_deleted="12-0"), "11-0", "q")
    assert notice == GapNotice("q", "10-0", "11-0", None, GapReason.DELETED)
    assert cursor.check_gap(info(15, 14, "1-0", "15-0", max_deleted="12-0"), "11-0", "q") is None


def test_a_fully_trimmed_stream_names_its_last_id() -> None:
    cursor = StreamCursor("$")
    cursor.resolve_tail(info(10, 10, "1-0", "10-0"))
    notice = cursor.check_gap(info(30, 0, None, "30-0"), None, "q")
    assert notice == GapNotice("q", "10-0", "30-0", 20)
    assert cursor.check_gap(info(30, 0, None, "30-0"), None, "q") is None


def test_servers_without_counters_give_no_notice() -> None:
    cursor = StreamCursor("5-0")
    assert cursor.check_gap({"length": 3, "first-entry": ["9-0", []], "last-generated-id": "11-0"}, None, "q") is None


@pytest.mark.parametrize("bad", ["", "latest", "1-", "-1", "1-2-3", 5, None])
def test_start_ids_are_validated(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="last_event_id"):
        StreamCursor(bad)


def test_helpers() -> None:
    assert parse_stream_id("1700000000000-3") == (1700000000000, 3)
    assert parse_stream_id("42") == (42, 0)
    assert info_dict([b"length", 3, b"first-entry", None]) == {"length": 3, "first-entry": None}
    assert info_dict({b"length": 3}) == {"length": 3}
