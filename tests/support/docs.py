"""Running a docs page's examples: every ```python block, in order, in one namespace.

A page is a script: its blocks run one after the other, sharing their names, so an example may
use what an earlier one built. An HTML comment on the line right before a block (invisible on
the rendered page) tells the runner something about it:

- ``<!-- docs-test: skip -->``: not run (a fragment, or a block that blocks forever);
- ``<!-- docs-test: connection=conn -->``: the block makes the page's client, named ``conn``;
  once it ran, the runner swaps in the client of the backend under test, so the same page runs
  on fakeredis and on a real Redis;
- ``<!-- docs-test: pytest -->``: the block is a test module: it is written to a file and run
  by pytest in a fresh process (the installed echomq pytest plugin included), with ``env``.

A failure names the page and the line of the block; a traceback points into the page itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_FENCE = re.compile(r"^```(\w*)[^\n]*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->$")
KNOWN = {"skip", "connection", "pytest"}


@dataclass(frozen=True)
class Block:
    """One ```python block: where it starts (1-based line of its first code line), its code,
    and the directives of the comment before it (``{"connection": "conn"}``, ``{"skip": ""}``)."""

    page: Path
    line: int
    code: str
    directives: Mapping[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, in order, with their directives; ValueError for an unknown
    directive or a fence left open (a page that silently runs less than it shows is a bug)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        start = index + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.name}:{index + 1}: code fence never closed")
        if fence.group(1) == "python":
            directives: dict[str, str] = {}
            previous = _DIRECTIVE.match(lines[index - 1].strip()) if index else None
            if previous is not None:
                for word in previous.group(1).split():
                    key, _, value = word.partition("=")
                    if key not in KNOWN:
                        raise ValueError(f"{page.name}:{index}: unknown docs-test directive {key!r}")
                    directives[key] = value
            blocks.append(Block(page, start + 1, "\n".join(lines[start:end]) + "\n", directives))
        index = end + 1
    return blocks


def run_page(page: Path, tmp_path: Path, *, connection: Any = None, env: Mapping[str, str] | None = None) -> int:
    """Run every block of ``page`` (see the module doc); return how many ran. ``connection``
    replaces the client a ``connection=`` block makes; ``env`` is added to the environment of
    the pytest runs."""
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    ran = 0
    for block in python_blocks(page):
        if "skip" in block.directives:
            continue
        ran += 1
        if "pytest" in block.directives:
            _run_as_pytest(block, tmp_path, env or {})
            continue
        # Blank lines in front keep the line numbers of a traceback those of the page.
        code = compile("\n" * (block.line - 1) + block.code, str(block.page), "exec")
        exec(code, namespace)  # the page's own examples, run as its readers would run them
        name = block.directives.get("connection")
        if name and connection is not None:
            namespace[name] = connection
    return ran


def _run_as_pytest(block: Block, tmp_path: Path, env: Mapping[str, str]) -> None:
    folder = tmp_path / f"page-{block.page.stem}-{block.line}"
    folder.mkdir()
    module = folder / f"test_docs_{block.page.stem}_{block.line}.py"
    module.write_text(block.code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
        cwd=folder, capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{block.where}: the pytest example failed (exit {result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
