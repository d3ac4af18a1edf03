"""``echomq metrics serve``: a Prometheus exporter of queues' job counts, in a process of its own.

For queues no worker of a process reports on (or none at all: a queue BullMQ workers run), it
serves ``echomq_queue_jobs{queue,state}`` and ``echomq_queue_up{queue}``, read from Redis at
each scrape (``echomq.contrib.prometheus.QueueStateCollector``), until SIGTERM or Ctrl-C, then
exits 0. It needs the ``prometheus`` extra; without it the command says so in one line and
exits 2. Redis being away is not an error here: the exporter keeps serving and says so with
``echomq_queue_up`` 0, as an exporter should.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from ..protocol.keys import validate_queue_name
from ..transport.connection import without_retries
from ..transport.urls import open_url
from .options import add_connection_options, checked, connection_url

#: Each scrape's Redis calls give up after this long (connect and read), well inside
#: Prometheus's default scrape timeout of 10 s, and are not retried by redis-py.
SCRAPE_REDIS_TIMEOUT_S = 3.0


def port_number(text: str) -> int:
    """An argparse ``type=`` for a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to 65535)")
    return value


def serve(args: argparse.Namespace) -> int:
    try:
        from ..contrib.prometheus import MetricsServer, QueueStateCollector, queue_registry
    except ImportError as exc:
        sys.stderr.write(f"echomq metrics serve: {exc}\n")
        return 2
    # Any URL of docs/deployment.md; a TLS URL checks the host name (docs/security.md).
    client, close_client = open_url(connection_url(args), socket_connect_timeout=SCRAPE_REDIS_TIMEOUT_S,
                                    socket_timeout=SCRAPE_REDIS_TIMEOUT_S, **without_retries())
    try:
        collector = QueueStateCollector(client, args.queue, prefix=args.prefix)
        try:
            server = MetricsServer(queue_registry(collector), port=args.port, host=args.host)
        except OSError as exc:
            sys.stderr.write(f"echomq metrics serve: cannot listen on {args.host}:{args.port}: {exc}\n")
            return 2
        stop = threading.Event()
        previous = {number: signal.signal(number, lambda *_: stop.set()) for number in (signal.SIGTERM, signal.SIGINT)}
        try:
            sys.stdout.write(f"echomq metrics serve: queues {', '.join(args.queue)} at {server.url}\n")
            sys.stdout.flush()
            while not stop.wait(0.5):  # a bounded wait: the handler runs between two of them at the latest
                pass
        finally:
            for number, handler in previous.items():
                if handler is not None:  # None: installed outside Python, nothing to put back
                    signal.signal(number, handler)
            server.close()
        return 0
    finally:
        close_client()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("metrics", help="Prometheus metrics of queues")
    commands = parser.add_subparsers(dest="metrics_command", metavar="SUBCOMMAND", required=True)
    serve_parser = commands.add_parser("serve", help="serve queues' job counts to Prometheus until SIGTERM or Ctrl-C")
    serve_parser.add_argument("--queue", action="append", required=True,
                              type=checked(validate_queue_name, "queue name"),
                              help="a queue to report (without braces); repeat for more")
    add_connection_options(serve_parser)
    serve_parser.add_argument("--port", required=True, type=port_number, help="TCP port to listen on (0: any free)")
    serve_parser.add_argument("--host", default="127.0.0.1",
                              help="address to listen on (default: %(default)s; 0.0.0.0 for every interface)")
    serve_parser.set_defaults(handler=serve)
