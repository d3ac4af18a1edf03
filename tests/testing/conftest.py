"""Fixtures of the echomq.testing tests: more unique queue names beside ``queue_name``, cleaned
up like it (their keys, and only theirs, deleted from the test's ``connection``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis


@pytest.fixture
def other_queue_name(connection: redis.Redis, queue_name: str) -> Iterator[Callable[[str], str]]:
    """``other_queue_name("b")``: a second unique queue name for the test, deleted afterwards."""
    made: list[str] = []

    def make(tag: str) -> str:
        name = f"{queue_name}-{tag}-{uuid.uuid4().hex[:4]}"
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(redis.RedisError):
            keys = list(connection.scan_iter(match=f"emq:\\{{{name}\\}}:*", count=1000))
            if keys:
                connection.delete(*keys)
