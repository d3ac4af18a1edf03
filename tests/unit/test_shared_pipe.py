"""The shared pipe gives every lost connection back to its pool, and never while another thread
may still write to it. A fake connection and pool make the interleaving exact: one thread reads
the first batch's replies while another sends the second; the read fails; the sender's send,
begun before the loss, goes on (redis-py reconnects a disconnected connection to send). The
connection goes back only after that send, disconnected again, so no later user of the pool
meets the stale calls on it. (tests/faults/test_connection_storm.py does it on a real server.)
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from echomq.worker.shared_pipe import SharedPipe


class FakeConnection:
    """Records what is done to it; the n-th send waits for ``send_gates[n]`` if there is one,
    reads wait for ``read_gate`` and then fail as a killed connection does."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.sends = 0
        self.send_gates: dict[int, threading.Event] = {}
        self.sending: dict[int, threading.Event] = {}
        self.read_gate = threading.Event()
        self.reading = threading.Event()

    def pack_command(self, *args: Any) -> list[bytes]:
        return [repr(args).encode()]

    def send_packed_command(self, packed: Any, check_health: bool = True) -> None:
        self.sends += 1
        number = self.sends
        self.log.append(f"send {number} begins")
        self.sending.setdefault(number, threading.Event()).set()
        gate = self.send_gates.get(number)
        if gate is not None:
            assert gate.wait(5)
        self.log.append(f"send {number} ends")

    def read_response(self, disconnect_on_error: bool = True) -> Any:
        self.reading.set()
        assert self.read_gate.wait(5)
        raise redis.ConnectionError("Connection closed by server.")

    def disconnect(self) -> None:
        self.log.append("disconnect")


class FakePool:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn
        self.released: list[FakeConnection] = []
        self.checked_out = 0

    def get_connection(self) -> FakeConnection:
        self.checked_out += 1
        return self.conn

    def release(self, conn: FakeConnection) -> None:
        self.conn.log.append("released")
        self.released.append(conn)


class FakeClient:
    def __init__(self, pool: FakePool) -> None:
        self.connection_pool = pool


def call_in_thread(pipe: SharedPipe, outcomes: list[BaseException | None]) -> threading.Thread:
    def call() -> None:
        try:
            pipe._command("PING")
            outcomes.append(None)
        except BaseException as exc:  # the test looks at what each call got
            outcomes.append(exc)
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def test_a_lost_connection_goes_back_to_the_pool() -> None:
    conn = FakeConnection()
    conn.read_gate.set()
    pool = FakePool(conn)
    pipe = SharedPipe(FakeClient(pool))  # type: ignore[arg-type]
    with pytest.raises(redis.ConnectionError):
        pipe._command("PING")
    assert pool.released == [conn]  # not left counted as in use: the pool's cap would fill up
    assert conn.log == ["send 1 begins", "send 1 ends", "disconnect", "disconnect", "released"]
    assert pipe.conn is None  # the next call checks out a connection afresh


def test_a_connection_lost_while_another_thread_sends_goes_back_after_that_send() -> None:
    conn = FakeConnection()
    conn.send_gates[2] = threading.Event()
    pool = FakePool(conn)
    pipe = SharedPipe(FakeClient(pool))  # type: ignore[arg-type]
    outcomes: list[BaseException | None] = []
    reader = call_in_thread(pipe, outcomes)  # sends the first call, then reads its reply
    assert conn.reading.wait(5)
    writer = call_in_thread(pipe, outcomes)  # sends the second while the first reads
    assert conn.sending.setdefault(2, threading.Event()).wait(5)
    conn.read_gate.set()  # the read fails: the connection is lost with the second send under way
    reader.join(5)
    assert not reader.is_alive()
    assert pool.released == []  # the writer is still on it
    conn.send_gates[2].set()
    writer.join(5)
    assert not writer.is_alive()
    assert pool.released == [conn]
    assert conn.log.index("released") > conn.log.index("send 2 ends")
    assert conn.log[-2:] == ["disconnect", "released"]  # whatever that send reconnected is cut first
    assert len(outcomes) == 2 and all(isinstance(exc, redis.ConnectionError) for exc in outcomes)
