"""What is stored is what was given: every job option, alone and in combination, through every
way of adding a job, read back from the job hash as ``Job.opts`` (hardening A.1)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import Queue
from echomq.protocol.keys import QueueKeys
from echomq.protocol.options import MAX_EPOCH_MS, MAX_SAFE_INTEGER, PRIORITY_LIMIT

# Each option alone: (given, stored under the protocol's names, what Job.opts reads back).
ALONE: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ({"attempts": 3}, {"attempts": 3}, {"attempts": 3}),
    ({"attempts": 0}, {"attempts": 0}, {"attempts": 0}),
    ({"delay": 5000}, {"attempts": 0, "delay": 5000}, {"attempts": 0, "delay": 5000}),
    ({"priority": 7}, {"attempts": 0, "priority": 7}, {"attempts": 0, "priority": 7}),
    ({"lifo": True}, {"attempts": 0, "lifo": True}, {"attempts": 0, "lifo": True}),
    ({"timestamp": 1_700_000_000_000}, {"attempts": 0, "timestamp": 1_700_000_000_000},
     {"attempts": 0, "timestamp": 1_700_000_000_000}),
    ({"backoff": 1000}, {"attempts": 0, "backoff": {"type": "fixed", "delay": 1000}},
     {"attempts": 0, "backoff": {"type": "fixed", "delay": 1000}}),
    ({"backoff": {"type": "exponential", "delay": 50, "jitter": 0.5}},
     {"attempts": 0, "backoff": {"type": "exponential", "delay": 50, "jitter": 0.5}},
     {"attempts": 0, "backoff": {"type": "exponential", "delay": 50, "jitter": 0.5}}),
    ({"remove_on_complete": True}, {"attempts": 0, "removeOnComplete": True},
     {"attempts": 0, "remove_on_complete": True}),
    ({"remove_on_complete": 10}, {"attempts": 0, "removeOnComplete": 10}, {"attempts": 0, "remove_on_complete": 10}),
    ({"remove_on_fail": {"age": 60, "count": 5}}, {"attempts": 0, "removeOnFail": {"age": 60, "count": 5}},
     {"attempts": 0, "remove_on_fail": {"age": 60, "count": 5}}),
    ({"stack_trace_limit": 2}, {"attempts": 0, "stackTraceLimit": 2}, {"attempts": 0, "stack_trace_limit": 2}),
    ({"keep_logs": 4}, {"attempts": 0, "kl": 4}, {"attempts": 0, "keep_logs": 4}),
    ({"size_limit": 1000}, {"attempts": 0, "sizeLimit": 1000}, {"attempts": 0, "size_limit": 1000}),
    ({"deduplication": {"id": "d", "ttl": 100}}, {"attempts": 0, "de": {"id": "d", "ttl": 100}},
     {"attempts": 0, "deduplication": {"id": "d", "ttl": 100}}),
    ({"fail_parent_on_failure": True}, {"attempts": 0, "fpof": True}, {"attempts": 0, "fail_parent_on_failure": True}),
    ({"telemetry": {"metadata": "m", "omit_context": True}}, {"attempts": 0, "tm": "m", "omc": True},
     {"attempts": 0, "telemetry": {"metadata": "m", "omit_context": True}}),
]


def _stored(connection: redis.Redis, queue_name: str, job_id: str) -> dict[str, Any]:
    return dict(json.loads(connection.hget(QueueKeys(queue_name).job(job_id), "opts")))


@pytest.mark.parametrize("given_opts,stored,read", ALONE, ids=[next(iter(g)) + "=" + str(next(iter(g.values())))
                                                           for g, _s, _r in ALONE])
def test_each_option_alone_is_stored_and_read_back_as_given(connection: redis.Redis, queue_name: str,
                                                             given_opts: dict[str, Any], stored: dict[str, Any],
                                                             read: dict[str, Any]) -> None:
    queue = Queue(connection, queue_name)
    job = queue.add("job", {"x": 1}, **given_opts)
    assert _stored(connection, queue_name, job.id) == stored
    assert job.opts == read
    fetched = queue.get_job(job.id)
    assert fetched is not None and fetched.opts == read


@pytest.mark.parametrize("given_opts,stored,read", ALONE[:8], ids=[next(iter(g)) for g, _s, _r in ALONE[:8]])
def test_bulk_defaults_and_flow_parents_store_options_as_given(connection: redis.Redis, queue_name: str,
                                                               given_opts: dict[str, Any], stored: dict[str, Any],
                                                               read: dict[str, Any]) -> None:
    [bulk] = Queue(connection, queue_name).add_bulk([("bulk", {}, given_opts)])
    assert _stored(connection, queue_name, bulk.id) == stored and bulk.opts == read
    defaulted = Queue(connection, queue_name, default_job_options=given_opts).add("defaulted")
    assert _stored(connection, queue_name, defaulted.id) == stored and defaulted.opts == read
    parent = Queue(connection, queue_name).add_flow({"name": "parent", "opts": given_opts},
                                                    [{"name": "child", "data": {}}])
    assert _stored(connection, queue_name, parent.id) == stored
    fetched = Queue(connection, queue_name).get_job(parent.id)
    assert fetched is not None and fetched.opts == read


def test_a_plain_add_still_stores_attempts_zero(connection: redis.Redis, queue_name: str) -> None:
    job = Queue(connection, queue_name).add("plain")
    assert connection.hget(QueueKeys(queue_name).job(job.id), "opts") == b'{"attempts":0}'


# -- any combination ------------------------------------------------------------------------------

_small_ids = st.text(alphabet="abcdefgh-_", min_size=1, max_size=8).filter(lambda s: not s.lstrip("-").isdigit())
_keep = st.one_of(st.booleans(), st.integers(0, MAX_SAFE_INTEGER),
                  st.fixed_dictionaries({}, optional={"age": st.integers(0, MAX_SAFE_INTEGER),
                                                      "count": st.integers(0, MAX_SAFE_INTEGER),
                                                      "limit": st.integers(0, MAX_SAFE_INTEGER)}).filter(bool))
_backoff = st.one_of(st.integers(0, MAX_SAFE_INTEGER),
                     st.fixed_dictionaries({"type": st.sampled_from(["fixed", "exponential", "custom"])},
                                           optional={"delay": st.integers(0, MAX_SAFE_INTEGER),
                                                     "jitter": st.floats(0, 1)}))
_flags = st.sampled_from([{}, {"fail_parent_on_failure": True}, {"continue_parent_on_failure": True},
                          {"ignore_dependency_on_failure": True}, {"remove_dependency_on_failure": False}])
OPTION_SETS = st.tuples(st.fixed_dictionaries({}, optional={
    "attempts": st.integers(0, MAX_SAFE_INTEGER),
    "delay": st.integers(0, 10**13),
    "priority": st.integers(0, PRIORITY_LIMIT),
    "lifo": st.booleans(),
    "timestamp": st.integers(0, MAX_EPOCH_MS - 10**13),
    "backoff": _backoff,
    "remove_on_complete": _keep,
    "remove_on_fail": _keep,
    "stack_trace_limit": st.integers(0, MAX_SAFE_INTEGER),
    "keep_logs": st.integers(0, MAX_SAFE_INTEGER),
    "size_limit": st.integers(100, MAX_SAFE_INTEGER),
    "deduplication": st.fixed_dictionaries({"id": _small_ids}, optional={
        "ttl": st.integers(1, 10**9), "extend": st.booleans(), "replace": st.booleans()}),
    "telemetry": st.fixed_dictionaries({}, optional={"metadata": st.text(max_size=5),
                                                     "omit_context": st.booleans()}).filter(bool),
}), _flags).map(lambda pair: {**pair[0], **pair[1]})


def _expected(opts: dict[str, Any]) -> dict[str, Any]:
    """What a reader must see, written from the protocol's rules rather than from the encoder:
    attempts always present (0 by default), a bare backoff number is a fixed backoff."""
    out = {"attempts": 0, **opts}
    if isinstance(out.get("backoff"), int):
        out["backoff"] = {"type": "fixed", "delay": out["backoff"]}
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opts=OPTION_SETS)
def test_any_option_set_round_trips_through_the_job_hash(connection: redis.Redis, queue_name: str,
                                                         opts: dict[str, Any]) -> None:
    queue = Queue(connection, queue_name)
    opts = {**opts, "job_id": f"j-{uuid.uuid4().hex}"}  # a fresh job each time, never a duplicate
    if "deduplication" in opts:
        opts["deduplication"] = {**opts["deduplication"], "id": f"{opts['deduplication']['id']}-{uuid.uuid4().hex}"}
    job = queue.add("prop", {"n": 1}, **opts)
    fetched = queue.get_job(job.id)
    assert fetched is not None
    assert fetched.opts == _expected(opts) == job.opts
