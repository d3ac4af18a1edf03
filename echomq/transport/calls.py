"""Running scripts: the one runner, with its three fast paths.

Every call is ``EVALSHA`` built by :meth:`LuaScript.command` (which checks the arity) and
answers a NOSCRIPT (a restarted server, a SCRIPT FLUSH) by loading the script and sending the
call again: a flushed cache costs one round trip, never an error.

* :func:`run_script`: one call on a client (through its retry policy) or queued on a pipeline
  (redis-py loads the script before a MULTI, so NOSCRIPT cannot fail half a transaction);
* :class:`PinnedConnection`: the worker's hot path, EVALSHA over one pool connection a thread
  keeps for its lifetime, without redis-py's per-command bookkeeping;
* :func:`run_calls`: many calls streamed over one connection in windows, so Python packing the
  next window overlaps Redis running the last one (bulk adds).
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError, ResponseError

from .scripts import LuaScript


def _hiredis_packer() -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis packs a whole command in C; redis-py would check and encode each argument in Python."""
    try:
        from hiredis import pack_command
    except ImportError:  # pragma: no cover - hiredis is an optional extra
        return None
    return pack_command


_pack_command = _hiredis_packer()

#: Calls per window of :func:`run_calls`; two windows are in flight at a time.
WINDOW = 256

Call = tuple[LuaScript, Sequence[str], Sequence[Any]]


def run_script(client: Any, lua: LuaScript, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
    """Run one call on a client, or queue it on a pipeline (its reply comes from ``execute``)."""
    command = lua.command(keys, args)
    if isinstance(client, Pipeline):
        lua.pipeline_script(client)(keys=list(keys), args=list(args), client=client)
        return client
    try:
        return client.execute_command(*command)
    except NoScriptError:
        client.script_load(lua.source)
        return client.execute_command(*command)


def _send(conn: Any, command: tuple[Any, ...]) -> None:
    if _pack_command is not None:
        conn.send_packed_command([_pack_command(command)], check_health=False)
    else:
        conn.send_command(*command)


def _checkout(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return pool.get_connection("EVALSHA")


class PinnedConnection:
    """EVALSHA over one pool connection that a thread keeps for its lifetime.

    The hot path (take a job, finish it and take the next) is one script per job; going through
    ``Redis.execute_command`` costs about three times the round trip itself in redis-py 8
    (retry wrapper, pool checkout, per-call bookkeeping), so each worker thread pins one
    connection and talks to it directly. A connection error drops the socket (the next call
    reconnects) and propagates to the caller's retry loop.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.pool = client.connection_pool
        self.conn: Any = None

    def __call__(self, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        command = lua.command(keys, args)
        if self.conn is None:
            self.conn = _checkout(self.pool)
        conn = self.conn
        try:
            try:
                _send(conn, command)
                return conn.read_response()
            except NoScriptError:
                conn.send_command("SCRIPT", "LOAD", lua.source)
                conn.read_response()
                _send(conn, command)
                return conn.read_response()
        except (redis.ConnectionError, redis.TimeoutError):
            conn.disconnect()
            raise

    def interrupt(self) -> None:
        """From another thread: cut the call in progress, if any, by shutting the socket (for a
        server that stopped answering). The owner's read fails with ConnectionError; its next
        call reconnects."""
        sock = getattr(self.conn, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                self.pool.release(conn)
            except (redis.RedisError, OSError):  # the pool may be closed; the socket goes with it
                conn.disconnect()


def run_calls(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    """Run every call in order; returns each reply (an exception instance for an error reply).

    An error reply is returned in its slot, not raised, so one bad call never desynchronises
    the stream. NOSCRIPT replies mean those calls did not run: the scripts are loaded and
    those calls sent again.
    """
    if not calls:
        return []
    for lua, keys, _args in calls:
        lua.check_arity(keys)  # every call, before any I/O
    pool = client.connection_pool
    conn = _checkout(pool)
    replies: list[Any] = []
    try:
        in_flight: deque[int] = deque()
        for start in range(0, len(calls), WINDOW):
            # Each window is built while Redis runs the one before (building them all first
            # would leave the server idle for the whole build).
            window = [lua.command(keys, args) for lua, keys, args in calls[start : start + WINDOW]]
            if _pack_command is not None:
                packed: Any = [b"".join([_pack_command(command) for command in window])]
            else:
                packed = conn.pack_commands(window)
            conn.send_packed_command(packed)
            in_flight.append(len(window))
            if len(in_flight) > 1:
                _read(conn, in_flight.popleft(), replies)
        while in_flight:
            _read(conn, in_flight.popleft(), replies)
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        for lua in {id(calls[i][0]): calls[i][0] for i in missing}.values():
            client.script_load(lua.source)
        again = run_calls(client, [calls[i] for i in missing])
        for i, reply in zip(missing, again):
            replies[i] = reply
    return replies


def _read(conn: Any, count: int, replies: list[Any]) -> None:
    for _ in range(count):
        try:
            replies.append(conn.read_response(disconnect_on_error=False))
        except ResponseError as exc:
            replies.append(exc)
