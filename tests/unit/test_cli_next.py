"""``echomq next``: what a user reads when asking when a schedule runs."""

from __future__ import annotations

import pytest

from echomq.cli import main


def test_lists_runs_in_the_zone_and_in_utc(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["next", "30 2 * * *", "--tz", "Europe/Berlin", "-n", "3", "--from", "2024-03-29T00:00:00Z"])
    out = capsys.readouterr().out
    assert code == 0
    runs = [line for line in out.splitlines() if line.lstrip()[:1].isdigit()]
    assert len(runs) == 3
    assert "Fri 2024-03-29 02:30:00 CET" in runs[0] and "2024-03-29T01:30:00Z" in runs[0]
    assert "Sun 2024-03-31 03:30:00 CEST" in runs[2] and "shifted out of a DST gap" in runs[2]


def test_from_without_offset_is_read_in_the_zone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "0 9 * * *", "--tz", "America/New_York", "-n", "1", "--from", "2024-05-01T08:59"]) == 0
    assert "Wed 2024-05-01 09:00:00 EDT" in capsys.readouterr().out


def test_six_fields_nicknames_and_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "@weekdays", "-n", "1", "--from", "2024-05-04T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "@weekdays = 0 0 0 * * 1-5" in out and "day-of-week   1-5" in out
    assert "Mon 2024-05-06 00:00:00" in out


def test_python_crontab_second_opinion(capsys: pytest.CaptureFixture[str]) -> None:
    main(["next", "*/5 * * * *", "-n", "1", "--from", "2024-05-01T00:00:00Z"])
    assert "also a valid system crontab line (288 runs on a matching day)" in capsys.readouterr().out
    main(["next", "0 0 * * 5L", "-n", "1", "--from", "2024-05-01T00:00:00Z"])
    assert "not a system crontab line" in capsys.readouterr().out


def test_every(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "--every", "60000", "-n", "2", "--from", "2024-01-01T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "2024-01-01T00:01:00Z" in out and "2024-01-01T00:02:00Z" in out


@pytest.mark.parametrize(("argv", "fragment"), [
    (["next", "0 0 * * 8"], "day-of-week (field 5 of 5) '8': value 8 is outside 0-7"),
    (["next", "0 0 * * * * *"], "has 7 fields"),
    (["next", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone"),
    (["next", "--every", "0"], "every 0"),
    (["next"], "a pattern or --every is required"),
    (["next", "0 9 * * *", "--from", "yesterday"], "--from 'yesterday'"),
])
def test_invalid_input_is_explained(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err


def test_pattern_that_never_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "0 0 31 4,6 *"]) == 0
    assert "no run" in capsys.readouterr().out
