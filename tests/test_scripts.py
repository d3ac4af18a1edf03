"""The Lua loader: file-name contract, include inlining, and every shipped script on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from echomq.errors import ScriptError
from echomq.scripts import ScriptRegistry, lua_root, registry


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_shipped_script_loads_and_is_known_to_the_server(connection: redis.Redis) -> None:
    scripts = list(registry())
    assert scripts, f"no scripts found under {lua_root()}"
    for script in scripts:
        sha = connection.script_load(script.source)
        sha = sha.decode() if isinstance(sha, bytes) else sha
        assert sha == script.sha, script.name
    assert all(connection.script_exists(*[s.sha for s in scripts]))


def test_no_script_uses_cmsgpack_or_bit() -> None:
    for script in registry():
        assert "cmsgpack" not in script.source, script.name
        assert "bit." not in script.source, script.name


def test_includes_are_inlined_once_and_nested(tmp_path: Path, connection: redis.Redis) -> None:
    write(tmp_path, "includes/double.lua", "local function double(x) return x * 2 end\n")
    write(tmp_path, "includes/quad.lua", '-- @include "double"\nlocal function quad(x) return double(double(x)) end\n')
    write(tmp_path, "calc-1.lua", '-- @include "double"\n-- @include "quad"\nreturn {double(3), quad(3), KEYS[1]}\n')
    reg = ScriptRegistry(tmp_path)
    calc = reg["calc"]
    assert calc.numkeys == 1
    assert calc.source.count("local function double") == 1
    assert calc(connection, ["k"]) == [6, 12, b"k"]


def test_wrong_number_of_keys_is_refused_before_redis(tmp_path: Path) -> None:
    write(tmp_path, "two-2.lua", "return 1\n")
    with pytest.raises(ScriptError, match="takes 2 keys, got 1"):
        ScriptRegistry(tmp_path)["two"](object(), ["a"])


def test_include_cycle_names_the_chain(tmp_path: Path) -> None:
    write(tmp_path, "includes/a.lua", '-- @include "b"\n')
    write(tmp_path, "includes/b.lua", 'local x = 1\n-- @include "a"\n')
    write(tmp_path, "top-0.lua", '-- @include "a"\n')
    with pytest.raises(ScriptError, match=r"include cycle: top-0.lua -> a -> b:2"):
        ScriptRegistry(tmp_path)


def test_missing_include_and_bad_file_name(tmp_path: Path) -> None:
    write(tmp_path, "top-0.lua", '-- @include "nowhere"\n')
    with pytest.raises(ScriptError, match="include 'nowhere' not found"):
        ScriptRegistry(tmp_path)
    (tmp_path / "top-0.lua").unlink()
    write(tmp_path, "noNumkeys.lua", "return 1\n")
    with pytest.raises(ScriptError, match="<scriptName>-<numkeys>.lua"):
        ScriptRegistry(tmp_path)


def test_noscript_reloads_transparently(tmp_path: Path, connection: redis.Redis) -> None:
    write(tmp_path, "echo-0.lua", "return ARGV[1]\n")
    echo = ScriptRegistry(tmp_path)["echo"]
    assert echo(connection, [], ["one"]) == b"one"
    connection.script_flush()
    assert echo(connection, [], ["two"]) == b"two"
