"""This process's own TCP connections (Linux /proc), for tests that check a close left none open."""

from __future__ import annotations

import contextlib
import os


def open_sockets_to(ports: set[int]) -> int:
    """This process's established TCP connections to any of ``ports``."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                established = fields[3] == "01"
                if fields[9] in inodes and established and int(fields[2].rsplit(":", 1)[1], 16) in ports:
                    count += 1
    return count
