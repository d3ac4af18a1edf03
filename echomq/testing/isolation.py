"""Every test on a Redis of its own: the per-test state behind the pytest plugin's isolation.

Two ways to keep tests apart, one per kind of server:

- **fakeredis**: :func:`fake_client` gives a client on the current test's own in-memory server.
  The plugin starts a test with no server; the first client a test asks for makes one, and
  every later client of that test shares it. Outside a pytest test (``manage.py test``) there
  is one server for the process.
- **a real Redis**: :class:`QueueRecorder` gives clients that note, in every command they send,
  the queues it names (``<prefix>:{<queue>}``: each EchoMQ key and each script's key prefix
  carries one). Afterwards :meth:`QueueRecorder.clean` deletes every key of those queues, so
  whatever a test wrote, into its own queues or into the application's, is gone, and nothing it
  did not touch is (the server may be shared with other test runs).

The framework integrations in test mode use both (``echomq.contrib.host``) and register with
:func:`at_test_end` what must forget the test's server when it ends (their registry's client,
their events readers), so the next test starts from nothing. Nothing is imported at import
time: the plugin loads this module in every session.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

#: The queue an EchoMQ key or key prefix names, in a packed command: ``<prefix>:{<queue>}``.
_QUEUE_BASE = re.compile(rb"(?:^|\n)([^\r\n{}]+?):\{([^\r\n{}]+)\}")
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.testing = False
        self.server: Any = None
        self.callbacks: dict[object, Callable[[], None]] = {}
        self.recorders: list[QueueRecorder] = []


_state = _State()


def in_test() -> bool:
    """True between the plugin's :func:`begin_test` and :func:`end_test`."""
    return _state.testing


def fake_client() -> redis.Redis:
    """A fakeredis client on this test's server (made on first use: a fresh one per test)."""
    import fakeredis  # the testing extra, only when a test asks for it

    with _state.lock:
        if _state.server is None:
            _state.server = fakeredis.FakeServer()
        server = _state.server
    return fakeredis.FakeRedis(server=server)


def at_test_end(key: object, callback: Callable[[], None]) -> None:
    """Run ``callback`` when the current test ends (once; ``key`` replaces an earlier one of
    the same key). Outside a test it is kept for the end of the next one."""
    with _state.lock:
        _state.callbacks[key] = callback


def begin_test() -> None:
    with _state.lock:
        _state.testing = True
        _state.server = None


def end_test() -> None:
    """Forget the test's fake server, run the callbacks, delete what the recorders saw."""
    with _state.lock:
        callbacks, _state.callbacks = list(_state.callbacks.values()), {}
        recorders, _state.recorders = _state.recorders, []
        _state.testing = False
        _state.server = None
    try:
        for callback in callbacks:
            callback()
    finally:
        for recorder in recorders:
            recorder.clean()


class QueueRecorder:
    """Clients that note the queues their commands name, and the deletion of those queues."""

    def __init__(self) -> None:
        self.bases: set[str] = set()
        self._lock = threading.Lock()
        self._kwargs: dict[str, Any] | None = None
        self._connection_class: Any = None

    def client(self, source: str | redis.Redis) -> redis.Redis:
        """A new client on ``source``'s server (a URL, or a client whose settings it copies)
        whose every command is noted."""
        import redis

        pool = redis.ConnectionPool.from_url(source) if isinstance(source, str) else source.connection_pool
        kwargs = dict(pool.connection_kwargs)
        recorder = self

        class Recording(pool.connection_class):  # type: ignore[misc, name-defined]
            def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                recorder.note(command)
                super().send_packed_command(command, check_health)

        with self._lock:
            self._kwargs, self._connection_class = kwargs, pool.connection_class
        return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=Recording, **kwargs))

    def note(self, command: Any) -> None:
        data = command if isinstance(command, (bytes, bytearray)) else b"".join(bytes(part) for part in command)
        found = {match[1].decode("utf-8", "replace") + ":{" + match[2].decode("utf-8", "replace") + "}"
                 for match in _QUEUE_BASE.finditer(data)}
        if found - self.bases:
            with self._lock:
                self.bases |= found

    def watch(self) -> QueueRecorder:
        """Clean at the end of the current test (the hosts' test connections)."""
        with _state.lock:
            if self not in _state.recorders:
                _state.recorders.append(self)
        return self

    def clean(self) -> None:
        """Delete every key of every queue noted so far (on a client of its own, noting nothing)."""
        import redis

        with self._lock:
            bases, self.bases = sorted(self.bases), set()
            kwargs, connection_class = self._kwargs, self._connection_class
        if not bases or kwargs is None:
            return
        client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=connection_class, **kwargs))
        try:
            for base in bases:
                keys = list(client.scan_iter(match=_GLOB_SPECIAL.sub(r"\\\1", base) + ":*", count=1000))
                for start in range(0, len(keys), 500):
                    client.delete(*keys[start:start + 500])
        except redis.RedisError:  # the test may have stopped the server: nothing left to clean
            pass
        finally:
            client.close()
            client.connection_pool.disconnect()
