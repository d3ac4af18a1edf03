from django.db import transaction
from django.http import HttpResponseBadRequest, JsonResponse

from .jobs import send_receipt
from .models import Order, Receipt


class CheckoutFailed(Exception):
    pass


def place_order(request):
    """POST email=...: the order and its receipt job, in one transaction. ``fail=1`` makes the
    checkout fail after the enqueue, so the transaction rolls back."""
    if request.method != "POST":
        return HttpResponseBadRequest("POST an email")
    try:
        with transaction.atomic():
            order = Order.objects.create(email=request.POST["email"])
            send_receipt.enqueue_on_commit(order_id=order.pk)
            if request.POST.get("fail") == "1":
                raise CheckoutFailed("payment declined")
    except CheckoutFailed as exc:
        return JsonResponse({"error": str(exc)}, status=402)
    return JsonResponse({"order": order.pk}, status=201)


def order_detail(request, order_id):
    receipt = Receipt.objects.filter(order_id=order_id).first()
    return JsonResponse({"order": order_id, "receipt_sent_to": receipt.sent_to if receipt else None})


def ping(request):
    return JsonResponse({"pong": True})
