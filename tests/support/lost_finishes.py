"""A worker whose last finishes and last take a failover loses, step by step.

``LostFinishes`` runs one Worker (concurrency 6) whose processor waits for the test to release
each job by name, so the test decides which writes happen when:

* before anything is lost: ``a`` completes (its fetch-next takes ``a2``), everything is on the
  replicas (``WAIT``);
* ``lose_from_here()`` stops the replicas (SIGSTOP) and cuts the master's links to them (CLIENT
  KILL TYPE replica): a stopped replica cannot connect again, so what the master takes from
  then on reaches none of them, and a kill -9 loses it;
* then ``j`` completes and its fetch-next takes ``n`` (a take that is lost too), ``f`` fails for
  good, ``d`` fails with a retry 300 ms later (moveToDelayed), and the scheduler's iteration
  ``tick`` completes, each acknowledged to the worker;
* the test kills the master (``resume_replicas()`` after) and waits for the promotion; ``r``,
  ``a2`` and ``n``, running all along, are released after it.

Every processor run is counted: each job must run once (``d`` twice: its retry) and finish on
the new master. A test of a failover that loses nothing (planned) skips ``lose_from_here``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from echomq.errors import UnrecoverableError
from echomq.protocol.codec import text
from echomq.protocol.keys import QueueKeys
from echomq.queue.queue import Queue
from echomq.schedule.scheduler import JobScheduler
from echomq.worker.listeners import WorkerListener
from echomq.worker.worker import Worker

from support.workers import wait_until

#: The jobs of the scenario, by name (the scheduler's iteration is named "tick").
NAMES = ("a", "a2", "r", "j", "n", "f", "d", "tick")


class _Told(WorkerListener):
    def __init__(self) -> None:
        self.finished: set[str] = set()

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        self.finished.add(job.name)

    def on_failed(self, job: Any, error: BaseException, *, duration_ms: float, final: bool, **_: Any) -> None:
        self.finished.add(job.name)


class LostFinishes:
    """The scenario of the module docstring on ``client_factory``'s topology."""

    def __init__(self, client_factory: Callable[[], Any], queue_name: str, *, lock_duration: int = 10000) -> None:
        self._clients: list[Any] = []
        self.keys = QueueKeys(queue_name)
        self.runs: Counter[str] = Counter()  # job name -> processor runs
        self.ids: dict[str, str] = {}
        self.gates = {name: threading.Event() for name in NAMES}
        self.told = _Told()
        self.queue = Queue(self._client(client_factory), queue_name)
        self.scheduler = JobScheduler(self._client(client_factory), queue_name)
        self.worker = Worker(self._client(client_factory), queue_name, self._process, concurrency=6,
                             lock_duration=lock_duration, stalled_interval=1000, drain_delay=1.0,
                             listeners=[self.told])
        self._thread = threading.Thread(target=self.worker.run, name="lost-finishes-worker", daemon=True)
        self._lock = threading.Lock()

    def _client(self, factory: Callable[[], Any]) -> Any:
        client = factory()
        self._clients.append(client)
        return client

    def _process(self, job: Any) -> Any:
        with self._lock:
            self.runs[job.name] += 1
            self.ids[job.name] = job.id
        if not self.gates[job.name].wait(60):
            raise RuntimeError(f"job {job.name} was never released")
        if job.name == "f":
            raise UnrecoverableError("f fails for good")
        if job.name == "d" and job.attempts_made == 0:
            raise RuntimeError("d fails once")
        return job.name

    def running(self, *names: str) -> bool:
        with self._lock:
            return all(self.runs[name] for name in names)

    def release(self, *names: str) -> None:
        for name in names:
            self.gates[name].set()

    def start(self, master: Any) -> None:
        """Everything up to the point where the failover may start losing writes."""
        self._thread.start()
        for name in ("a", "r", "j", "f"):
            self.queue.add(name)
        self.queue.add("d", attempts=2, backoff={"type": "fixed", "delay": 300})
        self.scheduler.upsert("tick", {"every": 60_000}, "tick")
        assert wait_until(lambda: self.running("a", "r", "j", "f", "d", "tick"), timeout=20), dict(self.runs)
        self.queue.add("a2")
        self.release("a")  # its fetch-next takes a2
        assert wait_until(lambda: self.running("a2") and "a" in self.told.finished, timeout=20)
        self.queue.add("n")  # every slot is busy: n waits
        assert master.call("WAIT", 1, 5000) >= 1, "the replica never acknowledged the writes so far"

    def lose_from_here(self, master: Any, replicas: list[Any]) -> None:
        """Stop the replicas and cut their links: what the master takes next reaches none of them."""
        for replica in replicas:
            replica.pause()
        assert master.cut_replica_links() == len(replicas)

    def finish_some(self) -> None:
        """``j`` (its fetch-next takes ``n``), then ``f``, ``d`` and ``tick``, each acknowledged."""
        self.release("j")
        assert wait_until(lambda: self.running("n") and "j" in self.told.finished, timeout=20)
        self.release("f", "d", "tick")
        assert wait_until(lambda: {"f", "d", "tick"} <= self.told.finished, timeout=20), self.told.finished

    def finish_all(self, reader: Any, timeout: float = 20.0) -> dict[str, str]:
        """Release the rest and wait until every job is finished on ``reader``'s master: each
        job's state there (completed / failed / ...), by name."""
        self.release(*NAMES)

        def states() -> dict[str, str]:
            return {name: self.state_of(reader, job_id) for name, job_id in self.ids.items()}

        wait_until(lambda: self.runs["d"] >= 2 and all(
            state in ("completed", "failed") for state in states().values()), timeout=timeout)
        return states()

    def state_of(self, reader: Any, job_id: str) -> str:
        k = self.keys
        for state, found in (("completed", lambda: reader.zscore(k.completed, job_id) is not None),
                             ("failed", lambda: reader.zscore(k.failed, job_id) is not None),
                             ("active", lambda: job_id in map(text, reader.lrange(k.active, 0, -1))),
                             ("delayed", lambda: reader.zscore(k.delayed, job_id) is not None),
                             ("waiting", lambda: job_id in map(text, reader.lrange(k.wait, 0, -1)))):
            if found():
                return state
        return "missing"

    def close(self) -> None:
        self.release(*NAMES)
        self.worker.close(10)
        self._thread.join(15)
        for client in self._clients:
            client.close()


def moves_of(worker: Worker) -> Any:
    """The worker's record of its finishes after a failover (None on code that has none)."""
    return getattr(worker.transitions, "moves", None)

