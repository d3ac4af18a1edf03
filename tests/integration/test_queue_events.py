"""QueueEvents on real Redis and on fakeredis: delivery, cursor semantics, isolation, shutdown."""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

from echomq import EventType, GapNotice, Handler, QueueEvents
from echomq.errors import ForkedProcessError, InvalidInputError, InvalidQueueNameError
from echomq.protocol.keys import QueueKeys

from support.queue_keys import SCAN_COUNT
from support.wire import WIRE_TABLE


def events_key(queue_name: str) -> str:
    return QueueKeys(queue_name).events


def xadd(client: redis.Redis, queue_name: str, fields: list[str]) -> str:
    """XADD the flat field list in its order, as the transition scripts do."""
    entry_id = client.execute_command("XADD", events_key(queue_name), "*", *fields)
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def collect(qe: QueueEvents) -> tuple[list[tuple[Any, dict[str, Any]]], threading.Condition]:
    got: list[tuple[Any, dict[str, Any]]] = []
    cond = threading.Condition()

    def on_event(event_type: Any, data: dict[str, Any]) -> None:
        with cond:
            got.append((event_type, data))
            cond.notify_all()

    qe.subscribe(on_event)
    return got, cond


def wait_for(cond: threading.Condition, predicate: Any, timeout: float = 5.0) -> None:
    with cond:
        assert cond.wait_for(predicate, timeout), "timed out waiting for events"


class Recorder(Handler):
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        # Define on_<type> for every event type, the way a user subclass would.
        if name.startswith("on_") and name[3:] in {t.value for t in EventType}:
            return lambda data: self.calls.append((name, data))
        raise AttributeError(name)


def test_every_event_type_reaches_callback_queue_and_handler(connection: redis.Redis, queue_name: str) -> None:
    handler = Recorder()
    inbox: queue.Queue[Any] = queue.Queue()
    with QueueEvents(connection, queue_name, handler=handler, block_ms=1000) as qe:
        got, cond = collect(qe)
        qe.subscribe(inbox)
        ids = [xadd(connection, queue_name, fields) for fields, _, _ in WIRE_TABLE]
        wait_for(cond, lambda: len(got) == len(WIRE_TABLE))
    expected = [(t, {**data, "event_id": i}) for (_, t, data), i in zip(WIRE_TABLE, ids)]
    assert got == expected
    assert all(type(t) is EventType for t, _ in got)
    assert [inbox.get_nowait() for _ in ids] == [("echomq_event", t, d) for t, d in expected]
    assert inbox.empty()
    assert handler.calls == [(f"on_{t.value}", d) for t, d in expected]
    assert qe.last_event_id == ids[-1]


def test_custom_events_reach_subscribers_and_handler_methods(connection: redis.Redis, queue_name: str) -> None:
    class Custom(Handler):
        def __init__(self) -> None:
            self.seen: list[dict[str, Any]] = []

        def on_custom_thing(self, data: dict[str, Any]) -> None:
            self.seen.append(data)

    handler = Custom()
    qe = QueueEvents(connection, queue_name, last_event_id="0", handler=handler)
    got, _ = collect(qe)
    xadd(connection, queue_name, ["event", "custom-thing", "foo", "bar", "n", "7"])
    xadd(connection, queue_name, ["event", "debounced", "jobId", "1", "debounceId", "x"])
    assert qe.run_once() == 2
    qe.close()
    assert [t for t, _ in got] == ["custom-thing", "debounced"]
    assert handler.seen == [got[0][1]] and got[0][1]["n"] == "7"


def test_dollar_is_resolved_before_start_returns(connection: redis.Redis, queue_name: str) -> None:
    before = [xadd(connection, queue_name, ["event", "waiting", "jobId", str(n)]) for n in range(3)]
    qe = QueueEvents(connection, queue_name, block_ms=1000)
    got, cond = collect(qe)
    qe.start()
    try:
        assert qe.last_event_id == before[-1]
        # Written immediately after start() returned, before the reader's first XREAD may run:
        # with an unresolved "$" these could be lost.
        after = [xadd(connection, queue_name, ["event", "waiting", "jobId", f"a{n}"]) for n in range(5)]
        wait_for(cond, lambda: len(got) == 5)
    finally:
        qe.close()
    assert [d["event_id"] for _, d in got] == after


