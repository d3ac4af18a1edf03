"""The Lua loader and the script runner: the file-name and header contracts, include inlining,
keys bound from the header, NOSCRIPT recovery on every path, and every shipped script on both
backends."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from echomq.errors import ScriptError
from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import NOSCRIPT_RELOADS, PinnedConnection, run_script
from echomq.transport.scripts import ScriptRegistry, lua_root, registry
from echomq.transport.stream_calls import run_calls


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def header(*keys: str) -> str:
    entries = "\n".join(f"    KEYS[{i}] {token}" for i, token in enumerate(keys, start=1))
    return f"--[[\n  A test script.\n\n  Input:\n{entries}\n]]\n"


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


def test_every_shipped_header_names_each_of_its_keys() -> None:
    for script in registry():
        assert len(script.key_tokens) == script.numkeys, script.file_name
    finished = registry()["moveToFinished"].bind(QueueKeys("q"), finished="failed")
    keys = finished.for_job("7")
    assert keys[10] == "emq:{q}:failed" and keys[11] == "emq:{q}:7" and keys[12] == "emq:{q}:metrics:failed"
    assert keys[0] == "emq:{q}:wait" and keys[13] == "emq:{q}:marker"


def test_includes_are_inlined_once_and_nested(tmp_path: Path, connection: redis.Redis) -> None:
    write(tmp_path, "includes/double.lua", "local function double(x) return x * 2 end\n")
    write(tmp_path, "includes/quad.lua", '-- @include "double"\nlocal function quad(x) return double(double(x)) end\n')
    write(tmp_path, "calc-1.lua", header("wait") + '-- @include "double"\n-- @include "quad"\n'
                                  "return {double(3), quad(3), KEYS[1]}\n")
    reg = ScriptRegistry(tmp_path)
    calc = reg["calc"]
    assert calc.numkeys == 1
    assert calc.source.count("local function double") == 1
    assert run_script(connection, calc, calc.keys_for(QueueKeys("q"))) == [6, 12, b"emq:{q}:wait"]


def test_a_script_directive_runs_another_script_with_its_own_keys_and_args(tmp_path: Path,
                                                                          connection: redis.Redis) -> None:
    write(tmp_path, "includes/twice.lua", "local function twice(x) return x .. x end\n")
    write(tmp_path, "echo-1.lua", header("wait") + '-- @include "twice"\nreturn {KEYS[1], twice(ARGV[1])}\n')
    write(tmp_path, "both-1.lua", header("meta") + '-- @include "twice"\n-- @script "echo"\n'
          'local inner = echo({"k"}, {"a"})\nreturn {inner[1], inner[2], KEYS[1], twice(ARGV[1])}\n')
    both = ScriptRegistry(tmp_path)["both"]
    assert both.source.count("local function twice") == 2  # once in each function's scope
    assert both.source.count("local function echo(KEYS, ARGV)") == 1
    assert run_script(connection, both, both.keys_for(QueueKeys("q")), ["b"]) == [b"k", b"aa", b"emq:{q}:meta",
                                                                                  b"bb"]


def test_a_script_directive_names_what_is_wrong(tmp_path: Path) -> None:
    write(tmp_path, "top-0.lua", header() + '-- @script "nowhere"\n')
    with pytest.raises(ScriptError, match=r"top-0.lua:7: script 'nowhere' not found"):
        ScriptRegistry(tmp_path)
    write(tmp_path, "top-0.lua", header() + '-- @script "loop"\n')
    write(tmp_path, "loop-0.lua", header() + '-- @script "loop"\n')
    with pytest.raises(ScriptError, match=r"script 'loop' runs itself \(loop-0.lua -> loop-0.lua\)"):
        ScriptRegistry(tmp_path)


def test_keys_come_from_the_header_in_its_order(tmp_path: Path) -> None:
    write(tmp_path, "move-5.lua", header("<finished>", "job", "job:lock", "prefix", "metrics:<finished>")
          + "return 1\n")
    move = ScriptRegistry(tmp_path)["move"]
    bound = move.bind(QueueKeys("orders", "p"), finished="completed")
    assert list(bound.for_job("42")) == ["p:{orders}:completed", "p:{orders}:42", "p:{orders}:42:lock",
                                         "p:{orders}:", "p:{orders}:metrics:completed"]
    with pytest.raises(ScriptError, match="pass the job id"):
        bound.for_job()
    with pytest.raises(ValueError, match="<finished>"):
        move.bind(QueueKeys("orders"))


@pytest.mark.parametrize(("text", "message"), [
    ("return 1\n", "must open with a --\\[\\[ ... \\]\\] header"),
    (header("wait"), r"does not name KEYS\[2\]"),
    (header("wait", "wait", "active"), r"KEYS\[3\] is beyond the 2 keys"),
    ("--[[\n  KEYS[1] wait\n  KEYS[1] active\n  KEYS[2] meta\n]]\n", r"two-2.lua:3: KEYS\[1\] is named twice"),
    (header("wait", "jobs"), r"KEYS\[2\]: unknown key 'jobs'"),
    (header("wait", "job:nothing"), r"KEYS\[2\]: job key 'job:nothing'"),
])
def test_a_header_that_breaks_the_contract_is_refused_at_load(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, "two-2.lua", text)
    with pytest.raises(ScriptError, match=message):
        ScriptRegistry(tmp_path)


def test_wrong_number_of_keys_is_refused_before_redis(tmp_path: Path) -> None:
    write(tmp_path, "two-2.lua", header("wait", "active") + "return 1\n")
    two = ScriptRegistry(tmp_path)["two"]
    nowhere = redis.Redis(host="127.0.0.1", port=1)  # any I/O would fail with ConnectionError
    with pytest.raises(ScriptError, match="takes 2 keys, got 1"):
        run_script(nowhere, two, ["a"])
    with pytest.raises(ScriptError, match="takes 2 keys, got 3"):
        PinnedConnection(nowhere)(two, ["a", "b", "c"], [])
    with pytest.raises(ScriptError, match="takes 2 keys, got 0"):
        run_calls(nowhere, [(two, [], [])])


def test_include_cycle_names_the_chain(tmp_path: Path) -> None:
    write(tmp_path, "includes/a.lua", '-- @include "b"\n')
    write(tmp_path, "includes/b.lua", 'local x = 1\n-- @include "a"\n')
    write(tmp_path, "top-0.lua", header() + '-- @include "a"\n')
    with pytest.raises(ScriptError, match=r"include cycle: top-0.lua -> a -> b:2"):
        ScriptRegistry(tmp_path)


def test_missing_include_and_bad_file_name(tmp_path: Path) -> None:
    write(tmp_path, "top-0.lua", header() + '-- @include "nowhere"\n')
    with pytest.raises(ScriptError, match="include 'nowhere' not found"):
        ScriptRegistry(tmp_path)
    (tmp_path / "top-0.lua").unlink()
    write(tmp_path, "noNumkeys.lua", "return 1\n")
    with pytest.raises(ScriptError, match=r"<scriptName>-<numkeys>\.lua"):
        ScriptRegistry(tmp_path)


def test_noscript_reloads_transparently_on_every_path(tmp_path: Path, connection: redis.Redis) -> None:
    write(tmp_path, "echo-0.lua", header() + "return ARGV[1]\n")
    echo = ScriptRegistry(tmp_path)["echo"]
    assert run_script(connection, echo, [], ["one"]) == b"one"
    connection.script_flush()
    assert run_script(connection, echo, [], ["two"]) == b"two"
    connection.script_flush()
    pinned = PinnedConnection(connection)
    try:
        assert pinned(echo, [], ["three"]) == b"three"
        connection.script_flush()
        assert pinned(echo, [], ["four"]) == b"four"
    finally:
        pinned.release()
    connection.script_flush()
    assert run_calls(connection, [(echo, [], [str(n)]) for n in range(3)]) == [b"0", b"1", b"2"]
    connection.script_flush()
    pipe = connection.pipeline(transaction=True)
    run_script(pipe, echo, [], ["five"])
    run_script(pipe, echo, [], ["six"])
    assert pipe.execute() == [b"five", b"six"]


def test_a_flush_between_the_reload_and_the_call_is_survived(tmp_path: Path, connection: redis.Redis,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A SCRIPT FLUSH (another client's, a restart) may come between the load a NOSCRIPT asked for
    and the call sent again: it is loaded again, NOSCRIPT_RELOADS times; a cache that never keeps
    it raises NOSCRIPT after them. (Seen on a shared server: a worker's finish left a job active.)"""
    write(tmp_path, "echo-0.lua", header() + "return ARGV[1]\n")
    echo = ScriptRegistry(tmp_path)["echo"]
    loads: list[int] = []
    real_load = connection.script_load

    def load_then_lose(source: str) -> str:
        sha = real_load(source)
        loads.append(1)
        if len(loads) < flushes_after:
            connection.script_flush()  # lost again before the call comes
        return sha

    monkeypatch.setattr(connection, "script_load", load_then_lose)
    flushes_after = NOSCRIPT_RELOADS
    connection.script_flush()
    assert run_script(connection, echo, [], ["kept"]) == b"kept"
    assert len(loads) == NOSCRIPT_RELOADS
    loads.clear()
    flushes_after = NOSCRIPT_RELOADS + 2  # every load is lost
    connection.script_flush()
    with pytest.raises(redis.exceptions.NoScriptError):
        run_script(connection, echo, [], ["lost"])
    assert len(loads) == NOSCRIPT_RELOADS
