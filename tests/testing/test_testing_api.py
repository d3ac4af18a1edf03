"""echomq.testing's public surface: one list of exports, typed imports in step with it, every
name importable, and nothing loaded before a name is used (the pytest plugin imports the
package in every test session)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import echomq.testing

INIT = Path(echomq.testing.__file__)


def test_the_typed_imports_are_the_export_list() -> None:
    typed: dict[str, str] = {}
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level == 1
                typed.update({alias.name: statement.module or "" for alias in statement.names})
    assert typed == echomq.testing._EXPORTS


def test_every_export_resolves_to_its_module() -> None:
    assert sorted(echomq.testing.__all__) == sorted(echomq.testing._EXPORTS)
    for name, module in echomq.testing._EXPORTS.items():
        assert getattr(echomq.testing, name) is getattr(importlib.import_module(f"echomq.testing.{module}"), name)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        echomq.testing.Nope  # noqa: B018


def test_importing_the_package_and_its_plugin_loads_nothing_else() -> None:
    code = ("import sys, echomq.testing, echomq.testing.pytest_plugin\n"
            "print(sorted(m for m in sys.modules if m.startswith('echomq.')), 'redis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = "['echomq._version', 'echomq.testing', 'echomq.testing.pytest_plugin']"
    assert out.strip() == f"{loaded} False"
