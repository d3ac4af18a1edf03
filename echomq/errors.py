"""The exception tree, and the one table that turns a script's return code into an exception.

One root, ``EchoMQError``; branches by who has to react. Input errors are also ``ValueError``,
"not found" errors are also ``LookupError``, so callers can catch the stdlib class they expect.
``redis.ConnectionError`` and friends pass through untouched: a network fault is redis-py's
story and callers already handle it. A refusal by the server's ACL is the exception:
``PermissionDeniedError`` names what the role lacks, and is still the
``redis.exceptions.NoPermissionError`` that code catching Redis's own refusal expects.

``UnrecoverableError`` is different: user code raises it inside a processor to fail a job at
once, so it is not an ``EchoMQError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError


class EchoMQError(Exception):
    """Root of every error EchoMQ raises about its own operations."""


class InvalidInputError(EchoMQError, ValueError):
    """An argument was rejected before anything was written to Redis."""


class InvalidQueueNameError(InvalidInputError):
    """A queue name is empty, has a ``:`` or has braces."""


class InvalidJobOptionsError(InvalidInputError):
    """A job's name, data or options cannot be stored (not JSON, out of range, bad id ...)."""


class InvalidScheduleError(InvalidInputError):
    """Repeat options cannot describe a schedule: bad cron pattern, unknown zone, every <= 0 ..."""


class NotFoundError(EchoMQError, LookupError):
    """The job or scheduler an operation names does not exist."""


class JobNotFoundError(NotFoundError):
    """The job hash does not exist."""


class SchedulerNotFoundError(NotFoundError):
    """No job scheduler has that id."""


class InvalidStateError(EchoMQError):
    """The job exists but is not in the state the operation needs (e.g. promote a waiting job)."""


class CancelPendingError(InvalidStateError):
    """An exit from ``active`` was refused because a cancel request for the job is pending: the
    worker ends the job as cancelled instead (docs/protocol.md §3.8)."""


class LockError(EchoMQError):
    """The job's lock is missing or held by another worker: this worker no longer owns it."""


class SchedulerConflictError(EchoMQError):
    """A scheduler's next iteration could not be placed (its slot is taken, or too many are)."""


class ScriptError(EchoMQError):
    """A Lua script could not be loaded (bad include, cycle, bad file name) or was misused."""


