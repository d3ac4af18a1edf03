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

**ACL refusals** (docs/security.md). Redis checks a script's commands one by one as it runs and
undoes nothing, so a user allowed EVALSHA but not, say, LPUSH would leave a job half-added. On
each path, the first call of a script for a pool's user is preceded by a check,
:func:`preflight`: one EVALSHA of a probe that asks ``redis.acl_check_cmd`` (Redis 7+) about
every command the script calls, so a missing one is refused before anything is written. A
refusal (the probe's, EVALSHA's, SCRIPT LOAD's, a key outside the user's patterns) is raised as
:class:`~echomq.errors.PermissionDeniedError` naming the command and the key pattern the role
needs (``transport.refusals``); the calls themselves only pay for it when an exception is raised.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError, ResponseError

from ..errors import PermissionDeniedError
from .connection import checkout
from .refusals import CALLED_COMMAND, key_pattern, refusal
from .reply_wait import LARGE_SEND, ReplySpin, timed, untimed, wait_for_reply
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

# -- the check before a script's first call -------------------------------------------------------

_PROBE_SOURCE = """
if type(redis.acl_check_cmd) ~= "function" then return false end
local denied = {}
for i = 1, #ARGV do
  local allowed
  if KEYS[1] then allowed = redis.acl_check_cmd(ARGV[i], KEYS[1]) else allowed = redis.acl_check_cmd(ARGV[i]) end
  if not allowed then denied[#denied + 1] = ARGV[i] end
end
return denied
"""
_PROBE_SHA = hashlib.sha1(_PROBE_SOURCE.encode("utf-8")).hexdigest()

#: Per connection pool (one user's), the SHAs of the scripts checked (or that cannot be checked).
_CLEARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_CLEARED_LOCK = threading.Lock()
_COMMANDS: dict[str, tuple[str, ...]] = {}


def cleared_for(pool: Any) -> set[str]:
    """The scripts already checked for this pool's user (shared by every path and thread)."""
    found = _CLEARED.get(pool)
    if found is None:
        with _CLEARED_LOCK:
            found = _CLEARED.setdefault(pool, set())
    return found


def script_commands(lua: LuaScript) -> tuple[str, ...]:
    """Every command ``lua`` may call, as its source names them (``redis.call("XADD", ...)``)."""
    found = _COMMANDS.get(lua.sha)
    if found is None:
        found = _COMMANDS[lua.sha] = tuple(sorted({name.lower() for name in CALLED_COMMAND.findall(lua.source)}))
    return found


def preflight(call: Callable[..., Any], lua: LuaScript, keys: Sequence[str]) -> None:
    """Check, with ``call(*command)`` (a client's or a connection's), that the user may run every
    command ``lua`` calls on its first key: PermissionDeniedError naming all that are missing,
    before anything is written. Returns quietly where the server cannot tell (no
    ``redis.acl_check_cmd``: Redis < 7, fakeredis); then Redis refuses in the script itself."""
    commands = script_commands(lua)
    if not commands:
        return
    probe = ("EVALSHA", _PROBE_SHA, 1 if keys else 0, *keys[:1], *commands)
    try:
        try:
            denied = call(*probe)
        except NoScriptError:
            call("SCRIPT", "LOAD", _PROBE_SOURCE)
            denied = call(*probe)
    except ResponseError as exc:
        refused = refusal(exc, "evalsha", keys, lua)
        if refused is not None:
            raise refused from None
        # Not a refusal (a Lua that cannot run the probe, OOM ...): the call goes ahead, unchecked.
        return
    if denied:
        names = [d.decode() if isinstance(d, bytes) else str(d) for d in denied]
        pattern = key_pattern(str(keys[0])) if keys else ""
        raise PermissionDeniedError(
            f"{lua.name}: the ACL refuses {', '.join(n.upper() for n in names)}, which the script calls; "
            f"the role needs {' '.join('+' + n for n in names)}{' and keys ' + pattern if pattern else ''} "
            f"(docs/security.md). Nothing was written.",
            command=names[0], key_pattern=pattern, missing=names)


def speak_on(conn: Any) -> Callable[..., Any]:
    """``call(*command)`` on one connection: send, then read the reply (for preflight)."""
    def call(*command: Any) -> Any:
        conn.send_command(*command)
        return conn.read_response()
    return call