def test_dollar_on_a_missing_stream_delivers_its_first_entry(connection: redis.Redis, queue_name: str) -> None:
    with QueueEvents(connection, queue_name, block_ms=1000) as qe:
        got, cond = collect(qe)
        first = xadd(connection, queue_name, ["event", "paused"])
        wait_for(cond, lambda: len(got) == 1)
    assert got == [(EventType.PAUSED, {"event_id": first})]


def test_zero_replays_the_whole_stream_in_order(connection: redis.Redis, queue_name: str) -> None:
    ids = [xadd(connection, queue_name, ["event", "added", "jobId", str(n), "name", "n"]) for n in range(25)]
    qe = QueueEvents(connection, queue_name, last_event_id="0", block_ms=1000, count=10)
    got, cond = collect(qe)  # subscribed before start: the replay begins at once
    with qe:
        wait_for(cond, lambda: len(got) == 25)
        live = xadd(connection, queue_name, ["event", "drained"])
        wait_for(cond, lambda: len(got) == 26)
    assert [d["event_id"] for _, d in got] == [*ids, live]


def test_malformed_entries_never_stop_the_reader(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, last_event_id="0")
    got, _ = collect(qe)
    connection.execute_command("XADD", events_key(queue_name), "*", "event", "failed", "jobId", "1",
                               "failedReason", b"bad \xff byte", "prev", "active")
    xadd(connection, queue_name, ["event", "completed", "jobId", "1", "returnvalue", "{oops", "prev", "active"])
    xadd(connection, queue_name, ["jobId", "2"])
    xadd(connection, queue_name, ["event", "drained"])
    assert qe.run_once() == 4
    qe.close()
    assert got[0][1]["failedReason"] == "bad \ufffd byte"
    assert got[1][1]["returnvalue"] == "{oops"
    assert got[2][0] == "" and got[3][0] is EventType.DRAINED


def test_an_explicit_id_resumes_after_it(connection: redis.Redis, queue_name: str) -> None:
    ids = [xadd(connection, queue_name, ["event", "stalled", "jobId", str(n)]) for n in range(6)]
    qe = QueueEvents(connection, queue_name, last_event_id=ids[2])
    got, _ = collect(qe)
    assert qe.run_once() == 3
    qe.close()
    assert [d["event_id"] for _, d in got] == ids[3:]
    assert qe.last_event_id == ids[-1]


@pytest.mark.parametrize("protocol,decode", [(2, False), (2, True), (3, False), (3, True)])
def test_any_client_protocol_and_decoding(server_url: str, url_connection: redis.Redis, queue_name: str,
                                          protocol: int, decode: bool) -> None:
    host = redis.Redis.from_url(server_url, protocol=protocol, decode_responses=decode)
    xadd(url_connection, queue_name, ["event", "progress", "jobId", "1", "data", '{"p":1}'])
    qe = QueueEvents(host, queue_name, last_event_id="0")
    got, _ = collect(qe)
    assert qe.run_once() == 1
    qe.close()
    host.close()
    assert got[0][0] is EventType.PROGRESS and got[0][1]["data"] == {"p": 1}


def test_reads_are_bounded_by_count(connection: redis.Redis, queue_name: str) -> None:
    connection.execute_command("XADD", events_key(queue_name), "*", "event", "drained")
    pipe = connection.pipeline(transaction=False)
    for _ in range(249):
        pipe.execute_command("XADD", events_key(queue_name), "*", "event", "drained")
    pipe.execute()
    qe = QueueEvents(connection, queue_name, last_event_id="0", count=100)
    try:
        assert [qe.run_once(), qe.run_once(), qe.run_once()] == [100, 100, 50]
    finally:
        qe.close()


