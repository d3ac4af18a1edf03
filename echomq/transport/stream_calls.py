"""Many calls streamed over one connection (bulk adds, one add): the executor's pipelined path.

:func:`run_calls` sends the calls in windows of :data:`WINDOW`, two in flight, so Python
packing the next window overlaps Redis running the last one. Error replies come back in their
slots; calls that did not run (NOSCRIPT, or a :class:`~echomq.transport.unsent.NotRunError`: a
failover under way) are sent again; a connection lost after calls were sent is
:class:`CallsOutcomeUnknown`, naming which calls may or may not have run.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis
from redis.exceptions import NoScriptError, ResponseError

from .calls import Call, cleared_for, pack_command, preflight, speak_on
from .connection import checkout
from .refusals import refusal
from .scripts import LuaScript
from .sentinel import watch_for
from .unsent import NotRunError

log = logging.getLogger(__name__)

#: Calls per window of :func:`run_calls`; two windows are in flight at a time.
WINDOW = 256

#: How long :func:`run_calls` keeps sending again calls that did not run (a failover under way:
#: the sentinels promoting a replica, a cluster slot changing owner, a master that refuses
#: connections) before it hands their :class:`NotRunError` to the caller.
RESEND_FOR_S = 5.0
_RESEND_FIRST_DELAY_S = 0.01
_RESEND_MAX_DELAY_S = 0.25


def run_calls(client: redis.Redis, calls: Sequence[Call], *, resend_for: float = RESEND_FOR_S,
              before_resend: Callable[[Sequence[Call], Sequence[int]], None] | None = None) -> list[Any]:
    """Run every call in order; returns each reply (an exception instance for an error reply).

    An error reply is returned in its slot, not raised, so one bad call never desynchronises
    the stream. NOSCRIPT replies mean those calls did not run: the scripts are loaded and
    those calls sent again. So are calls that did not run because the server is no longer the
    one to write to (:class:`~echomq.transport.unsent.NotRunError`: a failover, a moved slot, a
    refused connection), on the new master, for up to ``resend_for`` seconds; past that their
    slot holds the NotRunError. Any other connection error after a call was sent is raised: the
    calls not yet answered may or may not have run (:class:`CallsOutcomeUnknown` says which).

    ``before_resend(calls, indexes)`` is called before each resend with the indexes of the calls
    about to go again: it may change their args in place (an add learns there that its master
    moved).
    The first pass is the hot path of every add: nothing is read or built for a resend (the
    deadline, the Sentinel watch's epoch) until a call did not run.
    """
    if not calls:
        return []
    for lua, keys, _args in calls:
        lua.check_arity(keys)  # every call, before any I/O
    watch = getattr(client.connection_pool, "sentinel_watch", None)
    epoch = watch.epoch if watch is not None else 0
    try:
        replies = _stream(client, calls)
    except NotRunError as exc:
        replies = [exc] * len(calls)
    if len(replies) == 1:  # one add: no list built to look
        if replies[0].__class__ is not NotRunError:
            return replies
        not_run = [0]
    else:
        not_run = [i for i, reply in enumerate(replies) if reply.__class__ is NotRunError]
        if not not_run:
            return replies
    deadline = time.monotonic() + resend_for
    delay = _RESEND_FIRST_DELAY_S
    while not_run and time.monotonic() + delay <= deadline:
        log.debug("%d call(s) did not run (%s); sending them again", len(not_run), replies[not_run[0]])
        watch = watch or watch_for(client)
        if watch is not None:
            watch.wait_for_change(epoch, delay)
            epoch = watch.epoch
        else:
            time.sleep(delay)
        delay = min(delay * 2, _RESEND_MAX_DELAY_S)
        pending = not_run
        if before_resend is not None:
            before_resend(calls, pending)
        try:
            got = _stream(client, [calls[i] for i in pending])
        except NotRunError as exc:
            got = [exc] * len(pending)
        except CallsOutcomeUnknown as exc:
            for index, reply in zip(pending, exc.replies):
                replies[index] = reply
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            raise CallsOutcomeUnknown(cause, replies) from cause
        not_run = []
        for index, reply in zip(pending, got):
            replies[index] = reply
            if reply.__class__ is NotRunError:
                not_run.append(index)
    return replies


class _NoReply:
    """What stands in a call's slot of :class:`CallsOutcomeUnknown` when no reply came."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The call was never sent (or it was refused before it ran): nothing of it was written.
NOT_SENT: Any = _NoReply("NOT_SENT")
#: The call was sent and its reply never came: it may or may not have run.
UNANSWERED: Any = _NoReply("UNANSWERED")


class CallsOutcomeUnknown(redis.ConnectionError):
    """The connection failed after calls were sent. ``replies`` has a slot per call: the reply
    that came back, :data:`UNANSWERED` for a call sent without a reply (it may or may not have
    run), :data:`NOT_SENT` for one that never left (it did not). The cause is the connection
    error."""

    def __init__(self, cause: BaseException, replies: Sequence[Any]) -> None:
        super().__init__(str(cause))
        self.replies = list(replies)
        self.__cause__ = cause

    @property
    def unknown(self) -> list[int]:
        """The indexes of the calls that may or may not have run."""
        return [i for i, reply in enumerate(self.replies) if reply is UNANSWERED]

    @property
    def not_sent(self) -> list[int]:
        """The indexes of the calls that did not run."""
        return [i for i, reply in enumerate(self.replies) if reply is NOT_SENT]


def _stream(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    """One pass of :func:`run_calls` over one connection (its NOSCRIPT handling included)."""
    pool = client.connection_pool
    cleared = cleared_for(pool)
    conn = checkout(pool)
    replies: list[Any] = []
    started = sent = not_run = False  # a send begun (its bytes may have gone), one done; a reply NotRunError
    sent_upto = 0  # the calls before this index were sent, at least in part
    try:
        if getattr(conn, "_sock", None) is None:
            conn.connect()  # a refusal here means nothing was sent
        for lua, keys, _args in calls:
            if lua.sha not in cleared:  # a bulk has one or two scripts: the first call of each
                preflight(speak_on(conn), lua, keys)
                cleared.add(lua.sha)
        scripts = {lua.sha: (lua, keys) for lua, keys, _args in calls}
        if len(scripts) > 1:
            _load_before_streaming(conn, scripts.values())
        in_flight: deque[int] = deque()
        several = len(calls) > WINDOW
        for start in range(0, len(calls), WINDOW):
            # Each window is built while Redis runs the one before (building them all first
            # would leave the server idle for the whole build).
            window = [lua.command(keys, args) for lua, keys, args in calls[start : start + WINDOW]]
            if pack_command is not None:
                packed: Any = [b"".join([pack_command(command) for command in window])]
            else:
                packed = conn.pack_commands(window)
            started = True
            sent_upto = start + len(window)
            conn.send_packed_command(packed)
            if not sent:
                sent = True
                if several:  # replies are due now: no check before the next window may drop the socket
                    conn.streaming = True
            in_flight.append(len(window))
            if len(in_flight) > 1:
                not_run = _read(conn, in_flight.popleft(), replies, calls) or not_run
        while in_flight:
            not_run = _read(conn, in_flight.popleft(), replies, calls) or not_run
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        conn.disconnect()
        if isinstance(exc, NotRunError) and not sent:
            raise  # refused before its bytes left: a check of the connection's own
        if started:
            slots = replies + [UNANSWERED] * (sent_upto - len(replies)) + [NOT_SENT] * (len(calls) - sent_upto)
            raise CallsOutcomeUnknown(exc, slots) from exc
        raise NotRunError(f"nothing was sent: {exc}", "REFUSED") from exc
    except BaseException:
        conn.disconnect()
        raise
    finally:
        if sent and several:
            with contextlib.suppress(AttributeError):  # a connection class with slots of its own
                conn.streaming = False
        if not_run:
            conn.disconnect()  # the server it is on no longer takes these writes
        pool.release(conn)
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        for lua in {id(calls[i][0]): calls[i][0] for i in missing}.values():
            try:
                client.script_load(lua.source)
            except ResponseError as exc:
                refused = refusal(exc, "script|load", calls[missing[0]][1], lua)
                if refused is None:
                    raise
                raise refused from None
        for i in missing:
            replies[i] = NOT_SENT  # NOSCRIPT: the script did not run
        try:
            again = run_calls(client, [calls[i] for i in missing])
        except CallsOutcomeUnknown as exc:
            for i, reply in zip(missing, exc.replies):
                replies[i] = reply
            raise CallsOutcomeUnknown(exc.__cause__ or exc, replies) from exc.__cause__
        for i, reply in zip(missing, again):
            replies[i] = reply
    return replies


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


def _read(conn: Any, count: int, replies: list[Any], calls: Sequence[Call]) -> bool:
    """Read ``count`` replies into ``replies``; True when one of them says its call did not run."""
    not_run = False
    for _ in range(count):
        try:
            replies.append(conn.read_response(disconnect_on_error=False))
        except NotRunError as exc:  # read without dropping the socket: the next replies are due on it
            replies.append(exc)
            not_run = True
        except ResponseError as exc:
            lua, keys, _args = calls[len(replies)]
            replies.append(refusal(exc, "evalsha", keys, lua) or exc)
    return not_run