def _preflight_on_pool(pool: Any, lua: LuaScript, keys: Sequence[str]) -> None:
    conn = checkout(pool)
    try:
        preflight(speak_on(conn), lua, keys)
    except (redis.ConnectionError, redis.TimeoutError):
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


# -- the runners ----------------------------------------------------------------------------------

def run_script(client: Any, lua: LuaScript, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
    """Run one call on a client, or queue it on a pipeline (its reply comes from ``execute``)."""
    command = lua.command(keys, args)
    cleared = cleared_for(client.connection_pool)
    if isinstance(client, Pipeline):
        if lua.sha not in cleared:
            _preflight_on_pool(client.connection_pool, lua, keys)
            cleared.add(lua.sha)
        lua.pipeline_script(client)(keys=list(keys), args=list(args), client=client)
        return client
    try:
        if lua.sha not in cleared:
            preflight(client.execute_command, lua, keys)
            cleared.add(lua.sha)
        try:
            return client.execute_command(*command)
        except NoScriptError:
            client.script_load(lua.source)
            return client.execute_command(*command)
    except ResponseError as exc:
        refused = refusal(exc, "evalsha", keys, lua)
        if refused is None:
            raise
        raise refused from None


def pack_one(conn: Any, command: tuple[Any, ...]) -> bytes:
    """One command as the bytes ``conn.send_packed_command`` takes (hiredis packs it in C)."""
    if _pack_command is not None:
        return _pack_command(command)
    return b"".join(conn.pack_command(*command))


class PinnedConnection:
    """EVALSHA over one pool connection that a thread keeps for its lifetime.

    The hot path (take a job, finish it and take the next) is one script per job; going through
    ``Redis.execute_command`` costs about three times the round trip itself in redis-py 8
    (retry wrapper, pool checkout, per-call bookkeeping), so each worker thread pins one
    connection and talks to it directly. A connection error drops the socket (the next call
    reconnects) and propagates to the caller's retry loop.
    """

    def __init__(self, client: redis.Redis, *, spin_s: float = 0.0) -> None:
        self.pool = client.connection_pool
        self.conn: Any = None
        self._cleared = cleared_for(self.pool)
        # poll up to spin_s for each reply before blocking (reply_wait.py); None: never
        self._spin = ReplySpin(spin_s) if spin_s > 0 else None

    def __call__(self, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        command = lua.command(keys, args)
        if self.conn is None:
            self.conn = checkout(self.pool)
        conn = self.conn
        try:
            if lua.sha not in self._cleared:
                timed(conn)  # redis-py's own reads: with the socket's timeout
                preflight(speak_on(conn), lua, keys)
                self._cleared.add(lua.sha)
            try:
                self._round_trip(conn, command)
                return conn.read_response()
            except NoScriptError:
                timed(conn)
                conn.send_command("SCRIPT", "LOAD", lua.source)
                conn.read_response()
                self._round_trip(conn, command)
                return conn.read_response()
        except (redis.ConnectionError, redis.TimeoutError):
            conn.disconnect()
            raise
        except ResponseError as exc:
            refused = refusal(exc, "evalsha", keys, lua)
            if refused is None:
                raise
            raise refused from None

    def _round_trip(self, conn: Any, command: tuple[Any, ...]) -> None:
        """Send ``command`` and wait until its reply begins (spinning first, if asked), on the
        socket run without a timeout where it can be (reply_wait.py); the caller reads it."""
        packed = pack_one(conn, command)
        if len(packed) > LARGE_SEND:
            timed(conn)
        conn.send_packed_command([packed], check_health=False)
        if not untimed(conn):
            if self._spin is not None:
                self._spin.wait(conn)
            return  # TLS: the read waits with the socket's own timeout
        if self._spin is None or not self._spin.wait(conn):
            wait_for_reply(conn)

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
            timed(conn)
            try:
                self.pool.release(conn)
            except (redis.RedisError, OSError):  # the pool may be closed; the socket goes with it
                conn.disconnect()


class _Unanswered:
    """The outcome of a call :func:`run_calls` has no reply for (see its ``outcome``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: In ``outcome``: the call was never sent, so it did not run.
NOT_SENT: Any = _Unanswered("NOT_SENT")
#: In ``outcome``: the call was sent but its reply never came: it may or may not have run.
UNANSWERED: Any = _Unanswered("UNANSWERED")


def run_calls(client: redis.Redis, calls: Sequence[Call], outcome: list[Any] | None = None) -> list[Any]:
    """Run every call in order; returns each reply (an exception instance for an error reply).

    An error reply is returned in its slot, not raised, so one bad call never desynchronises
    the stream. NOSCRIPT replies mean those calls did not run: the scripts are loaded and
    those calls sent again.

    ``outcome``, when given, is filled in place as the run goes, one slot per call: its reply
    once read, :data:`UNANSWERED` while it is sent without a reply, :data:`NOT_SENT` before.
    When the run is cut (a lost connection between two windows, a timeout), the exception
    propagates and ``outcome`` tells the caller which calls ran, which may have, and which
    did not.
    """
    if outcome is None:
        outcome = []
    outcome[:] = [NOT_SENT] * len(calls)
    if not calls:
        return outcome
    for lua, keys, _args in calls:
        lua.check_arity(keys)  # every call, before any I/O
    _stream(client, calls, outcome)
    missing = [i for i, reply in enumerate(outcome) if isinstance(reply, NoScriptError)]
    if missing:
        for i in missing:
            outcome[i] = NOT_SENT  # NOSCRIPT: the script did not run
        for lua in {id(calls[i][0]): calls[i][0] for i in missing}.values():
            try:
                client.script_load(lua.source)
            except ResponseError as exc:
                refused = refusal(exc, "script|load", calls[missing[0]][1], lua)
                if refused is None:
                    raise
                raise refused from None
        again: list[Any] = []
        try:
            run_calls(client, [calls[i] for i in missing], again)
        finally:
            for i, reply in zip(missing, again):
                outcome[i] = reply
    return outcome


def _stream(client: redis.Redis, calls: Sequence[Call], outcome: list[Any]) -> None:
    """Send ``calls`` over one connection in windows, two in flight, filling ``outcome``."""
    pool = client.connection_pool
    cleared = cleared_for(pool)
    conn = checkout(pool)
    read = 0
    try:
        for lua, keys, _args in calls:
            if lua.sha not in cleared:  # a bulk has one or two scripts: the first call of each
                preflight(speak_on(conn), lua, keys)
                cleared.add(lua.sha)
        scripts = {lua.sha: (lua, keys) for lua, keys, _args in calls}
        if len(scripts) > 1:
            _load_before_streaming(conn, scripts.values())
        in_flight: deque[int] = deque()
        for start in range(0, len(calls), WINDOW):
            # Each window is built while Redis runs the one before (building them all first
            # would leave the server idle for the whole build).
            window = [lua.command(keys, args) for lua, keys, args in calls[start : start + WINDOW]]
            if _pack_command is not None:
                packed: Any = [b"".join([_pack_command(command) for command in window])]
            else:
                packed = conn.pack_commands(window)
            outcome[start : start + len(window)] = [UNANSWERED] * len(window)
            conn.send_packed_command(packed)
            in_flight.append(len(window))
            if len(in_flight) > 1:
                read = _read(conn, in_flight.popleft(), read, outcome, calls)
        while in_flight:
            read = _read(conn, in_flight.popleft(), read, outcome, calls)
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def _load_before_streaming(conn: Any, scripts: Iterable[tuple[LuaScript, Sequence[str]]]) -> None:
    """SCRIPT LOAD each script of a batch that mixes several, in one round trip, before it
    streams. Calls that meet NOSCRIPT are sent again after the others: with one script that is
    every call, in order, but with two, the calls of the cached one would run first and a bulk's
    job ids would no longer follow its order (a restarted server, a fresh cluster node)."""
    pending = list(scripts)
    conn.send_packed_command(conn.pack_commands([("SCRIPT", "LOAD", lua.source) for lua, _keys in pending]))
    for lua, keys in pending:
        try:
            conn.read_response()
        except ResponseError as exc:
            refused = refusal(exc, "script|load", keys, lua)
            if refused is None:
                raise
            raise refused from None


def _read(conn: Any, count: int, at: int, outcome: list[Any], calls: Sequence[Call]) -> int:
    """Read ``count`` replies into ``outcome`` from index ``at``; the index after them."""
    for i in range(at, at + count):
        try:
            outcome[i] = conn.read_response(disconnect_on_error=False)
        except ResponseError as exc:
            lua, keys, _args = calls[i]
            outcome[i] = refusal(exc, "evalsha", keys, lua) or exc
    return at + count
