"""One connection for all of a Worker's threads, their calls pipelined on it, for
``concurrency`` > 1.

Each job costs Redis a request of its own on top of the script: a read, a reply write and an
event-loop turn, about as much again as a short script. With one connection per thread, ten
threads finishing ten jobs cost ten of those. Here every thread queues its packed call (the
order of the queue is the order of the replies) and the one that found nobody writing writes
everything queued, in one send per turn, until the queue is empty: threads that finish while a
send is under way never wait for it, and their calls go out together. One of the waiting
threads reads: it answers each reply's caller in turn until its own comes, then hands the
reading on to the next caller still waiting. Redis finds several calls in one read and sends
their replies in one write.

Each call keeps its own outcome: its reply, its error reply (a refusal, NOSCRIPT, a failing
script) or, when the connection fails, that error for every call in flight on it, so each
caller's retry loop decides as it does over a connection of its own. A lost connection is
dropped and the next call checks out a new one: a reply is never read for the wrong call. The
lost one goes back to the pool, disconnected, once no thread is still sending or reading on it
(a writer whose send began before the loss would otherwise reconnect it, and its bytes would
reach whoever took it next): a pool counts a connection never given back as in use for good,
and a storm of lost connections would fill it (``MaxConnectionsError`` for every later call).
``concurrency`` 1 keeps ``transport.calls.PinnedConnection``: one thread has nothing to share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import ResponseError

from ..transport.calls import cleared_for, pack_one, preflight, reloading_scripts
from ..transport.connection import checkout
from ..transport.refusals import refusal
from ..transport.scripts import LuaScript


class _Call:
    """One call in flight: the connection (and its generation) it went out on, then its outcome."""

    __slots__ = ("answered", "conn", "error", "generation", "reply", "wake", "woken")

    def __init__(self) -> None:
        self.conn: Any = None
        self.generation = 0
        self.reply: Any = None
        self.error: BaseException | None = None
        self.answered = False
        # For a caller that waits (another thread reads): held from the start, it blocks on it
        # until its call is answered or the reading is handed to it; released at most once
        # (``woken``), under the pipe's state lock. A caller that reads itself needs none.
        self.wake: threading.Lock | None = None
        self.woken = False


class SharedPipe:
    """EVALSHA calls from many threads over one pool connection, pipelined."""

    def __init__(self, client: redis.Redis) -> None:
        self.pool = client.connection_pool
        self.conn: Any = None
        self._cleared = cleared_for(self.pool)
        self._state = threading.Lock()  # _in_flight, _outbox, _writing, _reading, conn, _generation
        self._in_flight: deque[_Call] = deque()
        self._outbox: list[bytes] = []  # packed calls not written yet, in the order of _in_flight
        self._writing = False  # a thread writes the outbox (or is about to)
        self._reading = False  # a thread reads replies (or is about to)
        self._generation = 0  # bumped when a connection is lost: its calls are over
        # Threads sending or reading on a generation's connection right now, and the connections
        # dropped while such a thread was still on them: each goes back to the pool when its
        # last user lets go (_let_go), never under a thread that may still write to it.
        self._users: dict[int, int] = {}
        self._dropped: dict[int, Any] = {}

    def __call__(self, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        command = lua.command(keys, args)
        try:
            if lua.sha not in self._cleared:
                preflight(self._command, lua, keys)
                self._cleared.add(lua.sha)
            # a restarted server or SCRIPT FLUSH: load it, send it again
            return reloading_scripts(lambda: self._round_trip(command),
                                     lambda: self._command("SCRIPT", "LOAD", lua.source))
        except ResponseError as exc:
            refused = refusal(exc, "evalsha", keys, lua)
            if refused is None:
                raise
            raise refused from None

    def _command(self, *command: Any) -> Any:
        return self._round_trip(command)

    def _round_trip(self, command: tuple[Any, ...]) -> Any:
        call = _Call()
        conn = self.conn
        if conn is None:
            with self._state:
                conn = self.conn = self.conn or checkout(self.pool)
        # Packed outside the lock by whichever connection is current: every connection of the
        # pool encodes alike, so the bytes suit the one the call goes out on.
        packed = pack_one(conn, command)
        with self._state:
            if self.conn is None:
                self.conn = checkout(self.pool)
            call.conn, call.generation = self.conn, self._generation
            self._in_flight.append(call)
            self._outbox.append(packed)
            write = not self._writing
            if write:
                self._writing = True
            read = not self._reading
            if read:
                self._reading = True
            else:
                call.wake = threading.Lock()
                call.wake.acquire()
        if write:
            self._write_out(call.conn, call.generation)
        if call.wake is not None:
            call.wake.acquire()  # answered, or handed the reading with this call still waiting
        if not call.answered:
            self._read_until(call)
        if call.error is not None:
            raise call.error
        return call.reply

    def _write_out(self, conn: Any, generation: int) -> None:
        """Write the outbox, one send for all that is queued, until nothing is left; then let the
        next caller write. A failed send fails every call in flight (``_lose``)."""
        holding = False  # counted among the connection's users from the first send on
        given_back: Any = None
        try:
            while True:
                with self._state:
                    if self._generation != generation or not self._outbox:
                        if self._generation == generation:
                            self._writing = False  # else lost meanwhile: the outbox went with it
                        if holding:
                            given_back = self._let_go(generation)
                        return
                    queued, self._outbox = self._outbox, []
                    if not holding:
                        self._users[generation] = self._users.get(generation, 0) + 1
                        holding = True
                try:
                    conn.send_packed_command([queued[0] if len(queued) == 1 else b"".join(queued)],
                                             check_health=False)
                except BaseException as exc:
                    lost = exc if isinstance(exc, redis.RedisError) else redis.ConnectionError(f"send cut: {exc!r}")
                    self._lose(generation, lost)
                    with self._state:
                        given_back = self._let_go(generation)
                    if not isinstance(exc, redis.RedisError):
                        raise
                    return
        finally:
            self._give_back(given_back)

    def _read_until(self, mine: _Call) -> None:
        """Read replies in order, answering each caller, until ``mine`` is answered; then hand
        the reading to the first call still waiting."""
        conn, generation = mine.conn, mine.generation
        with self._state:
            if self._generation != generation:
                return  # lost meanwhile: every call on it, mine too, was answered then
            self._users[generation] = self._users.get(generation, 0) + 1
        given_back: Any = None
        try:
            while True:
                error: BaseException | None = None
                reply: Any = None
                try:
                    reply = conn.read_response(disconnect_on_error=False)
                except ResponseError as exc:
                    error = exc
                except BaseException as exc:
                    self._lose(generation, exc if isinstance(exc, redis.RedisError)
                               else redis.ConnectionError(repr(exc)))
                    with self._state:
                        given_back = self._let_go(generation)
                    if isinstance(exc, redis.RedisError):
                        return
                    raise
                with self._state:
                    if self._generation != generation:
                        given_back = self._let_go(generation)
                        return  # lost meanwhile: every call on it, mine too, was answered then
                    call = self._in_flight.popleft()
                    call.reply, call.error, call.answered = reply, error, True
                    if call is mine:
                        if self._in_flight:
                            self._wake(self._in_flight[0])  # not answered yet: it reads on
                        else:
                            self._reading = False
                        given_back = self._let_go(generation)
                        return
                    self._wake(call)
        finally:
            self._give_back(given_back)

    def _wake(self, call: _Call) -> None:
        """Release ``call``'s caller (under ``_state``; once)."""
        if call.wake is not None and not call.woken:
            call.woken = True
            call.wake.release()

    def _lose(self, generation: int, exc: BaseException) -> None:
        """The connection of ``generation`` failed: answer every call in flight on it with
        ``exc``, drop it (disconnected; a reader still on it fails at once), start afresh."""
        with self._state:
            if self._generation != generation:
                return
            self._generation += 1
            conn, self.conn = self.conn, None
            for call in self._in_flight:
                call.error, call.answered = exc, True
                self._wake(call)
            self._in_flight.clear()
            self._outbox.clear()
            self._reading = self._writing = False
            given_back = self._drop(generation, conn)
        if conn is not None:
            conn.disconnect()
        self._give_back(given_back)

    def _drop(self, generation: int, conn: Any) -> Any:
        """(Under ``_state``.) ``conn``, the connection of ``generation``, is no longer the
        pipe's: returned to be given back now, or kept until its last user lets go (None)."""
        if conn is None or not self._users.get(generation):
            return conn
        self._dropped[generation] = conn
        return None

    def _let_go(self, generation: int) -> Any:
        """(Under ``_state``.) A thread stopped sending or reading on ``generation``'s
        connection; the dropped connection it was the last user of, to be given back, if any."""
        left = self._users[generation] - 1
        if left:
            self._users[generation] = left
            return None
        del self._users[generation]
        return self._dropped.pop(generation, None)

    def _give_back(self, conn: Any) -> None:
        """Return a dropped connection to the pool, disconnected first: a writer that began
        before the loss may have connected it again, with its calls on it."""
        if conn is None:
            return
        conn.disconnect()
        with contextlib.suppress(redis.RedisError, OSError):  # a closed pool: the socket is closed already
            self.pool.release(conn)

    def interrupt(self) -> None:
        """From another thread: cut the calls in flight, if any (a server that stopped
        answering); they fail with ConnectionError, the next call checks out a new connection."""
        sock = getattr(self.conn, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        """Give the connection back to the pool (once no thread uses the pipe any more). With a
        call still in flight (a thread that started one as the last other one ended) it stays
        checked out: the Worker's close disconnects it with the pool, never hands it on mid-call."""
        with self._state:
            if self._in_flight:
                return
            conn, self.conn = self.conn, None
            self._generation += 1
            if self._drop(self._generation - 1, conn) is None:
                return  # a writer still on it (its send done, not yet let go): it gives it back
        if conn is not None:
            try:
                self.pool.release(conn)
            except (redis.RedisError, OSError):  # the pool may be closed; the socket goes with it
                conn.disconnect()
