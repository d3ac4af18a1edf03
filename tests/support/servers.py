"""redis-server processes a test starts and stops, and the free ports they listen on.

Shared by tests/conftest.py (its fixtures) and by tests that start servers of their own; kept
out of the conftest so that test modules import it by a name no other conftest shadows.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis


def ping(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


#: Where test servers listen: below Linux's ephemeral range (32768-60999), so a port handed out
#: here is never the local port of some client connection, and drawn at random, so that the
#: pytest-xdist workers of one run and concurrent runs on the same machine rarely pick the same one.
PORT_RANGE = (20000, 32000)
_handed_out: set[int] = set()
_random = random.Random()


def free_port() -> int:
    """A port nothing listens on now, never handed out before by this process.

    Another process can still take it before our server binds it: :meth:`RedisServer.start`
    checks that the server answering is its own process and tries again elsewhere if not."""
    while True:
        port = _random.randrange(*PORT_RANGE)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port


def serves_pid(url: str, pid: int) -> bool:
    """True when the Redis answering at ``url`` is the process ``pid`` (not another run's server
    that took the port first)."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)
        try:
            return int(client.info("server")["process_id"]) == pid
        finally:
            client.close()
    except (redis.RedisError, KeyError, ValueError):
        return False


@dataclass
class RedisServer:
    """A redis-server process this test session owns: it can be killed and started again."""

    port: int
    dir: Path
    persistent: bool = True
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    started: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        """Start the server. At its first start, if another process took the port first, on
        another free port; a restart keeps its port (the test holds its URL)."""
        for _attempt in range(1 if self.started else 5):
            if self._start_once():
                self.started = True
                return self
            if self.started:
                break
            self.port = free_port()
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def _start_once(self) -> bool:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                "--save", "", "--daemonize", "no", "--logfile", str(self.dir / "redis.log")]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        process = self.process
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            if ping(self.url):
                if serves_pid(self.url, process.pid):
                    return True
                break  # someone else's server on this port: ours cannot bind it
            time.sleep(0.02)
        self.stop()
        return False

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-conversation, as in a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: a server that hangs on shutdown still goes."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
