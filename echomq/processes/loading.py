"""What the operator names as ``MODULE:NAME`` (``--app``, ``--processor``, ``--listener``), and
why the worker command cannot start.

Importing the module such a spec names is the worker command's whole point: it is the one place
in EchoMQ that imports a module named by a string, and that string is typed by the operator (or
a framework setting), never read from Redis. The current directory is importable, as with
``python -m``.

A listener is given as one of three things, told apart once, before anything starts
(:func:`listener_source`): a ``WorkerListener`` instance, used as it is (a pool's processes each
get their copy through the fork); a ``WorkerListener`` subclass; or any other callable taking no
argument and returning a ``WorkerListener`` (a factory). A class or a factory is called once in
each worker process, after the fork and before its Workers are built, so that each process gets
a listener of its own (a metrics server, an SDK with threads, a socket).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias

from ..errors import InvalidInputError
from ..worker.listeners import WorkerListener

#: What a listener may be given as (see the module doc).
ListenerSource: TypeAlias = "WorkerListener | type[WorkerListener] | Callable[[], WorkerListener]"


class StartupError(Exception):
    """Why the command cannot start, as its one line, with the exit status."""

    status = 1


class UsageError(StartupError):
    """A ``MODULE:NAME`` that does not name what it must, a queue the registry lacks, or settings
    the Worker refuses."""

    status = 2


_EXAMPLES = {"--app": "myapp.jobs:registry", "--processor": "myapp.jobs:process",
             "--listener": "myapp.monitoring:SentryListener"}


def load_object(spec: str, option: str) -> object:
    """The object ``module:attribute`` names (``attribute`` may be dotted); UsageError when the
    module or the attribute is not there. An error raised by the module's own code while it
    imports is the application's, and propagates with its traceback."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"{option} {spec!r}: give MODULE:NAME, e.g. {_EXAMPLES.get(option, 'myapp.jobs:name')}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # the console script's sys.path lacks it; `python -m` has it
    try:
        target: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise  # the module exists and imports something missing: the application's error
        raise UsageError(f"{option} {spec!r}: no module named {exc.name!r}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"{option} {spec!r}: {module_name} has no {attribute!r}") from None
    return target


def listener_source(found: object, shown: str) -> ListenerSource:
    """``found`` as a listener source (see the module doc), or UsageError naming ``shown``."""
    if isinstance(found, WorkerListener):
        return found
    if isinstance(found, type):
        if issubclass(found, WorkerListener):
            return found
        raise UsageError(f"{shown} is a class but not a WorkerListener subclass (it is {found!r:.60})")
    if callable(found):
        return found  # a factory: what it returns is checked in each process (make_listeners)
    raise UsageError(f"{shown} is not a WorkerListener, a WorkerListener class or a function returning one "
                     f"(it is {found!r:.60})")


def listener_sources(specs: Sequence[str], given: Sequence[object] = ()) -> list[tuple[ListenerSource, str]]:
    """The listeners a host passed in (``given``, as objects) and those ``--listener`` names, each
    with how to name it in a message; UsageError for the first that is not one."""
    sources = [(listener_source(found, f"listener {found!r:.60}"), f"listener {found!r:.60}") for found in given]
    for spec in specs:
        shown = f"--listener {spec!r}"
        sources.append((listener_source(load_object(spec, "--listener"), shown), shown))
    return sources


def make_listeners(sources: Sequence[tuple[ListenerSource, str]]) -> list[WorkerListener]:
    """The listeners of one worker process: instances as they are, classes and factories called
    (here, in the process). InvalidInputError naming the source whose call returned something
    else; what a call raises is the application's and propagates."""
    made: list[WorkerListener] = []
    for source, shown in sources:
        listener = source if isinstance(source, WorkerListener) else source()
        if not isinstance(listener, WorkerListener):
            raise InvalidInputError(f"{shown} returned {listener!r:.60}, not a WorkerListener")
        made.append(listener)
    return made
