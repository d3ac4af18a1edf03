"""Running a docs page's examples: every code block of README.md and docs/*.md, as a reader would.

**Python.** A page is a script: its ```python blocks run one after the other in one namespace,
so an example may use what an earlier one built. While a page runs, every Redis client it makes
(``redis.Redis()``, ``redis.Redis.from_url(...)``, ``fakeredis.FakeRedis()``, a URL handed to a
Queue or a Worker) connects to the backend under test whatever host, port, TLS files or password
it names (tests/support/docs_redis.py): the page's own FakeServer, or the page's own
redis-server. The same page runs on both, and ``"redis://localhost:6379/0"`` in a snippet never
reaches a server the suite shares.

**Directives.** An HTML comment on the line right before a fence (invisible on the rendered
page) tells the runner something about that block; several may share one comment:

- ``<!-- docs-test: skip -->``: not run nor checked (a fragment; use sparingly);
- ``<!-- docs-test: connection=conn -->``: the block makes the page's client, named ``conn``;
  once it ran, the runner puts the backend's own client in its place;
- ``<!-- docs-test: pytest -->``: the block is a test module, run by pytest in a fresh process
  (the installed echomq pytest plugin included), with the backend in ``ECHOMQ_TEST_BACKEND`` /
  ``ECHOMQ_TEST_REDIS_URL`` and the page's project folder (below) on ``PYTHONPATH``;
- ``<!-- docs-test: file=myapp/jobs.py -->``: the block is a file of the reader's project,
  written at that path under the page's project folder, which is on ``sys.path`` and is the
  working directory while the page runs; not run itself: a later block imports it (a config
  block with ``file=`` is checked as below, and written too);
- ``<!-- docs-test: close=worker -->``: the block blocks in ``worker.run()`` (or
  ``events.run()``), as a reader's program does. Once ``worker`` is running, and for a Worker
  once its queue has no job waiting or active, the runner calls ``worker.close()`` from another
  thread, and ``run()`` returns;
- ``<!-- docs-test: signature -->``: the block is a call signature, ``Name(params) -> result``;
  the parameters (names, kinds, defaults) must be the real ones of ``Name`` (looked up in the
  page's namespace, then in ``echomq``). The result is prose and is not checked.

**Hidden code.** A comment that starts ``<!-- docs-test: setup`` and ends with a line ``-->``
holds Python that runs at that point of the page, unseen by readers: stubs for what a snippet
takes as given (the reader's own ``send_invoice``), jobs for a worker to find, and asserts that
an example did what its text says. Keep it short; what a reader needs belongs in the snippet.

**Other blocks** are not run, but nothing in them may be stale:

- ``console`` (its ``$ `` lines), ``bash``, ``sh``, ``shell`` (every line, ``\\`` continuations
  joined, ``#`` comments dropped), and ``text`` or unlabeled fences (their lines that start
  with ``echomq`` or ``$ echomq``): every ``echomq ...`` command (or ``python -m echomq ...``)
  must be one the command line accepts as written: parsed by its own argparse parser, nothing
  run. In a synopsis, each ``[...]`` group is checked for its option names and left out of the
  parse. ``make TARGET`` must name a Makefile target, ``pip install 'echomq[EXTRA]'`` (or
  ``-e '.[EXTRA]'``, from a checkout) an extra of setup.cfg. Other programs (npm, node, jq,
  redis-cli) are left alone;
- ``json``, ``toml``, ``ini``/``cfg``, ``yaml`` are parsed; ``js`` is syntax-checked with ``node
  --check`` where node is installed; a ``dockerfile``'s instructions must be Docker's, its
  exec forms JSON and its STOPSIGNAL a signal; every ``echomq`` command a config names (a
  unit's ``ExecStart``, a Dockerfile's ``CMD``, a compose file's ``command``) is checked as a
  shell line's is; an unknown language is an error (so is a fence left open,
  an unknown directive, a directive that no fence follows, or an indented code block, which
  names no language: fence it).

**Limits.** A page must finish within its time limit (60 s by default): past it the runner
closes every Worker and QueueEvents the page made, interrupts the block running then (a loop
that never ends included), and fails the page. A page that leaves a
Worker, a QueueEvents or any other thread running fails too, naming it (the runner closes what
it can). Signal handlers, environment variables and the working directory a page changes are
put back afterwards, and the modules of its project folder forgotten.

A failure names the page and the line of the block; a traceback points into the page itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.docs_checks import check_config, check_shell, check_signature
from support.docs_limits import (
    PageTimeout,
    ProjectModules,
    Watchdog,
    close_running,
    interruptible,
    page_process_state,
    threads_left,
)
from support.docs_redis import RedisTarget, clients_routed_to

_FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)[^\n`]*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->$")
_HIDDEN_START = re.compile(r"^<!--\s*docs-test:\s*setup\b(.*)$")
KNOWN = {"skip", "connection", "pytest", "file", "close", "signature"}

PYTHON = "python"
SHELL_LANGUAGES = {"console", "bash", "sh", "shell", "text", ""}
CONFIG_LANGUAGES = {"json", "toml", "ini", "cfg", "js", "javascript", "yaml", "yml", "dockerfile"}
LANGUAGES = {PYTHON, *SHELL_LANGUAGES, *CONFIG_LANGUAGES}

@dataclass(frozen=True)
class Block:
    """One code block: where it starts (1-based line of its first code line), its language
    (``""`` for an unlabeled fence), its code, the directives of the comment before it
    (``{"connection": "conn"}``, ``{"skip": ""}``), and whether it is hidden setup."""

    page: Path
    line: int
    code: str
    directives: Mapping[str, str] = field(default_factory=dict)
    language: str = PYTHON
    hidden: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """Every block of the page, in order, hidden setup included; ValueError for what the runner
    cannot tell the meaning of (see the module doc): a page that silently runs less than it
    shows is a bug."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    pending: tuple[int, dict[str, str]] | None = None  # a directive comment waiting for its fence
    while index < len(lines):
        text = lines[index]
        hidden = _HIDDEN_START.match(text.strip())
        if hidden is not None and not text.strip().endswith("-->"):
            end = index + 1
            while end < len(lines) and lines[end].strip() != "-->":
                end += 1
            if end == len(lines):
                raise ValueError(f"{page.name}:{index + 1}: docs-test setup comment never closed (a line '-->')")
            directives = _parse_directives(page, index + 1, hidden.group(1))
            blocks.append(Block(page, index + 2, "\n".join(lines[index + 1:end]) + "\n", directives, hidden=True))
            index = end + 1
            continue
        directive = _DIRECTIVE.match(text.strip())
        if directive is not None:
            if pending is not None:
                raise ValueError(f"{page.name}:{pending[0]}: docs-test directive not followed by a code block")
            pending = (index + 1, _parse_directives(page, index + 1, directive.group(1)))
            index += 1
            continue
        fence = _FENCE.match(text)
        if fence is None:
            if pending is not None:
                raise ValueError(f"{page.name}:{pending[0]}: docs-test directive not followed by a code block")
            if _starts_indented_code(lines, index):
                raise ValueError(f"{page.name}:{index + 1}: an indented code block names no language: "
                                 "fence it (```console, ```text ...) so the docs test knows what it is")
            index += 1
            continue
        indent, language = fence.group(1), fence.group(2).lower()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page.name}:{index + 1}: code fence never closed")
        if language not in LANGUAGES:
            raise ValueError(f"{page.name}:{index + 1}: the docs test does not know the language {language!r} "
                             f"(known: {', '.join(sorted(x for x in LANGUAGES if x))})")
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                         for line in lines[index + 1:end]) + "\n"
        directives = pending[1] if pending is not None else {}
        pending = None
        blocks.append(Block(page, index + 2, code, directives, language))
        index = end + 1
    if pending is not None:
        raise ValueError(f"{page.name}:{pending[0]}: docs-test directive not followed by a code block")
    return blocks


