"""fakeredis served over TCP, for what only takes a URL (the CLI, components that own their client).

fakeredis's TCP server (2.38 to 2.41 at least) reports a connection's ``addr`` and ``laddr`` in
CLIENT LIST as Python tuples, ``addr=('127.0.0.1', 5)``, where Redis writes ``127.0.0.1:5``.
The space inside the value breaks redis-py's CLIENT LIST parser before 7.0 (``ValueError:
dictionary update sequence element ...``), so on the oldest redis-py the package admits every
``get_workers()`` over the fake URL failed for the rig's sake, not the library's. The handler
here hands fakeredis a socket whose addresses are already in Redis's ``host:port`` form.
"""

from __future__ import annotations

import socket
from typing import Any

import fakeredis


class _HostPortSocket:
    """A connected socket whose ``getpeername()``/``getsockname()`` answer ``"host:port"``;
    everything else is the socket's own."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def getpeername(self) -> str:
        host, port = self._sock.getpeername()[:2]
        return f"{host}:{port}"

    def getsockname(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"{host}:{port}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def tcp_fake_server(address: tuple[str, int] = ("127.0.0.1", 0)) -> Any:
    """A ``fakeredis.TcpFakeServer`` on ``address`` whose CLIENT LIST reads like Redis's."""
    server = fakeredis.TcpFakeServer(address, server_type="redis")
    base = server.RequestHandlerClass

    class Handler(base):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            self.request = _HostPortSocket(self.request)
            super().setup()

    server.RequestHandlerClass = Handler
    return server
