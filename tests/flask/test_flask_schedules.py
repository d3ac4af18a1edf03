"""``flask echomq schedules``: declared schedules synced into Redis (created, updated, left
alone, pruned), and ``--dry-run`` writing nothing; on a real Redis and on fakeredis."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask

from echomq import JobScheduler

from support.queue_keys import SCAN_COUNT

NIGHTLY = {"queue": "reports", "pattern": "0 2 * * *", "tz": "Europe/Berlin", "name": "build_report",
           "data": {"kind": "nightly"}, "opts": {"attempts": 3}}
TICK = {"queue": "reports", "every": 60_000, "name": "build_report"}


def _app(make_app: Callable[..., Flask], connection: redis.Redis, prefix: str,
         schedules: dict[str, Any]) -> Flask:
    return make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix, ECHOMQ_SCHEDULES=schedules)


def _run(app: Flask, *options: str) -> tuple[int, list[str]]:
    result = app.test_cli_runner().invoke(args=["echomq", "schedules", *options])
    return result.exit_code, result.output.splitlines()


def test_a_sync_creates_updates_leaves_and_prunes(make_app: Callable[..., Flask], connection: redis.Redis,
                                                 prefix: str) -> None:
    schedulers = JobScheduler(connection, "reports", prefix=prefix)
    first = _app(make_app, connection, prefix, {"nightly": NIGHTLY, "tick": TICK})
    assert _run(first) == (0, ["created reports/nightly", "created reports/tick",
                               "2 declared: 2 created, 0 updated, 0 unchanged; 0 removed"])
    nightly = schedulers.get("nightly")
    assert nightly is not None
    assert (nightly.pattern, nightly.tz, nightly.name, nightly.template_data) == (
        "0 2 * * *", "Europe/Berlin", "build_report", {"kind": "nightly"})
    assert nightly.template_opts == {"attempts": 3}
    pending = {record.id: record.next_millis for record in schedulers.list()}

    # Nothing changed: nothing is written, the pending iterations stay.
    assert _run(first) == (0, ["2 declared: 0 created, 0 updated, 2 unchanged; 0 removed"])
    assert {record.id: record.next_millis for record in schedulers.list()} == pending

    # One schedule edited, one dropped from the config, one made elsewhere.
    schedulers.upsert("made-by-hand", {"every": 5000}, "build_report")
    second = _app(make_app, connection, prefix, {"nightly": {**NIGHTLY, "pattern": "0 3 * * *"}})
    assert _run(second) == (0, ["updated reports/nightly: pattern",
                                "1 declared: 0 created, 1 updated, 0 unchanged; 0 removed"])
    assert schedulers.get("nightly").pattern == "0 3 * * *"  # type: ignore[union-attr]
    assert schedulers.get("tick") is not None  # without --prune, undeclared ones stay

    assert _run(second, "--prune") == (0, ["removed reports/made-by-hand", "removed reports/tick",
                                           "1 declared: 0 created, 0 updated, 1 unchanged; 2 removed"])
    assert [record.id for record in schedulers.list()] == ["nightly"]


def test_a_dry_run_prints_the_difference_and_writes_nothing(make_app: Callable[..., Flask],
                                                            connection: redis.Redis, prefix: str) -> None:
    schedulers = JobScheduler(connection, "reports", prefix=prefix)
    schedulers.upsert("old", {"every": 5000}, "build_report")
    schedulers.upsert("tick", {"every": 30_000}, "build_report")
    before = {key: connection.dump(key) for key in connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT)}
    app = _app(make_app, connection, prefix, {"nightly": NIGHTLY, "tick": TICK})

    assert _run(app, "--dry-run", "--prune") == (0, [
        "would create reports/nightly", "would update reports/tick: every", "would remove reports/old",
        "2 declared: 1 to create, 1 to update, 0 unchanged; 1 to remove (dry run: nothing written)"])
    assert {key: connection.dump(key) for key in connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT)} == before


def test_a_schedule_whose_job_no_function_handles_is_synced_with_a_warning(
        make_app: Callable[..., Flask], connection: redis.Redis, prefix: str) -> None:
    app = _app(make_app, connection, prefix, {"cleanup": {"queue": "reports", "every": 3_600_000, "name": "vacuum"}})
    result = app.test_cli_runner().invoke(args=["echomq", "schedules"])
    assert result.exit_code == 0
    assert "warning: schedule 'cleanup': no job 'vacuum' is registered for queue 'reports'" in result.stderr
    assert JobScheduler(connection, "reports", prefix=prefix).get("cleanup") is not None


def test_a_schedule_that_has_ended_is_a_warning_at_init_app_and_refused_by_the_sync_writing_nothing(
        make_app: Callable[..., Flask], connection: redis.Redis, prefix: str,
        caplog: pytest.LogCaptureFixture) -> None:
    _run(_app(make_app, connection, prefix, {"nightly": NIGHTLY, "tick": TICK}))
    JobScheduler(connection, "reports", prefix=prefix).upsert("made-by-hand", {"every": 5000}, "build_report")
    before = {key: connection.dump(key) for key in connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT)}
    with caplog.at_level(logging.WARNING, logger="echomq.contrib.flask.settings"):
        app = _app(make_app, connection, prefix, {"nightly": {**NIGHTLY, "pattern": "0 3 * * *"},  # an update
                                                  "over": {"queue": "reports", "every": 1000, "end_date": 1000}})
    assert "schedule 'over': end_date 1000 is already in the past" in caplog.text  # the app still starts
    code, output = _run(app, "--prune")
    assert code == 1
    assert output[-1] == ("Error: schedule 'over': end_date 1000 is already in the past: remove it from the "
                          "declaration (a sync cannot create a schedule with no run left)")
    assert {key: connection.dump(key) for key in connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT)} == before
