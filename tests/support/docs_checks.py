"""The checks of the docs blocks that are not run (tests/support/docs.py says which and how):
``echomq`` commands parsed by the command line's own parser, ``make`` targets, ``pip`` extras,
config files parsed, JavaScript syntax-checked, call signatures compared with the real ones."""

from __future__ import annotations

import argparse
import ast
import configparser
import contextlib
import functools
import inspect
import io
import json
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib
import yaml

if TYPE_CHECKING:
    from support.docs import Block

ROOT = Path(__file__).resolve().parents[2]

#: Tokens that end one simple command of a shell line.
_SEPARATORS = {"|", "||", "&&", ";", "&"}


# -- shell, console and text blocks ---------------------------------------------------------------

def check_shell(block: Block) -> None:
    """Every ``echomq`` command, ``make`` target and ``pip install`` extra the block names is
    real (see tests/support/docs.py)."""
    for number, line in _command_lines(block):
        where = f"{block.page.name}:{block.line + number}"
        for words in _simple_commands(line, where):
            _check_command(words, where)


def _command_lines(block: Block) -> list[tuple[int, str]]:
    """(offset in the block, command) for each command line, continuation lines joined."""
    lines = block.code.splitlines()
    found: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        start, text = index, lines[index]
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
        index += 1
        stripped = text.strip()
        if block.language == "console":
            if stripped.startswith("$ "):
                found.append((start, stripped[2:]))
        elif block.language in ("bash", "sh", "shell"):
            if stripped and not stripped.startswith("#"):
                found.append((start, stripped))
        elif re.match(r"^(\$ )?echomq\s", stripped):  # text: only what reads as an echomq command
            found.append((start, stripped.removeprefix("$ ")))
    return found


def _simple_commands(line: str, where: str) -> list[list[str]]:
    """The line's simple commands (split at pipes, ``&&``, ``;``), each without leading
    ``NAME=value`` assignments; a synopsis's ``[...]`` groups stay whole words."""
    if re.search(r"(^|\s)\[", line):  # a synopsis: its groups are options, not shell syntax
        return [_synopsis_words(line, where)]
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise AssertionError(f"{where}: cannot read the command line {line!r}: {exc}") from None
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [_without_assignments(words) for words in commands if words]


def _synopsis_words(line: str, where: str) -> list[str]:
    """Words split at spaces outside quotes and brackets; quotes dropped outside brackets."""
    words: list[str] = []
    depth, quote, current = 0, "", ""
    for char in line:
        if quote:
            if char == quote:
                quote = ""
                if depth:
                    current += char
            else:
                current += char
            continue
        if char in "'\"":
            quote = char
            if depth:
                current += char
            continue
        if char == "#" and depth == 0 and not current:
            break  # a comment
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == " " and depth == 0:
            if current:
                words.append(current)
            current = ""
            continue
        current += char
    if depth != 0 or quote:
        raise AssertionError(f"{where}: unbalanced brackets or quotes in {line!r}")
    if current:
        words.append(current)
    return _without_assignments(words)


def _without_assignments(words: list[str]) -> list[str]:
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return words


def _check_command(words: list[str], where: str) -> None:
    if not words:
        return
    program = Path(words[0]).name
    if program == "echomq":
        check_echomq(words[1:], where)
    elif re.fullmatch(r"python(3(\.\d+)?)?", program) and words[1:3] == ["-m", "echomq"]:
        check_echomq(words[3:], where)
    elif program == "make":
        unknown = [w for w in words[1:] if not w.startswith("-") and "=" not in w and w not in make_targets()]
        if unknown:
            raise AssertionError(f"{where}: make has no target {unknown[0]!r} (Makefile: {sorted(make_targets())})")
    elif program in ("pip", "pip3") and "install" in words[1:]:
        for word in words[words.index("install") + 1:]:
            match = re.fullmatch(r"(?:echomq|\.)\[([\w,-]+)\]", word)  # a release, or a checkout
            for extra in match.group(1).split(",") if match else ():
                if extra not in package_extras():
                    raise AssertionError(f"{where}: echomq has no extra {extra!r} "
                                         f"(setup.cfg: {sorted(package_extras())})")


