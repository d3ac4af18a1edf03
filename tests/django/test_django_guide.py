"""docs/django.md, followed as a newcomer follows it: from ``django-admin startproject`` to a
running worker, a synced nightly schedule, a passing ``manage.py test`` (and the same tests
under pytest-django) and gunicorn.

The page is read block by block, in order: each ``file=`` block is written where it says, each
``# mysite/settings.py, at the end`` block is appended to the settings startproject wrote, and
each shell line is run in the project folder. What runs until stopped (runserver, the worker,
gunicorn) is started, used as the page says (an order placed over HTTP gets its receipt), and
stopped at the end of its block. Only the ports differ from the page: a free one, not 8000.
Each backend gets a Redis of its own (the guide uses plain queue names, as a reader's would).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import fakeredis
import pytest
import redis

from support.django_site import Server, readers, wait_until
from support.docs import page_blocks
from support.servers import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "django.md"
APPENDED = "# mysite/settings.py, at the end"


@pytest.fixture(params=["real", "fake"])
def guide_redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A Redis of the guide's own: a private redis-server, or a fakeredis server over TCP."""
    if request.param == "real":
        factory: Callable[..., object] = request.getfixturevalue("redis_server_factory")
        yield factory(persistent=False).url  # type: ignore[attr-defined]
        return
    server = fakeredis.TcpFakeServer(("127.0.0.1", 0), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.server_address[1]}/0"
    finally:
        server.shutdown()
        server.server_close()


class Guide:
    """The reader's terminal: one project folder, one environment, what is left running."""

    def __init__(self, folder: Path, redis_url: str) -> None:
        self.folder = folder
        # The suite's own project is the default of this process's DJANGO_SETTINGS_MODULE.
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "mysite.settings", "REDIS_URL": redis_url}
        self.redis = redis.Redis.from_url(redis_url)
        self.running: dict[str, Server] = {}
        self.outputs: dict[str, str] = {}
        self.port = free_port()

    def run(self, line: str) -> None:
        words = shlex.split(line)
        if words[:2] == ["pip", "install"]:
            return  # installed already: the suite's own environment
        if words[0] == "django-admin":
            argv = [sys.executable, "-m", "django", *words[1:]]
        elif words[0] == "gunicorn":
            argv = [sys.executable, "-m", "gunicorn", *words[1:], "--bind", f"127.0.0.1:{self.port}"]
        elif words[0] == "pytest":
            argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]
        else:
            assert words[:2] == ["python", "manage.py"], line
            argv = [sys.executable, *words[1:]]
        if words[2:3] == ["runserver"]:
            argv.append(f"127.0.0.1:{self.port}")
        if words[0] == "gunicorn" or words[2:] in (["runserver"], ["echomq_worker"]):
            name = words[0] if words[0] == "gunicorn" else words[2]
            self.running[name] = Server(argv, self.env, self.folder / f"{name}.log", cwd=self.folder)
            return
        result = subprocess.run(argv, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=180,
                                check=False)
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
        self.outputs[line] = result.stdout + result.stderr

    def write(self, relative: str, code: str, *, append: bool = False) -> None:
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            code = path.read_text(encoding="utf-8") + "\n\n" + code
        path.write_text(code, encoding="utf-8")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def serving(self) -> bool:
        try:
            urllib.request.urlopen(self.url("/checkout/"), timeout=5)
        except urllib.error.HTTPError as exc:
            return exc.code == 405  # GET: require_POST answers 405 once the site is up
        except OSError:
            return False
        return False

    def receipt_sent(self, order: int) -> bool:
        line = ("python manage.py shell -c "
                f"\"from shop.models import Order; print(Order.objects.get(pk={order}).receipt_sent)\"")
        self.run(line)
        return self.outputs[line].strip().splitlines()[-1] == "True"

    def use_what_runs(self) -> None:
        """What the page does with its running processes, then stop them."""
        if "runserver" in self.running:
            assert wait_until(self.serving, timeout=60), self.running["runserver"].output()
            body = urllib.parse.urlencode({"email": "ada@example.com"}).encode()
            with urllib.request.urlopen(self.url("/checkout/"), data=body, timeout=10) as response:
                assert response.status == 201
                order = json.loads(response.read())["order"]
            assert wait_until(lambda: self.receipt_sent(order), timeout=60), self.running["echomq_worker"].output()
        if "gunicorn" in self.running:
            assert wait_until(lambda: readers(self.redis, "emails", "emq") == 2, timeout=60), \
                self.running["gunicorn"].output()
        for server in self.running.values():
            server.stop()
        if "echomq_worker" in self.running:
            assert self.running["echomq_worker"].process.returncode == 0  # SIGTERM: a graceful stop
            assert "('send_receipt') completed" in self.running["echomq_worker"].output()
        self.running = {}


def test_the_guide_from_an_empty_project_to_a_worker_a_schedule_and_a_passing_test(
        guide_redis_url: str, tmp_path: Path) -> None:
    guide = Guide(tmp_path, guide_redis_url)
    try:
        for block in page_blocks(PAGE):
            if block.hidden:
                continue
            if block.language in ("sh", "console", "bash"):
                for line in block.code.splitlines():
                    command = line.split(" # ")[0].strip()
                    if command:
                        guide.run(command)
                guide.use_what_runs()
            elif "file" in block.directives:
                guide.write(block.directives["file"], block.code)
            elif block.language == "python":
                assert block.code.startswith(APPENDED), f"{block.where}: which file is this block?"
                guide.write("mysite/settings.py", block.code, append=True)
    finally:
        for server in guide.running.values():
            server.stop()
        guide.redis.close()

    outputs = guide.outputs
    assert "would create reports/nightly-report" in outputs["python manage.py echomq_schedules --dry-run"]
    assert "created reports/nightly-report" in outputs["python manage.py echomq_schedules"]
    assert "1 declared: 0 created, 0 updated, 1 unchanged; 0 removed" in outputs[
        "python manage.py echomq_schedules --prune"]
    assert "Ran 2 tests" in outputs["python manage.py test shop"]
    assert "2 passed" in outputs["pytest shop/tests.py"]  # pytest-django: the same tests, each on a fresh fake
    assert "completed" in outputs["python manage.py echomq_worker --burst"]
