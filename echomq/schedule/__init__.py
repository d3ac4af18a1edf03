"""Job schedulers: recurring jobs by ``every`` (ms) or a cron ``pattern``, on BullMQ 6.7's
``repeat`` keys (docs/scheduler.md, docs/protocol.md §4).

``scheduler`` is the JobScheduler (upsert, produce_next, read, remove; ``operate`` its pause,
resume, run_now and history, ``misfire`` the missed-run policies), ``records`` what it
hands back, ``spec`` the one validator of repeat options (``dates`` its ranges and date forms),
``step`` the client's half of the worker step, ``repair`` the maintenance pass that gives a
scheduler that lost its pending iteration a new one, ``next_run`` the pure next-run function,
``cron`` the pattern dialect and its time zones.
"""

from .next_run import calculate_next_millis
from .records import Iteration, SchedulerRecord, ScheduleRun
from .scheduler import JobScheduler

__all__ = ["Iteration", "JobScheduler", "ScheduleRun", "SchedulerRecord", "calculate_next_millis"]