def python_blocks(page: Path) -> list[Block]:
    """The page's Python: its ```python blocks and its hidden setup, in order."""
    return [block for block in page_blocks(page) if block.language == PYTHON]


def _parse_directives(page: Path, line: int, text: str) -> dict[str, str]:
    directives: dict[str, str] = {}
    for word in text.split():
        key, _, value = word.partition("=")
        if key not in KNOWN:
            raise ValueError(f"{page.name}:{line}: unknown docs-test directive {key!r}")
        directives[key] = value
    return directives


def _starts_indented_code(lines: list[str], index: int) -> bool:
    """True for the first line of an indented code block: four spaces after a blank line, below a
    paragraph at the margin that is not a list item (whose continuation may be indented)."""
    if not lines[index].startswith("    ") or not lines[index].strip() or index == 0 or lines[index - 1].strip():
        return False
    above = index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    if above < 0:
        return True
    previous = lines[above]
    return not previous.startswith((" ", "\t")) and re.match(r"^([-*+]|\d+[.)])\s", previous) is None


@dataclass
class PageRun:
    """What running a page did: Python blocks run (visible, hidden setup, pytest modules), files
    written, other blocks checked."""

    python: int = 0
    hidden: int = 0
    pytest: int = 0
    files: int = 0
    checked: int = 0
    skipped: int = 0

    @property
    def blocks(self) -> int:
        """Every visible block the page has that was run, written or checked."""
        return self.python + self.pytest + self.files + self.checked


