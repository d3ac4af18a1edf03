"""The key layout: the only module that puts a ``:`` into a Redis key (docs/protocol.md §1).

Every key of a queue is ``<prefix>:{<queue>}:<suffix>``. The braces are a Redis Cluster hash
tag, so a whole queue lives in one slot and every script can touch all of its keys. A BullMQ
app configured with ``prefix: 'emq'`` and the queue name ``'{orders}'`` builds the same keys.

The scripts' headers name their KEYS with the tokens of docs/protocol.md §6.2; this module
says what each token means (:func:`parse_key_token`, :meth:`QueueKeys.for_token`), so the
order of a call's keys is written down once, in the Lua file.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .._version import __version__
from ..errors import InvalidInputError, InvalidQueueNameError
from .codec import utf8_problem

DEFAULT_PREFIX = "emq"
#: What an EchoMQ writer stamps in a queue's meta ``version`` (docs/protocol.md §1.2).
META_VERSION = f"echomq-python:{__version__}"

#: Per-queue key suffixes (docs/protocol.md §1.2). ``paused`` is a legacy input only: BullMQ 6
#: keeps paused jobs in ``wait`` and gates workers on meta.
SUFFIXES: tuple[str, ...] = (
    "wait",
    "paused",
    "active",
    "prioritized",
    "pc",
    "delayed",
    "waiting-children",
    "completed",
    "failed",
    "stalled",
    "stalled-check",
    "meta",
    "id",
    "events",
    "marker",
    "limiter",
    "repeat",
    "metrics:completed",
    "metrics:failed",
    "schedulers:paused",
)

#: The companion keys of a job hash, ``<jobKey>:<part>`` (docs/protocol.md §1.3).
JOB_KEY_PARTS: tuple[str, ...] = ("lock", "logs", "dependencies", "processed", "unsuccessful", "failed", "cancel")


def names_queue_key(job_id: str) -> str | None:
    """The queue key a job id would land on (its hash is ``<base>:<id>``), or None.

    An id equal to a suffix of §1.2 (``meta``, ``events`` ...) would make the job's hash *be* that
    key; one starting with ``de:`` or ``metrics:`` would land on a deduplication key or a metrics
    list (docs/protocol.md §1.4). Such an id must never be stored.
    """
    if job_id in SUFFIXES:
        return job_id
    head = job_id.split(":", 1)[0]
    if head in ("de", "metrics") and ":" in job_id:
        return f"{head}:..."
    return None


def validate_queue_name(name: str) -> str:
    """Return ``name`` if it can be a queue name; raise InvalidQueueNameError otherwise.

    A ``:`` would make the key ambiguous, braces would break the hash tag we add.
    """
    if not isinstance(name, str):
        raise InvalidQueueNameError(f"queue name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidQueueNameError("queue name must not be empty")
    if ":" in name:
        raise InvalidQueueNameError(f"queue name {name!r} must not contain ':'")
    if "{" in name or "}" in name:
        raise InvalidQueueNameError(
            f"queue name {name!r} must not contain braces: EchoMQ adds the {{}} hash tag itself"
        )
    problem = utf8_problem(name)
    if problem is not None:
        raise InvalidQueueNameError(f"queue name {name!r:.100}: {problem}")
    return name


def validate_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise InvalidInputError(f"prefix must be a non-empty str, got {prefix!r}")
    if "{" in prefix or "}" in prefix:
        raise InvalidInputError(f"prefix {prefix!r} must not contain braces")
    problem = utf8_problem(prefix)
    if problem is not None:
        raise InvalidInputError(f"prefix {prefix!r:.100}: {problem}")
    return prefix


# -- the key tokens of the scripts' headers (docs/protocol.md §6.2) -------------------------------

_CHOICE = re.compile(r"<([a-z]+)>")


class KeyToken(NamedTuple):
    """One ``KEYS[n]`` entry of a script header, parsed.

    ``queue``: a per-queue key, ``value`` its suffix (``<choice>`` parts filled in per call);
    ``job``: the call's job hash (``value`` "") or a companion (``value`` ":lock" ...);
    ``prefix``: the queue's key prefix ``<prefix>:{<queue>}:`` itself.
    """

    kind: Literal["queue", "job", "prefix"]
    value: str

    @property
    def choices(self) -> tuple[str, ...]:
        """The names the caller must choose a suffix for (``<finished>`` -> ``finished``)."""
        return tuple(_CHOICE.findall(self.value))


def parse_key_token(token: str) -> KeyToken:
    """What a header token means; ValueError when it is not in the grammar."""
    if token == "prefix":
        return KeyToken("prefix", "")
    if token == "job":
        return KeyToken("job", "")
    if token.startswith("job:"):
        part = token[4:]
        if part not in JOB_KEY_PARTS:
            raise ValueError(f"job key {token!r}: the companions are {', '.join(JOB_KEY_PARTS)}")
        return KeyToken("job", ":" + part)
    if _CHOICE.search(token):
        shape = re.compile(_CHOICE.sub("[a-z-]+", re.escape(token)))  # re.escape leaves < and > as they are
        if not any(shape.fullmatch(suffix) for suffix in SUFFIXES):
            raise ValueError(f"key {token!r} does not become a per-queue key for any choice")
        return KeyToken("queue", token)
    if token in SUFFIXES:
        return KeyToken("queue", token)
    raise ValueError(f"unknown key {token!r} (a per-queue suffix, 'prefix', 'job', 'job:<part>' or '<choice>')")


@dataclass(frozen=True)
class QueueKeys:
    """All keys of one queue. Build it once per Queue/Worker/JobScheduler/QueueEvents."""

    queue_name: str
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        validate_queue_name(self.queue_name)
        validate_prefix(self.prefix)

    @property
    def base(self) -> str:
        """``<prefix>:{<queue>}``: what BullMQ calls the queue's qualified name."""
        return f"{self.prefix}:{{{self.queue_name}}}"

    @property
    def job_prefix(self) -> str:
        """``<base>:``, the key prefix the scripts append job ids to (Cluster-safe thanks to the tag)."""
        return self.base + ":"

    def key(self, suffix: str) -> str:
        return f"{self.base}:{suffix}"

    def __getattr__(self, name: str) -> str:
        # keys.wait, keys.delayed, keys.waiting_children, keys.stalled_check ...
        suffix = name.replace("_", "-")
        if suffix in SUFFIXES:
            return self.key(suffix)
        raise AttributeError(name)

    def for_token(self, token: KeyToken, choices: Mapping[str, str]) -> str:
        """The key a ``queue`` or ``prefix`` token stands for; ``<name>`` parts from ``choices``."""
        if token.kind == "prefix":
            return self.job_prefix
        if token.kind != "queue":
            raise ValueError(f"a {token.kind} key is filled in per job, not per queue")
        suffix = token.value
        for name in token.choices:
            chosen = choices.get(name)
            if chosen is None:
                raise InvalidInputError(f"key <{name}>: choose it (one of the queue's key suffixes)")
            suffix = suffix.replace(f"<{name}>", chosen)
        if suffix not in SUFFIXES:
            raise InvalidInputError(f"key {token.value!r} with {dict(choices)}: {suffix!r} is not a queue key")
        return self.key(suffix)

    # -- jobs ---------------------------------------------------------------------------------
    def job(self, job_id: str) -> str:
        return self.key(job_id)

    def job_lock(self, job_id: str) -> str:
        return self.key(f"{job_id}:lock")

    def job_cancel(self, job_id: str) -> str:
        """``<job>:cancel``: the reason of a cancel request for a running job (docs/protocol.md §1.3)."""
        return self.key(f"{job_id}:cancel")

    def job_logs(self, job_id: str) -> str:
        return self.key(f"{job_id}:logs")

    def job_dependencies(self, job_id: str) -> str:
        return self.key(f"{job_id}:dependencies")

    def job_processed(self, job_id: str) -> str:
        return self.key(f"{job_id}:processed")

    def deduplication(self, dedup_id: str) -> str:
        return self.key(f"de:{dedup_id}")

    # -- schedulers ---------------------------------------------------------------------------
    def scheduler(self, scheduler_id: str) -> str:
        """``<base>:repeat:<id>``: the scheduler's hash."""
        return self.key(f"repeat:{scheduler_id}")

    def client_name(self, role: str = "") -> str:
        """The CLIENT SETNAME of a connection serving this queue, as BullMQ 6.7 names them:
        ``<prefix>:<base64 of the queue's BullMQ name>`` plus the role (``""`` for an unnamed
        worker, ``:w:<worker name>`` for a named one, ``:qe`` for an events reader), so
        BullMQ's ``getWorkers()``, bull-board and ``Queue.get_workers`` find the connection
        (docs/protocol.md §1.1). BullMQ's name of the queue carries the braces (``{orders}``)."""
        bullmq_name = "{" + self.queue_name + "}"
        return f"{self.prefix}:{base64.b64encode(bullmq_name.encode()).decode()}{role}"

    def worker_name_of(self, client_name: str) -> str | None:
        """The worker name a connection's CLIENT SETNAME carries (``""`` for an unnamed worker),
        or None when it is not a worker connection of this queue (BullMQ's getWorkers rule)."""
        base = self.client_name()
        if client_name == base:
            return ""
        if client_name.startswith(base + ":w:"):
            return client_name[len(base) + 3:]
        return None

    def all_keys_pattern(self) -> str:
        """A SCAN pattern for every key of the queue (the braces are escaped for glob)."""
        return f"{self.prefix}:\\{{{self.queue_name}\\}}:*"


