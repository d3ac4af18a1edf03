"""``echomq events tail``: print a queue's events as they arrive (until Ctrl-C or ``--limit``)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any, TextIO

from ..errors import InvalidInputError
from ..events import QueueEvents
from ..events.cursor import validate_start_id
from ..protocol.events import EventType, GapNotice
from .options import add_queue_options, open_client, positive_int, printable


def format_event(event_type: Any, data: dict[str, Any]) -> str:
    """One line per event: id, type, job, then the remaining fields as JSON values."""
    if isinstance(event_type, GapNotice):
        return (f"!! gap in {event_type.queue_name!r}: entries after {event_type.from_id} and before "
                f"{event_type.to_id} were trimmed (about {event_type.approx_lost} lost)")
    # Everything but the entry id comes from whoever wrote the entry: printed escaped.
    name = event_type.value if isinstance(event_type, EventType) else f"{printable(str(event_type))} (custom)"
    rest = {k: v for k, v in data.items() if k not in ("event_id", "jobId")}
    job = f" job={printable(str(data['jobId']))}" if "jobId" in data else ""
    fields = " ".join(f"{printable(k)}={_json(v)}" for k, v in rest.items())
    line = f"{data.get('event_id', '-'):>17}  {name:<17}{job}{'  ' + fields if fields else ''}"
    return line.rstrip()


def _json(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (ValueError, RecursionError):  # nested deeper than the encoder goes
        return '"<too deeply nested to print>"'


class EventPrinter:
    """The printing subscriber; counts what it printed so ``--limit`` can stop the tail.

    One read hands the reader a whole batch, and the rest of it is delivered before the tail
    gets to close the reader: once the limit is reached, the printer ignores what follows.
    """

    def __init__(self, out: TextIO, limit: int | None = None) -> None:
        self.out = out
        self.limit = limit
        self.printed = 0
        self.enough = threading.Event()

    def __call__(self, event_type: Any, data: dict[str, Any]) -> None:
        if self.enough.is_set():
            return
        self.out.write(format_event(event_type, data) + "\n")
        self.out.flush()
        if not isinstance(event_type, GapNotice):
            self.printed += 1
            if self.limit is not None and self.printed >= self.limit:
                self.enough.set()


def start_id(text: str) -> str:
    """``--from``: QueueEvents' own check of a start id, reported as the option's error."""
    try:
        return validate_start_id(text)
    except InvalidInputError:
        raise argparse.ArgumentTypeError(f"{text!r} is not '$', '0' or an entry id like '1700000000000-0'") from None


def tail(args: argparse.Namespace) -> int:
    client = open_client(args)
    printer = EventPrinter(sys.stdout, args.limit)
    events = QueueEvents(client, args.queue, prefix=args.prefix, last_event_id=args.from_id)
    events.subscribe(printer)
    try:
        with events:
            while not printer.enough.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        events.close(timeout=2)
        client.close()
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("events", help="read a queue's events stream")
    commands = parser.add_subparsers(dest="events_command", metavar="SUBCOMMAND", required=True)
    tail_parser = commands.add_parser("tail", help="print events as they arrive")
    add_queue_options(tail_parser)
    tail_parser.add_argument("--from", dest="from_id", default="$", type=start_id,
                             help="'$' (new events only, the default), '0' (replay) or an entry id")
    tail_parser.add_argument("--limit", type=positive_int, default=None, help="exit after this many events")
    tail_parser.set_defaults(handler=tail)
