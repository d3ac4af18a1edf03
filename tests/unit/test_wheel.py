"""The wheel ships every module of the tree and the Lua scripts, and a plain ``pip install echomq``
is all production needs: a non-editable install into a fresh venv, without fakeredis, run from
outside the tree, imports every subsystem, finds its scripts, and works on a real Redis; the
parts that want fakeredis (``echomq demo``'s embedded server, echomq.testing's fixtures) say how
to get it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import venv
import zipfile
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import importlib.metadata, importlib.util, json, sys
import echomq
import echomq.cli, echomq.events, echomq.queue, echomq.schedule, echomq.worker, echomq.testing
from echomq import JobScheduler, Queue, QueueEvents, Worker
from echomq.transport.scripts import lua_root, registry
import redis

url, queue_name = sys.argv[1], sys.argv[2]
client = redis.Redis.from_url(url)
scripts = list(registry())
for s in scripts:
    client.script_load(s.source)
queue = Queue(url, queue_name)
job = queue.add("ping", {"n": 1})
print(json.dumps({"module": echomq.__file__, "lua_root": str(lua_root()),
                  "scripts": sorted(s.name for s in scripts), "version": echomq.__version__,
                  "requires": importlib.metadata.requires("echomq"),
                  "fakeredis_installed": importlib.util.find_spec("fakeredis") is not None,
                  "state": queue.get_job(job.id).get_state()}))
"""

PLUGIN_TEST = """
def test_wants_fakeredis(echomq_connection):
    pass
"""


@pytest.mark.slow
def test_wheel_installs_without_fakeredis_and_runs_on_a_real_redis(tmp_path: Path, redis_url: str) -> None:
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
        shipped_files = set(archive.namelist())
    assert {"echomq/contrib/dashboard/templates/base.html", "echomq/contrib/dashboard/static/dashboard.js",
            "echomq/contrib/dashboard/static/dashboard.css"} <= shipped_files
    assert shipped_modules == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "echomq").rglob("*.py"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python, echomq_command = env_dir / "bin" / "python", env_dir / "bin" / "echomq"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, cwd=tmp_path)
    clean_env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTHONPATH")}

    queue_name = f"wheel-{uuid.uuid4().hex[:8]}"
    try:
        out = subprocess.run([str(python), "-c", CHECK, redis_url, queue_name], check=True, cwd=tmp_path,
                             capture_output=True, text=True, env=clean_env)
    finally:
        _delete_queue(redis_url, queue_name)
    found = json.loads(out.stdout)
    site = env_dir.resolve()
    assert Path(found["module"]).resolve().is_relative_to(site), "imported the source tree, not the wheel"
    assert Path(found["lua_root"]).resolve().is_relative_to(site)
    shipped = sorted(p.name.split("-")[0] for p in (ROOT / "lua").glob("*.lua"))
    assert found["scripts"] == shipped and shipped
    assert found["state"] == "waiting"

    # Production pulls redis and python-crontab; fakeredis only with the testing extra.
    requires = found["requires"]
    assert not found["fakeredis_installed"]
    assert [r for r in requires if r.startswith("fakeredis") and 'extra == "testing"' not in r] == []
    assert any(r.startswith("fakeredis") and 'extra == "testing"' in r for r in requires), requires
    unconditional = sorted(r.split(">")[0].split("=")[0].split("[")[0] for r in requires if "extra ==" not in r)
    assert unconditional == ["python-crontab", "redis"]

    helped = subprocess.run([str(echomq_command), "--help"], capture_output=True, text=True, cwd=tmp_path,
                            env=clean_env, check=False)
    assert helped.returncode == 0 and "demo" in helped.stdout, helped.stderr

    demo = subprocess.run([str(echomq_command), "demo"], capture_output=True, text=True, cwd=tmp_path,
                          env=clean_env, check=False, timeout=60)
    assert (demo.returncode, demo.stdout) == (2, ""), demo
    assert demo.stderr.count("\n") == 1 and "pip install 'echomq[testing]'" in demo.stderr, demo.stderr

    dashboard = subprocess.run([str(echomq_command), "dashboard"], capture_output=True, text=True, cwd=tmp_path,
                               env=clean_env, check=False, timeout=60)
    assert (dashboard.returncode, dashboard.stdout) == (2, ""), dashboard
    assert "pip install 'echomq[dashboard]'" in dashboard.stderr

    # echomq.testing's fakeredis fixture says the same, as a failed test (not an error of the run).
    subprocess.run([str(python), "-m", "pip", "install", "-q", "pytest"], check=True, cwd=tmp_path)
    (tmp_path / "test_plugin.py").write_text(PLUGIN_TEST, encoding="utf-8")
    plugin = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plugin.py"],
                            capture_output=True, text=True, cwd=tmp_path, env=clean_env, check=False, timeout=120)
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert "echomq_connection: fakeredis is not installed: pip install 'echomq[testing]'" in plugin.stdout


def _delete_queue(url: str, queue_name: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"emq:{{{queue_name}}}:*", count=10_000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
