"""A WorkerListener a project's ``LISTENERS`` setting names in the tests of the framework
worker commands: it writes a line per finished job to ``$ECHOMQ_TEST_LISTENER_FILE``, so the
test (another process) reads what the command's Workers told their listeners."""

from __future__ import annotations

import os
from typing import Any

from echomq import WorkerListener


class FileRecorder(WorkerListener):
    def _write(self, line: str) -> None:
        with open(os.environ["ECHOMQ_TEST_LISTENER_FILE"], "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def on_completed(self, job: Any, result: Any, *, duration_ms: float) -> None:
        self._write(f"{type(self).__name__} completed {job.name} {job.id}")


class SecondRecorder(FileRecorder):
    """A second one, named as an instance (``RECORDER``), to show both forms and their order."""


RECORDER = SecondRecorder()
