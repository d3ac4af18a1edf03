"""Waiting for one job to finish: the request/response pattern over a queue (docs/queue.md).

The finish is learnt from the queue's events (a ``QueueEvents``, taken by its shape, see
``types.EventReader``) and, for a finish that came before we listened, from the job itself,
so none is missed:

1. note the newest entry of the events stream: only a ``completed``/``failed`` written after it
   counts (a reader replaying old entries must not report the failure a retry since undid);
2. subscribe, then read the job: already in ``completed`` or ``failed`` ends the wait at once.
   A job whose hash is gone may have been removed by its own finish (``remove_on_complete``),
   so its finish is looked for in the entries written since step 1;
3. wait for the event: in the reader's thread when it runs (``start()``), else by stepping
   the reader here with ``run_once``, each step blocking no longer than the time left. A gap
   notice (entries trimmed unread) makes us read the job again, as the event may be lost.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import redis

from ..errors import InvalidInputError, JobFailedError, JobNotFoundError, JobWaitTimeoutError
from ..protocol.codec import json_or_text, text
from ..protocol.events import EventType, GapNotice, decode_entry
from ..protocol.keys import QueueKeys
from ..types import EventReader

#: Longest wait between two looks at a running reader: one that was closed meanwhile is noticed.
_SLICE_S = 1.0
#: Stream entries read per call when looking for a finish written since the wait began.
_SCAN_COUNT = 500

#: ("completed", return value) or ("failed", failedReason).
Outcome = tuple[str, Any]


def _stream_id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class _Watch:
    """The subscriber: keeps the first finish of the job written after ``since``."""

    def __init__(self, job_id: str, since: str) -> None:
        self.job_id = job_id
        self.since = since
        self._after = _stream_id(since)
        self.outcome: Outcome | None = None
        self.recheck = False
        self.ready = threading.Event()
        self._lock = threading.Lock()

    def on_event(self, event_type: Any, data: dict[str, Any]) -> None:
        if isinstance(event_type, GapNotice):
            with self._lock:
                self.recheck = True
                self.ready.set()
            return
        outcome = _finish_of(self.job_id, event_type, data)
        entry_id = data.get("event_id")
        if outcome is not None and (not isinstance(entry_id, str) or _stream_id(entry_id) > self._after):
            with self._lock:
                if self.outcome is None:
                    self.outcome = outcome
                self.ready.set()

    def take_recheck(self) -> bool:
        """True once after a gap notice (and the wait may block again)."""
        with self._lock:
            recheck, self.recheck = self.recheck, False
            if self.outcome is None:
                self.ready.clear()
            return recheck


def _finish_of(job_id: str, event_type: Any, data: dict[str, Any]) -> Outcome | None:
    if data.get("jobId") != job_id:
        return None
    if event_type is EventType.COMPLETED:
        return "completed", data.get("returnvalue")
    if event_type is EventType.FAILED:
        return "failed", data.get("failedReason", "")
    return None


def _check_timeout(timeout: Any) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout < 0:
        raise InvalidInputError(f"wait_until_finished: timeout={timeout!r} must be None (no limit) or a number of "
                                "seconds >= 0")


def wait_until_finished(client: redis.Redis, keys: QueueKeys, job_id: str, events: EventReader,
                        timeout: float | None) -> Any:
    """The job's return value once it completes; JobFailedError once it fails for good;
    JobWaitTimeoutError after ``timeout`` seconds (None: no limit); JobNotFoundError when the
    job is gone and no finish of it was written since the call began."""
    _check_timeout(timeout)
    if getattr(events, "events_key", None) != keys.events:
        raise InvalidInputError(f"wait_until_finished: {events!r} does not read the events of queue "
                                f"{keys.queue_name!r} ({keys.events})")
    deadline = None if timeout is None else time.monotonic() + timeout
    watch = _Watch(job_id, _newest_entry(client, keys))
    events.subscribe(watch.on_event)
    try:
        if not events.running:
            _step(events, 0.0)  # a reader never stepped resolves "$" now, before the job is read
        outcome = watch.outcome or _stored_outcome(client, keys, job_id, watch.since)
        while outcome is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise JobWaitTimeoutError(job_id, timeout if timeout is not None else 0.0)
            if events.running:
                watch.ready.wait(_SLICE_S if left is None else min(left, _SLICE_S))
            else:
                _step(events, left)
            outcome = watch.outcome
            if outcome is None and watch.take_recheck():
                outcome = _stored_outcome(client, keys, job_id, watch.since)
    finally:
        events.unsubscribe(watch.on_event)
    state, value = outcome
    if state == "failed":
        raise JobFailedError(job_id, value)
    return value


def _step(events: EventReader, left: float | None) -> None:
    """One ``run_once`` in this thread, blocking at most ``left`` seconds (at least 1 ms:
    ``BLOCK 0`` would block for ever)."""
    block_ms = events.block_ms
    if left is not None:
        events.block_ms = max(1, min(block_ms, math.ceil(left * 1000)))
    try:
        events.run_once()
    finally:
        events.block_ms = block_ms


def _newest_entry(client: redis.Redis, keys: QueueKeys) -> str:
    newest = client.xrevrange(keys.events, "+", "-", count=1)
    return text(newest[0][0]) if newest else "0-0"


def _stored_outcome(client: redis.Redis, keys: QueueKeys, job_id: str, since: str) -> Outcome | None:
    """The finish the job's keys record now, None while it has not finished."""
    pipe = client.pipeline(transaction=True)
    pipe.hmget(keys.job(job_id), "returnvalue", "failedReason")
    pipe.exists(keys.job(job_id))
    pipe.zscore(keys.completed, job_id)
    pipe.zscore(keys.failed, job_id)
    (value, reason), exists, completed, failed = pipe.execute()
    if not exists:
        found = _finish_since(client, keys, job_id, since)
        if found is None:
            raise JobNotFoundError(f"wait_until_finished: job {job_id!r} does not exist (never added, removed, "
                                   "or removed when it finished, before this wait began)")
        return found
    if completed is not None:
        return "completed", None if value is None else json_or_text(text(value))
    if failed is not None:
        return "failed", "" if reason is None else text(reason)
    return None


def _finish_since(client: redis.Redis, keys: QueueKeys, job_id: str, since: str) -> Outcome | None:
    """The job's finish among the stream entries written after ``since``, if there is one."""
    start = since
    while True:
        entries = client.xrange(keys.events, start, "+", count=_SCAN_COUNT) or []
        for raw_id, fields in entries:
            entry_id = text(raw_id or "")
            if entry_id == start or fields is None:  # XRANGE includes its start: seen already
                continue
            event_type, data = decode_entry(entry_id, fields)
            outcome = _finish_of(job_id, event_type, data)
            if outcome is not None:
                return outcome
        if len(entries) < _SCAN_COUNT:
            return None
        start = text(entries[-1][0] or "")
