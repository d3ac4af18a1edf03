"""The Lua loader: finds ``lua/``, inlines includes, and runs scripts with EVALSHA.

Every file in ``lua/`` is named ``<scriptName>-<numkeys>.lua``; the number is the contract, so a
call with a different number of keys is refused before anything reaches Redis. A line
``-- @include "name"`` inlines ``lua/includes/name.lua`` (once per script, nested includes
allowed, cycles reported with the include chain). Scripts are sent with EVALSHA and reloaded
on NOSCRIPT (redis-py's ``Script`` does the reload, for clients and pipelines alike), so a Redis
restart that flushed the script cache costs one extra round trip.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.commands.core import Script

from .errors import ScriptError

_FILE_NAME = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*)-(?P<numkeys>\d+)\.lua$")
_INCLUDE = re.compile(r'^\s*--\s*@include\s+"(?P<name>[A-Za-z0-9_]+)"\s*$')


def lua_root() -> Path:
    """The ``lua/`` directory: inside the installed package, else the source checkout's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "lua", here.parent / "lua"):
        if candidate.is_dir():
            return candidate
    raise ScriptError(f"no lua/ directory next to {here} or in its parent")


def inline_includes(source: str, includes_dir: Path, origin: str) -> str:
    """Replace each include directive with the include's text, depth first, each one once."""
    done: set[str] = set()

    def expand(text: str, chain: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            match = _INCLUDE.match(line)
            if not match:
                out.append(line)
                continue
            name = match["name"]
            where = " -> ".join(chain) + f":{lineno}"
            if name in chain:
                raise ScriptError(f"include cycle: {where} includes {name!r} again")
            if name in done:
                continue
            path = includes_dir / f"{name}.lua"
            if not path.is_file():
                raise ScriptError(f"{where}: include {name!r} not found at {path}")
            done.add(name)
            out.extend(expand(path.read_text(encoding="utf-8"), chain + (name,)))
        return out

    return "\n".join(expand(source, (origin,))) + "\n"


@dataclass
class LuaScript:
    """One transition script, ready to run on any client or pipeline."""

    name: str
    numkeys: int
    source: str
    sha: str = field(init=False)
    _script: Script | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    def _bound(self, client: Any) -> Script:
        # redis-py's Script needs a client only for its encoder; the SHA is the same everywhere.
        if self._script is None:
            with self._lock:
                if self._script is None:
                    self._script = Script(client, self.source)
        return self._script

    def __call__(self, client: Any, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        """Run on ``client`` (a Redis client or a pipeline). Raises ScriptError on a wrong arity."""
        if len(keys) != self.numkeys:
            raise ScriptError(f"{self.name}-{self.numkeys}.lua takes {self.numkeys} keys, got {len(keys)}")
        return self._bound(client)(keys=list(keys), args=list(args), client=client)

    def load(self, client: redis.Redis) -> None:
        """SCRIPT LOAD now (e.g. before a pipeline), instead of on the first NOSCRIPT."""
        client.script_load(self.source)


class ScriptRegistry:
    """All scripts under one ``lua/`` directory, parsed once per process."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or lua_root()
        self._scripts: dict[str, LuaScript] = {}
        self._load_all()

    def _load_all(self) -> None:
        includes_dir = self.root / "includes"
        for path in sorted(self.root.glob("*.lua")):
            match = _FILE_NAME.match(path.name)
            if not match:
                raise ScriptError(f"{path.name}: script files must be named <scriptName>-<numkeys>.lua")
            name = match["name"]
            if name in self._scripts:
                raise ScriptError(f"two scripts are named {name!r}")
            source = inline_includes(path.read_text(encoding="utf-8"), includes_dir, path.name)
            self._scripts[name] = LuaScript(name, int(match["numkeys"]), source)

    def __getitem__(self, name: str) -> LuaScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise ScriptError(f"no Lua script named {name!r} in {self.root}") from None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._scripts.values())

    def __len__(self) -> int:
        return len(self._scripts)

    def load_all(self, client: redis.Redis) -> None:
        for script in self._scripts.values():
            script.load(client)


_registry: ScriptRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> ScriptRegistry:
    """The process-wide registry of the shipped scripts (parsed at first use, not at import)."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = ScriptRegistry()
    return _registry


def script(name: str) -> LuaScript:
    """The shipped script called ``name`` (without the ``-<numkeys>.lua``)."""
    return registry()[name]
