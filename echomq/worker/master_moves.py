"""After a failover: what the new master may not have of this worker's recent work, sent again.

Replication is asynchronous: a finish (moveToFinished, moveToDelayed, retryJob) the old master
acknowledged may not have reached the replica that took over. There the job is still active,
locked with this worker's token until the lock expires, and then the stalled check (any
worker's) hands it out again: it runs twice. The same holds for a take: a job this worker took
(moveToActive, or the fetch-next inside a finish) and is running may be back in wait on the new
master, for the next worker to take.

So a Worker keeps a bounded record of its finishes (:class:`MasterMoves`: the last
:data:`MAX_RECORDS`, and only those of the last ``lock_duration`` ms are sent again: an older
lock is gone from the new master, whose stalled check may have taken the job already). When its
connection may have moved (any connection error on the worker's scripts sets ``suspect``, the
transport counts a move on the pool: a Sentinel switch, a slot that moved, and a lock renewal
that finds locks gone asks too), the next script call of any of its threads first *settles*: it
reads who the server is (``INFO`` run id and replication id; where INFO is refused, the counted
moves alone tell), and on a change, before anything else is sent:

1. every recorded finish of a job this worker is not running now is sent again, as it was (same
   token, timestamp, result or failure), without its fetch-next, after a ``reclaimJob`` of its
   take (the take may be lost too: the job is then still waiting on the new master, and is
   taken back first, with the same token, processedOn and ats). The finish script refuses one
   the new master has (the job is not active with that token: it finished, or was retried and
   taken by another token), and that refusal is the expected answer, logged at DEBUG only; one
   it takes (the failover had lost it) is logged as a WARNING;
2. every job this worker is running is held again (``reclaimJob``): a take the new master lost is
   taken again with the same token, so the job's own finish is accepted there.

``reclaimJob`` tells the worker's take from a later one by the job hash as the take left it
(processedOn, ats): a job that finished and was retried since is left alone, except one retried
with ``reset_attempts_started`` in its first attempt, which looks like a lost first take and is
taken (and completed with the result of the run before the retry).

Only then does the worker take new work, renew its locks or run the stalled check. A job's
newest record is the one sent (a job retried and taken again by the same token would otherwise
get an old result); a job running here now is left to its own finish.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import redis

from ..protocol.keys import QueueKeys
from ..transport.cluster import replica_answered
from ..transport.scripts import LuaScript, script
from ..transport.stream_calls import run_calls
from ..transport.unsent import NotRunError
from ..types import Clock

log = logging.getLogger(__name__)

#: The most finishes a worker remembers (a few seconds at full rate: the replication lag a
#: failover can lose is milliseconds to a second), and the most bytes of results and failures
#: they may hold together (the oldest go first).
MAX_RECORDS = 10_000
MAX_RECORD_BYTES = 32 * 1024 * 1024
#: A finish holding at most this many bytes of result and failure is kept on the lock-free path
#: (the last MAX_RECORDS of them: 40 MiB at most); larger ones are counted against
#: MAX_RECORD_BYTES, apart.
SMALL_RECORD_BYTES = 4096

#: A finish as recorded: job id, token, the take's processedOn, ats and job timestamp, its own
#: timestamp (epoch ms),
#: the bytes of result and failure it holds, then what the worker's Transitions need to build the
#: call again (``rebuild``). Atoms only: the garbage collector does not walk thousands of them.
Record = tuple[Any, ...]
#: A call as the executor takes it: script, keys, args.
Call = tuple[LuaScript, Sequence[str], Sequence[Any]]

#: Who the server is: its run id and replication id (None when INFO does not tell).
Identity = tuple[str, str] | None


class Settling(NamedTuple):
    """What one settling after a move did: the jobs whose finish was sent again and taken, those
    whose finish was refused (the new master had it), the running jobs held again."""

    resent: list[str]
    refused: list[str]
    reclaimed: list[str]


class MasterMoves:
    """One Worker's record of its finishes, and the settling after a master move (see the module
    docstring). ``held`` names the jobs the worker runs now, with their tokens."""

    def __init__(self, client: redis.Redis, keys: QueueKeys, *, lock_duration: int, clock: Clock,
                 rebuild: Callable[[Record], Call]) -> None:
        self.client = client
        self._rebuild = rebuild
        self.keys = keys
        self.lock_duration = lock_duration
        self.clock = clock
        #: Set by any connection error on the worker's scripts: the master may have moved.
        self.suspect = False
        #: The jobs the worker runs now: token, and the take's processedOn, ats and the job's
        #: timestamp (LockRegistry.held).
        self.held: Callable[[], Mapping[str, tuple[str, str, str, str]]] = dict
        self.records: deque[Record] = deque(maxlen=MAX_RECORDS)
        self.large_records: deque[Record] = deque()
        self._bytes = 0
        self._records_lock = threading.Lock()
        self._lock = threading.Lock()
        self._identity: Identity = None
        self._info_refused = False
        self._moves_seen = self._moves()
        self._reclaim = script("reclaimJob").bind(keys)
        #: What the settlings after a move did, the last 16, newest last (for logs and tests).
        self.settlings: deque[Settling] = deque(maxlen=16)
        self.settled = 0

    @property
    def resent(self) -> list[str]:
        """The last settling's finishes sent again and taken (none yet: [])."""
        return self.settlings[-1].resent if self.settlings else []

    @property
    def refused(self) -> list[str]:
        return self.settlings[-1].refused if self.settlings else []

    @property
    def reclaimed(self) -> list[str]:
        return self.settlings[-1].reclaimed if self.settlings else []

    def _read_identity(self) -> Identity:
        """The server's run id and replication id, or None where INFO is missing (fakeredis) or
        refused (an ACL without it: asked once, then never again) or says neither. A new process
        (a restart, another node) has a new run id; a node that was resynced or promoted has a new
        replication id. A replica is not asked who it is (a demoted master answers INFO, which no
        slot routes): NotRunError, asked again later."""
        if self._info_refused:
            return None
        pipe = self.client.pipeline(transaction=False)
        pipe.info("server")
        pipe.info("replication")
        try:
            server, replication = pipe.execute()
        except redis.ResponseError as exc:
            self._info_refused = True
            log.debug("worker %s: INFO refused (%s): a failover is told by Sentinel and Cluster moves only",
                      self.keys.queue_name, exc)
            return None
        if replication.get("role") == "slave":
            replica_answered(self.client)  # a slot that moved without a MOVED: ask the cluster again
            raise NotRunError("the server is a replica now: the new master is not reached yet", "READONLY")
        run_id, replid = server.get("run_id"), replication.get("master_replid")
        if not run_id or not replid:
            return None
        return str(run_id), str(replid)

    def _moves(self) -> int:
        return int(getattr(self.client.connection_pool, "master_moves", 0))

    def record(self, record: Record) -> None:
        """The hot path: a finish the server acknowledged, one tuple appended (the oldest go past
        :data:`MAX_RECORDS`; those holding more than :data:`SMALL_RECORD_BYTES` are kept apart,
        the oldest going past :data:`MAX_RECORD_BYTES`)."""
        size = record[4]
        if size <= SMALL_RECORD_BYTES:
            self.records.append(record)
            return
        with self._records_lock:
            large = self.large_records
            large.append(record)
            self._bytes += size
            while len(large) > MAX_RECORDS or self._bytes > MAX_RECORD_BYTES:
                self._bytes -= large.popleft()[4]

    def settle(self, *, force: bool = False) -> None:
        """If the master may have moved (``suspect``, a move the transport counted, or ``force``):
        find out, and after a move send again what the new master may lack. A connection error
        propagates with ``suspect`` still set: the caller's retry settles again."""
        if not (self.suspect or force or self._moves() != self._moves_seen):
            return
        with self._lock:
            moves = self._moves()
            if not (self.suspect or force or moves != self._moves_seen):
                return  # another thread settled meanwhile
            identity = self._read_identity()
            known = self._identity
            if identity is not None and known is not None:
                moved = identity != known  # who the server is decides; a counted move only asks
            else:
                moved = moves != self._moves_seen or (known is None and identity is not None and bool(self.records))
            if moved:
                self.send_again(identity)
            self._identity = identity if identity is not None else known
            self._moves_seen = moves
            self.suspect = False

    def send_again(self, identity: Identity = None) -> None:
        """What settling does after a move (public for tests): send the recent finishes again and
        hold the running jobs again, on the server the client talks to now."""
        now = self.clock()
        held = dict(self.held())
        latest: dict[str, Record] = {}
        with self._records_lock:
            records = [*self.records, *self.large_records]
        if self.large_records:
            records.sort(key=lambda record: int(record[3]))  # by timestamp: the two kinds in one order
        for record in reversed(records):
            job_id = record[0]
            if now - int(record[3]) > self.lock_duration:
                break  # older ones are older still: their locks are gone from the new master
            if job_id not in held and job_id not in latest:
                latest[job_id] = record
        finishes = list(reversed(latest.values()))
        calls: list[Call] = []
        for record in finishes:
            # the take first: a finish whose take was lost too is accepted once the take is back
            calls.append(self._reclaim_call(record[0], record[1], *record[2]))
            calls.append(self._rebuild(record))
        running = sorted(held)
        for job_id in running:
            token, *stamp = held[job_id]
            calls.append(self._reclaim_call(job_id, token, *stamp))
        replies = run_calls(self.client, calls)
        for reply in replies:
            if isinstance(reply, NotRunError):
                raise reply  # the new master is not reachable yet: settled again at the next call
        resent: list[str] = []
        refused: list[str] = []
        taken: list[str] = []
        for index, record in enumerate(finishes):
            reply = replies[2 * index + 1]
            refused_here = isinstance(reply, Exception) or (isinstance(reply, int) and reply < 0)
            (refused if refused_here else resent).append(record[0])
        for job_id, reply in zip(running, replies[2 * len(finishes):]):
            if reply in (1, 2):
                taken.append(job_id)
            elif reply != 0:
                log.debug("worker %s: job %s is no longer this worker's on the new master (%r)", self.keys.queue_name,
                          job_id, reply)
        self.settlings.append(Settling(resent, refused, taken))
        self.settled += 1
        where = "a new master" if identity is None else f"server {identity[0][:12]}"
        log.info("worker %s: the master changed (now %s): %d recent finish(es) checked, %d running job(s) held",
                 self.keys.queue_name, where, len(finishes), len(running))
        if refused:
            log.debug("worker %s: the new master had %d of them already: %s", self.keys.queue_name, len(refused),
                      ", ".join(refused[:20]))
        if resent:
            log.warning("worker %s: the failover had lost %d finish(es) of this worker; sent again: %s",
                        self.keys.queue_name, len(resent), ", ".join(resent[:20]))
        if taken:
            log.warning("worker %s: the failover had lost the take of %d running job(s); held again: %s",
                        self.keys.queue_name, len(taken), ", ".join(taken[:20]))

    def _reclaim_call(self, job_id: str, token: str, processed_on: str = "", ats: str = "",
                      timestamp: str = "") -> Call:
        return (self._reclaim.script, self._reclaim.for_job(job_id),
                [job_id, token, self.lock_duration, processed_on, ats, timestamp])
