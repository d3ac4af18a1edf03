"""The first landing's flat module paths, kept working on top of the layered tree.

``import echomq.scheduler`` (and the other paths below) still gives the module that now holds
those names, with a DeprecationWarning naming the new path. The finder answers only for the
names in this table and only after the normal finders found nothing, so it never shadows a
real module. New code imports from ``echomq`` itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: Old module path -> the module that holds its public names now.
LEGACY_PATHS: dict[str, str] = {
    "echomq.backoff": "echomq.worker.retry",
    "echomq.connection": "echomq.transport.connection",
    "echomq.cron": "echomq.schedule.cron",
    "echomq.cron_parse": "echomq.schedule.cron.parse",
    "echomq.cron_walk": "echomq.schedule.cron.walk",
    "echomq.enqueue": "echomq.queue.enqueue",
    "echomq.job": "echomq.queue.job",
    "echomq.keys": "echomq.protocol.keys",
    "echomq.maintenance": "echomq.worker.maintenance",
    "echomq.marker": "echomq.worker.fetcher",
    "echomq.options": "echomq.protocol.options",
    "echomq.pipelining": "echomq.transport.calls",
    "echomq.queue_admin": "echomq.queue.admin",
    "echomq.queue_events": "echomq.events",
    "echomq.repeat": "echomq.schedule.next_run",
    "echomq.scheduler": "echomq.schedule",
    "echomq.scheduler_records": "echomq.schedule.records",
    "echomq.scheduler_spec": "echomq.schedule.spec",
    "echomq.scripts": "echomq.transport.scripts",
    "echomq.stream_cursor": "echomq.events.cursor",
    "echomq.subscribers": "echomq.events.subscribers",
    "echomq.transitions": "echomq.worker.transitions",
    "echomq.worker_job": "echomq.worker.active_job",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} is deprecated: import from echomq (the module is {self.target} now)",
                      DeprecationWarning, stacklevel=4)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the target module is already imported."""


class LegacyPathFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = LEGACY_PATHS.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Answer the old paths (once per process, behind every other finder)."""
    if not any(isinstance(finder, LegacyPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(LegacyPathFinder())
