"""The Lua loader: finds ``lua/``, inlines includes, and reads each script's contract.

Every file in ``lua/`` is named ``<scriptName>-<numkeys>.lua`` and opens with a header whose
Input block names every key: ``KEYS[n] <token>`` (docs/protocol.md §6.1-6.2). Both are the
contract: a call with a different number of keys is refused before anything reaches Redis, and
the order of a call's keys comes from the header (:meth:`LuaScript.bind`), never from a list
written a second time in Python. A line ``-- @include "name"`` inlines
``lua/includes/name.lua`` (once per script, nested includes allowed, cycles reported with the
include chain). A line ``-- @script "name"`` inlines the transition script ``name`` (with its own
includes) as ``local function name(KEYS, ARGV) ... end``: a script that runs several
transitions in one call (a flow's adds) runs their own code, not a copy of it. Running a script
is ``transport.calls``' job.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.commands.core import Script

from ..errors import ScriptError
from ..protocol.keys import KeyToken, QueueKeys, parse_key_token

_FILE_NAME = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]*)-(?P<numkeys>\d+)\.lua$")
_INCLUDE = re.compile(r'^\s*--\s*@include\s+"(?P<name>[A-Za-z0-9_]+)"\s*$')
_SCRIPT = re.compile(r'^\s*--\s*@script\s+"(?P<name>[A-Za-z][A-Za-z0-9]*)"\s*$')
_HEADER = re.compile(r"\A\s*--\[\[(?P<body>.*?)\]\]", re.DOTALL)
_KEY_ENTRY = re.compile(r"KEYS\[(?P<index>\d+)\]\s+(?P<token>[A-Za-z<>-]+(?::[A-Za-z<>-]+)*)")


def lua_root() -> Path:
    """The ``lua/`` directory: inside the installed package, else the source checkout's."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "lua", package.parent / "lua"):
        if candidate.is_dir():
            return candidate
    raise ScriptError(f"no lua/ directory in {package} or next to it")


