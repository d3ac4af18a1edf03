"""Adding jobs: one add, a bulk, a flow, and what each reports when the server or the link fails.

A :class:`JobAdder` is the producer half of a Queue: it plans each add as data
(``AddPlanner``), hands the calls to transport's executor (``stream_calls.run_calls``), and
turns the replies into Jobs or into the error that says exactly what was written:

* one add: its refusal raised as is; a reply lost with the connection
  ``AddOutcomeUnknownError`` (it may have run), a call that never left the connection error;
* a bulk: ``BulkWriteError`` sorting every job into written / refused / unknown / not sent;
* every add carries the producer's highest id (``add_book``): a counter a failover or a
  restart set back is moved past it, and the adds it lost are reported;
* meta ``version`` is stamped after the first write, and ``wait_replicas`` confirmed last.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import redis

from ..errors import (
    AddOutcomeUnknownError,
    BulkInterruptedError,
    BulkWriteError,
    EchoMQError,
    InvalidInputError,
    PermissionDeniedError,
)
from ..protocol.keys import QueueKeys
from ..protocol.limits import DataLimits
from ..transport.refusals import refusals
from ..transport.stream_calls import NOT_SENT, UNANSWERED, CallsOutcomeUnknown, run_calls
from ..transport.unsent import NotRunError
from ..types import Clock
from .add_book import AddBook
from .enqueue import AddCall, AddPlanner, check_add_result, job_spec
from .flows import add_flow
from .job import Job
from .replication import confirm_replicas

log = logging.getLogger(__name__)

#: An add's ARGV with ARGV[14] (lua/includes/prepareNewJob.lua): the one that says a move was seen.
_ADD_ARGS_MOVED = 14


class JobAdder:
    """The adds of one Queue (see the module doc); ``planner`` holds its default job options."""

    def __init__(self, client: redis.Redis, keys: QueueKeys, planner: AddPlanner, *, clock: Clock,
                 data_limits: DataLimits, meta_version: str, wait_replicas: int | str, wait_timeout_ms: int,
                 describe: Callable[[], str]) -> None:
        self.client = client
        self.keys = keys
        self.planner = planner
        self.clock = clock
        self.data_limits = data_limits
        self.meta_version = meta_version
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.book = AddBook(keys.queue_name)
        self._describe = describe
        self._planners = {keys.queue_name: planner}
        self._pool = client.connection_pool
        self._meta_written = False

    def add(self, name: str, data: Any, opts: Mapping[str, Any]) -> Job:
        call = self.planner.prepare(name, data, opts)
        book = self.book
        args = call.args  # the call's own list: extended in place, not copied
        args += book.floor_args(getattr(self._pool, "master_moves", 0) != book.moves_seen)
        try:
            [reply] = run_calls(self.client, [(call.script, call.keys, args)], before_resend=self._before_resend)
        except CallsOutcomeUnknown as exc:
            cause = exc.__cause__ or exc
            if exc.unknown:
                raise AddOutcomeUnknownError("add", 1, [], cause) from cause
            raise cause from None  # nothing was sent: the connection error itself
        if isinstance(reply, Exception):
            raise reply
        job = self._job_for(call, self._added_id(call, reply))
        self._after_move_if_any()
        if not self._meta_written:
            self._stamp_meta()
        if self.wait_replicas:
            self._confirm("add", [job.id])
        return job

    def add_bulk(self, jobs: Iterable[Mapping[str, Any] | Sequence[Any]]) -> list[Job]:
        if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
            raise InvalidInputError(f"add_bulk: jobs={jobs!r:.100} must be a list of jobs")
        prepare = self.planner.prepare
        calls: list[AddCall] = []
        for index, item in enumerate(jobs):
            try:
                calls.append(prepare(*job_spec(item)))
            except InvalidInputError as exc:
                raise type(exc)(f"add_bulk: jobs[{index}]: {exc}") from None
        book = self.book
        moved = getattr(self._pool, "master_moves", 0) != book.moves_seen
        floor = book.floor_args()
        for index, call in enumerate(calls):  # each call's own list: extended in place, not copied
            call.args.extend(book.floor_args(True) if moved and not index else floor)
        try:
            replies = run_calls(self.client, [(call.script, call.keys, call.args) for call in calls],
                                before_resend=self._before_resend)
        except CallsOutcomeUnknown as exc:
            raise self._bulk_error(calls, exc.replies, exc.__cause__ or exc) from exc.__cause__
        for reply in replies:
            if isinstance(reply, (Exception, int)):  # a refusal or an error code: not written whole
                raise self._bulk_error(calls, replies, None)
        added = [self._job_for(call, job_id) for call, job_id in zip(calls, book.handed_many(replies, calls))]
        if calls:
            self._after_move_if_any()
        if added:
            self._stamp_meta()
            self._confirm("add_bulk", [job.id for job in added])
        return added

    def add_flow(self, queue_name: str, parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> Job:
        root = add_flow(self.client, self._planner_for, queue_name, parent, children)
        self._stamp_meta()
        self._confirm("add_flow", [root.id])
        return root

    def reset(self) -> None:
        """The queue was obliterated: the ids this producer saw name nothing any more."""
        self.book.reset()

    # -- what a reply means --------------------------------------------------------------------
    def _job_for(self, call: AddCall, job_id: str) -> Job:
        job = Job(self.client, self.keys, job_id, name=call.name, data=call.data,
                  opts=call.stored_opts, timestamp=call.timestamp, clock=self.clock)
        job.data_limits = self.data_limits
        return job

    def _added_id(self, call: AddCall, reply: Any) -> str:
        """The id an add script's reply hands out: its error codes raised, a counter it moved
        past this producer's highest id reported (add_book.py)."""
        if isinstance(reply, int):
            return check_add_result(reply, call)
        return self.book.handed(reply, call.custom_id)

    def _bulk_error(self, calls: Sequence[AddCall], outcome: Sequence[Any], cut: BaseException | None) -> BaseException:
        """What a bulk that was not written whole raises: BulkWriteError sorting every job into
        written / refused / unknown / not sent (a call the transport could not send for a
        failover under way, :class:`NotRunError`, did not run: not sent); the first error itself
        when nothing was (or may have been) written."""
        written: dict[int, Job] = {}
        refused: dict[int, BaseException] = {}
        unknown: list[int] = []
        not_sent: list[int] = []
        for index, (call, reply) in enumerate(zip(calls, outcome)):
            if reply is UNANSWERED:
                unknown.append(index)
            elif reply is NOT_SENT or isinstance(reply, NotRunError):
                not_sent.append(index)
            elif isinstance(reply, Exception):
                refused[index] = reply
            elif isinstance(reply, int):
                try:
                    check_add_result(reply, call)
                except EchoMQError as exc:
                    refused[index] = exc
            else:
                written[index] = self._job_for(call, self._added_id(call, reply))
        if cut is not None:
            first: BaseException = cut
        elif refused:
            first = refused[min(refused)]
        else:
            first = outcome[not_sent[0]]
        if written:
            self._stamp_meta()
        elif not unknown:
            return first
        self._after_move_if_any()
        kind = BulkInterruptedError if cut is not None else BulkWriteError
        error = kind("add_bulk", len(calls), written, refused, unknown, not_sent)
        error.__cause__ = first
        return error

    # -- around the adds ---------------------------------------------------------------------
    def _before_resend(self, calls: Sequence[Any], pending: Sequence[int]) -> None:
        """For run_calls: before adds are sent again (they did not run: a failover under way),
        the first of them carries ARGV[14] = "1" if the master moved meanwhile (add_book.py)."""
        if getattr(self._pool, "master_moves", 0) != self.book.moves_seen and pending:
            first = calls[pending[0]][2]
            if len(first) == _ADD_ARGS_MOVED - 1:
                first.append("1")
            else:
                first[_ADD_ARGS_MOVED - 1] = "1"

    def _after_move_if_any(self) -> None:
        """After the first adds past a master move the transport told of (they moved the counter
        past the failover, add_book.py): report this producer's adds in the gap the producers left."""
        moves = getattr(self._pool, "master_moves", 0)
        if moves != self.book.moves_seen:
            self.book.moves_seen = moves
            with refusals("add", [self.keys.meta]):
                self.book.check_gap(self.client, self.keys.meta)

    def _stamp_meta(self) -> None:
        """Stamp meta ``version`` once, after this producer's first write, as BullMQ's Queue stamps
        its own (docs/protocol.md §1.2): bull-board and operators see who writes the queue. Not
        at construction, which does no I/O (a Queue built at import time must not block), and
        not before the first add, which the server may refuse (nothing of a refused call is
        written). The jobs are written by then: a stamp that fails is logged and tried again at
        the next add, never raised (the caller would take the add for failed and add it again)."""
        if self._meta_written:
            return
        try:
            with refusals("add", [self.keys.meta]):
                self.client.hset(self.keys.meta, "version", self.meta_version)
        except PermissionDeniedError as exc:
            log.warning("%s: meta version not stamped, the role may not HSET it: %s", self._describe(), exc)
        except (redis.RedisError, OSError) as exc:
            log.debug("%s: meta version not stamped (tried again at the next add): %s", self._describe(), exc)
            return
        self._meta_written = True

    def _confirm(self, operation: str, job_ids: Sequence[str]) -> None:
        """With ``wait_replicas``, wait for the replicas to hold what was just added."""
        if self.wait_replicas:
            confirm_replicas(self.client, self.keys, self.meta_version, job_ids, self.wait_replicas,
                             self.wait_timeout_ms, operation=operation)

    def _planner_for(self, queue_name: str) -> AddPlanner:
        planner = self._planners.get(queue_name)
        if planner is None:
            planner = AddPlanner(QueueKeys(queue_name, self.keys.prefix), clock=self.clock, limits=self.data_limits)
            self._planners[queue_name] = planner
        return planner
