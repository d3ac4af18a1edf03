"""Watching a queue from the side while workers run: the most jobs ever seen in ``active``."""

from __future__ import annotations

import threading
import time

import redis

from echomq.protocol.keys import QueueKeys


class ActiveSampler:
    """Samples ``LLEN active`` every 2 ms in a thread of its own for the length of a ``with``
    block; ``most`` is the highest count seen."""

    def __init__(self, connection: redis.Redis, queue_name: str) -> None:
        self.connection = connection
        self.key = QueueKeys(queue_name).active
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, int(self.connection.llen(self.key)))
            time.sleep(0.002)

    def __enter__(self) -> ActiveSampler:  # noqa: PYI034 (Self needs Python 3.11)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
