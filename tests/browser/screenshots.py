"""Screenshots of the dashboard's main pages for docs/dashboard.md (not a test).

Run: ``.venv/bin/python tests/browser/screenshots.py`` (REDIS_URL, default the local server).
Seeds a few queues under a prefix of its own (deleted afterwards), serves the dashboard and
shoots the overview, a failed list, a job and the schedulers page with Debian's Chromium into
docs/dashboard-*.png.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import redis

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from echomq import JobScheduler, Queue, Worker
from echomq.contrib.dashboard import Dashboard

from support.browser import launched, served
from support.prefixes import delete_prefix
from support.workers import Running, wait_until

DOCS = TESTS.parent / "docs"


def seed(client: redis.Redis, prefix: str) -> str:
    orders = Queue(client, "orders", prefix=prefix)
    mail = Queue(client, "mail", prefix=prefix)
    reports = Queue(client, "reports", prefix=prefix)
    orders.set_global_concurrency(8)
    mail.set_global_rate_limit(100, 60_000)
    for n in range(40):
        orders.add("charge", {"order": 1000 + n, "amount": 19.5 + n, "card": "visa"}, attempts=1)
    for n in range(12):
        mail.add("welcome", {"to": f"user{n}@example.com"}, delay=3_600_000)

    def process(job: Any) -> dict[str, Any]:
        job.log(f"charging order {job.data['order']}")
        job.update_progress(100)
        if job.data["order"] % 7 == 0:
            raise RuntimeError(f"card declined for order {job.data['order']}")
        return {"charged": job.data["amount"]}

    with Running(Worker(client, "orders", process, prefix=prefix, metrics={"maxDataPoints": 60})):
        wait_until(lambda: orders.get_job_counts("completed", "failed")["completed"] +
                   orders.get_job_counts("failed")["failed"] == 40, timeout=30)
    for n in range(5):
        orders.add("charge", {"order": 2000 + n, "amount": 5}, priority=n + 1)
    scheduler = JobScheduler(client, "reports", prefix=prefix)
    scheduler.upsert("nightly-sales", {"pattern": "0 2 * * *", "tz": "Europe/Berlin"}, "sales-report",
                     {"format": "pdf"})
    scheduler.upsert("heartbeat", {"every": 300_000}, "heartbeat")
    mail.pause()
    reports.add("adhoc", {"kind": "weekly"})
    with Running(Worker(client, "reports", lambda job: {"rows": 120}, prefix=prefix)):
        wait_until(lambda: reports.get_job_counts("completed")["completed"] >= 2, timeout=30)
    return orders.get_jobs("failed", 0, 0)[0].id


def main() -> None:
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"shots-{uuid.uuid4().hex[:6]}"
    try:
        failed_id = seed(client, prefix)
        with served(Dashboard(client, prefix=prefix, label="redis://127.0.0.1:6379/0")) as url, launched() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            for name, path in (("overview", "/"), ("failed", "/queue?q=orders&state=failed"),
                               ("job", f"/job?q=orders&id={failed_id}"), ("schedulers", "/schedulers?q=reports")):
                page.goto(url + path)
                page.screenshot(path=str(DOCS / f"dashboard-{name}.png"), full_page=False)
                print(f"docs/dashboard-{name}.png")
    finally:
        delete_prefix(client, prefix)
        client.close()


if __name__ == "__main__":
    main()