class PermissionDeniedError(EchoMQError, NoPermissionError):
    """The Redis user's ACL refused a command or a key (docs/security.md).

    ``command`` is what was refused (``"evalsha"``, ``"client|list"``, a command a script
    calls), ``missing`` every command a script needs that the user lacks (when checked before
    the script ran: then nothing was written), ``key_pattern`` the ACL key pattern the role needs
    (``~emq:{orders}:*``; ``""`` when unknown).
    """

    def __init__(self, message: str, *, command: str = "", key_pattern: str = "",
                 missing: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.command = command
        self.key_pattern = key_pattern
        self.missing = tuple(missing) or ((command,) if command else ())


class ConnectionClosedError(EchoMQError):
    """An operation was attempted on a component that was closed."""


class ForkedProcessError(EchoMQError):
    """A thread-owning component was used from a process other than the one that started it."""


class JobFailedError(EchoMQError):
    """The job a caller waits for (``Job.wait_until_finished``) failed for good: its processor
    raised on its last attempt. ``failed_reason`` is the job's ``failedReason``."""

    def __init__(self, job_id: str, failed_reason: str) -> None:
        super().__init__(f"job {job_id!r} failed: {failed_reason}")
        self.job_id = job_id
        self.failed_reason = failed_reason


class JobWaitTimeoutError(EchoMQError, TimeoutError):
    """``Job.wait_until_finished`` gave up: the job did not finish within ``timeout`` seconds
    (it may still finish later; nothing was changed)."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"wait_until_finished: job {job_id!r} did not finish within {timeout} s")
        self.job_id = job_id
        self.timeout = timeout


class ReplicationError(EchoMQError):
    """Fewer replicas than a Queue's ``wait_replicas`` acknowledged an add within its
    ``wait_timeout_ms``. The jobs (``job_ids``) are written on the master and will run; they
    could be lost if the master failed over before a replica got them (docs/deployment.md)."""

    def __init__(self, operation: str, job_ids: Sequence[str], acknowledged: int, required: int,
                 timeout_ms: int, *, why: str = "") -> None:
        shown = ", ".join(map(repr, job_ids[:5])) + (f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else "")
        because = f" ({why})" if why else ""
        super().__init__(
            f"{operation}: job(s) {shown} are written on the master, but only {acknowledged} of {required} "
            f"replica(s) that could be promoted acknowledged them within {timeout_ms} ms{because}: a failover "
            "now could lose them")
        self.job_ids = tuple(job_ids)
        self.acknowledged = acknowledged
        self.required = required
        self.timeout_ms = timeout_ms


class AddOutcomeUnknownError(EchoMQError, RedisConnectionError):
    """The connection failed after an add was sent and before its reply came: the job may or may
    not have been added. Sending the same add again without a ``job_id`` can add it twice; with a
    ``job_id`` it is safe (the second add returns the first job). Adds that certainly did not
    run are sent again by the Queue itself, never raised as this (docs/deployment.md, "When an
    add is sent again"). ``job_ids`` are the jobs that were added (their replies came) before it."""

    def __init__(self, operation: str, unknown: int, job_ids: Sequence[str], cause: BaseException) -> None:
        super().__init__(
            f"{operation}: the connection was lost after {unknown} add(s) were sent ({cause}); they may or may "
            "not have been added: an add sent again without a job_id may add its job twice (docs/deployment.md)")
        self.unknown = unknown
        self.job_ids = tuple(job_ids)


class BulkWriteError(EchoMQError):
    """A bulk add (``Queue.add_bulk``) was written in part: the server refused some of its jobs
    (a missing parent, out of memory ...) or the run was cut (a lost connection, a timeout)
    after some were written. Every index of the bulk is in exactly one of:

    ``written``
        index -> the Job added (its ``id`` as the add returned it: new, existing or the
        deduplication owner), as ``add_bulk`` would have returned it;
    ``refused``
        index -> the exception that refused that job; nothing of it was written;
    ``unknown``
        indexes sent whose reply was lost: each may or may not be written (with a ``job_id``,
        adding it again is safe: an existing id adds nothing);
    ``not_sent``
        indexes never sent: nothing of them was written.

    ``__cause__`` is the first error (the lost connection, the first refusal).
    """

    def __init__(self, operation: str, total: int, written: Mapping[int, Any], refused: Mapping[int, BaseException],
                 unknown: Sequence[int], not_sent: Sequence[int]) -> None:
        self.written = dict(written)
        self.refused = dict(refused)
        self.unknown = tuple(unknown)
        self.not_sent = tuple(not_sent)
        parts = [f"{len(self.written)} of {total} jobs written ({index_ranges(sorted(self.written))})"]
        if self.refused:
            first = min(self.refused)
            parts.append(f"{len(self.refused)} refused ({index_ranges(sorted(self.refused))}; jobs[{first}]: "
                         f"{type(self.refused[first]).__name__}: {self.refused[first]})")
        for indexes, what in ((self.unknown, "sent without a reply, written or not"), (self.not_sent, "not sent")):
            if indexes:
                parts.append(f"{len(indexes)} {what} ({index_ranges(indexes)})")
        super().__init__(f"{operation}: " + ", ".join(parts))

    @property
    def job_ids(self) -> list[str]:
        """The ids of the written jobs, in the bulk's order."""
        return [self.written[index].id for index in sorted(self.written)]


class BulkInterruptedError(BulkWriteError, RedisConnectionError):
    r"""A :class:`BulkWriteError` whose run a lost connection (or a timeout) cut after some jobs
    were written. It is a ``redis.ConnectionError`` too, as the cut is: a loop that retries lost
    connections catches it, and should send again only ``unknown`` and ``not_sent`` (with
    ``job_id``\ s of yours, an unknown one that was written is not added twice)."""


def index_ranges(indexes: Sequence[int]) -> str:
    """Sorted indexes as ``0-599, 602, 610-611`` (jobs[...] of a bulk)."""
    runs: list[str] = []
    start = previous = None
    for index in indexes:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return "jobs " + ", ".join(runs) if runs else "none"


class WrongClusterNodeError(EchoMQError):
    """A plain client (one server: ``redis://``) reached a node of a Redis Cluster that does not
    serve the queue's slot: it answered ``MOVED``. No retry fixes it, so a Worker's run() stops
    with this (docs/deployment.md, "The command line"): give the component a cluster client or
    URL (``redis+cluster://``, or ``--cluster`` on the command line). ``node`` is where the
    client is, ``owner`` the node that serves ``slot``."""

    def __init__(self, what: str, node: str, slot: int, owner: str) -> None:
        super().__init__(
            f"{what}: Redis at {node} is a node of a Redis Cluster, and slot {slot} of the queue is served by "
            f"{owner} (MOVED): give a cluster client or a redis+cluster:// URL (on the command line, --cluster)")
        self.node = node
        self.slot = slot
        self.owner = owner


class UnrecoverableError(Exception):
    """Raise inside a processor to fail the job at once, whatever attempts are left."""


class WaitingChildrenError(Exception):
    """Raise inside a processor after ``job.move_to_waiting_children()`` returned True: the job
    now waits for its children and this attempt records nothing more."""


class JobCancelledError(Exception):
    """The running job was told to stop: ``job.raise_if_cancelled()`` raises it (a subclass says
    why) once ``job.cancelled`` is true (docs/worker.md, "Time limits and cancel"). Like
    ``UnrecoverableError`` it is raised into user code, so it is not an ``EchoMQError``.
    ``reason`` is the text the job's ``failedReason`` gets."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class JobCancelRequestedError(JobCancelledError):
    """``Queue.cancel`` / ``Job.cancel`` asked this job to stop: it fails for good with
    ``failedReason`` ``cancelled: <reason>``, whatever attempts are left."""


class JobSoftTimeLimitError(JobCancelledError):
    """The attempt ran past its soft time limit: raised from ``raise_if_cancelled``, it fails the
    attempt like any exception (retries and backoff apply)."""


class JobHardTimeLimitError(JobCancelledError):
    """The attempt ran past its hard time limit: the worker failed it without waiting for the
    processor (retries and backoff apply); the processor's late result is discarded."""


# Return codes shared by every transition script (protocol: BullMQ's ErrorCode enum).
_SCRIPT_ERRORS: dict[int, tuple[type[EchoMQError], str]] = {
    -1: (JobNotFoundError, "job {job_id!r} does not exist"),
    -2: (LockError, "lock for job {job_id!r} is missing"),
    -3: (InvalidStateError, "job {job_id!r} is not in the {state} state"),
    -4: (InvalidStateError, "job {job_id!r} has pending dependencies"),
    -5: (NotFoundError, "parent job of {job_id!r} does not exist"),
    -6: (LockError, "lock for job {job_id!r} is held by another worker"),
    -7: (InvalidStateError, "parent job of {job_id!r} cannot be replaced"),
    -8: (InvalidStateError, "job {job_id!r} belongs to a job scheduler and cannot be removed directly"),
    -9: (InvalidStateError, "job {job_id!r} has failed children"),
    -10: (SchedulerConflictError, "scheduler {scheduler_id!r}: iteration {job_id!r} already exists"),
    -11: (SchedulerConflictError, "scheduler {scheduler_id!r}: no free slot for the next iteration"),
    -12: (CancelPendingError, "job {job_id!r} is being cancelled (it can only fail as cancelled)"),
}


def raise_for_code(code: int, operation: str, **context: object) -> NoReturn:
    """Raise the exception a script's negative return code stands for, naming the operation."""
    try:
        cls, template = _SCRIPT_ERRORS[int(code)]
    except KeyError:
        raise EchoMQError(f"{operation}: unexpected script result {code!r}") from None
    fields = {"job_id": "?", "scheduler_id": "?", "state": "expected", **context}
    raise cls(f"{operation}: " + template.format(**fields))

