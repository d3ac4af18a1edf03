"""The rule for hidden setup: a reader who pastes the page's examples gets what the page runs.

A hidden ``<!-- docs-test: setup`` block (tests/support/docs.py) runs unseen, in the page's one
namespace. It may prepare what the test needs (jobs for a worker to find, a free port, asserts
that an example did what its text says, clean-up afterwards), but nothing a visible example
reads may come from it, or a reader who pastes that example meets a ``NameError`` (``conn``,
``send``) or a job that is not there (``queue.get_job("42")``). Two checks, by reading the
page's Python (nothing is run):

- **names**: a name a visible block reads, and does not bind itself, must have been bound last
  by a visible block (or be a builtin). A hidden block that binds it (``conn = redis.Redis()``,
  ``def send(job): ...``, an ``import``) is the offence, even when a visible block bound it
  before: the example would then read the hidden value.
- **job ids**: a string a visible block names must not be a job id that only hidden code made
  (a string of digits, as the ids of ``add`` are, or one given as ``job_id=``): a visible block
  must have named it first, or the example reads the hidden block's job.

Blocks marked ``skip``, ``file=``, ``pytest`` or ``signature`` are not run in the page's
namespace and take no part. :func:`hidden_setup_problems` lists every offence of a page, each
naming the visible block's line, the name, and the hidden block's line.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable
from pathlib import Path

from support.docs import Block, python_blocks

#: Directives of blocks that do not run in the page's namespace.
_OUTSIDE_THE_PAGE = ("skip", "file", "pytest", "signature")


def _bound_and_read(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names a block binds anywhere (assignments, imports, defs, parameters, loop and
    ``with`` targets, walrus, ``except ... as``, ``global``), and the names it reads. Scopes are
    flattened: a parameter ``job`` counts as bound for the whole block (a miss, never a false
    alarm)."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return bound, read


def _strings(tree: ast.AST) -> set[str]:
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def _job_ids_made(tree: ast.AST) -> set[str]:
    """Strings of hidden code that look like job ids: all-digit constants (the ids of ``add``),
    and the constants given as ``job_id=``."""
    found = {value for value in _strings(tree) if value.isdigit()}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "job_id" \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.add(node.value.value)
    return found


def _in_the_page(blocks: Iterable[Block]) -> list[Block]:
    return [block for block in blocks if not any(d in block.directives for d in _OUTSIDE_THE_PAGE)]


def hidden_setup_problems(page: Path) -> list[str]:
    """Every place a visible example of ``page`` depends on hidden setup (see the module doc)."""
    problems: list[str] = []
    last_bound_by: dict[str, Block] = {}  # name -> the block that bound it last
    ids_from: dict[str, Block] = {}       # job id -> the block that named it first
    for block in _in_the_page(python_blocks(page)):
        tree = ast.parse(block.code, filename=block.where)
        bound, read = _bound_and_read(tree)
        ids = _job_ids_made(tree) if block.hidden else _strings(tree)
        if not block.hidden:
            for name in sorted(read - bound):
                origin = last_bound_by.get(name)
                if origin is not None and origin.hidden and not hasattr(builtins, name):
                    problems.append(f"{block.where}: the example reads {name!r}, which the hidden setup at "
                                    f"{origin.where} binds: show it in the example (or an earlier one)")
            for job_id in sorted(ids):
                origin = ids_from.get(job_id)
                if origin is not None and origin.hidden:
                    problems.append(f"{block.where}: the example names job {job_id!r}, which only the hidden "
                                    f"setup at {origin.where} made: show how the job comes about, or find it "
                                    "(queue.get_jobs(...), job.id)")
        for name in bound:
            last_bound_by[name] = block
        for job_id in ids:
            ids_from.setdefault(job_id, block)
    return problems
