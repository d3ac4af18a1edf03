"""Turning ``add(name, data, **opts)`` into one call of the right add script.

Validation and encoding happen here, entirely in Python and before anything is sent, so a bad
job in a bulk or a flow rejects the whole call with nothing written. The script is chosen the
way BullMQ chooses it: a parent of a flow -> addParentJob, a delay -> addDelayedJob (its
priority applies at promotion), a priority -> addPrioritizedJob, otherwise addStandardJob.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..clock import system_clock
from ..errors import InvalidInputError, InvalidJobOptionsError, raise_for_code
from ..protocol.codec import text
from ..protocol.keys import QueueKeys, job_key
from ..protocol.limits import DataLimits
from ..protocol.options import MAX_EPOCH_MS, dumps_json, encode_job_options, validate_job_name
from ..transport.scripts import LuaScript, script
from ..types import Clock

_PARENT_FLAGS = ("fpof", "rdof", "idof", "cpof")
_NO_OPTIONS = {"attempts": 0}
_PLAIN_OPTS = '{"attempts":0}'  # the stored opts of a job added without options, pre-encoded


class AddCall(NamedTuple):
    """One prepared add: the script, its KEYS and ARGV, and what the Job object needs."""

    script: LuaScript
    keys: Sequence[str]
    args: list[str]
    name: str
    data: Any
    stored_opts: dict[str, Any]
    timestamp: int
    custom_id: str
    queue_keys: QueueKeys


class AddPlanner:
    """Prepares add calls for one queue; key lists are built once, not per job."""

    def __init__(self, keys: QueueKeys, default_job_options: Mapping[str, Any] | None = None, *,
                 clock: Clock = system_clock, limits: DataLimits | None = None) -> None:
        self.keys = keys
        self.clock = clock
        self.limits = DataLimits() if limits is None else limits
        if default_job_options is not None and not isinstance(default_job_options, Mapping):
            raise InvalidJobOptionsError(
                f"default_job_options={default_job_options!r}: must be a mapping of job options")
        self.defaults = dict(default_job_options or {})
        encode_job_options(self.defaults)  # fail at construction on bad defaults
        names = ("addStandardJob", "addDelayedJob", "addPrioritizedJob", "addParentJob")
        self._bound = {name: script(name).bind(keys) for name in names}

    def prepare(self, name: Any, data: Any, opts: Mapping[str, Any], *,
                waiting_children: bool = False, generated_id: str = "") -> AddCall:
        """``generated_id`` is an id the caller made up (a flow node's UUID): used as the job id
        but, unlike ``job_id``, not stored in opts, as BullMQ's FlowProducer does."""
        validate_job_name(name)
        if not isinstance(opts, Mapping):
            raise InvalidJobOptionsError(f"job {name!r}: opts {opts!r} must be a mapping")
        data_json = dumps_json({} if data is None else data, "data")
        if len(data_json) > self.limits.certainly_within:  # the data is untrusted: bounded before anything
            too_much = self.limits.problem(data_json)
            if too_much is not None:
                raise InvalidJobOptionsError(f"job {name!r:.100}: its data is {too_much}")
        merged = {**self.defaults, **opts} if self.defaults else opts
        # BullMQ's Job constructor always stores attempts (0 unless given), first.
        stored: dict[str, Any] = {"attempts": 0, **encode_job_options(merged)} if merged else {"attempts": 0}
        limit = stored.get("sizeLimit")
        if limit is not None and len(data_json.encode("utf-8")) > limit:
            raise InvalidJobOptionsError(
                f"job option size_limit={limit!r}: the data of job {name!r} is "
                f"{len(data_json.encode('utf-8'))} bytes of JSON, over the limit")
        repeat_job_key = stored.pop("repeatJobKey", "")
        timestamp = int(stored["timestamp"]) if "timestamp" in stored else self.clock()
        if timestamp + stored.get("delay", 0) > MAX_EPOCH_MS:
            raise InvalidJobOptionsError(
                f"job option delay={stored.get('delay')!r}: the job would be due after the latest "
                f"date a timestamp can hold ({MAX_EPOCH_MS} ms since the epoch)")
        parent_key = parent_deps = parent_json = ""
        parent = stored.get("parent")
        if parent is not None:
            parent_key = job_key(parent["queue"], parent["id"])
            parent_deps = job_key(parent["queue"], parent["id"], "dependencies")
            link: dict[str, Any] = {"id": parent["id"], "queueKey": parent["queue"]}
            link.update({flag: True for flag in _PARENT_FLAGS if stored.get(flag)})
            parent_json = dumps_json(link, "parent")
        dedup_key = ""
        if "de" in stored:
            dedup_key = self.keys.deduplication(stored["de"]["id"])
        if waiting_children:
            script_name = "addParentJob"
        elif stored.get("delay", 0) > 0:
            script_name = "addDelayedJob"
        elif stored.get("priority", 0) > 0:
            script_name = "addPrioritizedJob"
        else:
            script_name = "addStandardJob"
        custom_id = stored.get("jobId", generated_id)
        opts_json = _PLAIN_OPTS if stored == _NO_OPTIONS else dumps_json(stored, "opts")
        args = [self.keys.job_prefix, custom_id, name, str(timestamp), parent_key, parent_deps,
                parent_json, repeat_job_key, dedup_key, data_json, opts_json]
        bound = self._bound[script_name]
        return AddCall(bound.script, bound.keys, args, name, {} if data is None else data, stored, timestamp,
                       custom_id, self.keys)


def check_add_result(result: Any, call: AddCall) -> str:
    """The job id an add script returned; its negative codes as exceptions."""
    if isinstance(result, int):
        raise_for_code(result, f"add {call.name!r}", job_id=call.custom_id or "(new)")
    return text(result)


def job_spec(item: Mapping[str, Any] | Sequence[Any]) -> tuple[Any, Any, Mapping[str, Any]]:
    """``(name, data, opts)`` of one job given as ``{"name", "data"?, "opts"?}`` (a flow node may
    also carry ``children`` and ``queue``) or as a ``(name, data[, opts])`` tuple."""
    if type(item) is tuple and len(item) == 2:  # the common bulk shape, checked cheaply
        return item[0], item[1], {}
    if isinstance(item, Mapping):
        unknown = set(item) - {"name", "data", "opts", "children", "queue"}
        if unknown or "name" not in item:
            raise InvalidInputError(f"job {item!r}: needs 'name' and takes only 'data' and 'opts'")
        opts = item.get("opts") or {}
        if not isinstance(opts, Mapping):
            raise InvalidInputError(f"job {item.get('name')!r}: opts {opts!r} must be a mapping")
        return item["name"], item.get("data"), opts
    if isinstance(item, (tuple, list)) and 1 <= len(item) <= 3:
        name = item[0]
        data = item[1] if len(item) > 1 else None
        opts = item[2] if len(item) > 2 else {}
        if not isinstance(opts, Mapping):
            raise InvalidInputError(f"job {name!r}: opts {opts!r} must be a mapping")
        return name, data, opts
    raise InvalidInputError(f"job {item!r}: must be a mapping or a (name, data[, opts]) tuple")
