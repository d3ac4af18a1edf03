"""Flows: a parent job that waits in ``waiting-children`` until its children complete
(docs/protocol.md §3.6).

A flow is written whole or not at all. Everything Python can check is checked first: the tree's
shape and size, each node's name, data and options (as ``add`` checks them), ids repeated
within the flow, and on a Redis Cluster that every queue the flow touches is in one slot. Then
one script, ``addFlow``, writes it: it runs every check the server must make (a node's id is a
job that belongs to another parent; the root's parent is missing) over the state each node's
add will meet, before its first write, and only then each node's add, in planning order (every
parent before its children), and each parent's release step (a parent whose children were all
finished already moves on at once instead of waiting for children that will never finish).
One script is atomic where a MULTI of several is not: Redis refuses a script for want of
memory only at its first write, and cannot kill one that has written.

On a Redis Cluster one call reaches one slot, so a flow whose nodes (or the root's parent)
live in queues of different slots is refused, before anything is written, naming each queue
and its slot (docs/deployment.md, "Flows on a cluster").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import redis

from ..errors import EchoMQError, InvalidInputError, raise_for_code
from ..protocol.codec import text
from ..transport.calls import run_script
from ..transport.cluster import key_slot, routed_slot
from ..transport.scripts import script
from .enqueue import AddCall, AddPlanner, job_spec
from .job import Job

#: The most nodes one flow may have. The flow is one script, and Redis serves nobody else
#: while it runs: 10,000 nodes take it about a quarter of a second (docs/queue.md, "Flows").
MAX_FLOW_NODES = 10_000

#: The most bytes of data, names and options all the nodes of one flow may carry together:
#: the flow is one command, which Redis reads whole before running it.
MAX_FLOW_BYTES = 64 * 1024 * 1024

class _Node(NamedTuple):
    """One planned node: where it is in the tree (for messages) and its add."""

    path: str
    call: AddCall


def add_flow(client: redis.Redis, planner_for: Callable[[str], AddPlanner], queue_name: str,
             parent: Mapping[str, Any], children: Sequence[Mapping[str, Any]]) -> Job:
    """Plan and write a flow whose root goes to ``queue_name``; ``planner_for(name)`` gives the
    add planner of any queue a node names (under the same prefix). Returns the root's Job."""
    if isinstance(children, (str, bytes, Mapping)) or not isinstance(children, Sequence):
        raise InvalidInputError(f"add_flow: children={children!r:.100} must be a list of job mappings")
    if not isinstance(parent, Mapping):
        raise InvalidInputError(f"add_flow: parent={parent!r:.100} must be a job mapping")
    if not children:
        raise InvalidInputError("add_flow: children must not be empty (use add for a single job)")
    root_planner = planner_for(queue_name)
    nodes = _plan(parent, children, root_planner, planner_for)
    _refuse_cross_slot(client, nodes)
    args: list[Any] = [str(root_planner.clock()), len(nodes)]
    for node in nodes:
        call = node.call
        args += [call.script.name, len(call.keys), *call.keys, len(call.args), *call.args]
    lua = script("addFlow")
    reply = run_script(client, lua, [root_planner.keys.meta], args)
    status = int(reply[0])
    root = nodes[0].call
    if status == 0:
        code, index = int(reply[1]), int(reply[2]) - 1
        failed = nodes[index]
        try:
            raise_for_code(code, f"add_flow: {failed.path}: add {failed.call.name!r}", job_id=failed.call.custom_id)
        except EchoMQError as exc:
            raise type(exc)(f"{exc}; nothing of the flow was written") from None
    job = Job(client, root_planner.keys, text(reply[1]), name=root.name, data=root.data,
              opts=root.stored_opts, timestamp=root.timestamp, clock=root_planner.clock)
    job.data_limits = root_planner.limits
    return job


