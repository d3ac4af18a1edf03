"""The shop's jobs, found by the integration's autodiscovery (no list to keep)."""

from echomq.contrib.django import job

from .models import Order, Receipt


@job
def send_receipt(job):
    """Needs the order row: enqueued on commit, it always finds it."""
    order = Order.objects.get(pk=job.data["order_id"])
    receipt = Receipt.objects.create(order=order, sent_to=order.email, attempt=job.attempts_made + 1)
    return {"receipt": receipt.pk}


@job(queue="reports")
def build_report(job):
    return {"orders": Order.objects.count(), "kind": job.data.get("kind")}


@job(queue="orders")
def sweep_carts(job):
    return "swept"
