"""Running scripts: the one runner, with its three fast paths.

Every call is ``EVALSHA`` built by :meth:`LuaScript.command` (which checks the arity) and
answers a NOSCRIPT (a restarted server, a SCRIPT FLUSH) by loading the script and sending the
call again: a flushed cache costs one round trip, never an error.

* :func:`run_script`: one call on a client (through its retry policy) or queued on a pipeline
  (redis-py loads the script before a MULTI, so NOSCRIPT cannot fail half a transaction);
* :class:`PinnedConnection`: the worker's hot path, EVALSHA over one pool connection a thread
  keeps for its lifetime, without redis-py's per-command bookkeeping;
* ``stream_calls.run_calls``: many calls streamed over one connection in windows, so Python
  packing the next window overlaps Redis running the last one (adds, bulk adds).

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
import logging
import socket
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError, ResponseError

from ..errors import PermissionDeniedError
from .connection import checkout
from .refusals import CALLED_COMMAND, key_pattern, refusal
from .reply_wait import LARGE_SEND, ReplySpin, timed, untimed, wait_for_reply
from .scripts import LuaScript

log = logging.getLogger(__name__)


def _hiredis_packer() -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis packs a whole command in C; redis-py would check and encode each argument in Python."""
    try:
        from hiredis import pack_command
    except ImportError:  # pragma: no cover - hiredis is an optional extra
        return None
    return pack_command


pack_command = _hiredis_packer()

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



#: How many times a call meeting NOSCRIPT loads its script and is sent again: a SCRIPT FLUSH (or
#: a restart) may come between the load and the call it was for; one reload is not enough then.
NOSCRIPT_RELOADS = 3

_Reply = TypeVar("_Reply")


def reloading_scripts(send: Callable[[], _Reply], load: Callable[[], object]) -> _Reply:
    """``send()``; on NOSCRIPT, ``load()`` the script and send again, up to NOSCRIPT_RELOADS times.
    The one home of the NOSCRIPT rule for a single call (run_calls handles a batch's)."""
    for _ in range(NOSCRIPT_RELOADS):
        try:
            return send()
        except NoScriptError:
            load()
    return send()


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
        denied = reloading_scripts(lambda: call(*probe), lambda: call("SCRIPT", "LOAD", _PROBE_SOURCE))
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
        return reloading_scripts(lambda: client.execute_command(*command), lambda: client.script_load(lua.source))
    except ResponseError as exc:
        refused = refusal(exc, "evalsha", keys, lua)
        if refused is None:
            raise
        raise refused from None


def pack_one(conn: Any, command: tuple[Any, ...]) -> bytes:
    """One command as the bytes ``conn.send_packed_command`` takes (hiredis packs it in C)."""
    if pack_command is not None:
        return pack_command(command)
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
            def send() -> Any:
                self._round_trip(conn, command)
                return conn.read_response()

            def load() -> None:
                timed(conn)
                conn.send_command("SCRIPT", "LOAD", lua.source)
                conn.read_response()

            return reloading_scripts(send, load)
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
