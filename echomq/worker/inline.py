"""A Worker driven from the caller's thread, one attempt at a time (for ``echomq.testing``).

The Worker is built as usual but never runs: no fetcher loop, no processor threads, no
maintenance thread, no marker wait. Each attempt takes exactly the path it takes in ``run()``:
moveToActive with the worker's clock (which promotes due delayed jobs first), then
``AttemptRunner.process`` (the scheduler step, the processor, the final move that also fetches
the next job), so retries, backoff, scheduler iterations and flows behave as in production.
Locks are taken and released within the call; nothing is left to the stalled check.
"""

from __future__ import annotations

import itertools

from .transitions import Fetched
from .worker import Worker


class InlineWorker:
    """Takes and runs the jobs of ``worker``'s queue in the calling thread."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._tokens = itertools.count(1)

    def take(self) -> tuple[Fetched, str]:
        """One moveToActive now (by the worker's clock): the job taken, if any, and its lock token."""
        token = f"{self.worker.id}:{next(self._tokens)}"
        return self.worker.transitions.move_to_active(token, self.worker.clock()), token

    def run(self, fetched: Fetched, token: str, *, fetch_next: bool = True) -> Fetched | None:
        """Run one attempt of the job ``fetched`` and record its outcome as the Worker does;
        return the next job its final move took (``fetch_next``), which holds the same token."""
        stop = self.worker._stop  # never set otherwise: this worker never runs
        if not fetch_next:
            stop.set()  # the final move of a closing worker: it takes no next job
        try:
            return self.worker._runner.process(fetched, token)
        finally:
            stop.clear()

    def take_no_next_job(self) -> None:
        """From the processor of the attempt running now: its final move takes no next job (the
        caller is about to stop, and a job taken would be left active)."""
        self.worker._stop.set()

    def release(self) -> None:
        """Give back the connection the transitions pinned to this thread."""
        self.worker.transitions.release_thread_connection()
