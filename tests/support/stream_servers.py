"""redis-servers for the stream readers' tests (restartable, without persistence, with a skewed
clock) and what those tests watch a reader with (``EventLog``).

A server restarted empty with its clock behind is what issue 24.5 measured: its stream ids start
below a reader's cursor. Nothing on the machine skews a clock (libfaketime is not installed), so
the rig builds its own: a small preload library, compiled here with the machine's C compiler
into a cache directory, that shifts what ``gettimeofday``, ``clock_gettime`` (the real-time
clocks only: the monotonic ones Redis times its own work with stay true) and ``time`` return by
``ECHOMQ_CLOCK_OFFSET_MS``. A test checks the server's ``TIME`` before it trusts the skew.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from echomq import GapNotice

from support.servers import RedisServer, free_port, ping

CLOCK_OFFSET_VARIABLE = "ECHOMQ_CLOCK_OFFSET_MS"

_SKEW_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long offset_us(void) {
    const char *value = getenv("ECHOMQ_CLOCK_OFFSET_MS");
    return value ? atoll(value) * 1000LL : 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *, void *);
    if (!real) real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0 && tv) {
        long long us = (long long)tv->tv_sec * 1000000LL + tv->tv_usec + offset_us();
        tv->tv_sec = us / 1000000LL;
        tv->tv_usec = us % 1000000LL;
    }
    return rc;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clock, ts);
    if (rc == 0 && ts && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_us() * 1000LL;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (out) *out = tv.tv_sec;
    return tv.tv_sec;
}
"""


def skew_library() -> Path:
    """The preload library (built once per source version, in the temp dir, by ``cc``)."""
    digest = hashlib.sha1(_SKEW_SOURCE.encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"echomq-clock-skew-{digest}.so"
    if target.exists():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build the clock-skew library with")
    with tempfile.TemporaryDirectory(prefix="echomq-skew-") as tmp:
        source = Path(tmp) / "skew.c"
        source.write_text(_SKEW_SOURCE)
        built = Path(tmp) / "skew.so"
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(source), "-ldl"],
                       check=True, capture_output=True, timeout=60)
        os.replace(built, target)  # atomic: a concurrent build of the same source is as good
    return target


@dataclass
class StreamServer(RedisServer):
    """A redis-server without persistence that a test kills and starts again, each time with
    the clock offset it is given (``offset_ms`` < 0: behind the machine's clock)."""

    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="echomq-streams-")))
    persistent: bool = False
    offset_ms: int = 0

    def start(self, offset_ms: int = 0) -> StreamServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if offset_ms:
            env["LD_PRELOAD"] = str(skew_library())
            env[CLOCK_OFFSET_VARIABLE] = str(offset_ms)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--logfile", str(self.dir / "redis.log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        self.offset_ms = offset_ms
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if ping(self.url):
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start; see {self.dir / 'redis.log'}")

    def restart_empty(self, offset_ms: int = 0) -> StreamServer:
        """kill -9 (nothing is persisted), then start again with ``offset_ms``."""
        self.kill()
        return self.start(offset_ms)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, **kwargs)

    def clock_offset_ms(self) -> int:
        """The server's clock (TIME) minus ours, in ms: what a test asserts before relying on it."""
        client = self.client()
        try:
            seconds, micros = client.time()
        finally:
            client.close()
        return int(seconds * 1000 + micros // 1000 - time.time() * 1000)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class EventLog:
    """A subscriber that keeps every event id and notice, in delivery order, and waits for them."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def __call__(self, event_type: Any, data: dict[str, Any]) -> None:
        with self.cond:
            self.items.append((event_type, data))
            self.cond.notify_all()

    def ids(self) -> list[str]:
        with self.cond:
            return [d["event_id"] for t, d in self.items if not isinstance(t, GapNotice)]

    def notices(self) -> list[GapNotice]:
        with self.cond:
            return [t for t, _ in self.items if isinstance(t, GapNotice)]

    def wait_for(self, predicate: Callable[[EventLog], bool], what: str, timeout: float = 20.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: predicate(self), timeout):
                raise AssertionError(f"timed out waiting for {what}: {len(self.ids())} events, "
                                     f"notices {self.notices()}")

    def wait_for_count(self, count: int, timeout: float = 15.0) -> None:
        """Until at least ``count`` events (notices aside) were delivered."""
        self.wait_for(lambda log: len(log.ids()) >= count, f"{count} events", timeout)

    def wait_for_ids(self, wanted: list[str], timeout: float = 20.0) -> None:
        """Until every id of ``wanted`` was delivered."""
        want = set(wanted)
        self.wait_for(lambda log: want <= set(log.ids()), f"{len(wanted)} events", timeout)


def xadd_many(client: redis.Redis, key: str, count: int, *, first: int = 0, maxlen: int | None = None) -> list[str]:
    """``count`` entries with automatic ids (the server's clock), pipelined; their ids."""
    with client.pipeline(transaction=False) as pipe:
        for n in range(first, first + count):
            pipe.xadd(key, {"event": "waiting", "jobId": str(n)}, maxlen=maxlen, approximate=False)
        return [entry_id.decode() if isinstance(entry_id, bytes) else entry_id for entry_id in pipe.execute()]