def check_echomq(argv: list[str], where: str) -> None:
    """``echomq ARGV`` is a command the command line accepts: its subcommands exist (each with a
    ``--help`` that exits 0), each ``[...]`` group's options exist, and the rest parses."""
    from echomq.cli import build_parser

    parser = build_parser()
    optional = [word for word in argv if word.startswith("[")]
    argv = [word for word in argv if not word.startswith("[")]
    path, command_parser = _command_path(parser, argv, where)
    if path:
        status, _ = _parse(parser, [*path, "--help"])
        if status != 0:
            raise AssertionError(f"{where}: 'echomq {' '.join(path)} --help' exited {status}")
    for group in optional:
        for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", group):
            if option not in command_parser._option_string_actions:
                raise AssertionError(f"{where}: 'echomq {' '.join(path)}' has no option {option} (from {group})")
    if argv and argv[-1] in ("...", "…"):
        argv = argv[:-1]
    status, message = _parse(parser, argv)
    if status != 0:
        raise AssertionError(f"{where}: the command line refuses 'echomq {' '.join(argv)}': {message.strip()}")


def _command_path(parser: argparse.ArgumentParser, argv: list[str],
                  where: str) -> tuple[list[str], argparse.ArgumentParser]:
    """The subcommand words at the head of ``argv`` and the parser they lead to."""
    path: list[str] = []
    current = parser
    for word in argv:
        commands = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands is None or word.startswith("-"):
            break
        if word not in commands.choices:
            raise AssertionError(f"{where}: 'echomq {' '.join([*path, word])}': no such command "
                                 f"(there are: {', '.join(sorted(commands.choices))})")
        path.append(word)
        current = commands.choices[word]
    return path, current


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[int, str]:
    """Parse ``argv`` as the command line would, running nothing: (exit status, what it said)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            parser.parse_args(argv)
        except SystemExit as exit_:
            return int(exit_.code or 0), err.getvalue() or out.getvalue()
    return 0, ""


@functools.cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE))


@functools.cache
def package_extras() -> frozenset[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return frozenset(config["options.extras_require"])


# -- config files and JavaScript --------------------------------------------------------------------

def check_config(block: Block) -> None:
    """A config block parses; a JavaScript block passes ``node --check`` (where node is)."""
    try:
        if block.language == "json":
            json.loads(block.code)
        elif block.language == "toml":
            tomllib.loads(block.code)
        elif block.language in ("ini", "cfg"):
            config = configparser.ConfigParser(strict=False, interpolation=None)
            config.optionxform = str  # systemd's keys keep their case
            config.read_string(block.code)
            for section in config.sections():
                for key in ("ExecStart", "ExecStop"):
                    if key in config[section]:
                        _check_command(_without_assignments(shlex.split(config[section][key])), block.where)
        elif block.language in ("yaml", "yml"):
            _check_commands_in(yaml.safe_load(block.code), block.where)
        elif block.language == "dockerfile":
            _check_dockerfile(block)
        elif block.language in ("js", "javascript"):
            _check_javascript(block)
        else:
            raise AssertionError(f"{block.where}: no check for language {block.language!r}")
    except (ValueError, configparser.Error, yaml.YAMLError) as exc:  # JSON and TOML errors are ValueErrors
        raise AssertionError(f"{block.where}: the {block.language} block does not parse: {exc}") from None


#: Docker's Dockerfile instructions.
DOCKERFILE_INSTRUCTIONS = frozenset({
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER", "WORKDIR",
    "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"})


def dockerfile_instructions(code: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions, ``(INSTRUCTION, its arguments)``, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in code.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def _check_dockerfile(block: Block) -> None:
    for keyword, arguments in dockerfile_instructions(block.code):
        if keyword not in DOCKERFILE_INSTRUCTIONS:
            raise AssertionError(f"{block.where}: {keyword} is not a Dockerfile instruction")
        if keyword in ("CMD", "ENTRYPOINT", "RUN") and arguments.startswith("["):  # the exec form
            words = json.loads(arguments)
            if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
                raise AssertionError(f"{block.where}: {keyword}'s exec form is a JSON list of strings")
            _check_command(_without_assignments(words), block.where)
        elif keyword in ("CMD", "ENTRYPOINT", "RUN"):  # the shell form
            for command in _simple_commands(arguments, block.where):
                _check_command(command, block.where)
        if keyword == "STOPSIGNAL" and arguments not in signal.Signals.__members__:
            raise AssertionError(f"{block.where}: STOPSIGNAL {arguments} is not a signal's name")


def _check_commands_in(value: object, where: str) -> None:
    """Every ``command`` / ``entrypoint`` / ``args`` list or string in a compose or Kubernetes file."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("command", "entrypoint") and isinstance(item, (str, list)):
                words = shlex.split(item) if isinstance(item, str) else [str(word) for word in item]
                _check_command(_without_assignments(words), where)
            else:
                _check_commands_in(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_commands_in(item, where)


def _check_javascript(block: Block) -> None:
    node = shutil.which("node")
    if node is None:  # the interop rig needs node; without it there is nothing to check with
        return
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "snippet.js"
        script.write_text(block.code, encoding="utf-8")
        result = subprocess.run([node, "--check", str(script)], capture_output=True, text=True, timeout=30,
                                check=False)
    if result.returncode != 0:
        raise AssertionError(f"{block.where}: the JavaScript does not parse:\n{result.stderr}")


# -- signatures -----------------------------------------------------------------------------------

def check_signature(block: Block, namespace: dict[str, Any]) -> None:
    """The block is ``Name(params) [-> result]``; ``Name``'s real parameters are those."""
    text = " ".join(block.code.split())
    match = re.match(r"^([A-Za-z_][\w.]*)\((.*)\)(\s*->.*)?$", text)
    if match is None:
        raise AssertionError(f"{block.where}: a signature block is 'Name(params) -> result', got {text!r}")
    name, params = match.group(1), match.group(2)
    try:
        documented = ast.parse(f"def _documented({params}): pass").body[0].args  # type: ignore[attr-defined]
    except SyntaxError as exc:
        raise AssertionError(f"{block.where}: the parameters do not parse: {exc}") from None
    shown = _documented_parameters(documented, block)
    real = _real_parameters(_resolve(name, namespace, block), block)
    if shown != real:
        raise AssertionError(f"{block.where}: {name} is documented as ({_render(shown)}) but is ({_render(real)})")


def _documented_parameters(args: ast.arguments, block: Block) -> list[tuple[str, str, Any]]:
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    shown: list[tuple[str, str, Any]] = []
    for arg, default in zip(positional, defaults):
        shown.append((arg.arg, "positional", _literal(default, block)))
    if args.vararg is not None:
        shown.append((args.vararg.arg, "*args", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        shown.append((arg.arg, "keyword", _literal(default, block)))
    if args.kwarg is not None:
        shown.append((args.kwarg.arg, "**kwargs", None))
    return shown


def _literal(node: ast.expr | None, block: Block) -> Any:
    if node is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise AssertionError(f"{block.where}: default {ast.unparse(node)} is not a literal") from None


def _real_parameters(target: Any, block: Block) -> list[tuple[str, str, Any]]:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{block.where}: no signature for {target!r}: {exc}") from None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional", inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.VAR_POSITIONAL: "*args", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "**kwargs"}
    real = [(p.name, kinds[p.kind], None if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) else p.default)
            for p in signature.parameters.values()]
    if real and real[0][0] in ("self", "cls") and inspect.isfunction(target):
        real = real[1:]  # a method looked up on its class: the instance is not the reader's to pass
    return real


def _resolve(name: str, namespace: dict[str, Any], block: Block) -> Any:
    import echomq

    head, *rest = name.split(".")
    if head in namespace:
        value = namespace[head]
    elif hasattr(echomq, head):
        value = getattr(echomq, head)
    else:
        raise AssertionError(f"{block.where}: {head!r} is neither defined on the page nor exported by echomq")
    for part in rest:
        value = getattr(value, part)
    return value


def _render(parameters: list[tuple[str, str, Any]]) -> str:
    parts = []
    for name, kind, default in parameters:
        prefix = {"*args": "*", "**kwargs": "**"}.get(kind, "")
        shown = "" if default is inspect.Parameter.empty or (default is None and prefix) else f"={default!r}"
        parts.append(f"{prefix}{name}{shown}" + (" (keyword)" if kind == "keyword" else ""))
    return ", ".join(parts)
