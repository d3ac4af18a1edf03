"""Disturbances a fault test runs in a thread against a redis-server of its own, until ``stop``."""

from __future__ import annotations

import random
import threading
import time

import redis


def memory_pulses(url: str, stop: threading.Event, seed: int) -> None:
    """Flip maxmemory between almost nothing and unlimited every few ms: each write a script
    attempts while it is low gets an OOM error reply (noeviction), between them writes pass."""
    rng = random.Random(seed)
    control = redis.Redis.from_url(url)
    try:
        while not stop.is_set():
            control.config_set("maxmemory", 1)
            time.sleep(rng.uniform(0.001, 0.004))
            control.config_set("maxmemory", 0)
            time.sleep(rng.uniform(0.002, 0.008))
    finally:
        control.config_set("maxmemory", 0)
        control.close()


def cut_connections(url: str, stop: threading.Event, seed: int) -> None:
    """Every few ms, CLIENT KILL every normal client but this one (the others reconnect)."""
    rng = random.Random(seed)
    control = redis.Redis.from_url(url)
    try:
        while not stop.is_set():
            control.client_kill_filter(_type="normal", skipme=True)
            time.sleep(rng.uniform(0.002, 0.010))
    finally:
        control.close()
