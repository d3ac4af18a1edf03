"""Running the ``echomq`` command as a user runs it: a subprocess of this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: The commands that connect to Redis, each as its first arguments (for error-path tables).
CONNECTING_COMMANDS: list[list[str]] = [
    ["events", "tail"],
    ["schedulers", "list"],
    ["schedulers", "get", "nightly"],
    ["schedulers", "upsert", "nightly", "--every", "60000"],
    ["schedulers", "remove", "nightly"],
    ["queue", "stats"],
    ["queue", "pause"],
    ["queue", "resume"],
    ["queue", "clean", "--grace", "1h", "--yes"],
    ["queue", "drain", "--yes"],
    ["queue", "obliterate", "--yes"],
    ["workers"],
    ["jobs", "list", "--state", "failed"],
    ["jobs", "retry"],
    ["jobs", "promote"],
    ["job", "show", "1"],
    ["job", "retry", "1"],
    ["job", "remove", "1", "--yes"],
    ["job", "promote", "1"],
]


def command_id(command: list[str]) -> str:
    return " ".join(command[:2])


def echomq(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``python -m echomq ARGV`` from the project root, without the caller's ``REDIS_URL``."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run([sys.executable, "-m", "echomq", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def run_main(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """``echomq ARGV`` through ``echomq.cli.main`` in this process (argument parsing, the handler,
    errors made one line): (status, stdout, stderr), with pytest's ``capsys``."""
    from echomq.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own exits (usage errors)
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    """The one line a failed command wrote on stderr (never a traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