#: Characters a Redis glob pattern gives a meaning to (SCAN MATCH, KEYS): escaped to match themselves.
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def meta_scan_pattern(prefix: str) -> str:
    """A SCAN MATCH pattern for the meta hash of every queue under ``prefix``:
    ``<prefix>:{*}:meta`` with the prefix's glob characters escaped. Meta is the one key every
    queue has whoever wrote it: an EchoMQ Queue stamps it before its first add, BullMQ's Queue
    when it is constructed, and every script that writes an event stores the events cap there
    (docs/protocol.md §1.2). Candidates only: :func:`queue_of_meta_key` keeps the real ones."""
    validate_prefix(prefix)
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":\\{*\\}:meta"


def queue_of_meta_key(prefix: str, key: str) -> str | None:
    """The queue whose meta hash ``key`` is (``<prefix>:{<queue>}:meta`` -> ``<queue>``), or None
    when it is not one: a key another pattern match let through (a job id ending in
    ``}:meta``), a BullMQ queue named without braces, a name EchoMQ cannot address."""
    head, tail = f"{prefix}:{{", "}:meta"
    if not (key.startswith(head) and key.endswith(tail)) or len(key) <= len(head) + len(tail):
        return None
    name = key[len(head):-len(tail)]
    if any(char in name for char in "{}:"):
        return None
    return name


def job_key(queue_base: str, job_id: str, part: str = "") -> str:
    """A job's key in the queue whose base (``<prefix>:{<queue>}``) is given, or its companion
    ``part`` (``dependencies`` ...): for jobs of another queue, such as a flow child's parent."""
    return f"{queue_base}:{job_id}" + (f":{part}" if part else "")


def iteration_job_id(scheduler_id: str, millis: int) -> str:
    """The deterministic id of a scheduler's iteration: ``repeat:<id>:<millis>``."""
    return f"repeat:{scheduler_id}:{int(millis)}"
