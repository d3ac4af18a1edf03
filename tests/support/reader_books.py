"""Books kept on a QueueEvents reader across a failover, and the judgement of them.

``EntryProducer`` appends entries to a queue's events stream as fast as it can (through a client
of the topology, retrying what fails, as an application's producer would), so a failover finds
the old master and its replica apart. ``judge`` compares what a reader delivered (an
``EventLog``) with the stream the final master holds:

- every entry of the final stream written after the reader started was delivered (however low
  its id), and none twice; a notice that is not exact may have taken up to its ``approx_lost``
  entries as delivered unchecked (its reader's ``history`` was shorter than the divergence);
- every delivered entry that the final stream does not hold was announced: it is in the
  ``retracted`` of a GapNotice (or older than what a notice marked not exact lists: a reader
  with a short ``history`` forgot it), and the notices give the reason expected (a failover,
  never a restart).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from echomq import GapNotice, GapReason
from echomq.events.entries import parse_stream_id

from support.stream_servers import EventLog


class EntryProducer:
    """A thread appending ``{"event": "waiting", "jobId": n}`` entries to ``key`` until stopped."""

    def __init__(self, client_factory: Callable[[], Any], key: str, *, pause_s: float = 0.0, tag: str = "") -> None:
        self._client_factory = client_factory
        self.key = key
        self.tag = tag  # prefixes the job ids: two producers' entries never look alike
        self.pause_s = pause_s
        self.acked: list[str] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="entry-producer", daemon=True)

    def start(self) -> EntryProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        client = self._client_factory()
        n = 0
        try:
            while not self._stop.is_set():
                n += 1
                try:
                    entry_id = client.xadd(self.key, {"event": "waiting", "jobId": f"{self.tag}{n}"})
                except (redis.RedisError, OSError):
                    self.errors += 1
                    self._stop.wait(0.02)
                    continue
                self.acked.append(entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id))
                if self.pause_s:
                    self._stop.wait(self.pause_s)
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


@dataclass
class Verdict:
    """What the books say; ``problems`` is empty when the reader did what it promises."""

    problems: list[str]
    figures: dict[str, int] = field(default_factory=dict)


def _sorted(entry_ids: Iterable[str]) -> list[str]:
    return sorted(entry_ids, key=parse_stream_id)


#: An entry as the books know it: its id and its job id (two masters may give the same id to
#: two different entries: the same millisecond, each its own sequence).
Seen = tuple[str, str]


def delivered_entries(log: EventLog) -> list[Seen]:
    with log.cond:
        return [(d["event_id"], d.get("jobId", "")) for t, d in log.items if not isinstance(t, GapNotice)]


def judge(log: EventLog, final_stream: list[Seen], started_at: str, reason: GapReason) -> Verdict:
    """``final_stream``: the entries the final master holds; ``started_at``: the id the reader's
    ``"$"`` resolved to (entries up to it were written before the reader started)."""
    delivered = delivered_entries(log)
    notices = log.notices()
    start = parse_stream_id(started_at)
    problems: list[str] = []
    held = set(final_stream)
    expected = [i for i in final_stream if parse_stream_id(i[0]) > start]
    missed = [i for i in expected if i not in set(delivered)]
    # A notice that is not exact counts the entries it took as delivered without comparing
    # them (its reader forgot where the streams part): at most that many may be missed.
    unchecked = sum(n.approx_lost or 0 for n in notices if not n.exact)
    if len(missed) > unchecked:
        problems.append(f"{len(missed)} entries of the final stream never delivered: {missed[:5]}")
    twice = len(delivered) - len(set(delivered))
    if twice:
        problems.append(f"{twice} entries delivered twice")
    retracted = {(d["event_id"], d.get("jobId", "")) for n in notices for _, d in n.retracted}
    not_held = [i for i in delivered if i not in held]
    unannounced = [i for i in not_held if i not in retracted]
    # A notice that is not exact says the reader forgot older deliveries (``history``): those
    # older than what it lists may be missing too, and it says so.
    for notice in notices:
        if not notice.exact:
            listed = [parse_stream_id(d["event_id"]) for _, d in notice.retracted]
            bound = min(listed) if listed else parse_stream_id(notice.to_id)
            unannounced = [i for i in unannounced if parse_stream_id(i[0]) > bound]
    if unannounced:
        problems.append(f"{len(unannounced)} delivered entries the final stream lacks were not announced: "
                        f"{unannounced[:5]}")
    wrongly = [i for i in retracted if i in held and i in delivered]
    wrong_reasons = [n for n in notices if n.reason is not reason]
    if wrong_reasons:
        problems.append(f"notices with another reason than {reason}: {wrong_reasons}")
    order = [i for i in delivered if i in held]
    if order != [i for i in final_stream if i in set(order)]:
        problems.append("entries of the final stream were delivered out of its order")
    below = _below_cursor(log)
    figures = {"delivered": len(delivered), "missed_unchecked": len(missed), "final_stream_after_start": len(expected),
               "retracted": len(retracted), "retracted_but_held": len(wrongly),
               "not_held": len(not_held), "notices": len(notices),
               "delivered_below_cursor": below}
    return Verdict(problems, figures)


def _below_cursor(log: EventLog) -> int:
    """How many entries were delivered with an id below one delivered before them."""
    highest: tuple[int, int] | None = None
    below = 0
    for event_type, data in list(log.items):
        if isinstance(event_type, GapNotice):
            continue
        key = parse_stream_id(data["event_id"])
        if highest is not None and key < highest:
            below += 1
        highest = key if highest is None or key > highest else highest
    return below


def wait_quiet(log: EventLog, final_ids: Callable[[], list[Seen]], timeout: float = 30.0) -> list[Seen]:
    """Until the reader delivered the final stream's newest entry; the final stream's entries."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ids = final_ids()
        except (redis.RedisError, OSError):
            ids = []
        if ids and ids[-1] in set(delivered_entries(log)):
            return ids
        if time.monotonic() >= deadline:
            return ids
        time.sleep(0.05)
