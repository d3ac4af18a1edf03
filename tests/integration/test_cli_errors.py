"""What a user of the ``echomq`` command sees when Redis is not there or an argument is wrong:
one line on stderr that says what is wrong, a non-zero exit status, never a traceback.

Each case runs the real command (``python -m echomq``) in a subprocess, bounded in time.
"""

from __future__ import annotations

import subprocess

import pytest

from support.cli import CONNECTING_COMMANDS, command_id, echomq
from support.servers import free_port


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def dead_url() -> str:
    """A URL with credentials on a port nothing listens on."""
    return f"redis://app:s3cret@127.0.0.1:{free_port()}/0"


@pytest.mark.parametrize("command", CONNECTING_COMMANDS, ids=command_id)
def test_an_unreachable_redis_is_one_line_on_stderr(dead_url: str, command: list[str]) -> None:
    done = echomq(*command, "--queue", "orders", "--redis", dead_url)
    line = one_line_error(done)
    port = dead_url.rsplit(":", 1)[1].split("/")[0]
    assert f"127.0.0.1:{port}" in line and "reach" in line
    assert "s3cret" not in done.stderr  # the URL's password is not echoed
    assert done.returncode == 1 and done.stdout == ""


@pytest.mark.parametrize("argv,names", [
    (["events", "tail", "--queue", "orders", "--from", "yesterday"], "--from"),
    (["events", "tail", "--queue", "orders", "--limit", "0"], "--limit"),
    (["events", "tail", "--queue", "orders", "--limit", "many"], "--limit"),
    (["events", "tail", "--queue", "a:b"], "queue"),
    (["events", "tail", "--queue", "orders", "--redis", "http://127.0.0.1:6379"], "--redis"),
    (["events", "tail", "--queue", "orders", "--prefix", "a{b"], "prefix"),
    (["events"], "SUBCOMMAND"),
    (["schedulers", "list", "--queue", "a{b}"], "queue"),
    (["schedulers", "list", "--queue", "orders", "--start", "first"], "--start"),
    (["schedulers", "get", "--queue", "orders"], "id"),
    (["schedulers", "upsert", "x", "--queue", "orders", "--every", "0"], "every"),
    (["schedulers", "upsert", "x", "--queue", "orders", "--every", "1000", "--data", "{bad"], "--data"),
    (["schedulers", "upsert", "x", "--queue", "orders"], "--every"),
    (["schedulers", "remove", "x", "--queue", "orders", "--redis", "redis://127.0.0.1:notaport"], "--redis"),
    (["schedulers"], "SUBCOMMAND"),
    (["next", "--every", "0"], "every"),
    (["next", "-n", "0", "* * * * *"], "-n"),
    (["next", "--every", "1000", "--tz", "Mars/Olympus"], "Mars/Olympus"),
    (["next", "* * * * *", "--from", "soon"], "--from"),
    (["nonsense"], "nonsense"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_bad_argument_is_one_line_on_stderr(dead_url: str, argv: list[str], names: str) -> None:
    # Redis is never reached: every one of these is refused before the command connects.
    if "--redis" not in argv and argv[0] in ("events", "schedulers") and len(argv) > 1:
        argv = [*argv, "--redis", dead_url]
    done = echomq(*argv)
    line = one_line_error(done)
    assert names in line
    assert done.returncode == 2 and done.stdout == ""
