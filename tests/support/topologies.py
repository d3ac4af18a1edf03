"""Production topologies the tests start from the machine's redis-server: a Redis Cluster (three
masters, one replica each) and a Sentinel setup (one master, one replica, three sentinels).

Every node runs from a config file in a temp dir of its own, on free ports, so a test can kill one
with SIGKILL and start it again from the same dir: a cluster node comes back with its nodes.conf
and rejoins as a replica of whoever took its slots; a Sentinel data node is turned into a replica
by the sentinels. ``with Cluster() as cluster:`` (or ``SentinelSetup``) starts everything and,
whatever happens in the block, stops every process and removes the dirs.

The timeouts are short (cluster-node-timeout 1000 ms, down-after-milliseconds 1000 ms) so a
failover takes seconds, not the production defaults' tens of seconds. Replicas sync diskless with
no delay, so a restarted node is attached within a second or two.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.sentinel import Sentinel

from support.redis_versions import binary_version
from support.servers import free_port, stop_process

T = TypeVar("T")

HOST = "127.0.0.1"
SERVICE = "echomq"  # the Sentinel service (master) name
NODE_TIMEOUT_MS = 1000

#: Settings every data node gets: no persistence (a restarted node resyncs from its master),
#: immediate diskless full syncs, and no protected mode (sentinels connect from 127.0.0.1 anyway).
_DATA_NODE = ["save ''", "appendonly no", "repl-diskless-sync yes", "repl-diskless-sync-delay 0",
              "protected-mode no"]
_CLUSTER_NODE = ["cluster-enabled yes", "cluster-config-file nodes.conf",
                 f"cluster-node-timeout {NODE_TIMEOUT_MS}",
                 # a replica that lost its master a while ago may still be promoted: a test kills
                 # masters at any moment, and an unavailable slot would only hide the library's behaviour
                 "cluster-replica-validity-factor 0"]


def binaries_missing() -> list[str]:
    """The programs the rig needs that are not on PATH."""
    return [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.05) -> T:
    """Poll ``probe`` until it returns something other than None (or False); raise naming ``what``."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = probe()
            if result is not None and result is not False:
                return result
        except (redis.RedisError, OSError, LookupError) as exc:  # mid-failover: nobody serves it yet
            last_error = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}"
                               + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(interval)


