"""The key taxonomy: the only module that puts a ``:`` into a Redis key.

Every key of a queue is ``<prefix>:{<queue>}:<suffix>``. The braces are a Redis Cluster hash
tag, so a whole queue lives in one slot and every script can touch all of its keys. A BullMQ
app configured with ``prefix: 'emq'`` and the queue name ``'{orders}'`` builds the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidInputError, InvalidQueueNameError

DEFAULT_PREFIX = "emq"

#: Per-queue key suffixes, as the protocol names them (protocol-bullmq5.md §1.2). ``paused``
#: is a legacy input only: BullMQ 6 keeps paused jobs in ``wait`` and gates on meta.
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
)


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
    return name


def validate_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise InvalidInputError(f"prefix must be a non-empty str, got {prefix!r}")
    if "{" in prefix or "}" in prefix:
        raise InvalidInputError(f"prefix {prefix!r} must not contain braces")
    return prefix


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

    # -- jobs ---------------------------------------------------------------------------------
    def job(self, job_id: str) -> str:
        return self.key(job_id)

    def job_lock(self, job_id: str) -> str:
        return self.key(f"{job_id}:lock")

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

    def all_keys_pattern(self) -> str:
        """A SCAN pattern for every key of the queue (the braces are escaped for glob)."""
        return f"{self.prefix}:\\{{{self.queue_name}\\}}:*"


def iteration_job_id(scheduler_id: str, millis: int) -> str:
    """The deterministic id of a scheduler's iteration: ``repeat:<id>:<millis>``."""
    return f"repeat:{scheduler_id}:{int(millis)}"
