"""``echomq events tail ... | head -2``: the tail stops at once, quietly, when its output closes.

Run as a user runs it: the command in a subprocess whose stdout is a pipe the test reads two
lines from and then closes, as ``head -2`` does. The tail must then exit within a second with
128 + SIGPIPE (what a shell reports for ``yes`` in ``yes | head``) and print nothing on stderr,
whether events keep coming (its next write fails) or none comes (it watches the pipe).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from echomq.protocol.keys import QueueKeys

ROOT = Path(__file__).resolve().parents[2]


def start_tail(server_url: str, queue_name: str, *extra: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.Popen([sys.executable, "-m", "echomq", "events", "tail", "--queue", queue_name,
                             "--redis", server_url, *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def read_two_lines_and_close(tail: subprocess.Popen[bytes]) -> list[bytes]:
    assert tail.stdout is not None
    lines = [tail.stdout.readline(), tail.stdout.readline()]
    tail.stdout.close()  # what head -2 does once it has its lines
    return lines


def wait_exit(tail: subprocess.Popen[bytes], bound: float) -> tuple[int, float, bytes]:
    began = time.monotonic()
    try:
        status = tail.wait(timeout=bound + 10)
    except subprocess.TimeoutExpired:
        tail.kill()
        tail.wait()
        raise AssertionError(f"the tail did not exit within {bound + 10:.0f} s of its output closing") from None
    took = time.monotonic() - began
    assert tail.stderr is not None
    return status, took, tail.stderr.read()


def test_the_exit_status_is_128_plus_sigpipe() -> None:
    from echomq.cli.events import OUTPUT_CLOSED_STATUS

    assert OUTPUT_CLOSED_STATUS == 128 + signal.SIGPIPE == 141


@pytest.mark.parametrize("events_after", ["keep-coming", "none"])
def test_the_tail_exits_quietly_at_once_when_its_output_closes(url_connection: redis.Redis, server_url: str,
                                                               queue_name: str, events_after: str) -> None:
    key = QueueKeys(queue_name).events
    for n in range(3):
        url_connection.xadd(key, {"event": "waiting", "jobId": str(n)})
    tail = start_tail(server_url, queue_name, "--from", "0")
    stop = threading.Event()

    def produce() -> None:  # about 50 events/s until the tail is gone
        n = 3
        while not stop.wait(0.02):
            url_connection.xadd(key, {"event": "waiting", "jobId": str(n)})
            n += 1

    producer = threading.Thread(target=produce, daemon=True)
    try:
        lines = read_two_lines_and_close(tail)
        if events_after == "keep-coming":
            producer.start()
        status, took, stderr = wait_exit(tail, 1.0)
    finally:
        stop.set()
        if producer.is_alive():
            producer.join(5)
        if tail.poll() is None:
            tail.kill()
    assert [line.split()[1:3] for line in lines] == [[b"waiting", b"job=0"], [b"waiting", b"job=1"]]
    assert status == 141, stderr
    assert took < 1.0, f"exited {took:.2f} s after its output closed"
    assert stderr == b""


def test_a_tail_whose_output_stays_open_keeps_running(url_connection: redis.Redis, server_url: str,
                                                      queue_name: str) -> None:
    """The watch on the output reports a closed pipe only: an open one is left alone."""
    key = QueueKeys(queue_name).events
    tail = start_tail(server_url, queue_name, "--from", "0", "--limit", "3")
    try:
        assert tail.stdout is not None
        url_connection.xadd(key, {"event": "waiting", "jobId": "0"})
        assert tail.stdout.readline().split()[1:3] == [b"waiting", b"job=0"]
        time.sleep(0.3)  # several rounds of the watch with the pipe open and nothing to print
        assert tail.poll() is None
        url_connection.xadd(key, {"event": "waiting", "jobId": "1"})
        url_connection.xadd(key, {"event": "waiting", "jobId": "2"})
        assert tail.wait(timeout=10) == 0
        assert len(tail.stdout.read().splitlines()) == 2
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