@dataclass(eq=False)
class Node:
    """One redis-server (or redis-server --sentinel) process, started from ``dir/node.conf``."""

    port: int
    dir: Path
    config: list[str]
    sentinel: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def launch(self) -> Node:
        """Start the process without waiting for it (several nodes boot in parallel)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "node.conf"
        if not conf.exists():  # a restart keeps what redis (or a sentinel) rewrote into it
            lines = [f"port {self.port}", f"bind {HOST}", f"dir {self.dir}", "daemonize no",
                     f"logfile {self.dir / 'redis.log'}", *self.config]
            conf.write_text("\n".join(lines) + "\n")
        args = [str(shutil.which("redis-server")), str(conf)] + (["--sentinel"] if self.sentinel else [])
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def wait_up(self, timeout: float = 10.0) -> Node:
        def answers() -> bool:
            if not self.alive:
                raise RuntimeError(f"redis-server on port {self.port} exited; see {self.dir / 'redis.log'}")
            return self.client(socket_timeout=1).ping()

        wait_for(f"redis-server on port {self.port}", answers, timeout)
        return self

    def start(self) -> Node:
        """Start (or start again, from the same dir) and wait until it answers PING."""
        return self.launch().wait_up()

    def kill(self) -> None:
        """SIGKILL: the node vanishes mid-conversation, replies in flight are lost."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def pause(self) -> None:
        """SIGSTOP: the node stops reading, the replication stream to it piles up in its master."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def cut_replica_links(self) -> int:
        """Close this master's connections to its replicas (CLIENT KILL TYPE replica). With the
        replicas paused they cannot connect again: what this master takes from then on reaches
        none of them, and a kill -9 loses it. How many links were cut."""
        return int(self.call("CLIENT", "KILL", "TYPE", "replica"))

    def client(self, **kwargs: Any) -> redis.Redis:
        """A plain client on this one node (the caller closes it)."""
        kwargs.setdefault("socket_connect_timeout", 1)
        kwargs.setdefault("socket_timeout", 5)
        kwargs.setdefault("decode_responses", True)
        return redis.Redis(host=HOST, port=self.port, **kwargs)

    def use(self, operation: Callable[[redis.Redis], T]) -> T:
        """``operation`` on a short-lived client of this node: the rig leaves no connection open."""
        client = self.client()
        try:
            return operation(client)
        finally:
            client.close()

    def call(self, *args: Any) -> Any:
        return self.use(lambda client: client.execute_command(*args))

    def info(self, section: str) -> dict[str, Any]:
        return self.use(lambda client: dict(client.info(section)))


def _bindable(port: int) -> bool:
    if port >= 65536:
        return False
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


class _Topology:
    """The nodes of one topology and their common temp dir: stopped and removed on exit."""

    def __init__(self, prefix: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        self.root = Path(self._tmp.name)
        self.nodes: list[Node] = []
        self.startup_seconds = 0.0
        self._ports: set[int] = set()

    def _port(self, bus_offset: int = 0) -> int:
        """A free port, and not one already given to a node of this topology (none listens yet);
        with ``bus_offset``, one whose port + offset is free too (Redis 6.2's cluster bus)."""
        while True:
            port = free_port()
            if port in self._ports or (bus_offset and not _bindable(port + bus_offset)):
                continue
            self._ports.add(port)
            if bus_offset:
                self._ports.add(port + bus_offset)
            return port

    def _new_node(self, name: str, config: list[str], sentinel: bool = False, bus_offset: int = 0) -> Node:
        node = Node(self._port(bus_offset), self.root / name, config, sentinel=sentinel)
        self.nodes.append(node)
        return node

    def node_at(self, host: str, port: int) -> Node:
        for node in self.nodes:
            if node.port == int(port):
                return node
        raise LookupError(f"no node of this topology listens on {host}:{port}")

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()  # no graceful shutdown needed: there is nothing to keep
        self._tmp.cleanup()

    def __enter__(self) -> Any:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _parse_cluster_nodes(text: str) -> list[dict[str, Any]]:
    """CLUSTER NODES lines as dicts: id, port, flags (a set), master id, link state, slot ranges."""
    nodes = []
    for line in text.strip().splitlines():
        parts = line.split()
        address = parts[1].split("@")[0]
        slots: list[tuple[int, int]] = []
        for spec in parts[8:]:
            if spec.startswith("["):  # a slot being migrated: not used by the rig
                continue
            low, _, high = spec.partition("-")
            slots.append((int(low), int(high or low)))
        nodes.append({"id": parts[0], "port": int(address.rpartition(":")[2]), "flags": set(parts[2].split(",")),
                      "master_id": parts[3], "link": parts[7], "slots": slots})
    return nodes


class Cluster(_Topology):
    """A Redis Cluster of ``masters`` masters with ``replicas`` replica(s) each.

    ``extra`` adds config lines to every node (e.g. ``["min-replicas-to-write 1"]``).
    """

    def __init__(self, masters: int = 3, replicas: int = 1, extra: Iterable[str] = ()) -> None:
        super().__init__("echomq-cluster-")
        self.masters_count = masters
        self.replicas_count = replicas
        # the bus port: 7.0 takes it as a directive; 6.2 has none and always uses port + 10000
        bus = binary_version() >= (7, 0)
        for index in range(masters * (1 + replicas)):
            port_line = [f"cluster-port {self._port()}"] if bus else []
            self._new_node(f"node-{index}", [*_DATA_NODE, *_CLUSTER_NODE, *port_line, *extra],
                           bus_offset=0 if bus else 10000)

    def start(self) -> Cluster:
        began = time.monotonic()
        for node in self.nodes:
            node.launch()
        for node in self.nodes:
            node.wait_up()
        create = [str(shutil.which("redis-cli")), "--cluster", "create",
                  *(f"{HOST}:{node.port}" for node in self.nodes),
                  "--cluster-replicas", str(self.replicas_count), "--cluster-yes"]
        result = subprocess.run(create, capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{result.stdout}\n{result.stderr}")
        self.wait_ready()
        self.startup_seconds = time.monotonic() - began
        return self

    # -- what the cluster looks like --------------------------------------------------------

    def view(self, node: Node | None = None) -> list[dict[str, Any]]:
        """CLUSTER NODES as seen by ``node`` (by default the first live one)."""
        node = node or next(n for n in self.nodes if n.alive)
        return _parse_cluster_nodes(node.call("CLUSTER", "NODES"))

    def masters(self) -> list[Node]:
        """The live masters serving slots, in slot order."""
        entries = [e for e in self.view() if "master" in e["flags"] and e["slots"] and "fail" not in e["flags"]]
        entries.sort(key=lambda e: e["slots"][0][0])
        return [self.node_at(HOST, e["port"]) for e in entries]

    def replicas(self) -> list[Node]:
        return [self.node_at(HOST, e["port"]) for e in self.view()
                if "slave" in e["flags"] and "fail" not in e["flags"]]

    def owner_of(self, key: str) -> Node:
        """The master serving ``key``'s slot (a queue's keys share the slot of their hash tag)."""
        slot = key_slot(key.encode())
        for entry in self.view():
            if "master" in entry["flags"] and "fail" not in entry["flags"] \
                    and any(low <= slot <= high for low, high in entry["slots"]):
                return self.node_at(HOST, entry["port"])
        raise LookupError(f"no live master serves slot {slot} of {key!r}")

    def replica_of(self, master: Node, timeout: float = 10.0) -> Node:
        """A live replica of ``master``, as the replica itself sees it (CLUSTER FAILOVER is sent
        to it). The master's own view may name it a moment later: after a failover of an
        earlier test the gossip about who follows whom still travels."""
        master_id = next(e["id"] for e in self.view(master) if "myself" in e["flags"])

        def follower() -> Node | None:
            for node in self.nodes:
                if node.alive and node is not master and any(
                        "myself" in e["flags"] and e["master_id"] == master_id for e in self.view(node)):
                    return node
            return None

        try:
            return wait_for(f"a replica of the master on port {master.port}", follower, timeout)
        except TimeoutError:
            raise LookupError(f"the master on port {master.port} has no replica") from None

    # -- waiting ----------------------------------------------------------------------------

    def _healthy(self, replicas_attached: bool) -> bool:
        live = [n for n in self.nodes if n.alive]
        views = []
        for node in live:
            info = dict(line.split(":", 1) for line in node.call("CLUSTER", "INFO").split() if ":" in line)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            view = self.view(node)
            views.append(sorted((e["port"], tuple(e["slots"])) for e in view
                                if "master" in e["flags"] and e["slots"] and "fail" not in e["flags"]))
        if any(v != views[0] for v in views) or len(views[0]) != self.masters_count:
            return False  # nodes still disagree about who serves what
        if not replicas_attached:
            return True
        if len(live) != len(self.nodes):
            return False
        for node in live:  # a restarted node: every other node has seen it back
            if any(flag in e["flags"] for e in self.view(node) for flag in ("fail", "fail?", "handshake")):
                return False
        for master in self.masters():
            attached = [n for n in self.nodes if n.alive and n.info("replication").get("role") == "slave"
                        and n.info("replication").get("master_port") == master.port
                        and n.info("replication").get("master_link_status") == "up"]
            if len(attached) < self.replicas_count:
                return False
        return True

    def wait_ready(self, timeout: float = 60.0) -> Cluster:
        """Every node up and agreeing, all 16384 slots served, every master with its replica(s) in sync."""
        wait_for("the cluster to be ok with every replica attached", lambda: self._healthy(True), timeout)
        return self

    def wait_serving(self, timeout: float = 30.0) -> Cluster:
        """All slots served again by live masters (after a kill: a replica was promoted)."""
        wait_for("the cluster to serve every slot again", lambda: self._healthy(False), timeout)
        return self

    def wait_owner_change(self, key: str, old: Node, timeout: float = 30.0) -> Node:
        """The node that took ``key``'s slot over from ``old``, once the cluster is ok again."""
        def promoted() -> Node | None:
            owner = self.owner_of(key)
            return owner if owner is not old and self._healthy(False) else None

        return wait_for(f"another master to serve {key!r}", promoted, timeout)

    def restart(self, node: Node, timeout: float = 60.0) -> Node:
        """Start a killed node again from its dir; it rejoins (a former master as a replica)."""
        node.start()
        self.wait_ready(timeout)
        return node

    # -- clients ----------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> RedisCluster:
        """A ``redis.cluster.RedisCluster`` knowing every node as a startup node."""
        return RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in self.nodes], **kwargs)

    def url(self) -> str:
        node = next(n for n in self.nodes if n.alive)
        return f"redis+cluster://{HOST}:{node.port}"


