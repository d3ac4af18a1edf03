"""Running ``echomq worker`` as an operator does: a subprocess, signalled, its stderr read.

``WorkerCommand`` starts ``python -m echomq worker ...`` with tests/ on its PYTHONPATH (so
``support.sample_jobs`` imports), collects stderr in a thread, and lets a test wait for a log
line, signal the process, and read the jobs' traces from Redis.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

from echomq import Queue

from support import workers
from support.sample_jobs import results_key

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def traces(client: redis.Redis, queue: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in client.lrange(results_key(queue), 0, -1)]


def add_jobs(client: redis.Redis, queue: str, count: int, name: str = "record", **data: Any) -> list[str]:
    jobs = Queue(client, queue).add_bulk(
        [{"name": name, "data": {"results": results_key(queue), "n": n, **data}} for n in range(count)])
    return [job.id for job in jobs]


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, interval: float = 0.05) -> bool:
    """``support.workers.wait_until`` with the longer patience a subprocess needs."""
    return bool(workers.wait_until(predicate, timeout, interval))


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


#: How the subprocess runs the command: ``python -m echomq worker``.
ECHOMQ_WORKER = ("-m", "echomq", "worker")


class WorkerCommand:
    """One ``echomq worker`` subprocess (``program``: the interpreter's arguments before ``argv``)."""

    def __init__(self, argv: Sequence[str], *, queues: Sequence[str] = (), env: dict[str, str] | None = None,
                 program: Sequence[str] = ECHOMQ_WORKER, prefix: Sequence[str] = (),
                 new_session: bool = False, cwd: Path = ROOT) -> None:
        environment = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        environment["PYTHONPATH"] = os.pathsep.join([str(TESTS), environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if queues:
            environment["SAMPLE_APP_QUEUES"] = ",".join(queues)
        environment.update(env or {})
        # ``prefix``: a program the command runs under (``timeout 5``); ``new_session``: its own
        # session and process group, as systemd and a container runtime start it (killpg reaches it all).
        self.process = subprocess.Popen([*prefix, sys.executable, *program, *argv], cwd=cwd, env=environment,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=new_session)
        self.lines: list[str] = []
        self._seen_children: dict[int, bytes] = {}  # pid -> its command line, as first seen
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 20.0, count: int = 1) -> bool:
        return wait_until(lambda: sum(text in line for line in self.lines) >= count, timeout)

    def group_alive(self) -> bool:
        """Whether any process of its process group (``new_session``) is still there."""
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def killpg(self, signum: int = signal.SIGTERM) -> None:
        """Signal the whole process group (it must have been started with ``new_session``), as
        systemd's KillMode=control-group and ``kill -TERM -PGID`` do."""
        os.killpg(self.process.pid, signum)

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        status = self.process.wait(timeout)
        self._reader.join(5)
        return status

    def stop(self) -> None:
        """Make sure it is gone, and its worker processes with it (a test that failed half-way
        leaves no process behind)."""
        if self.process.poll() is None:
            self.children()  # remembered below
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        for pid in self._seen_children:  # orphans too: a supervisor killed without stopping them
            with contextlib.suppress(ProcessLookupError):
                if _parent_of(pid) in (self.pid, 1) and _cmdline(pid) == self._seen_children[pid]:
                    os.kill(pid, signal.SIGKILL)
        self._reader.join(5)

    def children(self) -> list[int]:
        """The pids of its worker processes (a supervisor's children), from /proc; each is
        remembered, so ``stop`` ends it even after its supervisor is gone."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _parent_of(int(entry.name)) == self.pid:
                found.append(int(entry.name))
                self._seen_children.setdefault(int(entry.name), _cmdline(int(entry.name)))
        return sorted(found)

    def __enter__(self) -> WorkerCommand:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
