"""A dedicated connection for blocking reads, and the one way to cut such a read short.

A Worker's fetcher blocks in BZPOPMIN on the queue's marker, a QueueEvents reader in XREAD
BLOCK on the events stream. Each blocks on a connection of its own (the host's connections
stay free), with a socket timeout of the longest block plus a margin, and is named so it shows
in CLIENT LIST. Another thread stops such a read in milliseconds with :meth:`interrupt`:
CLIENT UNBLOCK of the reader's client id, sent on a small control connection; where that is
refused (an ACL without CLIENT, an old fakeredis) the reader's socket is shut instead.

Where the ACL refuses CLIENT SETNAME (redis-py sends it as it connects, and a refusal fails the
connect), the connection is made again without a name, with one WARNING: the reader works but
CLIENT LIST does not show it under its name. Any other refusal (CLIENT ID, the blocking read
itself) is a :class:`~echomq.errors.PermissionDeniedError` naming the command and key pattern.

The reading thread owns the socket: it calls :meth:`connect`, sends and reads on
:attr:`conn`, and :meth:`drop`\\ s the socket after an error. Other threads only call
:meth:`interrupt` and, once the reader is done, :meth:`close`.

Every call on the way out is bounded, also when Redis hangs (a stopped server, a partition
that resets nothing): CLIENT UNBLOCK waits at most ``CONTROL_TIMEOUT_S`` to connect and as long
for its reply, without the host's retry policy; a control connection that timed out is not
tried again until the reader reconnects (its socket is shut instead); dropping and closing
only shut and close local sockets.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from typing import Any

import redis
from redis.exceptions import NoPermissionError

from .connection import BLOCK_SOCKET_MARGIN_S, CONNECTION_ERRORS, Connections, checkout, without_retries
from .refusals import refusal

log = logging.getLogger(__name__)

#: Connect and read timeout of the control connection that sends CLIENT UNBLOCK. A healthy
#: Redis answers in well under a millisecond; past this, the reader's socket is shut instead.
CONTROL_TIMEOUT_S = 0.5


class BlockingConnection:
    """One thread's blocking connection, interruptible from any other thread."""

    def __init__(self, connections: Connections, *, max_block_s: float, client_name: str | None = None,
                 queue_key: str = "", **overrides: Any) -> None:
        self._connections = connections
        # Its owner reconnects with a backoff of its own and checks for close() in between:
        # redis-py retrying inside a connect (the caller's client settings, copied) would hide
        # both, and retry a certificate that can never verify for seconds.
        self._settings: dict[str, Any] = {"socket_timeout": max_block_s + BLOCK_SOCKET_MARGIN_S,
                                          **without_retries(), **overrides}
        self.client_name = client_name
        self._queue_keys = [queue_key] if queue_key else []  # names the key pattern in a refusal
        self._client = connections.dedicated(client_name=client_name, **self._settings)
        self._control: redis.Redis | None = None
        self._control_unanswered = False  # CLIENT UNBLOCK timed out: Redis hangs, do not wait again
        self._lock = threading.Lock()
        self._closed = False
        self.conn: Any = None
        self.client_id: int | None = None

    def connect(self) -> Any:
        """The reader's socket, connected, with its client id known (again after a drop)."""
        if self.conn is not None:
            return self.conn
        try:
            conn: Any = checkout(self._client.connection_pool)
        except NoPermissionError as exc:
            if self.client_name is None or "client|setname" not in str(exc).lower():
                raise refusal(exc, "connect", self._queue_keys) or exc from None
            self._go_unnamed(exc)
            conn = checkout(self._client.connection_pool)
        try:
            conn.send_command("CLIENT", "ID")
            client_id = int(conn.read_response())
        except BaseException as exc:
            self._client.connection_pool.release(conn)
            conn.disconnect()
            refused = refusal(exc, "client|id", self._queue_keys)
            if refused is None:
                raise
            raise refused from None
        with self._lock:
            self.conn, self.client_id = conn, client_id
            self._control_unanswered = False  # Redis answered again: CLIENT UNBLOCK may work again
        return conn

    def _go_unnamed(self, exc: BaseException) -> None:
        """CLIENT SETNAME was refused: connect without a name from now on (warned once)."""
        log.warning("the ACL refuses CLIENT SETNAME %r (%s): connecting without a name, so CLIENT LIST "
                    "(Queue.get_workers, bull-board) does not show this connection; grant +client|setname "
                    "to name it", self.client_name, exc)
        unnamed = self._connections.dedicated(**self._settings)
        named, self._client, self.client_name = self._client, unnamed, None
        self._connections.release(named)

    def call(self, *command: Any, key: str | None = None) -> Any:
        """Send ``command`` on the reader's socket (connect first) and read its reply. An ACL
        refusal is a PermissionDeniedError naming the command and the pattern of ``key``
        (default: the command's first argument)."""
        conn = self.connect()
        conn.send_command(*command)
        try:
            return conn.read_response()
        except NoPermissionError as exc:
            keys = [key] if key is not None else [str(arg) for arg in command[1:2]] or self._queue_keys
            raise refusal(exc, str(command[0]), keys) or exc from None

    def drop(self) -> None:
        """Forget the socket after an error (or at the end): the next connect() opens a new one."""
        with self._lock:
            conn, self.conn, self.client_id = self.conn, None, None
        if conn is not None:
            conn.disconnect()
            self._client.connection_pool.release(conn)

    def interrupt(self) -> bool:
        """Unblock the read in progress, if any. True when a blocked read was (probably) cut:
        CLIENT UNBLOCK said so, or it was refused and the socket was shut instead."""
        client_id = self.client_id
        if client_id is None:
            return False
        if not self._control_unanswered:
            with self._lock:  # a close() in another thread: no control connection made after it
                if self._closed:
                    return False
                if self._control is None:
                    self._control = self._connections.dedicated(
                        socket_timeout=CONTROL_TIMEOUT_S, socket_connect_timeout=CONTROL_TIMEOUT_S,
                        **without_retries())
                control: Any = self._control
            try:
                return bool(control.execute_command("CLIENT", "UNBLOCK", client_id))
            except CONNECTION_ERRORS as exc:
                # Redis did not answer in time: each later interrupt would wait as long again.
                self._control_unanswered = True
                log.debug("CLIENT UNBLOCK unanswered (%s); shutting the reader's socket", exc)
            except Exception as exc:  # noqa: BLE001 - refused (ACL, old fakeredis): the same fallback
                log.debug("CLIENT UNBLOCK failed (%s); shutting the reader's socket", exc)
            finally:
                if self._closed_now():  # close() released it before this call opened its socket
                    self._connections.release(control)
        with self._lock:
            sock = getattr(self.conn, "_sock", None)
            if sock is not None:
                with contextlib.suppress(OSError, ValueError):
                    sock.shutdown(socket.SHUT_RDWR)
        return True

    def _closed_now(self) -> bool:
        with self._lock:
            return self._closed

    def close(self) -> None:
        """Disconnect the reader's socket and the control connection now (an interrupt() under
        way in another thread closes the control connection it used once it returns)."""
        with self._lock:
            self._closed = True
        self.drop()
        for client in (self._client, self._control):
            if client is not None:
                self._connections.release(client)
