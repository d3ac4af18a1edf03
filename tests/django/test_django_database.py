"""Database connections around jobs (``close_old_connections`` semantics) and across forks."""

from __future__ import annotations

import os

import pytest
from django.db import connection, transaction
from echoshop.models import Order

from echomq.contrib.django import runtime
from echomq.contrib.django.database import forget_inherited_connections, job_connections


@pytest.mark.django_db(transaction=True)
def test_a_job_closes_the_connection_it_opened_once_it_is_past_its_age(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "testing", lambda: False)  # as in a worker process
    with job_connections():
        Order.objects.create(email="ada@example.com")  # CONN_MAX_AGE = 0: one job's connection
        assert connection.connection is not None
    assert connection.connection is None  # closed after the job, as a request's end closes it
    assert Order.objects.count() == 1  # and reopened on the next use


@pytest.mark.django_db(transaction=True)
def test_a_connection_inside_a_transaction_is_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "testing", lambda: False)
    with transaction.atomic():
        order = Order.objects.create(email="ada@example.com")
        with job_connections():  # a test running a job in its own thread, inside its transaction
            assert Order.objects.filter(pk=order.pk).exists()
        assert connection.connection is not None and connection.in_atomic_block
    assert Order.objects.filter(pk=order.pk).exists()  # committed: the transaction was not broken


@pytest.mark.django_db(transaction=True)
def test_a_forked_worker_process_drops_the_connection_it_inherited() -> None:
    Order.objects.create(email="ada@example.com")
    inherited = connection.connection
    assert inherited is not None
    ours, theirs = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(ours)
            forget_inherited_connections()
            dropped = connection.connection is None
            count = Order.objects.count()  # a connection of the child's own
            os.write(theirs, f"{dropped} {connection.connection is not inherited} {count}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(theirs)
    with os.fdopen(ours) as pipe:
        report = pipe.read()
    _, status = os.waitpid(child, 0)
    assert (os.WEXITSTATUS(status), report) == (0, "True True 1")
    assert connection.connection is inherited and Order.objects.count() == 1  # the parent's still works


@pytest.mark.django_db(transaction=True)
def test_under_the_test_runner_a_job_leaves_the_test_s_connections_alone() -> None:
    Order.objects.create(email="ada@example.com")
    opened = connection.connection
    with job_connections():
        pass
    assert connection.connection is opened  # the runner's, as at a test client request's edges
