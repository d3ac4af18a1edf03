"""The tree shows the layers: imports go one way, no module imports itself back, no module grows
past its size, and nothing in the repository points outside it.

Every import statement counts, wherever it is (module level, inside a function, under
``TYPE_CHECKING``): a cycle a type checker sees is a cycle a reader has to untangle too.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "echomq"

#: Lowest first; a module may import its own layer and the layers before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("echomq._version", "echomq.errors", "echomq.types", "echomq.clock")),
    ("protocol", ("echomq.protocol",)),
    ("transport", ("echomq.transport",)),
    ("subsystems", ("echomq.queue", "echomq.schedule", "echomq.events", "echomq.worker")),
    ("composition", ("echomq.registry",)),
    ("processes", ("echomq.processes",)),
    ("hosts", ("echomq.cli", "echomq.contrib", "echomq.testing")),
    ("surface", ("echomq", "echomq.__main__")),
)

#: The only imports between two subsystems (a worker runs jobs and advances schedules) or two
#: hosts: the command line serves an integration (``echomq metrics serve``), and the framework
#: integrations' test mode puts each test on a Redis of its own (``testing.isolation``). The
#: framework integrations' worker commands are ``echomq worker``, from the layer below both
#: (``echomq.processes``), never from ``cli``. Module cycles stay refused (test_no_import_cycles).
PEER_IMPORTS = {("echomq.worker", "echomq.queue"), ("echomq.worker", "echomq.schedule"),
                ("echomq.cli", "echomq.contrib"), ("echomq.contrib", "echomq.testing")}

MAX_MODULE_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """Every echomq module ``name`` imports, resolved to the modules of the tree."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{alias.name}" for alias in node.names] or [stem]
        else:
            continue
        for target in targets:
            if target == "echomq" or target.startswith("echomq."):
                resolved = resolve(target)
                if resolved is not None and resolved != name:
                    found.add(resolved)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the layer's unit: the subsystem or host package the module belongs to)."""
    best: tuple[int, str] | None = None
    for index, (_name, roots) in enumerate(LAYERS):
        for root in roots:
            inside = module == root or (root != "echomq" and module.startswith(root + "."))
            if inside and (best is None or len(root) > len(best[1])):
                best = (index, root)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def wrong_way_imports(graph: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for source, targets in sorted(graph.items()):
        source_layer, source_unit = layer_of(source)
        for target in sorted(targets):
            target_layer, target_unit = layer_of(target)
            if target_layer > source_layer:
                problems.append(f"{source} ({LAYERS[source_layer][0]}) imports {target} ({LAYERS[target_layer][0]})")
            elif (target_layer == source_layer and LAYERS[source_layer][0] in ("subsystems", "hosts")
                  and source_unit != target_unit and (source_unit, target_unit) not in PEER_IMPORTS):
                problems.append(f"{source} imports {target}: {source_unit} may not use {target_unit}")
    return problems


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# -- the tree ---------------------------------------------------------------------------------

def test_every_module_belongs_to_a_layer() -> None:
    for module in package_modules():
        layer_of(module)


def test_imports_go_one_way() -> None:
    assert wrong_way_imports(import_graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_foundation_imports_nothing_of_echomq() -> None:
    graph = import_graph()
    for module in ("echomq.errors", "echomq.types", "echomq.clock", "echomq._version"):
        assert graph[module] == set(), module


def test_no_module_grows_past_its_size() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in package_modules().items()}
    assert {name: size for name, size in sizes.items() if size > MAX_MODULE_LINES} == {}


def test_the_integrations_never_import_the_command_line() -> None:
    """The worker command's code that Django's and Flask's commands share lives below both."""
    graph = import_graph()
    arrows = sorted(f"{source} imports {target}" for source, targets in graph.items()
                    if source.startswith("echomq.contrib")
                    for target in targets if target == "echomq.cli" or target.startswith("echomq.cli."))
    assert arrows == []
    commands = graph["echomq.contrib.django.management.commands.echomq_worker"] | graph["echomq.contrib.flask.commands"]
    assert "echomq.processes.arguments" in commands  # both parse `echomq worker`'s own options
    assert "echomq.processes.command" in graph["echomq.contrib.host.project"]  # and run it through the host layer


def test_the_worker_processes_use_no_host() -> None:
    graph = import_graph()
    assert [f"{source} imports {target}" for source, targets in sorted(graph.items())
            if source.startswith("echomq.processes") for target in sorted(targets)
            if layer_of(target)[0] >= layer_of("echomq.cli")[0]] == []


def test_the_checks_catch_what_they_guard(tmp_path: Path) -> None:
    bad = {
        "echomq.protocol.keys": {"echomq.worker.worker"},   # wrong way
        "echomq.events.queue_events": {"echomq.queue.job"},  # a peer it may not use
        "echomq.contrib.flask.commands": {"echomq.cli.worker"},  # the arrow that ran back up
        "echomq.processes.command": {"echomq.contrib.django"},  # below the hosts
        "echomq.queue.job": {"echomq.queue.admin"},
        "echomq.queue.admin": {"echomq.queue.job"},          # a cycle
        "echomq.worker.worker": {"echomq.schedule.scheduler", "echomq.queue.job"},  # allowed
    }
    assert wrong_way_imports(bad) == [
        "echomq.contrib.flask.commands imports echomq.cli.worker: echomq.contrib may not use echomq.cli",
        "echomq.events.queue_events imports echomq.queue.job: echomq.events may not use echomq.queue",
        "echomq.processes.command (processes) imports echomq.contrib.django (hosts)",
        "echomq.protocol.keys (protocol) imports echomq.worker.worker (subsystems)",
    ]
    assert cycles(bad) == [["echomq.queue.admin", "echomq.queue.job"]]
    source = "from __future__ import annotations\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n" \
             "    from ..worker import Worker\ndef late():\n    from . import spec\n"
    path = tmp_path / "_probe.py"
    path.write_text(source)
    found = imports_of("echomq.schedule._probe", path, {*package_modules(), "echomq.schedule._probe"})
    assert found == {"echomq.worker", "echomq.schedule.spec"}


# -- the repository refers to nothing outside it ---------------------------------------------

OUTSIDE = re.compile(r"\.\./shared|protocol-bullmq5|protocol-v6-differences|style[- ]anchor")


def tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        paths = [ROOT / line for line in listed.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in paths if p.suffix in (".py", ".lua", ".md", ".js", ".cfg", ".toml", "") and p.is_file()
            and p.name != "package-lock.json" and p != Path(__file__).resolve()]


def test_nothing_in_the_repository_cites_a_file_outside_it() -> None:
    offenders = []
    for path in tracked_text_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()[:80]}")
    assert offenders == []


def test_protocol_citations_name_sections_that_exist() -> None:
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?) ", (ROOT / "docs" / "protocol.md").read_text(), re.MULTILINE))
    cited = re.compile(r"docs/protocol\.md §(\d+(?:\.\d+)?)((?:[-, ]+§?\d+(?:\.\d+)?)*)")
    missing = []
    for path in tracked_text_files():
        for match in cited.finditer(path.read_text(encoding="utf-8", errors="replace")):
            numbers = [match[1], *re.findall(r"\d+(?:\.\d+)?", match[2] or "")]
            missing += [f"{path.relative_to(ROOT)}: §{n}" for n in numbers if n not in sections]
    assert missing == []
