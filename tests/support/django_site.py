"""The test Django project (tests/django_project) run as its operators run it: ``manage.py``
commands, runserver and gunicorn as subprocesses, and who holds which events reader.

A reader's connection is named ``<prefix>:<base64 of {queue}>:qe`` (docs/protocol.md §1.1), so
CLIENT LIST says how many readers a queue has. To say *which process* holds one, the client
port CLIENT LIST reports is matched against the sockets each process has open (``/proc``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import redis

from echomq.protocol.keys import QueueKeys

from support import workers

PROJECT = Path(__file__).resolve().parents[1] / "django_project"


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.1) -> bool:
    """``support.workers.wait_until`` with the longer patience a subprocess needs."""
    return bool(workers.wait_until(predicate, timeout, interval))


def manage(*argv: str, env: Mapping[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGV`` in the project folder, as an operator types it."""
    return subprocess.run([sys.executable, "manage.py", *argv], cwd=PROJECT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)


def reader_ports(client: redis.Redis, queue: str, prefix: str) -> list[int]:
    """The client ports of the queue's events readers (real Redis says ``127.0.0.1:5432``,
    fakeredis ``('127.0.0.1', 5432)``: the port is the last number either way)."""
    name = QueueKeys(queue, prefix).client_name(":qe")
    return [int(re.findall(r"\d+", entry["addr"])[-1]) for entry in client.client_list() if entry.get("name") == name]


def readers(client: redis.Redis, queue: str, prefix: str) -> int:
    return len(reader_ports(client, queue, prefix))


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of the sockets process ``pid`` has open."""
    inodes = _socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[9]) in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


def readers_by_process(client: redis.Redis, queue: str, prefix: str, pids: list[int]) -> dict[int, int]:
    """How many of the queue's readers each of ``pids`` holds."""
    ports = reader_ports(client, queue, prefix)
    return {pid: len(local_ports(pid) & set(ports)) for pid in pids}


class Server:
    """A long-running process of the project (runserver, gunicorn) in a session of its own, so
    stopping it stops its children too (the reloader's child, gunicorn's workers). What it
    prints goes to ``log``."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log: Path, *, cwd: Path = PROJECT) -> None:
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def children(self) -> list[int]:
        return children_of(self.pid)

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL to whatever is left after the leader exits."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                continue
