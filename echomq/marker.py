"""The fetcher's wait for work: BZPOPMIN on the queue's ``marker`` key, and how to cut it short.

Producers and the transition scripts ZADD member ``"0"`` (a job is ready) or ``"1"`` with the
next delayed job's due time as score (protocol §1.2). A worker blocks on the key instead of
polling; whatever it pops, the next moveToActive finds out what to do. The wait runs on a
connection of its own, so ``close()`` can interrupt it with ``CLIENT UNBLOCK`` from the host's
client. fakeredis has no CLIENT UNBLOCK, so there a wait is capped at a fraction of a second.
"""

from __future__ import annotations

import threading
import time

import redis

from .connection import BLOCK_SOCKET_MARGIN_S, dedicated_client, is_fake

#: Longest single block on fakeredis, which cannot be interrupted from outside.
FAKE_BLOCK_CAP_S = 0.2


class MarkerWaiter:
    """One worker's blocking read of the marker key (used by the fetcher thread only)."""

    def __init__(self, client: redis.Redis, marker_key: str, *, max_block_s: float, client_name: str) -> None:
        self.client = client
        self.marker_key = marker_key
        self.max_block_s = max_block_s
        self.client_name = client_name
        self._blocking: redis.Redis | None = None
        self._client_id: int | None = None

    def open(self) -> None:
        self._blocking = dedicated_client(self.client, socket_timeout=self.max_block_s + BLOCK_SOCKET_MARGIN_S,
                                          client_name=self.client_name)

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Block until a marker arrives or ``timeout`` s pass (or ``stop`` is set)."""
        blocking = self._blocking
        if blocking is None or stop.is_set():
            return
        if is_fake(blocking):
            timeout = min(timeout, FAKE_BLOCK_CAP_S)
        elif self._client_id is None:
            self._client_id = int(blocking.client_id())  # what interrupt() unblocks
        if stop.is_set():
            return
        blocking.bzpopmin(self.marker_key, timeout=max(0.001, round(min(timeout, self.max_block_s), 3)))

    def connection_lost(self) -> None:
        """The socket was replaced: its next wait learns the new client id."""
        self._client_id = None

    def interrupt(self, done: threading.Event, patience_s: float) -> None:
        """CLIENT UNBLOCK the wait until ``done`` is set (a wait may begin just after one
        unblock, so keep trying for ``patience_s``). Runs on the host's client, not ours."""
        if self._blocking is None or is_fake(self._blocking):
            return
        deadline = time.monotonic() + patience_s
        while not done.is_set() and time.monotonic() < deadline:
            client_id = self._client_id
            if client_id is not None:
                try:
                    self.client.client_unblock(client_id)
                except redis.RedisError:
                    pass
            done.wait(0.05)

    def close(self) -> None:
        if self._blocking is not None:
            try:
                self._blocking.close()
            except redis.RedisError:
                pass
