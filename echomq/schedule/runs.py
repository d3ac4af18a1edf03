"""An iteration runs at most once per slot, even when a failover loses its completion.

A scheduler's iteration ``repeat:<id>:<slot>`` becomes active, the worker step places the next
one, the processor runs and the job is completed: if the master fails over before those writes
reached the replica that takes over, the new master still holds the iteration as pending (or
active), and a worker would take it and run the same slot again. A worker remembers the
iterations it ran (:class:`IterationRuns`, the last :data:`REMEMBERED` of them, with their
results): one it takes again is completed with the result it had, without running the
processor again, and logged as a WARNING. The worker step is still sent for it, so a next
iteration the failover lost is placed again (docs/protocol.md §4.4: the step is idempotent, the
repair places the same id: they agree).

This covers the worker that ran it being handed it again (the stalled check gave it back
after its lock expired on the new master). That the iteration is not handed out again at all,
to any worker, is the worker's own sending again of its finishes after the move
(echomq/worker/master_moves.py, docs/deployment.md, "Jobs and schedules").
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: How many iterations a worker remembers (a few per scheduler at any rate).
REMEMBERED = 1024


class IterationRuns:
    """The iterations one worker ran, with each result as stored (JSON text); thread-safe."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._size = size
        self._runs: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def ran(self, job_id: str, value: str) -> None:
        with self._lock:
            self._runs[job_id] = value
            self._runs.move_to_end(job_id)
            while len(self._runs) > self._size:
                self._runs.popitem(last=False)

    def result_of(self, job_id: str) -> str | None:
        """The stored result of ``job_id`` if this worker ran it, else None."""
        with self._lock:
            return self._runs.get(job_id)
