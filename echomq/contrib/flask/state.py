"""What ``init_app`` keeps for one app (in ``app.extensions["echomq"]``), and the jobs an
extension declares before any app gives them a connection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import flask

from ...errors import InvalidJobOptionsError
from ...protocol.options import encode_job_options
from ...registry import JobRegistry, RegisteredJob
from ..host.project import Project
from ..host.readers import ProcessReaders
from .settings import Settings

#: The key of an app's state in ``app.extensions``.
EXTENSION_KEY = "echomq"


@dataclass(frozen=True)
class DeclaredJob:
    """A job as declared on the extension, before any app gives it a connection."""

    func: Callable[..., Any]
    name: str
    queue: str
    options: Mapping[str, Any]


@dataclass(eq=False)
class AppState:
    """What ``init_app`` gave one app: its settings, its project (the registry and what the
    commands do with it), its readers."""

    app: flask.Flask
    settings: Settings
    project: Project
    readers: ProcessReaders
    jobs: dict[tuple[str, str], RegisteredJob] = field(default_factory=dict)

    @property
    def registry(self) -> JobRegistry:
        return self.project.registry

    def options_for(self, declared: DeclaredJob) -> dict[str, Any]:
        """The job's options in this app: its declared ones over the app's queue defaults,
        checked (InvalidJobOptionsError when the two do not go together)."""
        options = {**self.settings.queues.get(declared.queue, {}), **declared.options}
        try:
            encode_job_options(options)
        except InvalidJobOptionsError as exc:
            raise InvalidJobOptionsError(f"app {self.app.name!r}, job {declared.name!r} with the ECHOMQ_QUEUES "
                                         f"defaults of queue {declared.queue!r}: {exc}") from None
        return options

    def register(self, declared: DeclaredJob) -> None:
        """Register a declared job in this app's registry (check ``options_for`` first)."""
        options = self.options_for(declared)
        registered = self.registry.register(declared.func, name=declared.name, queue=declared.queue, **options)
        self.jobs[declared.queue, declared.name] = registered
