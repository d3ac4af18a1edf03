"""The one time source: epoch milliseconds, the unit of every timestamp in the protocol.

Every component takes ``clock=`` (any callable returning epoch ms, see ``echomq.types.Clock``)
and hands it to whatever it builds: a Worker gives its clock to the JobScheduler that produces
the next iteration and to the jobs its processor receives, a Queue to the jobs it returns. So
one clock drives every timestamp EchoMQ writes (``timestamp``, ``processedOn``, ``finishedOn``,
due times, scheduler slots, the clean cutoff): no Lua script reads the server's TIME.

What a clock cannot steer: Redis key expiry (locks, deduplication ttl, the stalled-check
guard), blocking timeouts (BZPOPMIN, XREAD BLOCK) and the monotonic deadlines of ``close()``.
Those run on real time by nature.
"""

from __future__ import annotations

import time


def system_clock() -> int:
    """Now, in epoch milliseconds: the default clock of every component."""
    return int(time.time() * 1000)
