"""The public surface: one list of exports, typed imports in step with it, every name a user
meets importable from ``echomq``, and the first landing's module paths still answering."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import echomq
from echomq._legacy import LEGACY_PATHS

INIT = Path(echomq.__file__)


def type_checking_imports() -> dict[str, str]:
    """name -> module of every ``from .x import name`` under ``if TYPE_CHECKING:`` in __init__."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level == 1, ast.dump(statement)
                for alias in statement.names:
                    found[alias.name] = statement.module or ""
    return found


def test_the_typed_imports_are_the_export_list() -> None:
    assert type_checking_imports() == echomq._EXPORTS


def test_every_export_resolves_to_its_module() -> None:
    assert echomq.__all__ == ["__version__", *echomq._EXPORTS]
    assert len(set(echomq.__all__)) == len(echomq.__all__)
    for name, module in echomq._EXPORTS.items():
        assert getattr(echomq, name) is getattr(importlib.import_module(f"echomq.{module}"), name), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        echomq.Nope  # noqa: B018


@pytest.mark.parametrize("name", ["ActiveJob", "ConnectionClosedError", "BackoffStrategy", "Subscriber",
                                  "EVENT_TAG", "GAP_TAG", "Processor", "Clock", "JobOptions", "RepeatOptions",
                                  "WorkerListener", "JobRegistry", "RegisteredJob"])
def test_names_users_meet_are_importable_from_echomq(name: str) -> None:
    assert name in echomq.__all__
    assert getattr(echomq, name) is not None


def test_each_subsystem_package_offers_its_classes() -> None:
    from echomq.events import EventType, Handler, QueueEvents
    from echomq.queue import Job, Queue
    from echomq.schedule import Iteration, JobScheduler, SchedulerRecord, calculate_next_millis
    from echomq.worker import ActiveJob, Worker, WorkerListener

    assert (Queue, Job, Worker, ActiveJob, WorkerListener, QueueEvents, Handler, EventType) == (
        echomq.Queue, echomq.Job, echomq.Worker, echomq.ActiveJob, echomq.WorkerListener, echomq.QueueEvents,
        echomq.Handler, echomq.EventType)
    assert (JobScheduler, SchedulerRecord, Iteration, calculate_next_millis) == (
        echomq.JobScheduler, echomq.SchedulerRecord, echomq.Iteration, echomq.calculate_next_millis)


def test_importing_echomq_loads_no_subsystem() -> None:
    code = ("import sys, threading, echomq\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('echomq.'))\n"
            "print(loaded, threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['echomq._legacy', 'echomq._version'] 1"


@pytest.mark.parametrize(("old", "name"), [
    ("echomq.scheduler", "JobScheduler"), ("echomq.repeat", "calculate_next_millis"),
    ("echomq.queue_events", "QueueEvents"), ("echomq.queue_events", "Handler"), ("echomq.job", "Job"),
    ("echomq.keys", "QueueKeys"), ("echomq.scheduler", "SchedulerRecord"),
])
def test_old_module_paths_still_give_the_public_names(old: str, name: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(echomq, name)


def test_every_old_path_answers_and_documented_ones_keep_their_names() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in LEGACY_PATHS.items():
            sys.modules.pop(old, None)
            assert importlib.import_module(old) is importlib.import_module(new), old
        from echomq.maintenance import Maintenance
        from echomq.options import decode_job_options, encode_job_options

    assert Maintenance.run_once and encode_job_options({"delay": 5}) == {"delay": 5}
    assert decode_job_options({"kl": 3}) == {"keep_logs": 3}


def test_a_real_module_is_never_shadowed_by_an_old_path() -> None:
    for old in LEGACY_PATHS:
        _parent, _, leaf = old.rpartition(".")
        assert not (INIT.parent / f"{leaf}.py").exists() and not (INIT.parent / leaf / "__init__.py").exists(), old
