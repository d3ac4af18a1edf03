"""``echomq dashboard``: the web dashboard (echomq.contrib.dashboard) on a port of its own.

Serves every queue under ``--prefix`` (or only the ``--queue`` ones) until SIGTERM or Ctrl-C,
then exits 0. It binds 127.0.0.1 unless told otherwise; bound anywhere else without
``--basic-auth`` it says on stderr that anyone who reaches the port can act on the queues. Each
action is logged (INFO, ``echomq.contrib.dashboard``) with who did it: the Basic user, else the
client's address. Needs the ``dashboard`` extra (Jinja2); without it the command says so and
exits 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..protocol.keys import validate_queue_name
from ..transport.urls import open_url, redact_url
from .metrics import port_number
from .options import add_connection_options, checked, connection_url

#: Where a user:password for --basic-auth may come from instead of the command line (which
#: every user of the machine can read in the process list).
AUTH_ENV = "ECHOMQ_DASHBOARD_AUTH"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a browser's kept-alive connection never holds the exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (a poll every few seconds per tab); actions are."""


def basic_credentials(text: str) -> tuple[str, str]:
    """An argparse ``type=``: ``USER:PASSWORD``, both non-empty."""
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise argparse.ArgumentTypeError("give USER:PASSWORD (both non-empty)")
    return user, password


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_server(args: argparse.Namespace) -> tuple[Any, str, Any]:
    """The server, the address to open and the function that closes the Redis client."""
    from ..contrib.dashboard import Dashboard
    from ..contrib.dashboard.security import basic_auth

    url = connection_url(args)
    client, close_client = open_url(url)
    try:
        app: Any = Dashboard(client, prefix=args.prefix, queues=args.queue, read_only=args.read_only,
                             label=redact_url(url))
        auth = args.basic_auth or (basic_credentials(os.environ[AUTH_ENV]) if os.environ.get(AUTH_ENV) else None)
        if auth is not None:
            app = basic_auth(app, *auth)
        elif not is_loopback(args.host):
            sys.stderr.write(f"echomq dashboard: warning: listening on {args.host} without --basic-auth: anyone who "
                             f"reaches this port can see the jobs{'' if args.read_only else ' and act on the queues'}"
                             "; give --basic-auth (and TLS in front), or bind 127.0.0.1\n")
        server = make_server(args.host, args.port, app, server_class=_Server, handler_class=_QuietHandler)
    except BaseException:
        close_client()
        raise
    host = f"[{args.host}]" if ":" in args.host else args.host
    return server, f"http://{host}:{server.server_port}/", close_client


def serve(args: argparse.Namespace) -> int:
    try:
        import jinja2  # noqa: F401 - only to say what is missing
    except ImportError:
        sys.stderr.write("echomq dashboard: needs the dashboard extra: pip install 'echomq[dashboard]'\n")
        return 2
    logging.getLogger("echomq.contrib.dashboard").setLevel(logging.INFO)  # the action log
    try:
        server, address, close_client = build_server(args)
    except OSError as exc:
        sys.stderr.write(f"echomq dashboard: cannot listen on {args.host}:{args.port}: {exc}\n")
        return 2
    stop = threading.Event()
    previous = {number: signal.signal(number, lambda *_: stop.set()) for number in (signal.SIGTERM, signal.SIGINT)}
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True)
    try:
        thread.start()
        sys.stdout.write(f"echomq dashboard: {redact_url(connection_url(args))} at {address}"
                         f"{' (read-only)' if args.read_only else ''}\n")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)
        server.shutdown()
        server.server_close()
        close_client()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="a web dashboard of the queues (needs echomq[dashboard])",
        description="Serve a web dashboard of every queue under --prefix (EchoMQ's and BullMQ's) until SIGTERM "
                    "or Ctrl-C: counts, jobs, schedulers, throughput, and retry/promote/remove/cancel/clean/"
                    "pause/resume/drain, a scheduler's pause/resume/run now.")
    add_connection_options(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: %(default)s; beyond it, give --basic-auth)")
    parser.add_argument("--port", type=port_number, default=8025, help="TCP port (default %(default)s; 0: any free)")
    parser.add_argument("--read-only", action="store_true", help="no buttons; every action is refused (403)")
    parser.add_argument("--queue", action="append", type=checked(validate_queue_name, "queue name"),
                        help="show only this queue (repeat for more; default: every queue found)")
    parser.add_argument("--basic-auth", type=basic_credentials, metavar="USER:PASSWORD",
                        help=f"ask for these credentials (default: ${AUTH_ENV}, which keeps them out of the "
                             "process list)")
    parser.set_defaults(handler=serve)
