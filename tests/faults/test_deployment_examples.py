"""The systemd unit, the Dockerfile, the compose file and the Kubernetes snippet of
docs/worker-command.md, run as far as a machine without systemd or a container engine can.

The unit's ``ExecStart`` (and the image's ``CMD``) runs as written, in the directory the unit
names, on the page's own ``myapp/jobs.py`` with one slow job added, in a session of its own: a
control group's stand-in. It is stopped as systemd stops it (``KillMode=control-group``: SIGTERM
to every process, ``os.killpg``; ``KillMode=mixed``: to the main process), and as ``docker stop``
does (the ``STOPSIGNAL`` to PID 1, which an init passes to the supervisor); the running jobs
finish and every process exits within the stop timeout each file sets, which must cover
``--shutdown-timeout`` and the supervisor's margin.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from echomq import Queue
from echomq.processes.supervisor import STOP_MARGIN_S

from support.docs import page_blocks
from support.docs_checks import dockerfile_instructions
from support.worker_cli import WorkerCommand, wait_until

PAGE = Path(__file__).resolve().parents[2] / "docs" / "worker-command.md"

#: The page's queue names are plain ("emails"): each run gets a redis-server of its own.
pytestmark = [pytest.mark.real_only]

SLOW_JOB = '''

import time as _time


@registry.job(queue="emails")
def slow(job):  # added by tests/faults/test_deployment_examples.py: a job the stop must let finish
    _time.sleep(job.data["seconds"])
    return "finished"
'''


def page_file(name: str) -> str:
    [block] = [b for b in page_blocks(PAGE) if b.directives.get("file") == name]
    return block.code


def page_yaml(containing: str) -> Any:
    [block] = [b for b in page_blocks(PAGE) if b.language == "yaml" and containing in b.code]
    return yaml.safe_load(block.code)


def unit() -> configparser.ConfigParser:
    parsed = configparser.ConfigParser(strict=False, interpolation=None)
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(page_file("deploy/echomq-worker.service"))
    return parsed


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(s|min)?", str(text).strip())
    assert match, text
    return float(match[1]) * (60 if match[2] == "min" else 1)


def shutdown_timeout(argv: list[str]) -> float:
    return float(argv[argv.index("--shutdown-timeout") + 1]) if "--shutdown-timeout" in argv else 25.0


def deployed(argv: list[str], folder: Path, url: str) -> WorkerCommand:
    """The command as a unit or an image runs it: ``argv`` with its ``echomq`` swapped for this
    interpreter's ``-m echomq``, in ``folder`` (the page's myapp there, plus a slow job), in a
    session of its own."""
    assert Path(argv[0]).name == "echomq", argv
    (folder / "myapp").mkdir(parents=True, exist_ok=True)
    (folder / "myapp" / "__init__.py").write_text("")
    (folder / "myapp" / "jobs.py").write_text(page_file("myapp/jobs.py") + SLOW_JOB)
    return WorkerCommand(argv[1:], program=("-m", "echomq"), env={"REDIS_URL": url}, new_session=True, cwd=folder)


def run_and_stop(argv: list[str], folder: Path, url: str, stop: str, stop_timeout: float) -> None:
    """Start it, let two slow jobs begin (one per process), stop it the way ``stop`` says; check
    the jobs finished and every process exited within ``stop_timeout``."""
    with deployed(argv, folder, url) as command, redis.Redis.from_url(url) as client:
        assert command.wait_for_line("started: queues", count=2, timeout=30), command.stderr
        queue = Queue(client, "emails")
        queue.add("welcome", {"to": "ada@example.com"})
        slow = [queue.add("slow", {"seconds": 2}).id for _ in range(2)]
        assert wait_until(lambda: queue.get_job_counts("active")["active"] == 2, 20), command.stderr
        began = time.monotonic()
        if stop == "group":
            command.killpg(signal.SIGTERM)
        else:
            command.signal(signal.SIGTERM)  # the main process, PID 1's stand-in
        assert command.wait(stop_timeout) == 0, command.stderr
        assert wait_until(lambda: not command.group_alive(), 5), "a worker process outlived the stop"
        assert time.monotonic() - began < stop_timeout
        assert [queue.get_job(job_id).get_state() for job_id in slow] == ["completed", "completed"], command.stderr
        assert queue.get_job_counts("completed")["completed"] == 3


def test_the_systemd_unit_says_what_systemd_needs() -> None:
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert seconds(service["TimeoutStopSec"]) > shutdown_timeout(argv) + STOP_MARGIN_S
    assert service.get("KillMode", "control-group") in ("control-group", "mixed")  # process would orphan jobs
    assert service["Restart"] == "always" and service["Type"] == "exec"
    assert argv[1] == "worker" and "--processes" in argv


@pytest.mark.parametrize("kill_mode", ["control-group", "mixed"])
def test_the_systemd_units_command_stops_gracefully(redis_server_factory: Any, tmp_path: Path,
                                                    kill_mode: str) -> None:
    server_url = redis_server_factory(persistent=False).url
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    name, _, _ = service["Environment"].partition("=")
    assert name == "REDIS_URL"
    folder = tmp_path / service["WorkingDirectory"].lstrip("/")
    run_and_stop(argv, folder, server_url, "group" if kill_mode == "control-group" else "main",
                 seconds(service["TimeoutStopSec"]))


def test_the_container_files_agree_with_each_other() -> None:
    instructions = dict(dockerfile_instructions(page_file("deploy/Dockerfile")))
    argv = json.loads(instructions["CMD"])  # the exec form: no shell as PID 1 to swallow signals
    compose = yaml.safe_load(page_file("deploy/compose.yaml"))["services"]["worker"]
    assert compose["init"] is True
    assert compose["stop_signal"] == instructions["STOPSIGNAL"] == "SIGTERM"
    assert seconds(compose["stop_grace_period"]) > shutdown_timeout(argv) + STOP_MARGIN_S
    pod = page_yaml("terminationGracePeriodSeconds")["spec"]
    assert pod["terminationGracePeriodSeconds"] > shutdown_timeout(pod["containers"][0]["command"]) + STOP_MARGIN_S
    assert pod["containers"][0]["command"][:4] == argv[:4]


def test_the_images_command_stops_gracefully_on_docker_stop(redis_server_factory: Any, tmp_path: Path) -> None:
    server_url = redis_server_factory(persistent=False).url
    instructions = dict(dockerfile_instructions(page_file("deploy/Dockerfile")))
    compose = yaml.safe_load(page_file("deploy/compose.yaml"))["services"]["worker"]
    assert compose["environment"]["REDIS_URL"].startswith("redis://")
    folder = tmp_path / instructions["WORKDIR"].lstrip("/")
    run_and_stop(json.loads(instructions["CMD"]), folder, server_url, "main", seconds(compose["stop_grace_period"]))
