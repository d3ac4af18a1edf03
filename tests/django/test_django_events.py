"""The events helper: no reader under the test runner or in a management command unless
allowed; when allowed, one per process per queue, and one more in a forked child."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from echoshop import events as shop_events

from echomq.contrib.django import close_events, get_registry, queue_events, start_events
from echomq.contrib.django.events import RETRY_AFTER_S, start_on_request

from support.django_site import manage, readers, wait_until


def allow(settings: Any, **events: Any) -> None:
    echomq = copy.deepcopy(django_settings.ECHOMQ)
    echomq["EVENTS"].update(events)
    settings.ECHOMQ = echomq


def test_under_the_test_runner_no_reader_starts(settings: Any, shop_redis: redis.Redis, prefix: str) -> None:
    allow(settings, LAST_EVENT_ID="0")
    assert start_events() == []
    reader = queue_events("orders")
    assert reader.running is False
    assert readers(shop_redis, "orders", prefix) == 0
    # Unstarted, it delivers in the test's own thread, to the subscribers the setting names.
    del shop_events.seen[:]
    get_registry().queue("orders").add("send_receipt", {"order_id": 1}, job_id="first")
    assert reader.run_once() >= 1
    assert ("added", "first") in [(kind, data.get("jobId")) for kind, data in shop_events.seen]
    assert reader.running is False


def test_when_allowed_one_reader_per_process_and_one_more_after_a_fork(settings: Any, shop_redis: redis.Redis,
                                                                      prefix: str) -> None:
    allow(settings, IN_TESTS=True)
    del shop_events.seen[:]
    [reader] = start_events()
    assert reader.running and queue_events("orders") is reader
    assert start_events() == [reader]
    assert readers(shop_redis, "orders", prefix) == 1

    get_registry().queue("orders").add("send_receipt", {"order_id": 1})
    assert wait_until(lambda: "added" in [kind for kind, _ in shop_events.seen])

    ours, theirs = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its own reader, the parent's left alone
        status = 1
        try:
            os.close(ours)
            [own] = start_events()
            seen = readers(redis.Redis.from_url(os.environ["SHOP_REDIS_URL"]), "orders", prefix)
            os.write(theirs, json.dumps({"new": own is not reader, "running": own.running, "readers": seen}).encode())
            close_events()
            status = 0
        finally:
            os._exit(status)
    os.close(theirs)
    with os.fdopen(ours) as pipe:
        report = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(child, 0)
    assert (os.WEXITSTATUS(status), report) == (0, {"new": True, "running": True, "readers": 2})
    assert reader.running  # the parent's reader was not touched by the child's exit
    assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 1)
    close_events()
    assert not reader.running
    assert wait_until(lambda: readers(shop_redis, "orders", prefix) == 0)


def test_a_reader_that_cannot_start_raises_and_a_request_only_logs_it(
        settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        shop_redis: redis.Redis) -> None:
    allow(settings, IN_TESTS=True)
    monkeypatch.setenv("SHOP_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    get_registry().close()
    with pytest.raises(redis.ConnectionError):
        start_events()
    with pytest.raises(redis.ConnectionError):  # nothing was left half started: tried again
        queue_events("orders")
    start_on_request()  # what the first request of a process does: the request goes on
    start_on_request()  # the next requests do not wait on a Redis that is away: tried again later
    assert [r.getMessage() for r in caplog.records if "could not start" in r.getMessage()] == [
        f"EchoMQ events readers could not start; trying again in {RETRY_AFTER_S:g} s"]


SHOW_READERS = (
    "import os, redis\n"
    "from echomq.contrib.django import start_events\n"
    "from support.django_site import readers\n"
    "started = start_events()\n"
    "client = redis.Redis.from_url(os.environ['SHOP_REDIS_URL'])\n"
    "print(len(started), readers(client, 'orders', os.environ['SHOP_ECHOMQ_PREFIX']))\n"
)


@pytest.mark.parametrize(("allowed", "expected"), [("0", "0 0"), ("1", "1 1")])
def test_a_management_command_starts_none_unless_allowed(allowed: str, expected: str,
                                                        shop_redis: redis.Redis) -> None:
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = manage("shell", "-c", SHOW_READERS, env={"SHOP_EVENTS_IN_COMMANDS": allowed, "PYTHONPATH": tests,
                                                       "SHOP_EVENTS_IN_READY": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == expected.split()
