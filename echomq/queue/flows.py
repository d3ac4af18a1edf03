"""Flows: a parent job that waits in ``waiting-children`` until its children complete
(docs/protocol.md §3.6).

The whole tree is validated and planned before anything is sent, then written in one MULTI:
every node's add, then, for each parent, the release check (children that already existed and
had completed leave no pending dependency, so such a parent moves on at once instead of
waiting for children that will never finish).

On a Redis Cluster one MULTI reaches one slot, so a flow whose nodes live in queues of
different slots is refused, before anything is written, naming each queue and its slot
(docs/deployment.md, "Flows on a cluster"); a flow within one queue (or queues that share a
slot) stays one atomic MULTI there too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis

from ..errors import InvalidInputError
from ..transport.calls import run_script
from ..transport.cluster import key_slot, routed_slot
from ..transport.scripts import script
from .enqueue import AddCall, AddPlanner, check_add_result, job_spec
from .job import Job


def add_flow(client: redis.Redis, planner_for: Callable[[str], AddPlanner], queue_name: str,
             parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]], *,
             before_write: Callable[[], None] | None = None) -> Job:
    """Plan and write a flow whose root goes to ``queue_name``; ``planner_for(name)`` gives the
    add planner of any queue a node names (under the same prefix). ``before_write`` runs once
    the whole tree is validated, before the MULTI."""
    if isinstance(children, (str, bytes, Mapping)) or not isinstance(children, Sequence):
        raise InvalidInputError(f"add_flow: children={children!r:.100} must be a list of job mappings")
    if not isinstance(parent, Mapping):
        raise InvalidInputError(f"add_flow: parent={parent!r:.100} must be a job mapping")
    if not children:
        raise InvalidInputError("add_flow: children must not be empty (use add for a single job)")
    plans: list[AddCall] = []
    root_planner = planner_for(queue_name)
    root = _plan_node(client, parent, children, None, root_planner, planner_for, plans)
    _refuse_cross_slot(client, plans)
    if before_write is not None:
        before_write()
    pipe = client.pipeline(transaction=True)
    for call in plans:
        run_script(pipe, call.script, call.keys, call.args)
    release = script("releaseParentIfNoPendingDependencies")
    now = str(root_planner.clock())
    for call in plans:
        if call.script.name == "addParentJob":
            keys = call.queue_keys
            run_script(pipe, release, release.keys_for(keys, call.custom_id), [keys.base, call.custom_id, now])
    results = pipe.execute(raise_on_error=True)
    for call, result in zip(plans, results):
        check_add_result(result, call)
    return root


def _refuse_cross_slot(client: redis.Redis, plans: Sequence[AddCall]) -> None:
    """On a cluster, every node's queue must be in the slot the client is routed to."""
    home = routed_slot(client)
    if home is None:
        return
    slots = {call.queue_keys.queue_name: key_slot(client, call.queue_keys.meta) for call in plans}
    if any(slot != home for slot in slots.values()):
        where = ", ".join(f"{name!r} (slot {slot})" for name, slot in slots.items())
        raise InvalidInputError(f"add_flow: on a Redis Cluster a flow is one MULTI, so all its queues must share "
                                f"one slot; this flow spans {where}. Nothing was written (docs/deployment.md)")


def _plan_node(client: redis.Redis, node: Mapping[str, Any], children: Sequence[Mapping[str, Any]] | None,
               parent_ref: dict[str, str] | None, planner: AddPlanner,
               planner_for: Callable[[str], AddPlanner], plans: list[AddCall]) -> Job:
    name, data, opts = job_spec(node)
    opts = dict(opts)
    if parent_ref is not None:
        if "parent" in opts:
            raise InvalidInputError(f"add_flow: node {name!r} must not set parent (the tree sets it)")
        opts["parent"] = parent_ref
    # Nodes without a job_id get a UUID, as BullMQ 6's FlowProducer gives them (not stored in opts).
    call = planner.prepare(name, data, opts, waiting_children=bool(children), generated_id=str(uuid.uuid4()))
    plans.append(call)
    job = Job(client, planner.keys, call.custom_id, name=call.name, data=call.data,
              opts=call.stored_opts, timestamp=call.timestamp, clock=planner.clock)
    ref = {"id": call.custom_id, "queue": planner.keys.base}
    for child in children or ():
        if not isinstance(child, Mapping):
            raise InvalidInputError(f"add_flow: child {child!r} must be a mapping")
        child_planner = planner_for(child.get("queue", planner.keys.queue_name))
        _plan_node(client, child, child.get("children"), ref, child_planner, planner_for, plans)
    return job
