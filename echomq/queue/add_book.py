"""What a producer remembers of its own adds, so that no id names two jobs after a failover and
every add it can tell was lost is reported (docs/protocol.md §1.4, docs/deployment.md).

A job id without ``job_id`` is the queue's ``id`` counter, INCRed by the add script. When a
failover (or a restart without persistence) loses the last writes, the new master's counter is
behind the ids producers were already handed: the next adds would get those ids again, and
``get_job(id)`` would answer a new job to whoever holds the old id. So every add sends the
highest id this Queue was handed and a margin; an add script that finds the counter at or
below that id moves it to ``highest + margin`` and says so. The margin is how many ids the
queue hands out in :data:`LOSS_HORIZON_S` at the rate this producer has watched the counter
rise (all producers' adds share it), at least :data:`MIN_MARGIN`, so ids other producers were
handed in the lost window are skipped too.

When the counter went back, the ids this Queue was handed from there on name no job on the new
master: they were lost. They are logged (a WARNING naming how many and which) and kept in
:attr:`AddBook.lost_job_ids`. Another producer's highest id may be below what the counter went
back to while ids it was handed are lost above (another Queue added last): its INCR is not
behind its own ids, and it would be handed one of those. So a Queue that learns its master
changed (the transport counts moves on the pool: a Sentinel switch, a cluster slot that moved)
sends its first add after it with ARGV[14] = "1" (also an add sent again because it did not run
while the master moved): that add moves the counter past what it gives by the margin too,
whatever this Queue's own highest. Then it reads meta ``idGap``, where every producer that moved
the counter appended the range of ids no job got, and reports its own ids in them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..protocol.codec import text
from .enqueue import check_add_result

log = logging.getLogger(__name__)

#: How long, at the queue's add rate, the margin covers: other producers may take that long to
#: leave a failed master (a BullMQ producer follows ``SENTINEL MASTERS``, seconds behind).
LOSS_HORIZON_S = 5.0
#: The least margin: ids are cheap (BullMQ reads any), and the rate of producers this one does
#: not see (before its first measure, a BullMQ producer) is unknown.
MIN_MARGIN = 1000
#: How often the rate is measured.
_RATE_SAMPLE_S = 1.0
#: The adds remembered to tell which were lost (a few seconds at full rate).
_RECENT = 50_000
#: Lost ids kept on the Queue for the caller (the oldest dropped first).
_LOST_KEPT = 10_000


class AddBook:
    """One Queue's highest id, its view of the add rate, and its recent adds (thread-safe)."""

    def __init__(self, queue_name: str) -> None:
        self.queue_name = queue_name
        self.highest = 0
        self._margin = str(MIN_MARGIN)
        self._sample_at = time.monotonic()
        self._sample_highest = 0
        self._recent: deque[int] = deque(maxlen=_RECENT)
        self.lost_job_ids: deque[str] = deque(maxlen=_LOST_KEPT)
        self._lock = threading.Lock()
        self.moves_seen = 0
        self._count = 0

    def floor_args(self, moved: bool = False) -> list[Any]:
        """ARGV[12..14] of an add (lua/includes/prepareNewJob.lua); ``moved``: the first add
        after a master move, which moves the counter past what its INCR gives too. The highest
        id goes as an int: the packer writes it in decimal."""
        if moved:
            return [self.highest or "", self._margin, "1"]
        return [self.highest or "", self._margin]  # ARGV[14] absent: no move seen

    def reset(self) -> None:
        """The queue was obliterated on purpose: its ids start again."""
        with self._lock:
            self.highest = self._sample_highest = 0
            self._recent.clear()

    def handed(self, reply: Any, custom_id: str) -> str:
        """Note an add's reply; its job id. A reply ``[id, n]`` says the counter had gone back to n.

        The hot path of every add: no lock (a race of two threads can only leave ``highest`` one
        add behind until the next), the rate measured every 256 adds."""
        if type(reply) is list:
            return self._handed_after_rollback(reply, custom_id)
        job_id = reply.decode() if type(reply) is bytes else str(reply)
        if custom_id:
            return job_id
        number = int(job_id)
        if number > self.highest:
            self.highest = number
        self._recent.append(number)
        self._count += 1
        if not self._count & 255:
            self._measure()
        return job_id

    def handed_many(self, replies: Sequence[Any], calls: Sequence[Any]) -> list[str]:
        """:meth:`handed` for a bulk's replies (``calls`` carry each ``custom_id``), with the
        book updated once: a bulk's auto ids rise along it, so its last is its highest."""
        ids: list[str] = []
        autos: list[str] = []
        for reply, call in zip(replies, calls):
            if type(reply) is bytes and not call.custom_id:
                job_id = reply.decode()
                ids.append(job_id)
                autos.append(job_id)
            elif isinstance(reply, int):
                ids.append(check_add_result(reply, call))  # a refusal: raised
            else:
                ids.append(self.handed(reply, call.custom_id))
        if autos:
            number = int(autos[-1])
            if number > self.highest:
                self.highest = number
            self._recent.extend(map(int, autos))
            before, self._count = self._count, self._count + len(autos)
            if before >> 8 != self._count >> 8:
                self._measure()
        return ids

    def _measure(self) -> None:
        now = time.monotonic()
        if now - self._sample_at >= _RATE_SAMPLE_S:
            rate = (self.highest - self._sample_highest) / (now - self._sample_at)
            self._margin = str(max(MIN_MARGIN, int(rate * LOSS_HORIZON_S) + 1))
            self._sample_at, self._sample_highest = now, self.highest

    def _handed_after_rollback(self, reply: list[Any], custom_id: str) -> str:
        rolled_back = int(reply[1])
        job_id = text(reply[0])
        if custom_id or not job_id.isdigit():
            self.report_gap(rolled_back, self.highest + 1, by_this_add=True)
            return job_id
        number = int(job_id)
        self.report_gap(rolled_back, number, by_this_add=True)
        self.highest = max(self.highest, number)
        self._recent.append(number)
        return job_id

    def report_gap(self, start: int, end: int, *, by_this_add: bool = False) -> None:
        """Ids in ``start <= id < end`` name no job on the master: report the ones this Queue holds."""
        with self._lock:
            self._report_locked(start, end, by_this_add=by_this_add)

    def _report_locked(self, start: int, end: int, *, by_this_add: bool) -> None:
        lost = sorted({n for n in self._recent if start <= n < end})
        if not lost:
            if by_this_add:
                log.info("queue %s: the id counter was moved past a failover (from %d); none of this producer's "
                         "adds was lost", self.queue_name, start)
            return
        self._recent = deque((n for n in self._recent if not start <= n < end), maxlen=_RECENT)
        shown = ", ".join(map(str, lost[:10])) + (f" and {len(lost) - 10} more" if len(lost) > 10 else "")
        log.warning("queue %s: %d acknowledged add(s) are not on the master (a failover or a restart lost them; "
                    "%s): job ids %s. The id counter was moved past them, so no new job takes their ids",
                    self.queue_name, len(lost), "found by this add" if by_this_add else "found after a master move",
                    shown)
        self.lost_job_ids.extend(map(str, lost))

    def check_gap(self, client: Any, meta_key: str) -> None:
        """After a master move: read meta ``idGap`` (``"<from>:<to>,..."``, the last ranges of ids no
        job got) and report this Queue's ids in them."""
        raw = client.hget(meta_key, "idGap")
        if raw is None:
            return
        for gap in text(raw).split(","):
            start, _, end = gap.partition(":")
            if start.isdigit() and end.isdigit():
                self.report_gap(int(start), int(end))
