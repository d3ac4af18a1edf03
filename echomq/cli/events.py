"""``echomq events tail``: print a queue's events as they arrive (until Ctrl-C, ``--limit``, or
the reader of its output going away).

When its output closes (``echomq events tail ... | head -2``), the tail stops at once and exits
quietly with status 141, what a shell reports for ``yes`` in ``yes | head``: 128 + SIGPIPE. It
notices on the next line it writes (a write that fails with EPIPE) and, when no event comes, by
watching its output for the error a pipe whose reader closed reports (poll's POLLERR).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import sys
import threading
from typing import Any, TextIO

from ..errors import InvalidInputError
from ..events import QueueEvents
from ..events.cursor import validate_start_id
from ..protocol.events import EventType, GapNotice, GapReason
from .options import add_queue_options, open_client, positive_int, printable


def format_event(event_type: Any, data: dict[str, Any]) -> str:
    """One line per event: id, type, job, then the remaining fields as JSON values."""
    if isinstance(event_type, GapNotice):
        if event_type.replaced:  # a failover, a restart ...: the notice says it all in one line
            return f"!! {printable(str(event_type))}"
        how = "were deleted" if event_type.reason is GapReason.DELETED else "were trimmed"
        return (f"!! gap in {event_type.queue_name!r}: entries after {event_type.from_id} and before "
                f"{event_type.to_id} {how} (about {event_type.approx_lost} lost)")
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
    gets to close the reader: once the limit is reached, or the output is gone
    (``output_closed``), the printer ignores what follows.
    """

    def __init__(self, out: TextIO, limit: int | None = None) -> None:
        self.out = out
        self.limit = limit
        self.printed = 0
        self.enough = threading.Event()
        self.output_closed = False

    def __call__(self, event_type: Any, data: dict[str, Any]) -> None:
        if self.enough.is_set():
            return
        try:
            self.out.write(format_event(event_type, data) + "\n")
            self.out.flush()
        except BrokenPipeError:
            self.close_output()
            return
        if not isinstance(event_type, GapNotice):
            self.printed += 1
            if self.limit is not None and self.printed >= self.limit:
                self.enough.set()

    def close_output(self) -> None:
        """The output's reader went away: print nothing more and let the tail stop."""
        self.output_closed = True
        self.enough.set()

    def wait(self) -> None:
        """Until the printer has had enough (``--limit``) or its output is gone."""
        poller = _error_poller(self.out)
        while not self.enough.is_set():
            if poller is None:
                self.enough.wait(0.5)
            elif poller.poll(POLL_MS):
                self.close_output()  # POLLERR: nobody reads the pipe any more


#: How often the tail looks at its output while no event comes (a closed pipe is noticed then).
POLL_MS = 50

#: The exit status of a tail whose output closed: 128 + SIGPIPE, as a shell reports ``yes`` in
#: ``yes | head``.
OUTPUT_CLOSED_STATUS = 128 + int(signal.SIGPIPE) if hasattr(signal, "SIGPIPE") else 1


def _error_poller(out: TextIO) -> Any:
    """A poll object that reports only errors on ``out``'s descriptor (a pipe whose reader
    closed gives POLLERR, a file or a terminal nothing), or None where there is none to watch."""
    if not hasattr(select, "poll"):
        return None
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # a StringIO, pytest's capture
        return None
    poller = select.poll()
    poller.register(fd, 0)  # no events asked for: POLLERR, POLLHUP and POLLNVAL come anyway
    return poller


def _silence(out: TextIO) -> None:
    """Point ``out``'s descriptor at /dev/null, so the interpreter's flush at exit does not fail
    (and print a BrokenPipeError) on a pipe nobody reads."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)


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
            printer.wait()
    except KeyboardInterrupt:
        pass
    finally:
        events.close(timeout=2)
        client.close()
    if printer.output_closed:
        _silence(sys.stdout)
        return OUTPUT_CLOSED_STATUS
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
