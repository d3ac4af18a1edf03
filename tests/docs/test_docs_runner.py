"""The docs runner itself (tests/support/docs.py): what it runs, what it checks, what it refuses."""

from __future__ import annotations

import signal
import sys
import types
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from support.docs import page_blocks, python_blocks, run_page
from support.docs_redis import RedisTarget

FENCE = "```"


def write_page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text.replace("~~~", FENCE), encoding="utf-8")
    return page


def test_a_page_that_fails_names_its_line(tmp_path: Path) -> None:
    page = write_page(tmp_path, "# A page\n\n~~~python\nvalue = 1\n~~~\n\n<!-- docs-test: skip -->\n"
                                "~~~python\nnot run\n~~~\n\n~~~python\nassert value == 2, 'wrong'\n~~~\n")
    assert [(b.line, dict(b.directives)) for b in python_blocks(page)] == [(4, {}), (9, {"skip": ""}), (13, {})]
    with pytest.raises(AssertionError, match="wrong") as failure:
        run_page(page, tmp_path)
    assert any(entry.lineno + 1 == 13 and str(entry.path) == str(page) for entry in failure.traceback)


def test_what_the_runner_cannot_read_is_refused(tmp_path: Path) -> None:
    cases = {
        "<!-- docs-test: sometimes -->\n~~~python\nx = 1\n~~~\n": "unknown docs-test directive 'sometimes'",
        "~~~python\nx = 1\n": "never closed",
        "<!-- docs-test: skip -->\n\nSome text.\n": "not followed by a code block",
        "~~~pyhton\nx = 1\n~~~\n": "does not know the language 'pyhton'",
        "Run this:\n\n    echomq demo\n": "indented code block names no language",
        "<!-- docs-test: setup\nx = 1\n": "setup comment never closed",
    }
    for text, message in cases.items():
        with pytest.raises(ValueError, match=message):
            page_blocks(write_page(tmp_path, text))
    # A list item's indented continuation is not a code block.
    assert page_blocks(write_page(tmp_path, "- an item\n\n    its second paragraph\n")) == []


def test_hidden_setup_runs_in_order_and_is_not_counted_as_shown(tmp_path: Path) -> None:
    page = write_page(tmp_path, "<!-- docs-test: setup\ndef send(job):\n    return 'sent'\n-->\n\n"
                                "~~~python\nresult = send(None)\n~~~\n\n"
                                "<!-- docs-test: setup\nassert result == 'sent'\n-->\n")
    blocks = page_blocks(page)
    assert [(b.line, b.hidden) for b in blocks] == [(2, True), (7, False), (11, True)]
    ran = run_page(page, tmp_path)
    assert (ran.python, ran.hidden, ran.blocks) == (1, 2, 1)


@pytest.mark.parametrize("backend", ["real", "fake"])
def test_every_client_a_page_makes_lands_on_the_backend(backend: str, tmp_path: Path,
                                                        redis_server_factory: Callable[..., object]) -> None:
    target = (RedisTarget.real(redis_server_factory(persistent=False).url)  # type: ignore[attr-defined]
              if backend == "real" else RedisTarget.fake())
    key = f"docs-runner-{uuid.uuid4().hex}"
    page = write_page(tmp_path, f"""~~~python
import redis
from echomq import Queue

redis.Redis().set("{key}:plain", 1)
redis.Redis(host="redis.internal", port=6380, ssl=True, ssl_ca_certs="/etc/ssl/ca.pem").set("{key}:tls", 1)
redis.Redis.from_url("rediss://app:secret@redis.internal:6380/0").set("{key}:url", 1)
Queue("redis://localhost:6379/0", "{key}").add("job", {{}})
~~~
""")
    run_page(page, tmp_path, target=target)
    client = target.client()
    assert [client.exists(f"{key}:{name}") for name in ("plain", "tls", "url")] == [1, 1, 1]
    assert client.llen(f"emq:{{{key}}}:wait") == 1
    shared = redis.Redis(socket_connect_timeout=1)
    try:
        assert shared.exists(f"{key}:plain", f"emq:{{{key}}}:wait") == 0, "a page reached the shared Redis"
    except redis.ConnectionError:
        pass  # no shared Redis on this machine: nothing to reach either
    finally:
        shared.close()
    assert type(redis.Redis()).__module__ == "redis.client"  # outside a page, clients are what they say


def test_a_worker_that_blocks_in_run_is_closed_once_its_queue_is_idle(tmp_path: Path) -> None:
    page = write_page(tmp_path, """~~~python
from echomq import Queue, Worker
conn = redis.Redis()
Queue(conn, "invoices").add("invoice", {"n": 1})
~~~

<!-- docs-test: close=worker -->
~~~python
worker = Worker(conn, "invoices", lambda job: job.data["n"] + 1)
worker.run()
~~~

<!-- docs-test: setup
assert Queue(conn, "invoices").get_job_counts()["completed"] == 1
-->
""".replace("~~~python\nfrom", "~~~python\nimport redis\nfrom"))
    assert run_page(page, tmp_path).python == 2


