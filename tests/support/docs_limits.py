"""How a docs page is kept within bounds while it runs (tests/support/docs.py, "Limits"): the
process state it may change and gets back, the components it leaves running, its time limit."""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Signals a page may take over (a snippet installing its SIGTERM handler); put back afterwards.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT")
                if hasattr(signal, name))


class ProjectModules:
    """The page's project folder as Python sees it: on sys.path while the page runs, and the
    packages the page writes there its own. A package of that name imported before the page (the
    suite's own test projects have a ``shop`` too) is set aside until the page ends."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self._set_aside: dict[str, Any] = {}

    def claim(self, top_level: str) -> None:
        """The page writes ``top_level`` (a module or package): forget any imported elsewhere."""
        for name in [n for n in sys.modules if n == top_level or n.startswith(f"{top_level}.")]:
            if not self._is_the_pages(sys.modules[name]):
                self._set_aside[name] = sys.modules.pop(name)

    def forget(self) -> None:
        """Drop the page's modules and put back what was set aside."""
        for name, module in list(sys.modules.items()):
            if self._is_the_pages(module):
                del sys.modules[name]
        sys.modules.update(self._set_aside)

    def _is_the_pages(self, module: Any) -> bool:
        folder = str(self.project)
        origin = getattr(module, "__file__", None) or ""
        paths = list(getattr(module, "__path__", []) or [])
        return origin.startswith(folder) or any(str(path).startswith(folder) for path in paths)


@contextlib.contextmanager
def page_process_state(project: Path) -> Iterator[ProjectModules]:
    """The page runs in its project folder with it on sys.path; afterwards the process is as it
    was: working directory, environment, signal handlers, and no module of the project left."""
    cwd, environ = os.getcwd(), dict(os.environ)
    handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
    modules = ProjectModules(project)
    sys.path.insert(0, str(project))
    os.chdir(project)
    try:
        yield modules
    finally:
        os.chdir(cwd)
        sys.path.remove(str(project))
        os.environ.clear()
        os.environ.update(environ)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        modules.forget()


def closables(namespace: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The page's running components (a Worker, a QueueEvents ...): a ``running`` flag that is
    True and a ``close()``."""
    found = []
    for name, value in list(namespace.items()):
        if isinstance(value, type) or not callable(getattr(value, "close", None)):
            continue
        try:
            running = getattr(value, "running", False)
        except Exception:
            continue
        if running is True:
            found.append((name, value))
    return found


def close_running(namespace: Mapping[str, Any]) -> list[str]:
    """Close whatever the page left running; name it."""
    left = []
    for name, value in closables(namespace):
        left.append(f"{name} ({type(value).__name__})")
        with contextlib.suppress(Exception):
            value.close(timeout=2)
    return left


def threads_left(before: set[threading.Thread], patience_s: float = 3.0) -> list[str]:
    """Threads started during the page still alive after ``patience_s`` (a component's helper
    threads end shortly after its close)."""
    deadline = time.monotonic() + patience_s
    while True:
        alive = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not alive or time.monotonic() >= deadline:
            return [t.name for t in alive]
        time.sleep(0.02)


class PageTimeout(Exception):
    """Raised in the page's thread when it overran its time limit."""


class Interrupter:
    """Stops the page's thread in whatever it does (a loop that never ends included): a SIGUSR1
    handler raising :class:`PageTimeout` while armed, which is while a block runs. Only the main
    thread receives signals; in another one ``interrupt`` does nothing (pytest-timeout is left)."""

    def __init__(self) -> None:
        self.armed = False
        self._main = threading.current_thread() is threading.main_thread()

    def __call__(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.armed = False
            raise PageTimeout

    def interrupt(self) -> None:
        if self.armed and self._main:
            _thread.interrupt_main(signal.SIGUSR1)


@contextlib.contextmanager
def interruptible() -> Iterator[Interrupter]:
    interrupter = Interrupter()
    if not interrupter._main:
        yield interrupter
        return
    previous = signal.signal(signal.SIGUSR1, interrupter)
    try:
        yield interrupter
    finally:
        interrupter.armed = False
        signal.signal(signal.SIGUSR1, previous)


class Watchdog(threading.Thread):
    """Closes the component a ``close=`` block blocks in, once it is running (and, for a Worker,
    once its queue is idle); past the page's deadline, closes every running component of the page
    and interrupts the page's thread."""

    def __init__(self, namespace: Mapping[str, Any], deadline: float, interrupter: Interrupter) -> None:
        super().__init__(name="docs-watchdog", daemon=True)
        self.namespace = namespace
        self.deadline = deadline
        self.interrupter = interrupter
        self.expired = False
        self.stacks = ""  # every thread's stack when the deadline passed, for the failure message
        self._watched: str | None = None
        self._watch_lock = threading.Lock()  # watch() of the next block against the clear of the last
        self._watches = 0  # how many watch() calls: the next block's Worker often has the same name
        self._running_since: float | None = None
        self._done = threading.Event()

    def watch(self, name: str | None) -> None:
        with self._watch_lock:
            self._watched, self._running_since = name, None
            self._watches += 1

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)

    def run(self) -> None:
        while not self._done.wait(0.02):
            if time.monotonic() > self.deadline:
                if not self.expired:
                    self.stacks = _thread_stacks() + _queue_state(self.namespace.get(self._watched or ""))
                    self.expired = True
                    for _, value in closables(self.namespace):
                        with contextlib.suppress(Exception):
                            value.close(timeout=1)
                    self._done.wait(1.0)  # a block waiting in run() returns now: let it
                    self.interrupter.interrupt()
                continue
            with self._watch_lock:
                name, watches = self._watched, self._watches
            component = self.namespace.get(name) if name else None
            if component is None or getattr(component, "running", False) is not True:
                self._running_since = None
                continue
            now = time.monotonic()
            self._running_since = self._running_since or now
            if now - self._running_since >= 0.1 and _idle(component):
                with contextlib.suppress(Exception):
                    component.close()
                with self._watch_lock:  # the next block may have asked to watch its own already
                    if self._watches == watches:
                        self._watched = None


def _thread_stacks() -> str:
    """Where every thread of this process is, as text (what a hung page was waiting on)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(f"--- thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


def _queue_state(component: Any) -> str:
    """The watched Worker's queue, list by list, when the page timed out."""
    keys, client = getattr(component, "keys", None), getattr(component, "client", None)
    if keys is None or client is None:
        return ""
    try:
        return (f"\n--- queue {keys.queue_name}: wait {client.lrange(keys.wait, 0, 5)}, active "
                f"{client.lrange(keys.active, 0, 5)}, prioritized {client.zrange(keys.prioritized, 0, 5)}, "
                f"running {getattr(component, 'running', None)}")
    except Exception as exc:
        return f"\n--- queue: not read ({exc})"


def _idle(component: Any) -> bool:
    """A Worker's queue has no job waiting, prioritized or active; anything else is idle once running."""
    keys, client = getattr(component, "keys", None), getattr(component, "client", None)
    if type(component).__name__ != "Worker" or keys is None or client is None:
        return True
    return client.llen(keys.wait) + client.zcard(keys.prioritized) + client.llen(keys.active) == 0