def test_a_failing_subscriber_is_logged_and_isolated(connection: redis.Redis, queue_name: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Handler):
        def on_completed(self, data: dict[str, Any]) -> None:
            raise RuntimeError("handler bug")

    def broken(event_type: Any, data: dict[str, Any]) -> None:
        raise ValueError("subscriber bug")

    qe = QueueEvents(connection, queue_name, last_event_id="0", handler=Broken())
    qe.subscribe(broken)
    got, _ = collect(qe)
    inbox: queue.Queue[Any] = queue.Queue()
    qe.subscribe(inbox)
    xadd(connection, queue_name, ["event", "completed", "jobId", "1", "returnvalue", "1", "prev", "active"])
    xadd(connection, queue_name, ["event", "drained"])
    with caplog.at_level(logging.ERROR, logger="echomq.events.queue_events"):
        assert qe.run_once() == 2
    qe.close()
    assert [t for t, _ in got] == [EventType.COMPLETED, EventType.DRAINED]
    assert inbox.qsize() == 2
    messages = [r.getMessage() for r in caplog.records]
    assert sum(": handler failed on" in m for m in messages) == 1
    assert sum(": subscriber <function" in m for m in messages) == 2
    assert any("subscriber bug" in (r.exc_text or "") or (r.exc_info and "subscriber bug" in str(r.exc_info[1]))
               for r in caplog.records)


def test_subscribe_and_unsubscribe_while_running(connection: redis.Redis, queue_name: str) -> None:
    with QueueEvents(connection, queue_name, block_ms=1000) as qe:
        first, cond = collect(qe)
        xadd(connection, queue_name, ["event", "waiting", "jobId", "1"])
        wait_for(cond, lambda: len(first) == 1)
        late: queue.Queue[Any] = queue.Queue()
        qe.subscribe(late)
        xadd(connection, queue_name, ["event", "waiting", "jobId", "2"])
        assert late.get(timeout=5)[2]["jobId"] == "2"
        assert qe.unsubscribe(late) is True
        assert qe.unsubscribe(late) is False
        xadd(connection, queue_name, ["event", "waiting", "jobId", "3"])
        wait_for(cond, lambda: len(first) == 3)
    assert late.empty()
    assert [d["jobId"] for _, d in first] == ["1", "2", "3"]


def test_close_interrupts_a_block_within_100ms(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=5000).start()
    time.sleep(0.3)  # the reader is now inside XREAD BLOCK 5000
    started = time.perf_counter()
    qe.close()
    elapsed = time.perf_counter() - started
    assert elapsed < 0.1, f"close took {elapsed * 1000:.1f} ms"
    assert not qe.running and not qe._thread.is_alive()  # type: ignore[union-attr]


def test_close_from_another_thread_stops_run(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=5000)
    got, cond = collect(qe)
    runner = threading.Thread(target=qe.run)
    runner.start()
    deadline = time.monotonic() + 5
    while qe.last_event_id is None and time.monotonic() < deadline:  # run() resolves "$" first
        time.sleep(0.005)
    xadd(connection, queue_name, ["event", "resumed"])
    wait_for(cond, lambda: len(got) == 1)
    qe.close(timeout=2)
    runner.join(1)
    assert not runner.is_alive()


def test_close_from_inside_a_subscriber_does_not_deadlock(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=1000)
    qe.subscribe(lambda t, d: qe.close())
    qe.start()
    xadd(connection, queue_name, ["event", "drained"])
    xadd(connection, queue_name, ["event", "drained"])
    assert qe._done.wait(5)
    assert qe.last_event_id is not None


def test_a_signal_handler_can_close_run_in_the_main_thread(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=5000)
    previous = signal.signal(signal.SIGUSR1, lambda *_: qe.close())
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        started = time.monotonic()
        qe.run()  # blocks in XREAD BLOCK 5000 until the handler closes it
        assert time.monotonic() - started < 2
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert qe._done.is_set()


def test_run_once_refuses_to_race_the_running_loop(connection: redis.Redis, queue_name: str) -> None:
    with QueueEvents(connection, queue_name, block_ms=1000) as qe, pytest.raises(InvalidInputError, match="run_once"):
        qe.run_once()


def test_context_manager_starts_and_stops(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=5000)
    assert qe._thread is None  # nothing runs before start
    with qe as running:
        assert running is qe and qe.running
        thread = qe._thread
    assert thread is not None and not thread.is_alive()
    with pytest.raises(Exception, match="closed"):
        qe.start()


