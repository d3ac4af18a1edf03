"""The dashboard as a user meets it, in Chromium (conftest.py): finding a failed job from the
overview and retrying it while a worker runs, hostile job data, the token and read-only rules.

On the real Redis only: the browser adds nothing a backend changes, and the pages' reads and
the actions are checked on real Redis and fakeredis in tests/integration/test_dashboard.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from playwright.sync_api import expect

from echomq import Queue, Worker

from support.browser import served
from support.workers import Running, wait_until

HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">'
HOSTILE_DATA = "</pre><script>window.__pwned=2</script>"
HOSTILE_REASON = '"><svg onload=window.__pwned=3>'


@pytest.fixture
def shop(redis_client: redis.Redis, browser_prefix: str) -> Iterator[tuple[Queue, set[str]]]:
    """A queue with a worker running: each job fails on its first run (with the job's
    ``reason``) and completes when retried. Yields the queue and the ids that have run."""
    queue = Queue(redis_client, f"shop-{uuid.uuid4().hex[:6]}", prefix=browser_prefix)
    ran: set[str] = set()

    def process(job: Any) -> str:
        if job.id not in ran:
            ran.add(job.id)
            raise RuntimeError(job.data.get("reason", "card declined"))
        return "charged"

    with Running(Worker(redis_client, queue.name, process, prefix=browser_prefix)):
        yield queue, ran


def failed_job(queue: Queue, **data: Any) -> str:
    job_id = queue.add(data.pop("name", "charge"), data, attempts=1).id
    assert wait_until(lambda: queue.get_job(job_id).get_state() == "failed", timeout=5)
    return job_id


def test_a_user_finds_a_failed_job_from_the_overview_and_retries_it(page: Any, dashboard_url: str,
                                                                    shop: tuple[Queue, set[str]]) -> None:
    queue, _ran = shop
    job_id = failed_job(queue, order=42)
    page.goto(dashboard_url)
    page.get_by_role("link", name=queue.name, exact=True).click()  # shown within a poll or two
    expect(page.locator("h1")).to_have_text(queue.name)
    page.locator("nav.tabs a", has_text="failed").click()
    expect(page.locator("table.jobs a")).to_have_text([job_id])
    # while the page is open a worker fails another job: the counts follow, the list stays as read
    page.evaluate("document.querySelector('table.jobs').dataset.mark = 'kept'")
    failed_job(queue, order=43)
    expect(page.locator("nav.tabs a.current .count")).to_have_text("2")
    assert page.evaluate("document.querySelector('table.jobs').dataset.mark") == "kept"
    expect(page.locator("table.jobs a")).to_have_text([job_id])
    page.locator("table.jobs a", has_text=job_id).click()
    expect(page.locator("#job-status .badge")).to_have_text("failed")
    expect(page.locator("#job-status .reason")).to_have_text("card declined")
    page.locator("button[data-action=retry]").click()
    expect(page.locator(".flash")).to_contain_text("moved back to wait")
    expect(page.locator("#job-status .badge")).to_have_text("completed")  # the worker ran it; the page polled
    assert queue.get_job(job_id).return_value == "charged"
    assert page.seen == []


def test_hostile_job_data_runs_no_script_and_breaks_no_layout(page: Any, dashboard_url: str,
                                                              shop: tuple[Queue, set[str]]) -> None:
    queue, _ran = shop
    deep: Any = HOSTILE_DATA
    for _ in range(300):
        deep = [deep]
    job_id = failed_job(queue, name=HOSTILE_NAME, reason=HOSTILE_REASON, html=HOSTILE_DATA, long="x" * 50_000,
                        deep=deep)
    queue.log(job_id, HOSTILE_DATA)
    queue.update_progress(job_id, HOSTILE_NAME)
    for path in ("/", f"/queue?q={queue.name}&state=failed", f"/job?q={queue.name}&id={job_id}"):
        page.goto(dashboard_url + path)
        if path.startswith("/job"):
            page.wait_for_timeout(450)  # two polls: the job's fragment, swapped in, must be as harmless
        assert page.evaluate("window.__pwned") is None, path
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
    expect(page.locator("h1.jobtitle")).to_contain_text(HOSTILE_NAME)
    expect(page.locator("#job-status .reason")).to_have_text(HOSTILE_REASON)
    expect(page.locator("pre.logs")).to_contain_text(HOSTILE_DATA)
    assert page.locator("img, svg:not(.chart), iframe").count() == 0
    assert page.seen == []


def test_a_forged_token_and_a_read_only_dashboard_change_nothing(page: Any, dashboard_url: str, read_only_url: str,
                                                                 shop: tuple[Queue, set[str]]) -> None:
    queue, _ran = shop
    job_id = failed_job(queue)
    page.goto(f"{dashboard_url}/job?q={queue.name}&id={job_id}")
    with page.expect_navigation():  # one script: the page's own polling cannot swap the form meanwhile
        page.evaluate("""() => { const form = document.querySelector('button[data-action=retry]').form;
                                 form.elements.csrf.value = '0'.repeat(64); form.submit(); }""")
    expect(page.locator("body")).to_contain_text("missing or wrong action token")
    page.goto(f"{read_only_url}/job?q={queue.name}&id={job_id}")
    expect(page.locator(".badge.ro")).to_have_text("read-only")
    assert page.locator("form.action, button").count() == 0
    status = page.evaluate("""([queue, id]) => fetch('/action/retry', {method: 'POST',
        body: new URLSearchParams({queue: queue, id: id, csrf: 'x'})}).then(answer => answer.status)""",
                           [queue.name, job_id])
    assert status == 403
    assert queue.get_job(job_id).get_state() == "failed"


def test_the_flask_blueprint_in_the_browser_obeys_authorize(browser: Any, redis_client: redis.Redis,
                                                             browser_prefix: str, shop: tuple[Queue, set[str]]) -> None:
    from flask import Flask

    from echomq.contrib.flask import EchoMQ

    queue, _ran = shop
    job_id = failed_job(queue)
    app = Flask("shop")
    app.config.update(ECHOMQ_CONNECTION=redis_client, ECHOMQ_PREFIX=browser_prefix, SECRET_KEY="browser-test")
    extension = EchoMQ(app)
    extension.init_dashboard(app, authorize=lambda request: request.headers.get("X-User") == "ops" and "ops",
                             url_prefix="/ops/queues")
    with served(app) as url:
        stranger = browser.new_page()
        assert stranger.goto(f"{url}/ops/queues/").status == 403
        stranger.close()
        context = browser.new_context(extra_http_headers={"X-User": "ops"})
        page = context.new_page()
        seen: list[str] = []
        page.on("console", lambda message: seen.append(message.text) if message.type == "error" else None)
        page.goto(f"{url}/ops/queues/job?q={queue.name}&id={job_id}")
        expect(page.locator("#job-status .badge")).to_have_text("failed")
        page.locator("button[data-action=retry]").click()
        expect(page.locator("#job-status .badge")).to_have_text("completed")  # polled under the mount
        assert seen == []
        context.close()
