"""The dashboard as a WSGI app (echomq.contrib.dashboard), driven through werkzeug's test client
on real Redis and fakeredis: what its pages show, what its actions do, and its rules (tokens,
read-only, escaping, the CSP, no password shown).

Each test works under a prefix of its own (support/prefixes.py), since the overview lists every
queue of a prefix.
"""

from __future__ import annotations

import html
import logging
import re
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
import redis
from markupsafe import escape
from werkzeug.test import Client, TestResponse

from echomq import JobScheduler, Queue, Worker
from echomq.contrib.dashboard import Dashboard

from support.prefixes import delete_prefix, new_prefix
from support.workers import Running, wait_until

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def prefix(connection: redis.Redis) -> Iterator[str]:
    name = new_prefix("dash")
    yield name
    delete_prefix(connection, name)


def token_of(page: TestResponse) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.get_data(as_text=True))
    assert found, "the page has no action form"
    return found.group(1)


def rows_of(body: str) -> list[list[str]]:
    """The text of each cell of each row of the page's first table body."""
    tbody = body.split("<tbody", 1)[1].split("</tbody>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
            for row in re.findall(r"<tr>(.*?)</tr>", tbody, re.DOTALL)]


def tags_of(body: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every element of the page as a browser's parser sees it: (tag, attributes)."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Parser().feed(body)
    return found


def fail_jobs(connection: redis.Redis, queue: Queue, count: int, reason: str = "boom") -> None:
    """Run a worker until ``count`` jobs of ``queue`` failed, raising ``reason``."""
    def fail(job: Any) -> None:
        raise RuntimeError(reason)

    with Running(Worker(connection, queue.name, fail, prefix=queue.prefix)):
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == count)


def test_the_overview_lists_every_queue_with_its_counts_limits_and_state(connection: redis.Redis,
                                                                         prefix: str) -> None:
    orders = Queue(connection, "orders", prefix=prefix)
    for n in range(3):
        orders.add("o", {"n": n})
    orders.add("later", {}, delay=60_000)
    orders.set_global_concurrency(4)
    orders.set_global_rate_limit(10, 1000)
    billing = Queue(connection, "billing", prefix=prefix)
    billing.add("b", {})
    billing.pause()
    clock = [0.0]
    client = Client(Dashboard(connection, prefix=prefix, monotonic=lambda: clock[0], discovery_ttl=30))
    page = client.get("/")
    assert page.status_code == 200
    billing_row, orders_row = rows_of(page.get_data(as_text=True))
    # queue, waiting, prioritized, delayed, active, waiting-children, completed, failed, paused,
    # concurrency, rate limit, schedulers, workers, written by
    assert orders_row[:11] == ["orders", "3", "0", "1", "0", "0", "0", "0", "no", "4", "10 / 1000 ms"]
    assert orders_row[13].startswith("echomq-python:")
    assert billing_row[:11] == ["billing", "1", "0", "0", "0", "0", "0", "0", "yes", "-", "-"]
    # discovery is cached: a new queue shows once the cache has expired (found by a SCAN in
    # the background, the page answering meanwhile with what it had), or once asked for by name
    Queue(connection, "mail", prefix=prefix).add("m", {})
    Queue(connection, "news", prefix=prefix).add("n", {})
    assert "mail" not in client.get("/").get_data(as_text=True)
    assert client.get("/queue?q=mail").status_code == 200  # asked for by name: found at once
    assert ">mail</a>" in client.get("/").get_data(as_text=True)
    assert ">news</a>" not in client.get("/").get_data(as_text=True)
    clock[0] = 31.0
    assert ">news</a>" not in client.get("/fragment/overview").get_data(as_text=True)
    assert wait_until(lambda: ">news</a>" in client.get("/fragment/overview").get_data(as_text=True), timeout=5)


