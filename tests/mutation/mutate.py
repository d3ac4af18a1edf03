"""`make mutate MODULE=echomq/protocol/options.py`: mutation testing of one module of the pure
layers against the unit tests (mutmut 3), in a scratch tree of its own (build/mutation).

Why a scratch tree: mutmut rewrites the package into ``mutants/`` beside the configuration it
reads, and copies ``tests/`` whole; a tree holding only the package, the scripts and the unit
tests keeps that copy small and leaves the checkout untouched. Only the unit tests run (no
Redis: each mutant is run by every unit test that reached its function, in forked processes).

The score counts the reached mutants: killed / (killed + survived - accepted), where the
accepted ones are the equivalent mutants listed with their reason in
tests/mutation/equivalent.txt (one ``<mutant name>  <reason>`` a line). Survivors not accepted
are listed, for the tests still to write.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / "build" / "mutation"
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
#: unit tests that build a wheel or read the whole tree (a mutated module is far longer than its
#: limit): left out of the scratch tree
NOT_RUN = ["tests/unit/test_wheel.py", "tests/unit/test_architecture.py", "tests/unit/test_public_api.py"]


def accepted() -> dict[str, str]:
    """The equivalent mutants, name -> reason."""
    found: dict[str, str] = {}
    for line in EQUIVALENT.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.strip().partition(" ")
            if not reason.strip():
                raise SystemExit(f"{EQUIVALENT.name}: {name} has no reason")
            found[name] = reason.strip()
    return found


def prepare(module: str) -> None:
    """The scratch tree: the package, its scripts, the unit tests and a configuration for ``module``."""
    shutil.rmtree(SCRATCH, ignore_errors=True)
    (SCRATCH / "tests").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "echomq", SCRATCH / "echomq", ignore=ignore)
    shutil.copytree(ROOT / "lua", SCRATCH / "lua", ignore=ignore)
    skipped = shutil.ignore_patterns("__pycache__", *(Path(path).name for path in NOT_RUN))
    shutil.copytree(ROOT / "tests" / "unit", SCRATCH / "tests" / "unit", ignore=skipped)
    shutil.copytree(ROOT / "tests" / "support", SCRATCH / "tests" / "support", ignore=ignore)
    shutil.copytree(ROOT / "tests" / "data", SCRATCH / "tests" / "data", ignore=ignore)
    # the unit tests need none of the rig's servers: a conftest that only finds tests/support
    (SCRATCH / "tests" / "conftest.py").write_text(
        'import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n')
    (SCRATCH / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = echomq\n"
        f"only_mutate = {module}\n"
        "pytest_add_cli_args_test_selection = tests/unit\n"
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n"
        "\n[tool:pytest]\n"
        "testpaths = tests/unit\n"
        "markers =\n    real_only: x\n    interop: x\n    slow: x\n    min_redis(major, minor, reason): x\n")


def results() -> dict[str, str]:
    """mutant name -> status, as ``mutmut results --all true`` prints them."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=SCRATCH,
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+): (.+)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a module of echomq/, e.g. echomq/protocol/options.py")
    parser.add_argument("--max-children", type=int, default=2)
    args = parser.parse_args()
    module = args.module
    if not (ROOT / module).is_file() or not module.startswith("echomq/") or not module.endswith(".py"):
        parser.error(f"MODULE={module!r} is not a module of echomq/ (e.g. echomq/protocol/options.py)")
    prepare(module)
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)],
                         cwd=SCRATCH, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        return run.returncode
    statuses = results()
    equivalent = accepted()
    dotted = module[:-3].replace("/", ".")
    mine = {name: status for name, status in statuses.items() if name.startswith(dotted + ".")}
    killed = sorted(n for n, s in mine.items() if s in ("killed", "timeout", "segfault"))
    survived = sorted(n for n, s in mine.items() if s == "survived")
    unreached = sorted(n for n, s in mine.items() if s == "no tests")
    equivalent_here = [n for n in survived if n in equivalent]
    open_survivors = [n for n in survived if n not in equivalent]
    reached = len(killed) + len(survived) - len(equivalent_here)
    score = 100.0 * len(killed) / reached if reached else 100.0
    print(f"{module}: {len(mine)} mutants, {len(unreached)} reached by no unit test, "
          f"{len(killed)} killed, {len(survived)} survived ({len(equivalent_here)} accepted as equivalent)")
    print(f"score: {score:.1f}% of the reached mutants killed")
    for name in open_survivors:
        print(f"  survived: {name}   (mutmut show {name}, in build/mutation)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