def inline_includes(source: str, includes_dir: Path, origin: str, callers: tuple[str, ...] = ()) -> str:
    """Replace each include directive with the include's text, depth first, each one once, and
    each script directive with that script wrapped in a function (its includes inlined inside
    it, once per function: the function's ``KEYS`` and ``ARGV`` are its own). ``callers``: the
    scripts whose functions this source is inlined into (a script may not call itself)."""
    done: set[str] = set()

    def expand(text: str, chain: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            where = " -> ".join(chain) + f":{lineno}"
            called = _SCRIPT.match(line)
            if called:
                out.extend(_wrapped_script(called["name"], includes_dir, where, (*callers, origin)))
                continue
            match = _INCLUDE.match(line)
            if not match:
                out.append(line)
                continue
            name = match["name"]
            if name in chain:
                raise ScriptError(f"include cycle: {where} includes {name!r} again")
            if name in done:
                continue
            path = includes_dir / f"{name}.lua"
            if not path.is_file():
                raise ScriptError(f"{where}: include {name!r} not found at {path}")
            done.add(name)
            out.extend(expand(path.read_text(encoding="utf-8"), (*chain, name)))
        return out

    return "\n".join(expand(source, (origin,))) + "\n"


def _wrapped_script(name: str, includes_dir: Path, where: str, callers: tuple[str, ...]) -> list[str]:
    """``local function <name>(KEYS, ARGV) <the script> end``, for a script directive at ``where``."""
    found = [path for path in includes_dir.parent.glob(f"{name}-*.lua") if _FILE_NAME.match(path.name)]
    if not found:
        raise ScriptError(f"{where}: script {name!r} not found in {includes_dir.parent}")
    path = found[0]
    if path.name in callers:
        raise ScriptError(f"{where}: script {name!r} runs itself ({' -> '.join((*callers, path.name))})")
    body = inline_includes(path.read_text(encoding="utf-8"), includes_dir, path.name, callers)
    return [f"local function {name}(KEYS, ARGV)", *body.splitlines(), "end"]


def read_key_tokens(source: str, numkeys: int, origin: str) -> tuple[KeyToken, ...]:
    """The header's ``KEYS[1]..KEYS[numkeys]`` tokens, in order; ScriptError if any is missing,
    named twice, beyond ``numkeys`` or not in the grammar."""
    header = _HEADER.match(source)
    if header is None:
        raise ScriptError(f"{origin}: must open with a --[[ ... ]] header naming its KEYS")
    body = header["body"]
    tokens: dict[int, KeyToken] = {}
    for match in _KEY_ENTRY.finditer(body):
        index = int(match["index"])
        line = source.count("\n", 0, header.start("body") + match.start()) + 1
        if index in tokens:
            raise ScriptError(f"{origin}:{line}: KEYS[{index}] is named twice")
        if not 1 <= index <= numkeys:
            raise ScriptError(f"{origin}:{line}: KEYS[{index}] is beyond the {numkeys} keys of the file name")
        try:
            tokens[index] = parse_key_token(match["token"])
        except ValueError as exc:
            raise ScriptError(f"{origin}:{line}: KEYS[{index}]: {exc}") from None
    missing = [i for i in range(1, numkeys + 1) if i not in tokens]
    if missing:
        raise ScriptError(f"{origin}: the header does not name KEYS{missing}")
    return tuple(tokens[i] for i in range(1, numkeys + 1))


class BoundKeys:
    """One script's KEYS for one queue, in the header's order, with the per-call choices made.

    Built once per component; the hot path only fills in the job's keys (:meth:`for_job`).
    """

    __slots__ = ("_job_prefix", "_job_slots", "keys", "script")

    def __init__(self, script: LuaScript, queue_keys: QueueKeys, choices: Mapping[str, str]) -> None:
        self.script = script
        self._job_prefix = queue_keys.job_prefix
        keys: list[str] = []
        slots: list[tuple[int, str]] = []
        for index, token in enumerate(script.key_tokens):
            if token.kind == "job":
                slots.append((index, token.value))
                keys.append("")
            else:
                keys.append(queue_keys.for_token(token, choices))
        self.keys: tuple[str, ...] = tuple(keys)
        self._job_slots = tuple(slots)

    def for_job(self, job_id: str | None = None) -> Sequence[str]:
        """The keys of a call about ``job_id`` (None for a script that names no job key)."""
        if not self._job_slots:
            return self.keys
        if job_id is None:
            raise ScriptError(f"{self.script.file_name} names the job's keys: pass the job id")
        keys = list(self.keys)
        for index, part in self._job_slots:
            keys[index] = f"{self._job_prefix}{job_id}{part}"
        return keys


@dataclass(eq=False)
class LuaScript:
    """One transition script: its source with includes inlined, its SHA and its key contract."""

    name: str
    numkeys: int
    source: str
    key_tokens: tuple[KeyToken, ...]
    sha: str = field(init=False)
    _pipeline_script: Script | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.numkeys}.lua"

    def bind(self, queue_keys: QueueKeys, **choices: str) -> BoundKeys:
        """This script's keys for a queue; ``choices`` fill the header's ``<name>`` tokens."""
        return BoundKeys(self, queue_keys, choices)

    def keys_for(self, queue_keys: QueueKeys, job_id: str | None = None, **choices: str) -> Sequence[str]:
        """The keys of one call (binding on the spot: for calls off the hot path)."""
        return BoundKeys(self, queue_keys, choices).for_job(job_id)

    def check_arity(self, keys: Sequence[str]) -> None:
        """ScriptError when a call would pass another number of keys than the file name says."""
        if len(keys) != self.numkeys:
            raise ScriptError(f"{self.file_name} takes {self.numkeys} keys, got {len(keys)}")

    def command(self, keys: Sequence[str], args: Sequence[Any]) -> tuple[Any, ...]:
        """The EVALSHA command for a call; ScriptError on a wrong number of keys."""
        self.check_arity(keys)
        return ("EVALSHA", self.sha, self.numkeys, *keys, *args)

    def pipeline_script(self, client: Any) -> Script:
        """redis-py's Script for this source: a pipeline loads it before MULTI, so a flushed
        script cache cannot fail half a transaction."""
        if self._pipeline_script is None:
            with self._lock:
                if self._pipeline_script is None:
                    self._pipeline_script = Script(client, self.source)
        return self._pipeline_script


class ScriptRegistry:
    """All scripts under one ``lua/`` directory, parsed once per process."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or lua_root()
        self._scripts: dict[str, LuaScript] = {}
        includes_dir = self.root / "includes"
        for path in sorted(self.root.glob("*.lua")):
            match = _FILE_NAME.match(path.name)
            if not match:
                raise ScriptError(f"{path.name}: script files must be named <scriptName>-<numkeys>.lua")
            name, numkeys = match["name"], int(match["numkeys"])
            if name in self._scripts:
                raise ScriptError(f"two scripts are named {name!r}")
            raw = path.read_text(encoding="utf-8")
            tokens = read_key_tokens(raw, numkeys, path.name)
            self._scripts[name] = LuaScript(name, numkeys, inline_includes(raw, includes_dir, path.name), tokens)

    def __getitem__(self, name: str) -> LuaScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise ScriptError(f"no Lua script named {name!r} in {self.root}") from None

    def __iter__(self) -> Iterator[LuaScript]:
        return iter(self._scripts.values())

    def __len__(self) -> int:
        return len(self._scripts)


@functools.cache
def registry() -> ScriptRegistry:
    """The process-wide registry of the shipped scripts (parsed at first use, not at import)."""
    return ScriptRegistry()


def script(name: str) -> LuaScript:
    """The shipped script called ``name`` (without the ``-<numkeys>.lua``)."""
    return registry()[name]
