"""``manage.py echomq_schedules``: the declared schedules, synced; a second run changes nothing."""

from __future__ import annotations

import copy
from io import StringIO
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from echomq import JobScheduler

from support.django_site import manage
from support.snapshot import queue_snapshot


def sync(*options: str) -> list[str]:
    out = StringIO()
    call_command("echomq_schedules", *options, stdout=out)
    return out.getvalue().splitlines()


def stored(client: redis.Redis, prefix: str) -> dict[str, Any]:
    return {queue: queue_snapshot(client, queue, prefix) for queue in ("orders", "reports")}


def declared(settings: Any, **changes: Any) -> dict[str, Any]:
    """The project's ECHOMQ with SCHEDULES entries changed (None removes one)."""
    echomq = copy.deepcopy(django_settings.ECHOMQ)
    for scheduler_id, entry in changes.items():
        if entry is None:
            echomq["SCHEDULES"].pop(scheduler_id)
        else:
            echomq["SCHEDULES"][scheduler_id] = {**echomq["SCHEDULES"].get(scheduler_id, {}), **entry}
    settings.ECHOMQ = echomq
    return echomq


def test_the_first_sync_creates_the_second_changes_nothing(shop_redis: redis.Redis, prefix: str) -> None:
    assert sync() == ["created reports/nightly-report", "created orders/sweep-carts",
                      "2 declared: 2 created, 0 updated, 0 unchanged; 0 removed"]
    record = JobScheduler(shop_redis, "reports", prefix=prefix).get("nightly-report")
    assert record is not None
    assert (record.name, record.pattern, record.tz, record.template_data) == (
        "build_report", "0 2 * * *", "Europe/Berlin", {"kind": "daily"})
    sweep = JobScheduler(shop_redis, "orders", prefix=prefix).get("sweep-carts")
    assert sweep is not None and (sweep.every, sweep.template_opts) == (900000, {"attempts": 2})

    before = stored(shop_redis, prefix)
    assert sync() == ["2 declared: 0 created, 0 updated, 2 unchanged; 0 removed"]
    assert stored(shop_redis, prefix) == before  # byte for byte: no upsert, the pending slots kept


def test_a_dry_run_prints_the_difference_and_writes_nothing(settings: Any, shop_redis: redis.Redis,
                                                            prefix: str) -> None:
    assert sync("--dry-run") == ["would create reports/nightly-report", "would create orders/sweep-carts",
                                 "2 declared: 2 to create, 0 to update, 0 unchanged; 0 to remove "
                                 "(dry run: nothing written)"]
    assert stored(shop_redis, prefix) == {"orders": {}, "reports": {}}

    sync()
    before = stored(shop_redis, prefix)
    declared(settings, **{"nightly-report": {"pattern": "30 3 * * *", "data": {"kind": "full"}}})
    assert sync("--dry-run") == ["would update reports/nightly-report: pattern, data",
                                 "2 declared: 0 to create, 1 to update, 1 unchanged; 0 to remove "
                                 "(dry run: nothing written)"]
    assert stored(shop_redis, prefix) == before

    assert sync() == ["updated reports/nightly-report: pattern, data",
                      "2 declared: 0 created, 1 updated, 1 unchanged; 0 removed"]
    record = JobScheduler(shop_redis, "reports", prefix=prefix).get("nightly-report")
    assert record is not None and (record.pattern, record.template_data) == ("30 3 * * *", {"kind": "full"})
    assert stored(shop_redis, prefix)["orders"] == before["orders"]  # the other schedule untouched


def test_prune_removes_what_is_not_declared_in_the_declared_queues(settings: Any, shop_redis: redis.Redis,
                                                                   prefix: str) -> None:
    sync()
    JobScheduler(shop_redis, "orders", prefix=prefix).upsert("legacy-cleanup", {"every": 60000}, "cleanup")
    JobScheduler(shop_redis, "elsewhere", prefix=prefix).upsert("not-ours", {"every": 60000}, "other")
    assert sync() == ["2 declared: 0 created, 0 updated, 2 unchanged; 0 removed"]  # without --prune, left alone

    assert sync("--prune", "--dry-run") == ["would remove orders/legacy-cleanup",
                                            "2 declared: 0 to create, 0 to update, 2 unchanged; 1 to remove "
                                            "(dry run: nothing written)"]
    assert JobScheduler(shop_redis, "orders", prefix=prefix).get("legacy-cleanup") is not None

    declared(settings, **{"sweep-carts": None})  # a schedule deleted from the settings
    assert sync("--prune") == ["removed orders/legacy-cleanup", "removed orders/sweep-carts",
                               "1 declared: 0 created, 0 updated, 1 unchanged; 2 removed"]
    assert [r.id for r in JobScheduler(shop_redis, "orders", prefix=prefix).list()] == []
    assert [r.id for r in JobScheduler(shop_redis, "reports", prefix=prefix).list()] == ["nightly-report"]
    assert [r.id for r in JobScheduler(shop_redis, "elsewhere", prefix=prefix).list()] == ["not-ours"]


def test_a_bad_declaration_is_refused_before_anything_is_written(settings: Any, shop_redis: redis.Redis,
                                                                 prefix: str) -> None:
    declared(settings, **{"nightly-report": {"pattern": "0 25 * * *"}})
    with pytest.raises(ImproperlyConfigured, match=r"'nightly-report'.*hour.*\(echomq\.E007\)"):
        call_command("echomq_schedules")
    assert stored(shop_redis, prefix) == {"orders": {}, "reports": {}}


def test_the_command_as_an_operator_runs_it(shop_redis: redis.Redis, prefix: str) -> None:
    first = manage("echomq_schedules")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[:2] == ["created reports/nightly-report", "created orders/sweep-carts"]
    again = manage("echomq_schedules", "--prune", "-v", "0")
    assert (again.returncode, again.stdout) == (0, "")


def test_an_ended_schedule_is_a_warning_at_start_up_and_refused_by_the_sync_writing_nothing(
        settings: Any, shop_redis: redis.Redis, prefix: str) -> None:
    sync()
    JobScheduler(shop_redis, "orders", prefix=prefix).upsert("legacy-cleanup", {"every": 60000}, "cleanup")
    declared(settings, **{"nightly-report": {"pattern": "30 3 * * *"},  # a change the sync would write first
                          "promo": {"queue": "orders", "every": 60000, "end_date": 1_000_000}})
    [warning] = checks.run_checks(tags=["echomq"])
    assert (warning.id, warning.level) == ("echomq.W001", checks.WARNING)  # the project still starts
    before = stored(shop_redis, prefix)
    with pytest.raises(CommandError, match=r"echomq_schedules: schedule 'promo': end_date 1000000 is already in the "
                                           r"past: remove it from the declaration"):
        call_command("echomq_schedules", "--prune", stdout=StringIO())
    assert stored(shop_redis, prefix) == before  # all or nothing: not even the update before it