class SentinelSetup(_Topology):
    """One master, ``replicas`` replica(s), ``sentinels`` sentinels with quorum 2, service ``SERVICE``.

    ``extra`` adds config lines to the data nodes (e.g. ``["min-replicas-to-write 1"]``).
    """

    def __init__(self, replicas: int = 1, sentinels: int = 3, extra: Iterable[str] = ()) -> None:
        super().__init__("echomq-sentinel-")
        self.service = SERVICE
        self.data = [self._new_node("master", [*_DATA_NODE, *extra])]
        for index in range(replicas):
            self.data.append(self._new_node(f"replica-{index}", [*_DATA_NODE, *extra,
                                                                 f"replicaof {HOST} {self.data[0].port}"]))
        monitor = [f"sentinel monitor {SERVICE} {HOST} {self.data[0].port} 2",
                   f"sentinel down-after-milliseconds {SERVICE} 1000",
                   f"sentinel failover-timeout {SERVICE} 5000",
                   f"sentinel parallel-syncs {SERVICE} 1"]
        self.sentinels = [self._new_node(f"sentinel-{i}", monitor, sentinel=True) for i in range(sentinels)]

    def start(self) -> SentinelSetup:
        began = time.monotonic()
        for node in self.data:
            node.launch()
        for node in self.data:
            node.wait_up()
        # the replica first: a sentinel learns the replicas from its first INFO of the master
        wait_for("the replica to sync", lambda: self._replicas_in_sync(self.data[0]), 30)
        for node in self.sentinels:
            node.launch()
        for node in self.sentinels:
            node.wait_up()
        self.wait_ready()
        self.startup_seconds = time.monotonic() - began
        return self

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [n.address for n in self.sentinels]

    def master(self) -> Node:
        """The master every live sentinel agrees on (raises while they disagree)."""
        answers = {tuple(n.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)) for n in self.sentinels if n.alive}
        if len(answers) != 1:
            raise LookupError(f"the sentinels disagree about the master: {sorted(answers)}")
        host, port = answers.pop()
        return self.node_at(host, int(port))

    def replica(self) -> Node:
        master = self.master()
        return next(n for n in self.data if n is not master)

    def _replicas_in_sync(self, master: Node) -> bool:
        for node in self.data:
            if node is master:
                continue
            if not node.alive:
                return False
            info = node.info("replication")
            if info.get("role") != "slave" or info.get("master_port") != master.port \
                    or info.get("master_link_status") != "up":
                return False
        return master.info("replication").get("role") == "master"

    def _healthy(self) -> bool:
        master = self.master()
        if not master.alive or not self._replicas_in_sync(master):
            return False
        for sentinel in self.sentinels:
            state = sentinel.use(lambda client: client.sentinel_master(SERVICE))
            if int(state["num-slaves"]) < len(self.data) - 1 \
                    or int(state["num-other-sentinels"]) != len(self.sentinels) - 1:
                return False
            if "s_down" in str(state["flags"]) or "o_down" in str(state["flags"]):
                return False
            # as the sentinel last saw them (INFO every 10 s): a replica it would promote
            replicas = sentinel.use(lambda client: client.sentinel_slaves(SERVICE))
            up = [r for r in replicas if not r["is_sdown"] and not r["is_disconnected"]
                  and r["role-reported"] == "slave" and r["master-link-status"] == "ok"
                  and int(r["master-port"]) == master.port and int(r["port"]) != master.port]
            if len(up) < len(self.data) - 1:
                return False
        return True

    def wait_ready(self, timeout: float = 60.0) -> SentinelSetup:
        """Every sentinel sees the master, its replicas in sync and the other sentinels."""
        wait_for("the sentinels to agree on a master with its replicas", self._healthy, timeout)
        return self

    def wait_master_change(self, old: Node, timeout: float = 30.0) -> Node:
        """The replica the sentinels promoted in place of ``old``, once it answers as a master."""
        def promoted() -> Node | None:
            master = self.master()
            return master if master is not old and master.info("replication").get("role") == "master" else None

        return wait_for("the sentinels to promote a new master", promoted, timeout)

    def wait_demoted(self, node: Node, timeout: float = 45.0) -> None:
        """Until ``node``, a former master still running, has been turned into a replica. The
        sentinels do that after their next INFO of it (every 10 s): until then it takes writes."""
        wait_for(f"the node on port {node.port} to be demoted",
                 lambda: node.info("replication").get("role") == "slave", timeout)

    def failover(self) -> None:
        """``SENTINEL FAILOVER``: a planned switch, the old master demoted to a replica."""
        sentinel = next(n for n in self.sentinels if n.alive)
        sentinel.call("SENTINEL", "FAILOVER", SERVICE)

    def restart(self, node: Node, timeout: float = 60.0) -> Node:
        """Start a killed data node again, as a replica of the current master.

        Its config is pointed at the current master first, as an operator would: left alone, the
        sentinels would demote it too, but only after their next INFO of it (up to 10 s later).
        """
        master = self.master()
        conf = node.dir / "node.conf"
        lines = [line for line in conf.read_text().splitlines() if not line.startswith(("replicaof", "slaveof"))]
        conf.write_text("\n".join([*lines, f"replicaof {HOST} {master.port}"]) + "\n")
        node.start()
        self.wait_ready(timeout)
        return node

    def sentinel(self, **kwargs: Any) -> Sentinel:
        kwargs.setdefault("socket_timeout", 5)
        return Sentinel(self.sentinel_addresses, **kwargs)

    def client(self, **kwargs: Any) -> redis.Redis:
        """``Sentinel(...).master_for(service)``: a client that asks the sentinels where the master is."""
        return self.sentinel().master_for(SERVICE, **kwargs)

    def url(self) -> str:
        hosts = ",".join(f"{HOST}:{n.port}" for n in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}"