def test_a_page_that_leaves_a_worker_running_fails_naming_it(tmp_path: Path) -> None:
    page = write_page(tmp_path, "~~~python\nimport redis\nfrom echomq import Worker\n"
                                "worker = Worker(redis.Redis(), 'q', lambda job: None)\nworker.start()\n~~~\n")
    with pytest.raises(AssertionError, match=r"left running: worker \(Worker\)"):
        run_page(page, tmp_path)


def test_a_page_past_its_time_limit_is_stopped_and_fails(tmp_path: Path) -> None:
    page = write_page(tmp_path, "~~~python\nimport redis\nfrom echomq import Worker\n"
                                "worker = Worker(redis.Redis(), 'q', lambda job: None)\nworker.run()\n~~~\n")
    with pytest.raises(AssertionError, match="did not finish within 1 s"):
        run_page(page, tmp_path, time_limit=1.0)


def test_a_loop_that_never_ends_is_interrupted(tmp_path: Path) -> None:
    page = write_page(tmp_path, "~~~python\nimport time\nwhile True:\n    time.sleep(0.01)\n~~~\n")
    with pytest.raises(AssertionError, match=r"did not finish within 0\.5 s"):
        run_page(page, tmp_path, time_limit=0.5)


def test_project_files_are_importable_and_the_process_is_left_as_it_was(tmp_path: Path) -> None:
    page = write_page(tmp_path, """<!-- docs-test: file=shop/jobs.py -->
~~~python
def charge(job):
    return "charged"
~~~

~~~python
import os
import signal
from shop.jobs import charge
assert charge(None) == "charged"
signal.signal(signal.SIGTERM, lambda *_: None)
os.environ["DOCS_RUNNER_PAGE"] = "set"
open("notes.txt", "w").close()
~~~
""")
    before = signal.getsignal(signal.SIGTERM)
    elsewhere = types.ModuleType("shop")              # a package of the same name the suite imported
    sys.modules["shop"] = elsewhere
    try:
        ran = run_page(page, tmp_path)
        assert sys.modules["shop"] is elsewhere       # set aside while the page ran, then put back
    finally:
        del sys.modules["shop"]
    assert (ran.files, ran.python) == (1, 1)
    assert signal.getsignal(signal.SIGTERM) is before
    assert "shop.jobs" not in sys.modules and "DOCS_RUNNER_PAGE" not in __import__("os").environ
    assert (tmp_path / "project-page" / "notes.txt").is_file()


def test_a_signature_block_must_be_the_real_one(tmp_path: Path) -> None:
    right = "<!-- docs-test: signature -->\n~~~python\nQueueEvents(connection, queue_name, *, prefix=\"emq\", " \
            "last_event_id=\"$\",\n            block_ms=5000, handler=None, count=1000, history=10000)\n~~~\n"
    assert run_page(write_page(tmp_path, right), tmp_path).checked == 1
    wrong = right.replace("block_ms=5000", "block_ms=1000")
    with pytest.raises(AssertionError, match="is documented as"):
        run_page(write_page(tmp_path, wrong), tmp_path)


@pytest.mark.parametrize(("block", "message"), [
    ("~~~console\n$ echomq queue stats --queue orders --json\n~~~\n", None),
    ("~~~console\n$ echomq queue stat --queue orders\n~~~\n", "no such command"),
    ("~~~console\n$ echomq queue stats --queeu orders\n~~~\n", "refuses"),
    ("~~~console\n$ echomq queue stats --queue orders\nechomq queue stat: output, not a command\n~~~\n", None),
    ("~~~text\necho: echomq is not a command at the start\necho nothing\n~~~\n", None),
    ("~~~text\nechomq schedulers list --queue reports [--redis URL] [--asc] [--json]\n~~~\n", None),
    ("~~~text\nechomq schedulers list --queue reports [--jsn]\n~~~\n", "no option --jsn"),
    ("~~~sh\nREDIS_URL=redis://x:1/0 echomq job show 2 --queue orders --json | jq .state  # a comment\n~~~\n", None),
    ("~~~sh\nmake test && make nosuch\n~~~\n", "no target 'nosuch'"),
    ("~~~sh\npip install 'echomq[hiredis]'\npip install 'echomq[nosuch]'\n~~~\n", "no extra 'nosuch'"),
    ("~~~sh\ncd echomq-python\npip install -e '.[hiredis,testing]'  # a checkout\n~~~\n", None),
    ("~~~sh\npip install -e '.[hiredis,nosuch]'\n~~~\n", "no extra 'nosuch'"),
    ("~~~json\n{\"a\": 1,}\n~~~\n", "does not parse"),
    ("~~~toml\n[tool]\nx = 1\n~~~\n", None),
    ("~~~js\nconst answer = ;\n~~~\n", "does not parse"),
])
def test_blocks_that_are_not_run_are_checked(tmp_path: Path, block: str, message: str | None) -> None:
    page = write_page(tmp_path, block)
    if message is None:
        assert run_page(page, tmp_path).checked == 1
    else:
        with pytest.raises(AssertionError, match=message):
            run_page(page, tmp_path)


