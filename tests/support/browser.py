"""A real browser for the dashboard's tests: Debian's Chromium, driven by Playwright.

Playwright never downloads a browser here: the tests launch ``/usr/bin/chromium``, installed
from Debian's ``chromium`` package when missing (``apt-get``, as root; a machine where that is
impossible fails the tests with the command to run). The launch flags keep the browser off
the network and away from the sandbox a container cannot give it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def ensure_chromium() -> str:
    """``/usr/bin/chromium``, installing Debian's package first when it is missing."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "install", "-y", "--no-install-recommends", "chromium"], ["apt-get", "update"],
                    ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        if os.access(CHROMIUM, os.X_OK):
            break
        subprocess.run(command, env=env, capture_output=True, check=False, timeout=900)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing and could not be installed: run `apt-get install -y chromium` as root")
    return CHROMIUM


@contextmanager
def launched() -> Iterator[Any]:
    """One headless Chromium for a whole session."""
    executable = ensure_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` on a free port of 127.0.0.1 for the block; its base URL."""
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
