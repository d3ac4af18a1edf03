"""The public surface: one list of exports, typed imports in step with it, every name a user
meets importable from ``echomq``, and nothing answering for the first layout's flat module paths."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import echomq

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
    assert out.strip() == "['echomq._version'] 1"


@pytest.mark.parametrize("old", ["echomq.scheduler", "echomq.repeat", "echomq.queue_events", "echomq.job",
                                 "echomq.keys", "echomq.options", "echomq.maintenance"])
def test_the_first_layouts_flat_module_paths_are_gone(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{old}'"):
        importlib.import_module(old)
    assert not any(type(finder).__module__.startswith("echomq") for finder in sys.meta_path)
