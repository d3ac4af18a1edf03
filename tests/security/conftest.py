"""The TLS rig: a throwaway PKI made with ``openssl`` and ``redis-server``\\ s that speak TLS only.

``tls_pki`` makes, in the test's temp dir, a CA, a server certificate it signed (SAN
``IP:127.0.0.1`` and ``DNS:localhost``), a client certificate it signed, a second CA that
signed nothing the server presents (``rogue_ca``), and a server certificate the CA signed for
another name only (``mismatch_cert``, SAN ``DNS:elsewhere.invalid``).

``tls_server(auth_clients=False, cert="server")`` starts ``redis-server --port 0 --tls-port P``
on a free port: no plain port at all, so any connection that lost its TLS settings fails. With
``auth_clients=True`` the server demands a client certificate signed by the CA. Every server is
stopped at the end of the test, every wait is bounded. Without ``openssl`` or ``redis-server``
the tests skip, except under ``CI=true`` where that fails the run; a ``redis-server`` that cannot
start with TLS (built without it) fails the test with the server's own output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import redis

from support.servers import free_port, stop_process

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: Bounds of the rig: one openssl call, and a server coming up (it answers a TLS PING).
OPENSSL_TIMEOUT_S = 30.0
START_TIMEOUT_S = 10.0


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        message = f"{binary} is not installed: the TLS tests need it"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


@dataclass(frozen=True)
class Pki:
    """Paths of the throwaway CA, certificates and keys (PEM)."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path
    mismatch_cert: Path
    mismatch_key: Path


