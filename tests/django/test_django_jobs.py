"""Jobs of a Django project: enqueued from a view once its transaction commits, run by
``manage.py echomq_worker``, their effect in the database."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from echoshop.jobs import build_report, send_receipt
from echoshop.models import Order, Receipt

from echomq.contrib.django import get_registry, job
from echomq.testing import run_until_idle

from support.django_site import manage


def waiting(queue: str = "orders") -> int:
    counts = get_registry().queue(queue).get_job_counts("waiting", "delayed", "active", "completed", "failed")
    return sum(counts.values())


@pytest.mark.django_db(transaction=True)
def test_a_view_enqueues_and_the_worker_command_runs_the_job(client, shop_redis: redis.Redis) -> None:
    response = client.post("/orders/", {"email": "ada@example.com"})
    assert response.status_code == 201
    order_id = response.json()["order"]
    [job] = get_registry().queue("orders").get_jobs("waiting")
    assert (job.name, job.data) == ("send_receipt", {"order_id": order_id})

    worker = manage("echomq_worker", "--burst", env={"SHOP_DB": connection.settings_dict["NAME"]})
    assert worker.returncode == 0, worker.stderr
    assert "job 1 ('send_receipt') completed" in worker.stderr

    receipt = Receipt.objects.get(order_id=order_id)
    assert (receipt.sent_to, receipt.attempt) == ("ada@example.com", 1)
    assert client.get(f"/orders/{order_id}/").json() == {"order": order_id, "receipt_sent_to": "ada@example.com"}
    assert get_registry().queue("orders").get_job_counts("completed") == {"completed": 1}


@pytest.mark.django_db(transaction=True)
def test_a_view_whose_transaction_rolls_back_enqueues_nothing(client, shop_redis: redis.Redis) -> None:
    response = client.post("/orders/", {"email": "grace@example.com", "fail": "1"})
    assert response.status_code == 402
    assert Order.objects.count() == 0
    assert waiting() == 0

    worker = manage("echomq_worker", "--burst", "orders", env={"SHOP_DB": connection.settings_dict["NAME"]})
    assert worker.returncode == 0, worker.stderr
    assert Receipt.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_adds_the_job_once_the_transaction_commits(shop_redis: redis.Redis) -> None:
    with transaction.atomic():
        first = Order.objects.create(email="ada@example.com")
        send_receipt.enqueue_on_commit(order_id=first.pk)
        assert waiting() == 0  # not yet: a worker would not find the order
        with transaction.atomic():  # a savepoint that commits into the outer transaction
            second = Order.objects.create(email="grace@example.com")
            send_receipt.enqueue_on_commit(order_id=second.pk)
        assert waiting() == 0
    assert waiting() == 2

    registry = get_registry()
    report = run_until_idle(registry.queue("orders"), registry.processors("orders"))
    assert report.outcomes() == ["completed", "completed"]
    assert sorted(Receipt.objects.values_list("sent_to", flat=True)) == ["ada@example.com", "grace@example.com"]


@pytest.mark.django_db(transaction=True)
def test_enqueue_on_commit_inside_a_transaction_that_rolls_back_never_runs(shop_redis: redis.Redis) -> None:
    with pytest.raises(RuntimeError, match="declined"), transaction.atomic():
        order = Order.objects.create(email="grace@example.com")
        send_receipt.enqueue_on_commit(order_id=order.pk)
        raise RuntimeError("payment declined")
    with transaction.atomic():
        kept = Order.objects.create(email="kept@example.com")
        try:
            with transaction.atomic():  # a savepoint rolled back: its enqueue goes with it
                send_receipt.enqueue_on_commit(order_id=kept.pk)
                raise RuntimeError("inner")
        except RuntimeError:
            pass
    assert waiting() == 0
    registry = get_registry()
    assert len(run_until_idle(registry.queue("orders"), registry.processors("orders"))) == 0
    assert Receipt.objects.count() == 0


@pytest.mark.django_db
def test_on_commit_callbacks_in_a_test_case_transaction(django_capture_on_commit_callbacks,
                                                         shop_redis: redis.Redis) -> None:
    order = Order.objects.create(email="ada@example.com")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        send_receipt.enqueue_on_commit(order_id=order.pk)
        assert waiting() == 0
    assert len(callbacks) == 1
    registry = get_registry()
    # run_until_idle runs the job in the test's thread, inside the test's transaction, which the
    # job's connection handling leaves open: the job sees the order and its receipt stays visible.
    report = run_until_idle(registry.queue("orders"), registry.processors("orders"))
    assert report.outcomes() == ["completed"]
    assert Receipt.objects.get(order=order).sent_to == "ada@example.com"


def test_jobs_take_their_queue_and_the_queues_default_options(shop_redis: redis.Redis) -> None:
    assert (send_receipt.queue, build_report.queue) == ("orders", "reports")  # DEFAULT_QUEUE, then queue=
    assert send_receipt.options == {"attempts": 3, "backoff": {"type": "exponential", "delay": 1000}}
    assert build_report.options == {"remove_on_complete": 100}
    job = send_receipt.enqueue(order_id=7)
    assert job.opts["attempts"] == 3
    assert get_registry().queues == ("orders", "reports")


def test_a_value_that_is_not_json_fails_in_the_view_not_at_the_commit(shop_redis: redis.Redis) -> None:
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        send_receipt.enqueue_on_commit(order_id=object())


@pytest.mark.django_db(transaction=True)
def test_the_worker_command_with_a_pool_of_processes(shop_redis: redis.Redis) -> None:
    orders = [Order.objects.create(email=f"buyer{n}@example.com") for n in range(6)]
    for order in orders:
        send_receipt.enqueue(order_id=order.pk)
    worker = manage("echomq_worker", "--burst", "--processes", "2", "--concurrency", "2", "orders",
                    env={"SHOP_DB": connection.settings_dict["NAME"]})
    assert worker.returncode == 0, worker.stderr
    assert sorted(Receipt.objects.values_list("order_id", flat=True)) == [order.pk for order in orders]
    assert get_registry().queue("orders").get_job_counts("completed", "failed") == {"completed": 6, "failed": 0}


def test_every_apps_jobs_module_is_found_on_first_use_of_the_registry() -> None:
    show = "from echomq.contrib.django import registry; print(sorted(registry.processors('orders')), registry.queues)"
    shown = manage("shell", "-c", show)  # no jobs.py imported by hand
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == "['send_receipt', 'sweep_carts'] ('orders', 'reports')"


def test_a_bad_queue_option_fails_the_registration_naming_it(settings: Any) -> None:
    settings.ECHOMQ = {**django_settings.ECHOMQ, "QUEUES": {"orders": {"attempt": 3}}}
    with pytest.raises(ImproperlyConfigured, match=r"attempt=3: unknown job option.*\(echomq\.E006\)"):
        job(queue="orders")(lambda job: None)
    assert "<lambda>" not in get_registry().processors("orders")
