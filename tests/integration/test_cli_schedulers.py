"""``echomq schedulers``: the table, ``--json``, errors, on each backend the CLI connects to by URL."""

from __future__ import annotations

import argparse
import json

import pytest

from echomq.cli import schedulers
from echomq.schedule.scheduler import JobScheduler


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    schedulers.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    code = args.handler(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_upsert_list_get_remove(capsys, url_connection, server_url, queue_name):
    common = ("--queue", queue_name, "--redis", server_url)
    code, out, _ = run(capsys, "schedulers", "upsert", "nightly", *common, "--pattern", "0 2 * * *",
                       "--tz", "Asia/Tokyo", "--start-date", "2030-01-01T00:00:00+00:00", "--data", '{"k": 1}')
    assert code == 0 and "scheduled repeat:nightly:" in out
    code, out, _ = run(capsys, "schedulers", "upsert", "tick", *common, "--every", "60000", "--offset", "5000")
    assert code == 0
    code, out, _ = run(capsys, "schedulers", "list", *common)
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["ID", "NAME", "SCHEDULE"]
    assert lines[1].startswith("nightly") and "2030-01-01 17:00:00" in lines[1] and "JST" in lines[1]
    assert "2030-01-02 02:00:00" in lines[1]
    assert lines[2].startswith("tick") and "every 60000 ms +5000" in lines[2]
    code, out, _ = run(capsys, "schedulers", "get", "nightly", *common, "--json")
    record = json.loads(out)
    assert record["pattern"] == "0 2 * * *" and record["tz"] == "Asia/Tokyo"
    assert record["next_local"] == "2030-01-02T02:00:00+09:00" and record["template"] == {"data": {"k": 1}}
    code, out, _ = run(capsys, "schedulers", "remove", "nightly", *common, "--json")
    assert (code, json.loads(out)) == (0, {"removed": True})
    assert JobScheduler(url_connection, queue_name).count() == 1
    code, out, _ = run(capsys, "schedulers", "remove", "nightly", *common)
    assert code == 1


def test_bad_input_is_an_error_message_not_a_traceback(capsys, url_connection, server_url, queue_name):
    code, out, err = run(capsys, "schedulers", "upsert", "x", "--queue", queue_name, "--redis", server_url,
                         "--pattern", "61 * * * *")
    assert code == 2 and err.startswith("error: ") and out == ""
    code, _, err = run(capsys, "schedulers", "get", "x", "--queue", queue_name, "--redis", server_url)
    assert code == 1 and "no scheduler 'x'" in err
