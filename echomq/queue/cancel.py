"""Cancelling a job from any process (docs/protocol.md §3.8, docs/worker.md "Time limits and cancel").

One script call, ``cancelJob``: a job that has not started is failed for good on the spot and
never runs; a running one gets a request, ``<job>:cancel``, that its worker reads within a
fraction of a second and ends the job with. The outcome says which, or why nothing was written,
so the CLI and a dashboard can tell a user why a cancel did nothing.
"""

from __future__ import annotations

import enum

import redis

from ..errors import InvalidInputError, raise_for_code
from ..protocol import job_hash
from ..protocol.codec import decode_hash, sendable_text
from ..protocol.keys import QueueKeys
from ..protocol.limits import CANCEL_TTL_MS
from ..protocol.options import keep_args
from ..transport.calls import run_script
from ..transport.scripts import script

#: The reason stored when the caller gives none.
DEFAULT_REASON = "no reason given"

#: The longest reason accepted: it ends up in ``failedReason``, every event reader's memory and logs.
MAX_REASON_CHARS = 1000


class CancelOutcome(enum.Enum):
    """What one cancel did. ``done`` is what ``Queue.cancel`` returns."""

    FAILED = "failed"  #: it had not started: taken out and failed for good
    TOLD = "told"  #: it runs: its worker is told and ends it as cancelled
    PENDING = "pending"  #: it runs and was told already: nothing written
    FINISHED = "finished"  #: completed or failed already: nothing written
    WAITING_CHILDREN = "waiting-children"  #: a flow parent waiting for its children: nothing written
    MISSING = "missing"  #: no such job: nothing written

    @property
    def done(self) -> bool:
        return self in (CancelOutcome.FAILED, CancelOutcome.TOLD)

    @property
    def explained(self) -> str:
        """What a user is told of it (the CLI's ``job cancel``, the dashboard's Cancel)."""
        return _EXPLAINED[self]


_EXPLAINED = {
    CancelOutcome.FAILED: "it had not started: taken out and failed, it will not run",
    CancelOutcome.TOLD: "it is running: its worker is told and ends it as cancelled",
    CancelOutcome.PENDING: "a cancel of it is under way already",
    CancelOutcome.FINISHED: "it finished already",
    CancelOutcome.WAITING_CHILDREN: "it waits for its children: cancel them, or remove it",
    CancelOutcome.MISSING: "there is no such job",
}


def failed_reason(reason: str) -> str:
    """The ``failedReason`` of a cancelled job: ``cancelled: <reason>`` (one home for the text)."""
    return f"cancelled: {reason}"


def checked_reason(reason: object) -> str:
    """The reason to store: the caller's text, or DEFAULT_REASON for None."""
    if reason is None:
        return DEFAULT_REASON
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInputError(f"cancel: reason={reason!r:.100} must be a non-empty str or None")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInputError(f"cancel: reason of {len(reason)} characters: at most {MAX_REASON_CHARS}")
    return sendable_text(reason)


def cancel_job(client: redis.Redis, keys: QueueKeys, job_id: str, reason: object, now_ms: int) -> CancelOutcome:
    """Cancel ``job_id`` (see the module's docstring); never raises for a job's state."""
    text_reason = checked_reason(reason)
    # The keep rule on failure is the job's own (no worker is involved): read once here, where
    # protocol.options reads every stored rule (a job removed meanwhile makes the script say -1).
    stored = decode_hash({"opts": client.hget(keys.job(job_id), "opts") or b""})
    count, age, limit = keep_args(job_hash.stored_opts(stored).get("removeOnFail"))
    lua = script("cancelJob")
    code = int(run_script(client, lua, lua.keys_for(keys, job_id),
                          [job_id, text_reason, failed_reason(text_reason), now_ms, keys.job_prefix, CANCEL_TTL_MS,
                           count, age, limit]))
    if code == 1:
        return CancelOutcome.FAILED
    if code == 2:
        return CancelOutcome.TOLD
    if code == 0:
        return CancelOutcome.PENDING
    if code == -1:
        return CancelOutcome.MISSING
    if code == -3:
        waiting = client.zscore(keys.key("waiting-children"), job_id) is not None
        return CancelOutcome.WAITING_CHILDREN if waiting else CancelOutcome.FINISHED
    raise_for_code(code, "cancel", job_id=job_id)
