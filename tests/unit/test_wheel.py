"""The wheel ships every module of the tree and the Lua scripts: a non-editable install, run from
outside the tree, imports every subsystem and finds its scripts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import json, fakeredis, echomq
import echomq.cli, echomq.events, echomq.queue, echomq.schedule, echomq.worker
from echomq import JobScheduler, Queue, QueueEvents, Worker
from echomq.transport.scripts import lua_root, registry
client = fakeredis.FakeRedis()
scripts = list(registry())
for s in scripts:
    client.script_load(s.source)
print(json.dumps({"module": echomq.__file__, "lua_root": str(lua_root()),
                  "scripts": sorted(s.name for s in scripts), "version": echomq.__version__}))
"""


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_finds_its_scripts(tmp_path: Path) -> None:
    # Built from a copy of the sources: a build/ left in the checkout by an older tree would
    # otherwise ship its stale modules too.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "node_modules", "__pycache__", ".*_cache", ".hypothesis"))
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        check=True, cwd=tmp_path,
    )
    [wheel] = list(dist.glob("echomq-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        shipped_modules = sorted(n for n in archive.namelist() if n.startswith("echomq/") and n.endswith(".py"))
    assert shipped_modules == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "echomq").rglob("*.py"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, cwd=tmp_path)

    out = subprocess.run([str(python), "-c", CHECK], check=True, cwd=tmp_path, capture_output=True, text=True)
    found = json.loads(out.stdout)
    site = env_dir.resolve()
    assert Path(found["module"]).resolve().is_relative_to(site), "imported the source tree, not the wheel"
    assert Path(found["lua_root"]).resolve().is_relative_to(site)
    shipped = sorted(p.name.split("-")[0] for p in (ROOT / "lua").glob("*.lua"))
    assert found["scripts"] == shipped and shipped
