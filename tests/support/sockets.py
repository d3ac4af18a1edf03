"""This process's own TCP connections (Linux /proc): for tests that check a close left none
open, and for telling this process's connections from a lingering subprocess's."""

from __future__ import annotations

import contextlib
import os
from typing import NamedTuple


class OwnSocket(NamedTuple):
    local_port: int
    remote_port: int
    established: bool


def own_tcp_sockets() -> list[OwnSocket]:
    """Every TCP socket this process holds, read from /proc/self/fd and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    found.append(OwnSocket(int(fields[1].rsplit(":", 1)[1], 16),
                                           int(fields[2].rsplit(":", 1)[1], 16), fields[3] == "01"))
    return found


def open_sockets_to(ports: set[int]) -> int:
    """This process's established TCP connections to any of ``ports``."""
    return sum(1 for sock in own_tcp_sockets() if sock.established and sock.remote_port in ports)
