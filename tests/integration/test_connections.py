"""A component closes what it opened: after ``close()`` the server sees none of the connections
a Worker, QueueEvents, JobScheduler or Queue made for itself, nor the client it built from a
URL; a client the caller passed in stays open. Dedicated clients keep their own timeouts."""

from __future__ import annotations

import redis

from echomq import JobScheduler, Queue, QueueEvents, Worker
from echomq.transport.blocking import BlockingConnection
from echomq.transport.connection import Connections, checkout, close_client, dedicated_client

from support.sockets import own_tcp_sockets
from support.workers import wait_until


def _own_ports() -> set[int]:
    """The local TCP ports of this process's sockets: a connection the server lists from one of
    them is this test process's, not a subprocess's still shutting down."""
    return {sock.local_port for sock in own_tcp_sockets()}


def connected(client: redis.Redis) -> int:
    """Connections the server has from this process (other tests' subprocesses may linger)."""
    clients = client.client_list()
    addrs = [str(c.get("addr", "")) for c in clients]
    if not all(addr.rpartition(":")[2].isdigit() for addr in addrs):
        return len(clients)  # fakeredis lists no client ports: every connection counts
    ports = _own_ports()
    return sum(1 for addr in addrs if int(addr.rpartition(":")[2]) in ports)


def settles_at(client: redis.Redis, count: int) -> bool:
    """The server's disconnects are asynchronous: give them a moment."""
    return wait_until(lambda: connected(client) <= count, timeout=5)


def test_closed_workers_leave_no_connection_behind(connection: redis.Redis, queue_name: str) -> None:
    connection.ping()
    baseline = connected(connection)
    for _ in range(10):
        host = dedicated_client(connection, socket_timeout=5.0)  # a caller's client of its own
        worker = Worker(host, queue_name, lambda job: None, concurrency=2, drain_delay=0.2)
        worker.start()
        assert wait_until(lambda: worker.running)  # noqa: B023 - waited on in this iteration
        Queue(host, queue_name).add("x")
        assert wait_until(lambda: worker.processed == 1)  # noqa: B023 - waited on in this iteration
        worker.close(timeout=5)
        assert not worker.running
        assert host.ping()  # the caller's client is the caller's to close
        close_client(host)
    assert settles_at(connection, baseline)


def test_a_closed_reader_leaves_no_connection_behind(connection: redis.Redis, queue_name: str) -> None:
    connection.ping()
    baseline = connected(connection)
    for _ in range(5):
        events = QueueEvents(connection, queue_name, block_ms=2000).start()
        events.close(timeout=5)
        assert not events.running
    assert settles_at(connection, baseline)
    assert connection.ping()  # the caller's client was not closed


def test_components_built_from_a_url_close_every_connection(server_url: str, url_connection: redis.Redis,
                                                            queue_name: str) -> None:
    url_connection.ping()
    baseline = connected(url_connection)
    queue = Queue(server_url, queue_name)
    queue.add("x")
    schedules = JobScheduler(server_url, queue_name)
    schedules.upsert("s", {"every": 60_000})
    events = QueueEvents(server_url, queue_name, block_ms=2000).start()
    worker = Worker(server_url, queue_name, lambda job: None, drain_delay=0.2).start()
    assert wait_until(lambda: worker.processed >= 1)
    assert connected(url_connection) > baseline
    for component in (worker, events, schedules, queue):
        component.close()
    assert settles_at(url_connection, baseline), url_connection.client_list()


def test_a_dedicated_client_keeps_its_own_timeout(connection: redis.Redis) -> None:
    connection.ping()  # redis-py records the pool's original timeouts at run time
    blocking = dedicated_client(connection, socket_timeout=15.0)
    try:
        kwargs = blocking.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == 15.0
        assert kwargs.get("orig_socket_timeout", 15.0) == 15.0  # not the source pool's 5 s
        blocking.ping()
        conn = checkout(blocking.connection_pool)
        try:
            assert conn.socket_timeout == 15.0
            assert getattr(conn, "orig_socket_timeout", 15.0) == 15.0
        finally:
            blocking.connection_pool.release(conn)
    finally:
        blocking.close()
        blocking.connection_pool.disconnect()


def test_a_close_while_an_interrupt_is_sent_leaves_no_control_connection(connection: redis.Redis) -> None:
    # Worker.close() and QueueEvents.close() interrupt the blocked read from a helper thread
    # while the owner closes; a close() that lands while CLIENT UNBLOCK is on its way closed
    # the control connection before that call opened its socket, which then stayed open (seen
    # in the matrix: two unnamed connections left after every component closed).
    connection.ping()
    baseline = connected(connection)
    connections = Connections(connection)
    blocking = BlockingConnection(connections, max_block_s=1.0, client_name="echomq:test:interrupt")
    blocking.connect()
    assert blocking.interrupt() is False  # nothing blocked: UNBLOCK answers 0, the control client is made
    control = blocking._control
    assert control is not None
    sent = control.execute_command

    def close_first(*args: object) -> object:
        blocking.close()  # the owner's close(), between the interrupt's lock and its call
        return sent(*args)

    control.execute_command = close_first  # type: ignore[method-assign]
    blocking.interrupt()
    assert settles_at(connection, baseline), connection.client_list()
