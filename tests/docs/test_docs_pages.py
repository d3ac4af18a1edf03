"""Every docs page listed here runs as a test: its ```python blocks in order, on fakeredis and on
a real Redis (tests/support/docs.py says how a page marks what to skip or swap).

The real run gets a redis-server of its own, so the pages may use plain queue names
("reports", "emails") as a reader's code would, without meeting other tests' keys.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import fakeredis
import pytest
import redis

from support.docs import python_blocks, run_page

ROOT = Path(__file__).resolve().parents[2]

#: The pages whose examples run; add a page by listing it.
PAGES = ["docs/testing.md"]


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("backend", ["real", "fake"])
def test_the_examples_of_the_page_run(page: str, backend: str, tmp_path: Path,
                                      redis_server_factory: Callable[..., object]) -> None:
    path = ROOT / page
    if backend == "real":
        server = redis_server_factory(persistent=False)
        url = server.url  # type: ignore[attr-defined]
        client: redis.Redis = redis.Redis.from_url(url)
        env = {"ECHOMQ_TEST_BACKEND": "real", "ECHOMQ_TEST_REDIS_URL": url}
    else:
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        env = {"ECHOMQ_TEST_BACKEND": "fake"}
    try:
        ran = run_page(path, tmp_path, connection=client, env=env)
    finally:
        client.close()
    assert ran == len([b for b in python_blocks(path) if "skip" not in b.directives]) > 0


def test_a_page_that_fails_names_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nvalue = 1\n```\n\n<!-- docs-test: skip -->\n```python\nnot run\n```\n\n"
                    "```python\nassert value == 2, 'wrong'\n```\n", encoding="utf-8")
    assert [(b.line, dict(b.directives)) for b in python_blocks(page)] == [(4, {}), (9, {"skip": ""}), (13, {})]
    with pytest.raises(AssertionError, match="wrong") as failure:
        run_page(page, tmp_path)
    assert any(entry.lineno + 1 == 13 and str(entry.path) == str(page) for entry in failure.traceback)


def test_an_unknown_directive_or_an_open_fence_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: sometimes -->\n```python\nx = 1\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown docs-test directive 'sometimes'"):
        python_blocks(page)
    page.write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="never closed"):
        python_blocks(page)