def _plan(parent: Mapping[str, Any], children: Sequence[Any], root_planner: AddPlanner,
          planner_for: Callable[[str], AddPlanner]) -> list[_Node]:
    """Every node's add, each parent before its children (depth first, in the given order),
    without recursion: a deep tree is planned like a wide one."""
    nodes: list[_Node] = []
    seen: dict[str, str] = {}  # job key -> the path of the node that has it
    size = 0
    # (path, node, its children, its parent's {"id", "queue"}, its planner)
    pending: list[tuple[str, Mapping[str, Any], Sequence[Any], dict[str, str] | None, AddPlanner]] = [
        ("parent", parent, children, None, root_planner)]
    while pending:
        path, node, kids, parent_ref, planner = pending.pop()
        if len(nodes) == MAX_FLOW_NODES:
            raise InvalidInputError(f"add_flow: the flow has more than {MAX_FLOW_NODES} nodes (the whole flow is "
                                    "one script, which Redis runs alone): split it, or add children to a parent "
                                    "with add(..., parent=...)")
        try:
            call = _plan_node(node, bool(kids), parent_ref, planner)
        except InvalidInputError as exc:
            raise type(exc)(f"add_flow: {path}: {exc}") from None
        key = call.queue_keys.job(call.custom_id)
        if key in seen:
            raise InvalidInputError(f"add_flow: {path}: job_id {call.custom_id!r:.100} is also the id of "
                                    f"{seen[key]} (every node of a flow is a job of its own)")
        seen[key] = path
        size += sum(len(arg) for arg in call.args)
        if size > MAX_FLOW_BYTES:
            raise InvalidInputError(f"add_flow: the flow's nodes carry more than {MAX_FLOW_BYTES} bytes of names, "
                                    "data and options (the whole flow is one command): split it")
        nodes.append(_Node(path, call))
        ref = {"id": call.custom_id, "queue": planner.keys.base}
        for index in range(len(kids) - 1, -1, -1):  # reversed onto the stack: popped in order
            child, child_path = kids[index], f"{path}.children[{index}]" if path != "parent" else f"children[{index}]"
            if not isinstance(child, Mapping):
                raise InvalidInputError(f"add_flow: {child_path}: {child!r:.100} must be a job mapping")
            grandchildren = child.get("children") or ()
            if isinstance(grandchildren, (str, bytes, Mapping)) or not isinstance(grandchildren, Sequence):
                raise InvalidInputError(f"add_flow: {child_path}: children={grandchildren!r:.100} must be a list "
                                        "of job mappings")
            try:
                child_planner = planner_for(child.get("queue", planner.keys.queue_name))
            except InvalidInputError as exc:
                raise type(exc)(f"add_flow: {child_path}: {exc}") from None
            pending.append((child_path, child, grandchildren, ref, child_planner))
    return nodes


def _plan_node(node: Mapping[str, Any], has_children: bool, parent_ref: dict[str, str] | None,
               planner: AddPlanner) -> AddCall:
    name, data, opts = job_spec(node)
    if parent_ref is not None:
        if "parent" in opts:
            raise InvalidInputError(f"node {name!r:.100} must not set parent (the tree sets it)")
        opts = {**opts, "parent": parent_ref}
    # Nodes without a job_id get a UUID, as BullMQ 6's FlowProducer gives them (not stored in opts).
    return planner.prepare(name, data, opts, waiting_children=has_children, generated_id=str(uuid.uuid4()))


def _refuse_cross_slot(client: redis.Redis, nodes: Sequence[_Node]) -> None:
    """On a cluster, every node's queue, and the root's parent, must be in the slot the client
    is routed to."""
    home = routed_slot(client)
    if home is None:
        return
    slots = {f"queue {node.call.queue_keys.queue_name!r}": key_slot(client, node.call.queue_keys.meta)
             for node in nodes}
    root_parent_key = nodes[0].call.args[4]
    if root_parent_key:
        slots[f"the root's parent {root_parent_key!r}"] = key_slot(client, root_parent_key)
    if any(slot != home for slot in slots.values()):
        where = ", ".join(f"{name} (slot {slot})" for name, slot in slots.items())
        raise InvalidInputError(f"add_flow: on a Redis Cluster a flow is one script call, so all its queues must "
                                f"share one slot; this flow spans {where}. Nothing was written (docs/deployment.md)")
