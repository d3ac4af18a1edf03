"""``ECHOMQ["CONNECTION"]`` of the test project: a client on ``SHOP_REDIS_URL``, read at each
call, so a test can point the registry at its own server (and its subprocesses inherit it)."""

import os

import redis


def make_client() -> redis.Redis:
    return redis.Redis.from_url(os.environ.get("SHOP_REDIS_URL", "redis://127.0.0.1:6379/0"))
