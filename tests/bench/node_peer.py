"""What the benchmark scripts share: the project root and running their Node peer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tests" / "interop" / "node_modules"


def run_node_peer(script: Path, url: str, *args: str, timeout: float = 300) -> Any:
    """Run ``node script args...`` against ``url`` (BullMQ 6.7 from tests/interop) and return
    the JSON its last output line holds; the bench stops with Node's stderr if it fails."""
    env = {**os.environ, "REDIS_URL": url, "NODE_PATH": str(NODE_MODULES)}
    done = subprocess.run(["node", str(script), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode:
        raise SystemExit(f"node {script.name} failed: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])
