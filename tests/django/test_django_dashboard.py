"""The dashboard mounted in the test project (``path("echomq/", include(...))``), through Django's
test client: staff only by default, a permission by setting, read-only by setting, on the
project's EchoMQ connection and prefix, actions logged with the user's name."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Permission, User
from django.test import Client

from echomq import Queue


def token_of(body: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', body)
    assert found, "no action form on the page"
    return found.group(1)


@pytest.fixture
def orders(shop_redis: redis.Redis, prefix: str) -> Queue:
    queue = Queue(shop_redis, "orders", prefix=prefix)
    queue.add("ship", {"order": 1})
    return queue


@pytest.mark.django_db
def test_staff_see_and_act_others_are_refused(orders: Queue, caplog: pytest.LogCaptureFixture) -> None:
    anonymous = Client()
    assert anonymous.get("/echomq/").status_code == 302
    assert anonymous.get("/echomq/")["Location"].startswith("/accounts/login/?next=/echomq/")
    customer = Client()
    customer.force_login(User.objects.create_user("customer", password="x"))
    assert customer.get("/echomq/").status_code == 403
    assert customer.post("/echomq/action/pause", {"queue": "orders"}).status_code == 403
    staff = Client()
    staff.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    overview = staff.get("/echomq/")
    body = overview.content.decode()
    assert overview.status_code == 200 and overview["Content-Security-Policy"].startswith("default-src 'self'")
    assert 'href="/echomq/queue?q=orders"' in body and 'src="/echomq/static/dashboard.js"' in body
    assert staff.get("/echomq/static/dashboard.css").status_code == 200
    page = staff.get("/echomq/queue?q=orders").content.decode()
    assert staff.post("/echomq/action/pause", {"queue": "orders"}).status_code == 403  # no token
    assert not orders.is_paused()
    with caplog.at_level(logging.INFO, logger="echomq.contrib.dashboard"):
        done = staff.post("/echomq/action/pause", {"queue": "orders", "csrf": token_of(page),
                                                   "next": "/echomq/queue?q=orders"})
    assert done.status_code == 303, (done.content, staff.cookies)
    assert done["Location"] == "/echomq/queue?q=orders"
    assert orders.is_paused()
    assert "pause on queue 'orders'  by ops" in caplog.text
    assert "Pause: queue paused" in staff.get("/echomq/queue?q=orders").content.decode()


@pytest.mark.django_db
def test_a_permission_setting_and_read_only(orders: Queue, settings: Any) -> None:
    settings.ECHOMQ_DASHBOARD = {"PERMISSION": "auth.view_user"}
    staff = Client()
    staff.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    assert staff.get("/echomq/").status_code == 403  # staff without the permission
    viewer = User.objects.create_user("viewer", password="x")
    viewer.user_permissions.add(Permission.objects.get(codename="view_user"))
    allowed = Client()
    allowed.force_login(viewer)
    token = token_of(allowed.get("/echomq/queue?q=orders").content.decode())
    settings.ECHOMQ_DASHBOARD = {"PERMISSION": "auth.view_user", "READ_ONLY": True}
    page = allowed.get("/echomq/queue?q=orders").content.decode()
    assert "read-only" in page and "csrf" not in page
    assert allowed.post("/echomq/action/pause", {"queue": "orders", "csrf": token}).status_code == 403
    assert not orders.is_paused()
    settings.ECHOMQ_DASHBOARD = {"READONLY": True}
    with pytest.raises(Exception, match="ECHOMQ_DASHBOARD must be a dict with keys among PERMISSION, READ_ONLY"):
        allowed.get("/echomq/")


@pytest.mark.parametrize("server_url", ["real"], indirect=True)  # the browser adds nothing a backend changes
@pytest.mark.django_db(transaction=True)
def test_the_staff_gate_in_the_browser(browser: Any, live_server: Any, orders: Queue) -> None:
    """Signed in as a customer, Chromium gets 403; as staff, the overview, then a pause."""
    users = {"customer": User.objects.create_user("customer", password="x"),
             "ops": User.objects.create_user("ops", password="x", is_staff=True)}
    for name, status in (("customer", 403), ("ops", 200)):
        signed_in = Client()
        signed_in.force_login(users[name])
        context = browser.new_context()
        context.add_cookies([{"name": "sessionid", "value": signed_in.cookies["sessionid"].value,
                              "url": live_server.url}])
        page = context.new_page()
        assert page.goto(f"{live_server.url}/echomq/").status == status
        if name == "ops":
            page.get_by_role("link", name="orders", exact=True).click()
            page.locator("button[data-action=pause]").click()
            page.locator(".flash").wait_for()
            assert "Pause: queue paused" in page.locator(".flash").inner_text()
        context.close()
    assert orders.is_paused()
