"""Routing by job name: a Worker's processor given as ``{"email": send_email, "report": build_report}``.

The mapping is checked when the Worker is built (every key a str, every value callable, at
least one entry) and becomes one processor, :class:`JobRouter`, that calls the function of the
job's name. A job whose name nothing handles (a producer of another version, a typo, another
runtime's job) fails for good, with no retry: no later attempt would find a function either.
Its ``failedReason`` names the job's name and the names handled; the name comes from whoever
wrote the job, so it is quoted and shortened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInputError, UnrecoverableError
from ..types import Processor


def shown_name(name: str) -> str:
    """A job name fit for a log line or a reason: quoted (a newline cannot forge a second line),
    at most 100 characters."""
    return repr(name[:100]) + ("..." if len(name) > 100 else "")


class UnroutedJobError(UnrecoverableError):
    """A job whose name no function handles: it fails for good, and its log line carries no
    traceback (the only frame would be the router's)."""


class JobRouter:
    """One processor calling ``routes[job.name](job)``; an unhandled name fails the job for good."""

    def __init__(self, routes: Mapping[str, Processor], queue_name: str) -> None:
        self.routes = dict(routes)
        self.queue_name = queue_name
        self._handled = ", ".join(sorted(self.routes))

    def __call__(self, job: Any) -> Any:
        function = self.routes.get(job.name)
        if function is None:
            raise UnroutedJobError(f"no processor for job name {shown_name(job.name)} in queue "
                                   f"{self.queue_name!r} (handled: {self._handled})")
        return function(job)

    def __repr__(self) -> str:
        return f"JobRouter({self.queue_name!r}, handled: {self._handled})"


def as_processor(processor: Processor | Mapping[str, Processor], queue_name: str) -> Processor:
    """``processor`` if callable; a mapping of job name -> function checked and made a
    :class:`JobRouter`; anything else refused, naming what is wrong."""
    if isinstance(processor, Mapping):
        if not processor:
            raise InvalidInputError("Worker processor={}: map at least one job name to its function")
        bad = {name: fn for name, fn in processor.items() if not isinstance(name, str) or not callable(fn)}
        if bad:
            raise InvalidInputError(f"Worker processor: job names must be str and each must map to a callable "
                                    f"(bad entries: {bad!r:.200})")
        return JobRouter(processor, queue_name)
    if not callable(processor):
        raise InvalidInputError(f"Worker processor={processor!r:.100}: must be callable, or a mapping of job "
                                "name -> callable")
    return processor