def test_named_queues_only_and_an_unknown_queue_is_not_found(connection: redis.Redis, prefix: str) -> None:
    Queue(connection, "orders", prefix=prefix).add("o", {})
    Queue(connection, "secret", prefix=prefix).add("s", {})
    client = Client(Dashboard(connection, prefix=prefix, queues=["orders"]))
    assert ">secret<" not in client.get("/").get_data(as_text=True)
    for path in ("/queue?q=secret", "/queue?q=nothere", "/job?q=secret&id=1"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "no queue" in answer.get_data(as_text=True)
    assert client.get("/queue?q=bad{name").status_code == 400
    assert client.get("/queue?q=orders&state=nonsense").status_code == 400
    assert client.get("/nowhere").status_code == 404


def test_a_list_is_paged_newest_first_and_a_job_is_found_by_id(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    ids = [queue.add("o", {"n": n}).id for n in range(30)]
    client = Client(Dashboard(connection, prefix=prefix, page_size=25))
    first = client.get("/queue?q=orders&state=waiting").get_data(as_text=True)
    shown = re.findall(r'/job\?q=orders&amp;id=(\d+)"', first)
    assert shown == list(reversed(ids))[:25]
    assert "page 1 of 2" in first
    second = client.get("/queue?q=orders&state=wait&page=2").get_data(as_text=True)
    assert re.findall(r'/job\?q=orders&amp;id=(\d+)"', second) == list(reversed(ids))[25:]
    found = client.get(f"/find?q=orders&id={ids[3]}")
    assert (found.status_code, found.headers["Location"]) == (303, f"/job?q=orders&id={ids[3]}")
    missing = client.get("/find?q=orders&id=nope", follow_redirects=True)
    assert "no job &#39;nope&#39; in queue &#39;orders&#39;" in missing.get_data(as_text=True)
    assert client.get("/job?q=orders&id=meta").status_code == 404  # a queue key is never a job


def test_a_job_page_shows_everything_escaped(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    deep: Any = "bottom"
    for _ in range(100):
        deep = {"d": deep}
    job = queue.add(HOSTILE, {"html": HOSTILE, "long": "y" * 20_000, "deep": deep}, attempts=1)
    queue.log(job.id, HOSTILE)
    queue.update_progress(job.id, {"step": HOSTILE})
    fail_jobs(connection, queue, 1, HOSTILE)
    parent = queue.add_flow({"name": "parent", "data": {}}, [{"name": HOSTILE, "data": {"x": HOSTILE}}])
    child_id = next(iter(parent.get_pending_dependencies())).rsplit(":", 1)[1]
    client = Client(Dashboard(connection, prefix=prefix))
    page = client.get(f"/job?q=orders&id={job.id}")
    body = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "<script>alert" not in body and "<img src=x" not in body
    assert str(escape(HOSTILE)) in body  # the failed reason, the name, the log line, the trace
    assert body.count("RuntimeError") >= 1 and 'class="trace"' in body
    assert "y" * 20_000 in body and '"d": "bottom"' in html.unescape(body)
    assert "failed" in body and "1 made" in body
    tags = tags_of(body)
    assert [attrs for tag, attrs in tags if tag == "script"] == [{"src": "/static/dashboard.js", "defer": None}]
    assert not [attrs for _tag, attrs in tags if any(name.startswith("on") or name == "style" for name in attrs)]
    assert not [tag for tag, _attrs in tags if tag in ("img", "iframe", "object", "embed")]
    # parent and child link to each other
    child = client.get(f"/job?q=orders&id={child_id}").get_data(as_text=True)
    assert f'href="/job?q=orders&amp;id={parent.id}"' in child
    parent_page = client.get(f"/job?q=orders&id={parent.id}").get_data(as_text=True)
    assert f'href="/job?q=orders&amp;id={child_id}"' in parent_page and "Children waiting (1)" in parent_page
    listing = client.get("/queue?q=orders&state=failed").get_data(as_text=True)
    assert "<script>alert" not in listing and str(escape(HOSTILE))[:60] in listing


def test_every_answer_carries_the_csp_and_no_password(connection: redis.Redis, prefix: str) -> None:
    Queue(connection, "orders", prefix=prefix).add("o", {})
    app = Dashboard(connection, prefix=prefix)
    with_password = redis.Redis(host="127.0.0.1", port=1, password="hunter2")
    assert Dashboard(with_password, prefix=prefix).label == "redis://127.0.0.1:1/0"
    url_app = Dashboard("redis://user:hunter2@127.0.0.1:1/0", prefix=prefix)
    assert url_app.label == "redis://user:***@127.0.0.1:1/0"
    client = Client(app)
    for path in ("/", "/queue?q=orders", "/job?q=orders&id=1", "/static/dashboard.js", "/nowhere"):
        answer = client.get(path)
        assert answer.headers["Content-Security-Policy"].startswith("default-src 'self'"), path
        assert answer.headers["X-Frame-Options"] == "DENY"
    unreachable = Client(url_app).get("/")
    assert unreachable.status_code == 503 and "hunter" not in unreachable.get_data(as_text=True)
    url_app.close()
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/dashboard.js").headers["Content-Type"].startswith("text/javascript")


def test_an_action_needs_the_token_of_its_own_session(connection: redis.Redis, prefix: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    queue.add("o", {})
    app = Dashboard(connection, prefix=prefix)
    alice, mallory = Client(app), Client(app)
    alice_token = token_of(alice.get("/queue?q=orders"))
    mallory.get("/")
    for client, form in ((alice, {"queue": "orders"}), (alice, {"queue": "orders", "csrf": "0" * 64}),
                         (mallory, {"queue": "orders", "csrf": alice_token}),
                         (Client(app), {"queue": "orders", "csrf": alice_token})):
        refused = client.post("/action/pause", data=form)
        assert refused.status_code == 403
        assert "token" in refused.get_data(as_text=True)
    assert not queue.is_paused()
    assert alice.get("/action/pause").status_code == 405
    with caplog.at_level(logging.INFO, logger="echomq.contrib.dashboard"):
        done = alice.post("/action/pause", data={"queue": "orders", "csrf": alice_token,
                                                "next": "/queue?q=orders"},
                          environ_overrides={"REMOTE_USER": "alice"})
    assert (done.status_code, done.headers["Location"]) == (303, "/queue?q=orders")
    assert queue.is_paused()
    assert "dashboard: pause on queue 'orders'  by alice: queue paused" in caplog.text
    shown = alice.get("/queue?q=orders").get_data(as_text=True)
    assert "Pause: queue paused" in shown and 'data-action="resume"' in shown
    # next= elsewhere (another host, however spelled; a header's end) is not followed
    for elsewhere in ("//evil.example/", "/\\evil.example/", "https://evil.example/", "/queue?q=x\r\nSet-Cookie: a=b"):
        away = alice.post("/action/resume", data={"queue": "orders", "csrf": alice_token, "next": elsewhere})
        assert away.headers["Location"] == "/queue?q=orders", elsewhere
    assert not queue.is_paused()


def test_retry_promote_remove_clean_drain(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    for _ in range(3):
        queue.add("f", {}, attempts=1)
    fail_jobs(connection, queue, 3)
    delayed = [queue.add("d", {}, delay=600_000).id for _ in range(3)]
    client = Client(Dashboard(connection, prefix=prefix))
    failed = queue.get_jobs("failed")
    token = token_of(client.get(f"/job?q=orders&id={failed[0].id}"))

    def post(action: str, **form: str) -> TestResponse:
        return client.post(f"/action/{action}", data={"queue": "orders", "csrf": token, **form},
                           follow_redirects=True)

    assert "moved back to wait" in post("retry", id=failed[0].id, state="failed").get_data(as_text=True)
    assert queue.get_job(failed[0].id).get_state() == "waiting"
    assert "retried 2 jobs" in post("retry-all", state="failed").get_data(as_text=True)
    assert queue.get_job_counts("failed", "waiting") == {"failed": 0, "waiting": 3}
    post("promote", id=delayed[0])
    assert queue.get_job(delayed[0]).get_state() == "waiting"
    assert "promoted 2 jobs" in post("promote-all").get_data(as_text=True)
    refused = post("retry", id=delayed[0], state="failed").get_data(as_text=True)
    assert "Retry:" in refused and 'class="flash error"' in refused
    assert "Retry: no job &#39;gone&#39;" in post("retry", id="gone").get_data(as_text=True)
    # destructive: a confirmation page first, nothing removed until it is confirmed
    ask = post("remove", id=delayed[0])
    assert "Remove?" in ask.get_data(as_text=True) and 'name="confirm" value="yes"' in ask.get_data(as_text=True)
    assert queue.get_job(delayed[0]) is not None
    post("remove", id=delayed[0], confirm="yes")
    assert queue.get_job(delayed[0]) is None
    assert queue.get_job_counts("waiting")["waiting"] == 5
    assert "bad" in post("clean", state="waiting", grace="soon", confirm="yes").get_data(as_text=True)
    assert "removed 5 jobs (waiting)" in post("clean", state="waiting", grace="0",
                                              confirm="yes").get_data(as_text=True)
    queue.add("w", {})
    post("drain")
    assert queue.get_job_counts("waiting")["waiting"] == 1
    assert "removed 1 job waiting" in post("drain", confirm="yes").get_data(as_text=True)
    assert queue.get_job_counts("waiting")["waiting"] == 0
    queue.add("w", {}), queue.add("d", {}, delay=600_000)
    assert "(delayed ones too)" in post("drain", delayed="1").get_data(as_text=True)
    assert "removed 2 jobs waiting and delayed" in post("drain", delayed="1", confirm="yes").get_data(as_text=True)
    assert queue.get_job_counts("waiting", "delayed") == {"waiting": 0, "delayed": 0}


def test_a_job_is_cancelled_from_its_page_waiting_or_running(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    waiting = queue.add("w", {}, delay=600_000)
    client = Client(Dashboard(connection, prefix=prefix))
    page = client.get(f"/job?q=orders&id={waiting.id}")
    assert "/action/cancel" in [attrs.get("action") for tag, attrs in tags_of(page.get_data(as_text=True))
                                if tag == "form"]
    token = token_of(page)

    def post(**form: str) -> str:
        return client.post("/action/cancel", data={"queue": "orders", "csrf": token, **form},
                           follow_redirects=True).get_data(as_text=True)

    ask = post(id=waiting.id, reason="wrong order")
    assert "Cancel?" in ask and "it ends failed as cancelled and is not retried" in ask and "deletes" not in ask
    assert queue.get_job(waiting.id).get_state() == "delayed"  # asked first, nothing done
    assert "it had not started" in html.unescape(post(id=waiting.id, reason="wrong order", confirm="yes"))
    cancelled = queue.get_job(waiting.id)
    assert cancelled.get_state() == "failed" and cancelled.failed_reason == "cancelled: wrong order"
    again = html.unescape(post(id=waiting.id, confirm="yes"))
    assert 'class="flash error"' in again and "not cancelled: it finished already" in again
    assert "no job 'nope'" in html.unescape(post(id="nope", confirm="yes"))
    body = client.get(f"/job?q=orders&id={waiting.id}").get_data(as_text=True)
    assert "/action/cancel" not in [attrs.get("action") for tag, attrs in tags_of(body) if tag == "form"]

    started = threading.Event()

    def obedient(job: Any) -> None:
        started.set()
        while not job.cancelled:
            time.sleep(0.01)
        job.raise_if_cancelled()

    running = queue.add("r", {})
    with Running(Worker(connection, "orders", obedient, prefix=prefix)):
        assert started.wait(10)
        assert "it is running: its worker is told" in html.unescape(post(id=running.id, confirm="yes"))
        assert wait_until(lambda: queue.get_job(running.id).get_state() == "failed")
    assert queue.get_job(running.id).failed_reason == "cancelled: no reason given"


def test_read_only_shows_no_button_and_refuses_every_action(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    job = queue.add("o", {}, delay=60_000)
    writable = Client(Dashboard(connection, prefix=prefix))
    token = token_of(writable.get(f"/job?q=orders&id={job.id}"))
    client = Client(Dashboard(connection, prefix=prefix, read_only=True))
    for path in ("/", "/queue?q=orders&state=delayed", f"/job?q=orders&id={job.id}", "/schedulers?q=orders"):
        body = client.get(path).get_data(as_text=True)
        assert "<form class=\"action\"" not in body and "csrf" not in body, path
    assert "read-only" in client.get("/").get_data(as_text=True)
    for action in ("promote", "pause", "drain", "nonexistent"):
        answer = client.post(f"/action/{action}", data={"queue": "orders", "csrf": token, "id": job.id})
        assert answer.status_code == 403 and "read-only" in answer.get_data(as_text=True)
    assert queue.get_job(job.id).get_state() == "delayed" and not queue.is_paused()


def test_schedulers_with_their_next_runs_and_outcomes(connection: redis.Redis, prefix: str) -> None:
    scheduler = JobScheduler(connection, "reports", prefix=prefix)
    scheduler.upsert("nightly", {"pattern": "0 2 * * *", "tz": "Europe/Berlin"}, "report")
    scheduler.upsert("tick", {"every": 600_000}, "tick")
    queue = Queue(connection, "reports", prefix=prefix)
    tick = scheduler.get("tick")

    def fail(job: Any) -> None:
        raise RuntimeError("no report today")

    with Running(Worker(connection, "reports", fail, prefix=prefix)):
        assert wait_until(lambda: queue.get_job_counts("failed")["failed"] == 1)
    body = Client(Dashboard(connection, prefix=prefix)).get("/schedulers?q=reports").get_data(as_text=True)
    assert "cron <code>0 2 * * *</code>" in body and "Europe/Berlin" in body and "every 10.0 min" in body
    tbody = body.split("<tbody>", 1)[1]
    nightly_row, tick_row = sorted(re.findall(r"<tr>(.*?)</tr>", tbody, re.DOTALL), key=lambda r: "tick" in r)
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:00:00\.000Z<br>", nightly_row)) == 5
    assert "failed" in tick_row and "no report today" in tick_row
    assert f"/job?q=reports&amp;id=repeat%3Atick%3A{tick.next_millis}" in tick_row


def test_a_schedule_is_paused_resumed_and_run_now_from_its_page(connection: redis.Redis, prefix: str) -> None:
    scheduler = JobScheduler(connection, "reports", prefix=prefix)
    scheduler.upsert("hourly", {"every": 3_600_000, "start_date": 10**13}, "report", misfire="skip",
                     misfire_grace_ms=300_000)
    client = Client(Dashboard(connection, prefix=prefix))
    page = client.get("/schedulers?q=reports")
    body = page.get_data(as_text=True)
    assert "missed runs: skip within 5.0 min" in body and ">running<" in body
    buttons = [attrs.get("action") for tag, attrs in tags_of(body) if tag == "form"]
    assert "/action/pause-scheduler" in buttons and "/action/resume-scheduler" not in buttons
    token = token_of(page)

    def post(action: str, **form: str) -> str:
        return client.post(f"/action/{action}", data={"queue": "reports", "csrf": token, **form},
                           follow_redirects=True).get_data(as_text=True)

    assert "scheduler &#39;hourly&#39; paused" in post("pause-scheduler", scheduler="hourly")
    assert scheduler.get("hourly").paused
    body = client.get("/schedulers?q=reports").get_data(as_text=True)
    buttons = [attrs.get("action") for tag, attrs in tags_of(body) if tag == "form"]
    assert ">paused<" in body and "/action/resume-scheduler" in buttons and "/action/pause-scheduler" not in buttons
    assert "was paused already" in post("pause-scheduler", scheduler="hourly")
    ran = post("run-scheduler-now", scheduler="hourly")
    manual = Queue(connection, "reports", prefix=prefix).get_jobs("waiting")
    assert len(manual) == 1 and manual[0].id.startswith("repeat:hourly:manual-")
    assert repr(manual[0].id) in html.unescape(ran)
    assert "resumed" in post("resume-scheduler", scheduler="hourly") and not scheduler.get("hourly").paused
    assert "was not paused" in post("resume-scheduler", scheduler="hourly")
    refused = post("pause-scheduler", scheduler="nope")
    assert 'class="flash error"' in refused and "no job scheduler &#39;nope&#39;" in refused
    assert 'class="flash error"' in post("run-scheduler-now") and scheduler.count() == 1


def test_throughput_chart_from_the_metrics_keys(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    client = Client(Dashboard(connection, prefix=prefix))
    queue.add("o", {})
    assert "No metrics" in client.get("/queue?q=orders").get_data(as_text=True)
    connection.rpush(f"{prefix}:{{orders}}:metrics:completed:data", 7, 3, 0, 5)
    connection.hset(f"{prefix}:{{orders}}:metrics:completed", mapping={"count": 15, "prevTS": 1, "prevCount": 0})
    body = client.get("/queue?q=orders").get_data(as_text=True)
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart"' in body
    assert "peak 7/min" in body and "completed 15" in body and "failed 0" in body


def test_fragments_refresh_counts_and_job_state(connection: redis.Redis, prefix: str) -> None:
    queue = Queue(connection, "orders", prefix=prefix)
    job = queue.add("o", {})
    client = Client(Dashboard(connection, prefix=prefix))
    page = client.get("/queue?q=orders").get_data(as_text=True)
    assert 'data-poll="/fragment/queue?q=orders&amp;state=waiting"' in page
    queue.add("o2", {})
    fragment = client.get("/fragment/queue?q=orders&state=waiting").get_data(as_text=True)
    assert re.search(r'state=waiting">waiting <span class="count">2</span>', fragment)
    assert "<html" not in fragment
    queue.update_progress(job.id, 42)
    status = client.get(f"/fragment/job?q=orders&id={job.id}").get_data(as_text=True)
    assert '<progress max="100" value="42"></progress> 42%' in status
