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


def test_upsert_without_a_template_keeps_the_existing_one(capsys, url_connection, server_url, queue_name):
    common = ("--queue", queue_name, "--redis", server_url)
    code, _, _ = run(capsys, "schedulers", "upsert", "report", *common, "--every", "60000", "--name", "build-report",
                     "--data", '{"to": "ops@example.com", "n": [1, 2]}',
                     "--opts", '{"attempts": 3, "backoff": {"type": "exponential", "delay": 1000}, '
                               '"remove_on_complete": 10}')
    assert code == 0
    before = JobScheduler(url_connection, queue_name).get("report")
    assert before is not None and before.name == "build-report"

    # Only the schedule changes (the period here); name, data and opts stay as they were.
    code, out, err = run(capsys, "schedulers", "upsert", "report", *common, "--every", "120000")
    assert code == 0 and err == ""
    assert "kept the existing job name, data and opts" in out
    after = JobScheduler(url_connection, queue_name).get("report")
    assert after is not None and after.every == 120000
    assert after.name == "build-report"
    assert after.template_data == {"to": "ops@example.com", "n": [1, 2]}
    assert after.template_opts == before.template_opts == {
        "attempts": 3, "backoff": {"type": "exponential", "delay": 1000}, "remove_on_complete": 10}
    # The pending iteration is built from the kept template too.
    job = url_connection.hgetall(f"emq:{{{queue_name}}}:repeat:report:{after.next_millis}")
    assert job[b"name"] == b"build-report" and json.loads(job[b"data"]) == {"to": "ops@example.com", "n": [1, 2]}


def test_a_kept_template_is_not_rewritten(capsys, url_connection, server_url, queue_name):
    """A bare-number backoff is stored as given (as BullMQ stores it); keeping the template on a
    re-upsert must leave those bytes alone, not store their normal form."""
    common = ("--queue", queue_name, "--redis", server_url)
    run(capsys, "schedulers", "upsert", "nightly", *common, "--every", "60000", "--opts",
        '{"attempts": 2, "backoff": 1000}')
    key = f"emq:{{{queue_name}}}:repeat:nightly"
    stored = url_connection.hget(key, "opts")
    assert json.loads(stored)["backoff"] == 1000
    code, out, _ = run(capsys, "schedulers", "upsert", "nightly", *common, "--every", "30000")
    assert code == 0 and "kept" in out
    assert url_connection.hget(key, "opts") == stored


def test_upsert_replaces_the_parts_of_the_template_it_is_given(capsys, url_connection, server_url, queue_name):
    common = ("--queue", queue_name, "--redis", server_url)
    run(capsys, "schedulers", "upsert", "report", *common, "--every", "60000", "--name", "build-report",
        "--data", '{"to": "ops@example.com"}', "--opts", '{"attempts": 3}')
    code, out, _ = run(capsys, "schedulers", "upsert", "report", *common, "--every", "60000",
                       "--data", '{"to": "dev@example.com"}', "--json")
    assert code == 0 and json.loads(out)["kept_template"] == ["name", "opts"]
    record = JobScheduler(url_connection, queue_name).get("report")
    assert record is not None
    assert (record.name, record.template_data, record.template_opts) == (
        "build-report", {"to": "dev@example.com"}, {"attempts": 3})
    # Everything given: nothing kept; '{}' clears a part.
    code, out, _ = run(capsys, "schedulers", "upsert", "report", *common, "--every", "60000", "--name", "other",
                       "--data", "{}", "--opts", "{}")
    assert code == 0 and "kept" not in out
    record = JobScheduler(url_connection, queue_name).get("report")
    assert record is not None
    assert (record.name, record.template_data, record.template_opts) == ("other", None, None)


def test_upsert_of_a_new_scheduler_has_nothing_to_keep(capsys, url_connection, server_url, queue_name):
    code, out, _ = run(capsys, "schedulers", "upsert", "fresh", "--queue", queue_name, "--redis", server_url,
                       "--every", "60000")
    assert code == 0 and "kept" not in out
    record = JobScheduler(url_connection, queue_name).get("fresh")
    assert record is not None and record.name == "fresh" and record.template == {}


def test_pause_resume_run_now_history(capsys, url_connection, server_url, queue_name):
    common = ("--queue", queue_name, "--redis", server_url)
    run(capsys, "schedulers", "upsert", "nightly", *common, "--pattern", "0 2 * * *", "--misfire", "skip",
        "--misfire-grace-ms", "600000")
    assert run(capsys, "schedulers", "pause", "nightly", *common) == (0, "paused nightly\n", "")
    assert run(capsys, "schedulers", "pause", "nightly", *common) == (0, "nightly was paused already\n", "")
    code, out, _ = run(capsys, "schedulers", "list", *common)
    assert out.splitlines()[0].split()[-1] == "STATE" and out.splitlines()[1].split()[-1] == "paused"
    code, out, _ = run(capsys, "schedulers", "get", "nightly", *common, "--json")
    record = json.loads(out)
    assert record["paused"] is True and (record["misfire"], record["misfire_grace_ms"]) == ("skip", 600000)
    code, out, _ = run(capsys, "schedulers", "upsert", "nightly", *common, "--pattern", "0 3 * * *")
    assert "kept the existing job name and missed-run policy" in out and out.splitlines()[-1].endswith("paused")
    assert JobScheduler(url_connection, queue_name).get("nightly").misfire == ("skip", 600000)  # type: ignore[union-attr]
    code, out, _ = run(capsys, "schedulers", "run-now", "nightly", *common, "--json")
    job_id = json.loads(out)["job_id"]
    assert code == 0 and job_id.startswith("repeat:nightly:manual-")
    assert run(capsys, "schedulers", "resume", "nightly", *common, "--json") == (
        0, '{"paused": false, "changed": true}\n', "")
    assert run(capsys, "schedulers", "resume", "nightly", *common) == (0, "nightly was not paused\n", "")
    code, out, _ = run(capsys, "schedulers", "history", "nightly", *common)
    assert code == 0 and out.split() == ["JOB", "SLOT", "(UTC)", "START", "(UTC)", "DURATION", "OUTCOME"]
    assert run(capsys, "schedulers", "history", "nightly", *common, "--json")[1] == "[]\n"


def test_operating_an_unknown_scheduler_is_one_line_and_status_1(capsys, url_connection, server_url, queue_name):
    from echomq.cli import main

    for command in ("pause", "resume", "run-now", "history"):
        assert main(["schedulers", command, "ghost", "--queue", queue_name, "--redis", server_url]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"echomq schedulers {command}: not found:" in err and "'ghost'" in err
    assert main(["schedulers", "upsert", "x", "--every", "1000", "--misfire", "skip", "--misfire-grace-ms", "-5",
                 "--queue", queue_name, "--redis", server_url]) == 2
    assert "misfire_grace_ms=-5: must be within" in capsys.readouterr().err
    assert not url_connection.exists(f"emq:{{{queue_name}}}:repeat")
