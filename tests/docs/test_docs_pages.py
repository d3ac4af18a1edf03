"""Every docs page listed here runs as a test: its code blocks in order, on fakeredis and on a
real Redis (tests/support/docs.py says what is run, what is checked, and how a page marks it).

The real run gets a redis-server of its own, so the pages may use plain queue names
("reports", "emails") as a reader's code would, without meeting other tests' keys.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.docs import page_blocks, run_page
from support.docs_redis import RedisTarget
from support.docs_setup import hidden_setup_problems

ROOT = Path(__file__).resolve().parents[2]

#: The pages whose examples run. Add a page here, one line, once its blocks run.
PAGES = [
    "README.md",
    "docs/coming-from.md",
    "docs/coverage.md",
    "docs/dashboard.md",
    "docs/cron.md",
    "docs/deployment.md",
    "docs/django.md",
    "docs/events.md",
    "docs/flask.md",
    "docs/hosting.md",
    "docs/metrics.md",
    "docs/operating.md",
    "docs/protocol.md",
    "docs/queue.md",
    "docs/registry.md",
    "docs/scheduler.md",
    "docs/security.md",
    "docs/testing.md",
    "docs/worker.md",
    "docs/worker-command.md",
]

#: Pages being written now whose authors list them in PAGES when their blocks run (move the
#: line up then). Every page of docs/ is in one list or the other.
IN_PROGRESS: list[str] = []


@pytest.mark.parametrize("page", PAGES)
def test_no_example_reads_what_only_hidden_setup_made(page: str) -> None:
    assert hidden_setup_problems(ROOT / page) == []


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("backend", ["real", "fake"])
def test_the_examples_of_the_page_run(page: str, backend: str, tmp_path: Path,
                                      redis_server_factory: Callable[..., object]) -> None:
    path = ROOT / page
    if backend == "real":
        url = redis_server_factory(persistent=False).url  # type: ignore[attr-defined]
        target = RedisTarget.real(url)
        env = {"ECHOMQ_TEST_BACKEND": "real", "ECHOMQ_TEST_REDIS_URL": url}
    else:
        target = RedisTarget.fake()
        env = {"ECHOMQ_TEST_BACKEND": "fake"}
    client = target.client()
    try:
        ran = run_page(path, tmp_path, target=target, connection=client, env=env)
    finally:
        client.close()
    visible = [b for b in page_blocks(path) if not b.hidden]
    assert ran.skipped == len([b for b in visible if "skip" in b.directives])
    assert ran.blocks + ran.skipped == len(visible)


def test_every_page_of_the_docs_is_listed() -> None:
    pages = {"README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))}
    assert sorted(pages - set(PAGES) - set(IN_PROGRESS)) == [], "list the new page in PAGES"
    assert sorted(set(PAGES) & set(IN_PROGRESS)) == []
    assert [p for p in PAGES if not (ROOT / p).is_file()] == []
    assert len(PAGES) == len(set(PAGES))
