"""The worker side of the job lifecycle: one method per transition script, nothing else.

Every call is one round trip. The scripts take flat ARGV (no msgpack: fakeredis has none), in
the order documented in each script's header; their KEYS are bound from the header once per
Worker. Results are decoded here so the Worker and the maintenance loop deal in Python values:
a ``Fetched`` after moveToActive or a fetch-next, lists of ids after the lock and stalled
scripts, exceptions for negative codes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ..errors import raise_for_code
from ..protocol.codec import decode_hash, encode_json, int_or_none, text
from ..protocol.keys import QueueKeys
from ..protocol.options import keep_args
from ..transport.calls import PinnedConnection, run_script
from ..transport.cluster import wrong_node
from ..transport.connection import CONNECTION_ERRORS, uses_tls
from ..transport.scripts import BoundKeys, script
from .master_moves import MasterMoves, Record
from .options import WorkerOptions
from .shared_pipe import SharedPipe

#: What tells a worker's script call that its server may no longer be the master it was: a lost
#: or refused connection, a moved slot or demoted master (transport's NotRunError is one), a
#: READONLY reply from a plain client's server that became a replica.
_MAYBE_MOVED: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.ReadOnlyError)

#: The kinds of finish a worker records (MasterMoves.record).
_FINISHED, _DELAYED, _RETRIED = 0, 1, 2


@dataclass(slots=True)
class Fetched:
    """What moveToActive (or a fetch-next) handed over.

    ``job_id`` is None when no job was taken; then ``rate_limit_ms`` says how long the
    limiter holds jobs back and ``next_due_ms`` when the earliest delayed job is due (0: none).
    """

    job_id: str | None
    hash: dict[str, str] = field(default_factory=dict)
    rate_limit_ms: int = 0
    next_due_ms: int = 0


NOTHING = Fetched(None)


def _flat_hash(raw: Any) -> dict[str, str]:
    # The hot path: HGETALL inside a script always comes back as a flat list of bytes (str when
    # the client decodes); decoding inline and pairing with one iterator costs a third less.
    if raw.__class__ is list:
        try:
            values = iter([v.decode("utf-8", "replace") for v in raw])
        except AttributeError:  # a client that decodes replies: str already
            values = iter([text(v) for v in raw])
        return dict(zip(values, values))
    return decode_hash(raw)


def parse_fetched(result: Any) -> Fetched:
    if not isinstance(result, (list, tuple)) or len(result) < 4:
        return NOTHING
    raw, job_id, rate_limit, next_due = result[0], result[1], result[2], result[3]
    if isinstance(raw, (list, tuple, dict)):
        return Fetched(text(job_id), _flat_hash(raw))
    return Fetched(None, {}, int(rate_limit or 0), int_or_none(text(next_due or 0)) or 0)


def _fields_arg(fields: Sequence[str]) -> str:
    """The ``[field, value ...]`` the script HSETs first, as it takes them ("" for none)."""
    return encode_json(list(fields), ascii_only=True) if fields else ""


class Transitions:
    """Runs the worker's transition scripts for one queue on one client.

    Thread-safe: the hot-path scripts go over a connection pinned per thread
    (``transport.calls.PinnedConnection``) or, with ``concurrency`` > 1, over one connection
    all threads share (``shared_pipe.SharedPipe``); the rest through the client's pool; the
    scripts carry all state. Every finish is recorded, and after a failover the next call of
    any thread first sends again what the new master lacks (``moves``, master_moves.py).
    """

    def __init__(self, client: redis.Redis, keys: QueueKeys, options: WorkerOptions) -> None:
        self.client = client
        self.keys = keys
        self.options = options
        self._fetch_args = options.fetch_args()
        self._job_prefix = keys.job_prefix  # a property that builds the string: read once
        self._finish_tail = [*self._fetch_args, options.metrics_arg()]  # moveToFinished's ARGV[14..18]
        self._local = threading.local()
        # Every thread's pinned connection, by thread id, so close() can cut a call stuck on a
        # server that stopped answering (interrupt_threads); filled once per thread, off the hot path.
        self._pinned: dict[int, PinnedConnection | SharedPipe] = {}
        # concurrency > 1: every thread's hot-path calls share one connection, batched while one
        # is in flight (shared_pipe.py); one thread has nothing to batch and keeps its own. Not
        # over TLS: one thread writing while another reads the same SSL object is a race inside
        # OpenSSL (seen as EAGAIN and lost replies), so each thread pins its own TLS socket.
        self._shared = SharedPipe(client) if options.concurrency > 1 and not uses_tls(client) else None
        self._pinned_lock = threading.Lock()
        # One processing thread: poll briefly for each reply rather than sleep (reply_wait.py).
        self._spin_s = options.reply_spin_us / 1e6 if options.concurrency == 1 else 0.0
        # Key lists bound once: the hot path only fills in the job's own keys.
        self._active = script("moveToActive").bind(keys)
        self._finished: dict[str, BoundKeys] = {
            target: script("moveToFinished").bind(keys, finished=target) for target in ("completed", "failed")
        }
        self._delayed = script("moveToDelayed").bind(keys)
        self._retry = script("retryJob").bind(keys)
        self._extend = script("extendLocks").bind(keys)
        self._stalled = script("moveStalledJobsToWait").bind(keys)
        self.moves = MasterMoves(client, keys, lock_duration=options.lock_duration, clock=options.clock,
                                 rebuild=self.replay_call)

    def _run(self, bound: BoundKeys, keys: Sequence[str], args: Sequence[Any]) -> Any:
        moves = self.moves
        if moves.suspect:  # a connection error since the last call: settle first (master_moves.py)
            self._settle(moves)
        pinned = getattr(self._local, "pinned", None)
        if pinned is None:
            pinned = self._local.pinned = self._shared or PinnedConnection(self.client, spin_s=self._spin_s)
            with self._pinned_lock:
                self._pinned[threading.get_ident()] = pinned
        try:
            return pinned(bound.script, keys, args)
        except _MAYBE_MOVED:
            moves.suspect = True
            raise
        except redis.ResponseError as exc:
            self._raise_if_wrong_node(exc)
            raise

    def _raise_if_wrong_node(self, exc: redis.ResponseError) -> None:
        """MOVED on a plain client: a cluster node that does not serve the queue, which no retry
        fixes (the caller's loop would retry it forever): WrongClusterNodeError instead."""
        wrong = wrong_node(self.client, exc, f"worker {self.keys.queue_name}")
        if wrong is not None:
            raise wrong from exc

    def settle(self, *, force: bool = False) -> bool:
        """Settle now (``force``: ask who the server is even without a reason); True when that
        found a move and sent again what the new master lacked."""
        before = self.moves.settled
        self._settle(self.moves, force=force)
        return self.moves.settled != before

    @staticmethod
    def _settle(moves: MasterMoves, *, force: bool = False) -> None:
        try:
            moves.settle(force=force)
        except _MAYBE_MOVED:
            moves.suspect = True
            raise

    def release_thread_connection(self) -> None:
        """Give this thread's connection back to the pool (at the thread's end); the shared
        one goes back with the last thread that used it."""
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            with self._pinned_lock:
                self._pinned.pop(threading.get_ident(), None)
                last = all(other is not pinned for other in self._pinned.values())
            if last:
                pinned.release()
            self._local.pinned = None

    def interrupt_threads(self, idents: Iterable[int | None]) -> None:
        """Cut the call each of these threads may be blocked in on its connection (from
        close(), once Redis stopped answering): the call fails with a connection error. On the
        shared connection that fails the whole batch in flight; each caller retries its own."""
        with self._pinned_lock:
            pinned = {id(c): c for c in (self._pinned[i] for i in idents if i is not None and i in self._pinned)}
        for connection in pinned.values():
            connection.interrupt()

    # -- taking jobs ------------------------------------------------------------------------
    def move_to_active(self, token: str, now_ms: int) -> Fetched:
        args = [self._job_prefix, now_ms, token, *self._fetch_args]
        return parse_fetched(self._run(self._active, self._active.keys, args))

    # -- finishing an attempt ---------------------------------------------------------------
    def move_to_finished(
        self,
        job_id: str,
        token: str,
        now_ms: int,
        *,
        completed: bool,
        value: str,
        keep: Any,
        attempts: int,
        fetch_next: bool,
        fields: Sequence[str] = (),
        taken: tuple[str, str, str] = ("", "", ""),
        cancelling: bool = False,
    ) -> Fetched | None:
        """Complete (value = return value JSON) or finally fail (value = failed reason).
        Returns the next job's Fetched when fetch_next took one (or learnt the next due time).
        ``taken`` (processedOn, ats of the take) goes into the record of the finish, which
        tells this take from another if it must be sent again after a failover. ``cancelling``:
        this failure is the job's cancellation, the one exit a pending cancel request allows
        (docs/protocol.md §3.8); any other is refused with CancelPendingError."""
        target = "completed" if completed else "failed"
        count, age, limit = keep_args(keep)
        fields_json = _fields_arg(fields)
        bound = self._finished[target]
        keys = bound.for_job(job_id)
        result = self._run(bound, keys, self._finished_args(job_id, token, now_ms, target, value, count, age, limit,
                                                            str(int(attempts)), fields_json, fetch_next, cancelling))
        if isinstance(result, int) and result < 0:
            raise_for_code(result, f"move job to {target}", job_id=job_id, state="active")
        # atoms only, no list: a record the garbage collector need not walk (master_moves.py)
        self.moves.record((job_id, token, taken, now_ms, len(value) + len(fields_json), _FINISHED, target, value,
                           count, age, limit, str(int(attempts)), fields_json, cancelling))
        return None if isinstance(result, int) else parse_fetched(result)

    def _finished_args(self, job_id: str, token: str, now_ms: int, target: str, value: str, count: str, age: str,
                       limit: str, attempts: str, fields_json: str, fetch_next: bool,
                       cancelling: bool = False) -> list[Any]:
        return [job_id, now_ms, "returnvalue" if target == "completed" else "failedReason", value, target,
                "1" if fetch_next else "0", self._job_prefix, token, count, age, limit, attempts, fields_json,
                *self._finish_tail, "1" if cancelling else ""]

    def move_to_delayed(
        self, job_id: str, token: str, now_ms: int, delay_ms: int, *, fields: Sequence[str] = (),
        fetch_next: bool = False, taken: tuple[str, str, str] = ("", "", ""),
    ) -> Fetched | None:
        fields_json = _fields_arg(fields)
        keys = self._delayed.for_job(job_id)
        result = self._run(self._delayed, keys, self._delayed_args(job_id, token, now_ms, int(delay_ms), fields_json,
                                                                   fetch_next))
        if isinstance(result, int) and result < 0:
            raise_for_code(result, "move job to delayed", job_id=job_id, state="active")
        self.moves.record((job_id, token, taken, now_ms, len(fields_json), _DELAYED, int(delay_ms), fields_json))
        return None if isinstance(result, int) else parse_fetched(result)

    def _delayed_args(self, job_id: str, token: str, now_ms: int, delay_ms: int, fields_json: str,
                      fetch_next: bool) -> list[Any]:
        return [self._job_prefix, now_ms, job_id, token, delay_ms, "0", fields_json, "1" if fetch_next else "0",
                *self._fetch_args]

    def retry(self, job_id: str, token: str, now_ms: int, *, lifo: bool = False,
              fields: Sequence[str] = (), taken: tuple[str, str, str] = ("", "", "")) -> None:
        keys = self._retry.for_job(job_id)
        fields_json = _fields_arg(fields)
        push = "RPUSH" if lifo else "LPUSH"
        result = self._run(self._retry, keys, [self._job_prefix, now_ms, push, job_id, token, fields_json])
        if isinstance(result, int) and result < 0:
            raise_for_code(result, "retry job", job_id=job_id, state="active")
        self.moves.record((job_id, token, taken, now_ms, len(fields_json), _RETRIED, push, fields_json))

    def replay_call(self, record: Record) -> tuple[Any, Sequence[str], list[Any]]:
        """The call a recorded finish was, without its fetch-next (master_moves.py sends it again)."""
        job_id, token, _taken, now_ms, _size, kind, *rest = record
        if kind == _FINISHED:
            target, value, count, age, limit, attempts, fields_json, cancelling = rest
            bound = self._finished[target]
            return bound.script, bound.for_job(job_id), self._finished_args(
                job_id, token, now_ms, target, value, count, age, limit, attempts, fields_json, False, cancelling)
        if kind == _DELAYED:
            delay_ms, fields_json = rest
            return self._delayed.script, self._delayed.for_job(job_id), self._delayed_args(
                job_id, token, now_ms, delay_ms, fields_json, False)
        push, fields_json = rest
        return self._retry.script, self._retry.for_job(job_id), [self._job_prefix, now_ms, push, job_id, token,
                                                                 fields_json]

    # -- maintenance ------------------------------------------------------------------------
    def extend_locks(self, tokens: Mapping[str, str]) -> list[str]:
        """Renew every lock in ``{job_id: token}``; return the ids whose lock is lost."""
        if not tokens:
            return []
        args: list[Any] = [self.keys.job_prefix, self.options.lock_duration]
        for job_id, token in tokens.items():
            args += [job_id, token]
        failed = self._maintain(self._extend, args)
        return [text(x) for x in failed or []]

    def move_stalled_to_wait(self, max_stalled_count: int, interval_ms: int, now_ms: int) -> list[str]:
        moved = self._maintain(self._stalled, [max_stalled_count, self.keys.job_prefix, now_ms, interval_ms])
        return [text(x) for x in moved or []]

    def _maintain(self, bound: BoundKeys, args: Sequence[Any]) -> Any:
        """A maintenance script, on the client's pool: after a connection error or a move the
        transport counted, what the new master lacks is sent again first (master_moves.py). A
        renewal that finds locks gone asks who the server is itself (Maintenance.renew_locks):
        the pool's redis-py may have reconnected to a new server unseen."""
        self._settle(self.moves)
        try:
            return run_script(self.client, bound.script, bound.keys, args)
        except _MAYBE_MOVED:
            self.moves.suspect = True
            raise
        except redis.ResponseError as exc:
            self._raise_if_wrong_node(exc)
            raise
