"""The events readers both integrations use: one per queue and process, made on first use; a
start that fails at a request is logged once and tried again ``RETRY_AFTER_S`` later, while an
explicit start raises; on a real Redis and on fakeredis."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from echomq import QueueEvents
from echomq.contrib.host import readers as readers_module
from echomq.contrib.host.readers import RETRY_AFTER_S, ProcessReaders


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_reader_per_queue_started_once_and_closed(connection: redis.Redis, queue_name: str) -> None:
    made: list[str] = []

    def make(queue: str) -> QueueEvents:
        made.append(queue)
        return QueueEvents(connection, queue)

    readers = ProcessReaders(make)
    unstarted = readers.get(queue_name, start=False)
    assert not unstarted.running and readers.running() == {}
    started = readers.get(queue_name)
    assert started is unstarted and started.running  # the same reader, now started
    assert readers.start([queue_name]) == [started] and made == [queue_name]
    readers.close(timeout=2)
    assert readers.running() == {} and not started.running
    again = readers.get(queue_name)
    assert again is not started and again.running and made == [queue_name, queue_name]
    readers.close(timeout=2)


@pytest.mark.real_only
def test_a_start_that_fails_at_a_request_is_logged_once_and_retried_later(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, redis_server_factory: Any) -> None:
    clock = Clock()
    monkeypatch.setattr(readers_module.time, "monotonic", clock)
    server = redis_server_factory(persistent=False)
    client = redis.Redis.from_url(server.url, socket_connect_timeout=0.5)
    attempts: list[str] = []

    def make(queue: str) -> QueueEvents:
        attempts.append(queue)
        return QueueEvents(client, queue)

    readers = ProcessReaders(make)
    server.stop()
    with pytest.raises(redis.ConnectionError):  # asked for: raised
        readers.start(["mail"])
    with caplog.at_level(logging.WARNING, logger="echomq.contrib.host.readers"):
        readers.start_on_request(["mail"])  # a request goes on
        readers.start_on_request(["mail"])  # the next does not wait on a Redis that is away
        clock.now += RETRY_AFTER_S - 1
        readers.start_on_request(["mail"])
    assert [r.getMessage() for r in caplog.records] == [
        f"EchoMQ events readers could not start; trying again in {RETRY_AFTER_S:g} s"]
    assert readers.running() == {}
    server.start()  # Redis is back
    readers.start_on_request(["mail"])  # still within the wait: not tried
    assert readers.running() == {}
    clock.now += 2
    readers.start_on_request(["mail"])
    assert list(readers.running()) == ["mail"] and attempts == ["mail"]  # the same reader, started at last
    readers.close(timeout=2)
    client.close()