class _OpenSSL:
    def __init__(self, directory: Path) -> None:
        self.binary = _require("openssl")
        self.dir = directory

    def run(self, *args: str) -> None:
        done = subprocess.run([self.binary, *args], cwd=self.dir, capture_output=True, text=True,
                              timeout=OPENSSL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")

    def ca(self, name: str, subject: str) -> tuple[Path, Path]:
        cert, key = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        self.run("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", subject,
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 "-addext", "subjectKeyIdentifier=hash")
        return cert, key

    def leaf(self, name: str, subject: str, ca: tuple[Path, Path], serial: int,
             extensions: list[str]) -> tuple[Path, Path]:
        cert, key, csr, ext = (self.dir / f"{name}{suffix}" for suffix in (".crt", ".key", ".csr", ".ext"))
        self.run("req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-keyout", str(key), "-out", str(csr), "-subj", subject)
        ext.write_text("\n".join([
            "basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature",
            "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid,issuer", *extensions, ""]))
        self.run("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
                 "-set_serial", str(serial), "-days", "2", "-out", str(cert), "-extfile", str(ext))
        return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    openssl = _OpenSSL(directory)
    ca = openssl.ca("ca", "/CN=EchoMQ test CA")
    rogue = openssl.ca("rogue-ca", "/CN=EchoMQ rogue CA")
    server = openssl.leaf("server", "/CN=localhost", ca, 2, [
        "extendedKeyUsage=serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
    mismatch = openssl.leaf("mismatch", "/CN=elsewhere.invalid", ca, 3, [
        "extendedKeyUsage=serverAuth", "subjectAltName=DNS:elsewhere.invalid"])
    client = openssl.leaf("client", "/CN=echomq-test-client", ca, 4, ["extendedKeyUsage=clientAuth"])
    return Pki(dir=directory, ca=ca[0], server_cert=server[0], server_key=server[1], client_cert=client[0],
               client_key=client[1], rogue_ca=rogue[0], mismatch_cert=mismatch[0], mismatch_key=mismatch[1])


@dataclass
class TLSServer:
    """A redis-server listening on a TLS port only, and how to reach it with verification on."""

    port: int
    pki: Pki
    auth_clients: bool
    dir: Path
    cert: Path
    key: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _admin: redis.Redis | None = field(default=None, repr=False)

    def tls_kwargs(self, *, ca: Path | None = None, client_cert: bool | None = None) -> dict[str, Any]:
        """redis-py client settings: the CA (the rig's unless ``ca``), and the client certificate
        when the server demands one (or as ``client_cert`` says). Verification stays the default."""
        kwargs: dict[str, Any] = {"ssl_ca_certs": str(ca or self.pki.ca)}
        if self.auth_clients if client_cert is None else client_cert:
            kwargs.update(ssl_certfile=str(self.pki.client_cert), ssl_keyfile=str(self.pki.client_key))
        return kwargs

    def url(self, host: str = "127.0.0.1", **query: Any) -> str:
        """``rediss://host:port/0?...``: the TLS settings of :meth:`tls_kwargs`, updated with
        ``query``, in the URL's query."""
        params = {**self.tls_kwargs(), **query}
        return f"rediss://{host}:{self.port}/0?" + urlencode(params, quote_via=quote)

    def client(self, **overrides: Any) -> redis.Redis:
        """A ``redis.Redis(ssl=True, ...)``: the TLS settings live only on this client object."""
        # ssl_check_hostname: what docs/security.md tells a redis-py 5.x user to pass (the default from 6.0).
        kwargs: dict[str, Any] = {"host": "127.0.0.1", "port": self.port, "ssl": True, "ssl_check_hostname": True,
                                  **self.tls_kwargs()}
        kwargs.update(overrides)
        return redis.Redis(**kwargs)

    def admin(self) -> redis.Redis:
        """The test's own view of the server (TLS, the chain verified but not the name, so the
        mismatch server too; with a client certificate, so always accepted; replies decoded).
        One client, closed when the server stops."""
        if self._admin is None:
            self._admin = redis.Redis(host="127.0.0.1", port=self.port, ssl=True, decode_responses=True,
                                      ssl_check_hostname=False, socket_timeout=5, socket_connect_timeout=5,
                                      **self.tls_kwargs(client_cert=True))
        return self._admin

    def client_list(self) -> list[dict[str, Any]]:
        """CLIENT LIST without the admin's own connection."""
        return [c for c in self.admin().client_list() if c.get("cmd") != "client|list"]

    def command_calls(self, command: str) -> int:
        """How many times the server ran ``command`` (INFO commandstats, e.g. ``client|unblock``)."""
        entry = self.admin().info("commandstats").get(f"cmdstat_{command}")
        return int(entry["calls"]) if entry else 0

    def start(self) -> TLSServer:
        binary = _require("redis-server")
        args = [binary, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
                "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
                "--tls-ca-cert-file", str(self.pki.ca),
                "--tls-auth-clients", "yes" if self.auth_clients else "no",
                "--save", "", "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no",
                "--logfile", str(self.dir / "redis.log")]
        with (self.dir / "redis.out").open("wb") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self._answers():
                return self
            time.sleep(0.02)
        self.stop()
        output = "\n".join(
            (self.dir / name).read_text(errors="replace")[-2000:] for name in ("redis.out", "redis.log")
            if (self.dir / name).exists())
        raise RuntimeError(f"redis-server with TLS on port {self.port} did not start:\n{output}")

    def _answers(self) -> bool:
        # The rig's probe checks the chain, not the name: the mismatch server must come up too.
        admin = redis.Redis(host="127.0.0.1", port=self.port, ssl=True, ssl_check_hostname=False,
                            socket_timeout=0.5, socket_connect_timeout=0.5, retry=None,
                            **self.tls_kwargs(client_cert=True))
        try:
            return bool(admin.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            admin.close()

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self.process is not None:
            stop_process(self.process)
            self.process = None


@pytest.fixture
def tls_pki(tmp_path: Path) -> Pki:
    """A fresh CA, server, client, rogue-CA and wrong-name certificates in the test's temp dir."""
    _require("redis-server")
    return make_pki(tmp_path / "pki")


@pytest.fixture
def tls_server(tls_pki: Pki, tmp_path: Path) -> Iterator[Callable[..., TLSServer]]:
    """Start TLS-only redis-servers: ``tls_server(auth_clients=False, cert="server"|"mismatch",
    port=None)`` (a free port unless given: a test may stop a server and start another there)."""
    servers: list[TLSServer] = []

    def start(auth_clients: bool = False, cert: str = "server", port: int | None = None) -> TLSServer:
        if cert not in ("server", "mismatch"):
            raise ValueError(f"cert={cert!r}: 'server' or 'mismatch'")
        cert_path, key_path = ((tls_pki.server_cert, tls_pki.server_key) if cert == "server"
                               else (tls_pki.mismatch_cert, tls_pki.mismatch_key))
        error: RuntimeError | None = None
        for attempt in range(3):  # a free port may be taken before the server binds it
            directory = tmp_path / f"redis-{len(servers)}-{attempt}"
            directory.mkdir()
            server = TLSServer(port or free_port(), tls_pki, auth_clients, directory, cert_path, key_path)
            try:
                server.start()
            except RuntimeError as exc:
                error = exc
                if port is not None:
                    break
                continue
            servers.append(server)
            return server
        assert error is not None
        if IN_CI:
            pytest.fail(str(error))
        raise error

    yield start
    for server in servers:
        server.stop()
