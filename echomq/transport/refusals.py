"""ACL refusals told by name: what the role lacks, for every command and script EchoMQ sends.

Redis answers a refused command with NOPERM, and a script's refused command with an ERR that
names the script line (Redis 7.0) or the command. :func:`refusal` turns either into a
:class:`~echomq.errors.PermissionDeniedError` naming the command and the key pattern the role
needs (docs/security.md); :func:`refusals` does it for a block of plain commands. Off the hot
path: only called with an exception in hand.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

from redis.exceptions import NoPermissionError

from ..errors import PermissionDeniedError
from .scripts import LuaScript

#: A script's command refused inside it (Redis 7.0 answers ERR, not NOPERM, from a script).
_SCRIPT_REFUSAL = re.compile(r"user executing the script can't (run|access)", re.IGNORECASE)
_NAMED_COMMAND = re.compile(r"'([^']+)' command")
_SCRIPT_LINE = re.compile(r"@user_script:(\d+)")
#: A redis.call("CMD", ...) in a script's source: the commands it may send.
CALLED_COMMAND = re.compile(r"""redis\.p?call\(\s*["']([A-Za-z]+)["']""")


def key_pattern(key: str) -> str:
    """The ACL key pattern of ``key``'s queue, ``~<prefix>:{<queue>}:*`` (else ``~<key>``)."""
    base, tag_end, _ = key.partition("}:")
    return f"~{base}}}:*" if tag_end else f"~{key}"


def refusal(exc: BaseException, command: str, keys: Sequence[str] = (), lua: LuaScript | None = None,
            *, pattern: str = "", operation: str = "") -> PermissionDeniedError | None:
    """``exc`` told as a :class:`PermissionDeniedError` when it is an ACL refusal, else None.

    ``command`` is what was sent (``"evalsha"``, ``"xread"`` ...; ``""`` if unknown), ``keys``
    its keys (the first names the queue's pattern unless ``pattern`` is given), ``lua`` the
    script that ran, whose source names the command Redis refused inside it, ``operation`` what
    the message starts with (default: the script or the command). Off the hot path: only called
    with an exception in hand.
    """
    if isinstance(exc, PermissionDeniedError):
        return exc
    reason = str(exc)
    in_script = bool(_SCRIPT_REFUSAL.search(reason))
    if not (isinstance(exc, NoPermissionError) or in_script):
        return None
    refused = command.lower()
    named = _NAMED_COMMAND.search(reason)
    line = _SCRIPT_LINE.search(reason)
    if named:
        refused = named[1].lower()
    elif in_script and lua is not None and line:
        lines = lua.source.splitlines()
        number = int(line[1])
        called = CALLED_COMMAND.search(lines[number - 1]) if 0 < number <= len(lines) else None
        if called:
            refused = called[1].lower()
    pattern = pattern or (key_pattern(str(keys[0])) if keys else "")
    where = f" (called by the script {lua.name})" if in_script and lua is not None else ""
    if "key" in reason.lower() and not named:
        needs = pattern or "a pattern covering its keys"
        what = f"the ACL refused a key of {refused.upper() or 'the command'}{where}; the role needs {needs}"
    else:
        what = f"the ACL refused {refused.upper()}{where}; the role needs +{refused}"
        what += f" (with keys {pattern})" if pattern else ""
    if in_script:
        what += "; the script stopped there and may have written part of its work"
    operation = operation or (lua.name if lua is not None else refused)
    return PermissionDeniedError(f"{operation}: {what} (docs/security.md; Redis said: {reason})",
                                 command=refused, key_pattern=pattern)


@contextlib.contextmanager
def refusals(operation: str, keys: Sequence[str]) -> Iterator[None]:
    """Plain commands (not scripts) about ``keys``' queue: an ACL refusal inside the block is
    raised as a PermissionDeniedError that starts with ``operation``."""
    try:
        yield
    except NoPermissionError as exc:
        raise refusal(exc, "", keys, operation=operation) or exc from None