# -- the hidden-setup rule (tests/support/docs_setup.py) ---------------------------------------------

@pytest.mark.parametrize(("text", "problems"), [
    # a name only hidden setup binds, read by an example: each kind of binding
    ("<!-- docs-test: setup\nimport redis\nconn = redis.Redis()\n-->\n\n~~~python\nconn.ping()\n~~~\n",
     ["page.md:7: the example reads 'conn', which the hidden setup at page.md:2 binds"]),
    ("<!-- docs-test: setup\ndef send(job): ...\n-->\n\n~~~python\nsend(None)\n~~~\n",
     ["page.md:6: the example reads 'send', which the hidden setup at page.md:2 binds"]),
    ("<!-- docs-test: setup\nfrom echomq import Worker\n-->\n\n~~~python\nWorker\n~~~\n",
     ["page.md:6: the example reads 'Worker', which the hidden setup at page.md:2 binds"]),
    ("<!-- docs-test: setup\nfor n in range(3): pass\n-->\n\n~~~python\nprint(n)\n~~~\n",
     ["page.md:6: the example reads 'n', which the hidden setup at page.md:2 binds"]),
    # read inside a function of the example: still the hidden value
    ("<!-- docs-test: setup\nconn = None\n-->\n\n~~~python\ndef f():\n    return conn\n~~~\n",
     ["page.md:6: the example reads 'conn', which the hidden setup at page.md:2 binds"]),
    # hidden setup that rebinds what an example bound first is the offence too
    ("~~~python\nconn = 1\n~~~\n\n<!-- docs-test: setup\nconn = 2\n-->\n\n~~~python\nprint(conn)\n~~~\n",
     ["page.md:10: the example reads 'conn', which the hidden setup at page.md:6 binds"]),
    # a job id only hidden code made, by number or by job_id=
    ("~~~python\nq = 1\n~~~\n\n<!-- docs-test: setup\nassert [j for j in ('42',)]\n-->\n\n"
     "~~~python\nq.get_job('42')\n~~~\n",
     ["page.md:10: the example names job '42', which only the hidden setup at page.md:6 made"]),
    ("<!-- docs-test: setup\nq.add('x', job_id='charge-9')\n-->\n\n~~~python\nq.get_job('charge-9')\n~~~\n",
     ["page.md:6: the example names job 'charge-9', which only the hidden setup at page.md:2 made"]),
    # allowed: asserts, clean-up, state for a worker to find, names of its own, builtins
    ("~~~python\nconn = 1\nworker = 2\n~~~\n\n<!-- docs-test: setup\nassert conn == 1\nhelper = [conn]\n"
     "worker.close if False else None\n-->\n\n~~~python\nprint(conn, worker, len([1]))\n~~~\n", []),
    ("<!-- docs-test: setup\nconn = 1\n-->\n\n~~~python\nconn = 2\nprint(conn)\n~~~\n", []),
    ("<!-- docs-test: setup\nconn = 1\n-->\n\n~~~python\ndef f(conn):\n    return conn\n~~~\n", []),
    ("~~~python\njob = q.get_job('42')\n~~~\n\n<!-- docs-test: setup\nassert '42'\n-->\n\n"
     "~~~python\nq.get_job('42')\n~~~\n", []),
    ("<!-- docs-test: setup\nlen = 3\n-->\n\n~~~python\nprint(len([]))\n~~~\n", []),
    # blocks outside the page's namespace take no part
    ("<!-- docs-test: setup\nconn = 1\n-->\n\n<!-- docs-test: skip -->\n~~~python\nconn\n~~~\n\n"
     "<!-- docs-test: file=app.py -->\n~~~python\nconn\n~~~\n\n<!-- docs-test: pytest -->\n~~~python\nconn\n~~~\n",
     []),
])
def test_the_hidden_setup_rule(tmp_path: Path, text: str, problems: list[str]) -> None:
    from support.docs_setup import hidden_setup_problems

    found = hidden_setup_problems(write_page(tmp_path, text))
    assert len(found) == len(problems) and all(f.startswith(p) for f, p in zip(found, problems)), found


def test_the_hidden_setup_rule_says_what_to_do(tmp_path: Path) -> None:
    from support.docs_setup import hidden_setup_problems

    page = write_page(tmp_path, "<!-- docs-test: setup\nconn = 1\nq.add('x', job_id='a-1')\n-->\n\n"
                                "~~~python\nconn.get_job('a-1')\n~~~\n")
    assert hidden_setup_problems(page) == [
        "page.md:7: the example reads 'conn', which the hidden setup at page.md:2 binds: show it in the example "
        "(or an earlier one)",
        "page.md:7: the example names job 'a-1', which only the hidden setup at page.md:2 made: show how the job "
        "comes about, or find it (queue.get_jobs(...), job.id)",
    ]