def test_long_blocks_outlive_the_clients_socket_timeout(url_connection: redis.Redis, server_url: str,
                                                        queue_name: str, caplog: pytest.LogCaptureFixture) -> None:
    # The host's client has a 0.5 s socket timeout; a 1.5 s BLOCK must not trip over it.
    host = redis.Redis.from_url(server_url, socket_timeout=0.5)
    with caplog.at_level(logging.WARNING, logger="echomq.events.queue_events"), \
            QueueEvents(host, queue_name, block_ms=1500) as qe:
        got, cond = collect(qe)
        time.sleep(2.0)
        xadd(url_connection, queue_name, ["event", "drained"])
        wait_for(cond, lambda: len(got) == 1)
    host.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.min_redis(7, 0, reason="gap detection reads XINFO STREAM entries-added")
def test_trimmed_gap_is_reported_as_a_notice(connection: redis.Redis, queue_name: str) -> None:
    handler_gaps: list[GapNotice] = []

    class H(Handler):
        def handle_gap(self, notice: GapNotice) -> None:
            handler_gaps.append(notice)

    qe = QueueEvents(connection, queue_name, last_event_id="0", handler=H())
    got, _ = collect(qe)
    inbox: queue.Queue[Any] = queue.Queue()
    qe.subscribe(inbox)
    first = [xadd(connection, queue_name, ["event", "waiting", "jobId", str(n)]) for n in range(5)]
    assert qe.run_once() == 5
    later = [xadd(connection, queue_name, ["event", "waiting", "jobId", str(n)]) for n in range(5, 25)]
    connection.xtrim(events_key(queue_name), maxlen=5, approximate=False)
    assert qe.run_once() == 5
    qe.close()
    gap = GapNotice(queue_name, first[-1], later[15], 15)
    assert got[5] == (gap, gap.as_dict())
    assert [d["event_id"] for t, d in got if not isinstance(t, GapNotice)] == first + later[15:]
    assert handler_gaps == [gap]
    items = [inbox.get_nowait() for _ in range(11)]
    assert items[5] == ("echomq_gap", gap, gap.as_dict())


def test_replaying_a_trimmed_stream_from_zero_is_not_a_gap(connection: redis.Redis, queue_name: str) -> None:
    for n in range(10):
        xadd(connection, queue_name, ["event", "waiting", "jobId", str(n)])
    connection.xtrim(events_key(queue_name), maxlen=4, approximate=False)
    qe = QueueEvents(connection, queue_name, last_event_id="0")
    got, _ = collect(qe)
    assert qe.run_once() == 4
    qe.close()
    assert not any(isinstance(t, GapNotice) for t, _ in got)


@pytest.mark.parametrize(
    "kwargs,field",
    [({"last_event_id": "latest"}, "last_event_id"), ({"last_event_id": "1-x"}, "last_event_id"),
     ({"block_ms": 0}, "block_ms"), ({"block_ms": 1.5}, "block_ms"), ({"count": 0}, "count"),
     ({"handler": object()}, "handler"), ({"prefix": ""}, "prefix")],
)
def test_bad_arguments_are_rejected_before_touching_redis(connection: redis.Redis, queue_name: str,
                                                          kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError, match=field):
        QueueEvents(connection, queue_name, **kwargs)
    assert not list(connection.scan_iter(match=f"*{queue_name}*", count=SCAN_COUNT))


@pytest.mark.parametrize("name", ["", "a:b", "{x}"])
def test_bad_queue_names_are_rejected(connection: redis.Redis, name: str) -> None:
    with pytest.raises(InvalidQueueNameError):
        QueueEvents(connection, name)


def test_bad_subscribers_are_rejected(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name)
    with pytest.raises(InvalidInputError, match="subscriber"):
        qe.subscribe(42)  # type: ignore[arg-type]


def test_use_after_fork_is_refused(connection: redis.Redis, queue_name: str) -> None:
    qe = QueueEvents(connection, queue_name, block_ms=1000).start()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                qe.subscribe(lambda t, d: None)
            except ForkedProcessError:
                code = 0
            qe.close()  # must not touch the parent's reader
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        got, cond = collect(qe)  # the parent's reader still works
        xadd(connection, queue_name, ["event", "drained"])
        wait_for(cond, lambda: len(got) == 1)
    finally:
        qe.close()


def test_no_thread_at_import_or_construction(server_url: str) -> None:
    code = (
        "import threading, echomq\n"
        "from echomq import QueueEvents, Handler, EventType\n"
        f"qe = QueueEvents({server_url!r}, 'no-thread-check')\n"
        "print(threading.active_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "1"