def run_page(page: Path, tmp_path: Path, *, target: RedisTarget | None = None, connection: Any = None,
             env: Mapping[str, str] | None = None, time_limit: float = 60.0) -> PageRun:
    """Run every block of ``page`` (see the module doc). ``target``: where the page's clients
    connect (default: a FakeServer of its own); ``connection`` replaces the client a
    ``connection=`` block makes (default: a client on ``target``); ``env`` is added to the
    environment of the pytest runs."""
    target = target or RedisTarget.fake()
    connection = connection if connection is not None else target.client()
    project = tmp_path / f"project-{page.stem}"
    project.mkdir(parents=True, exist_ok=True)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    run = PageRun()
    threads_before = set(threading.enumerate())
    completed = False
    with page_process_state(project) as modules, clients_routed_to(target), interruptible() as interrupter:
        watchdog = Watchdog(namespace, time.monotonic() + time_limit, interrupter)
        watchdog.start()
        running: Block | None = None
        try:
            for block in page_blocks(page):
                running = block
                _run_block(block, namespace, run, modules, connection, watchdog, env or {})
                if watchdog.expired:
                    break
            completed = True
        except PageTimeout:
            pass  # the watchdog stopped a block that would not end: reported below
        finally:
            watchdog.stop()
            left_running = close_running(namespace)
            lingering = threads_left(threads_before)
    if watchdog.expired:
        where = f"the block at {running.where}" if running is not None else "no block"
        raise AssertionError(f"{page.name}: did not finish within {time_limit:g} s ({where} was running; the "
                             "page's Workers and QueueEvents were closed and that block interrupted); "
                             f"the threads then:\n{watchdog.stacks}")
    if completed and left_running:
        raise AssertionError(f"{page.name}: left running: {', '.join(left_running)}; close it in the page "
                             "(a hidden setup block after the example may do it)")
    if completed and lingering:
        raise AssertionError(f"{page.name}: threads still alive after the page: {lingering}")
    return run


def _run_block(block: Block, namespace: dict[str, Any], run: PageRun, modules: ProjectModules, connection: Any,
               watchdog: Watchdog, env: Mapping[str, str]) -> None:
    if "skip" in block.directives:
        run.skipped += 1
        return
    if block.language in SHELL_LANGUAGES:
        check_shell(block)
        run.checked += 1
        return
    if block.language != PYTHON:
        check_config(block)
        if "file" in block.directives:  # a config file of the reader's project: checked, and written
            _write_project_file(block, modules)
        run.checked += 1
        return
    if "signature" in block.directives:
        check_signature(block, namespace)
        run.checked += 1
        return
    if "file" in block.directives:
        _write_project_file(block, modules)
        run.files += 1
        return
    if "pytest" in block.directives:
        _run_as_pytest(block, modules.project, env)
        run.pytest += 1
        return
    # Blank lines in front keep the line numbers of a traceback those of the page.
    code = compile("\n" * (block.line - 1) + block.code, str(block.page), "exec")
    watchdog.watch(block.directives.get("close"))
    watchdog.interrupter.armed = not watchdog.expired
    try:
        exec(code, namespace)  # the page's own examples, run as its readers would run them
    finally:
        watchdog.interrupter.armed = False
        watchdog.watch(None)
    if block.hidden:
        run.hidden += 1
    else:
        run.python += 1
    name = block.directives.get("connection")
    if name:
        namespace[name] = connection


def _write_project_file(block: Block, modules: ProjectModules) -> None:
    relative = Path(block.directives["file"])
    if not block.directives["file"] or relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{block.where}: file= takes a path inside the project, got {block.directives['file']!r}")
    modules.claim(relative.parts[0].removesuffix(".py"))
    path = modules.project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.code, encoding="utf-8")


def _run_as_pytest(block: Block, project: Path, env: Mapping[str, str]) -> None:
    folder = project.parent / f"pytest-{block.page.stem}-{block.line}"
    folder.mkdir()
    module = folder / f"test_docs_{block.page.stem.replace('-', '_')}_{block.line}.py"
    module.write_text(block.code, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(project), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": python_path, **env},
    )
    if result.returncode != 0:
        raise AssertionError(f"{block.where}: the pytest example failed (exit {result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")


