"""The Worker and its parts (docs/worker.md): ``worker`` (threads, start and shutdown),
``options`` (its settings), ``fetcher`` (taking jobs, the marker wait), ``processing`` (running
and finishing attempts), ``active_job`` (the job a processor receives), ``retry`` (backoff and
stack traces), ``transitions`` (the worker's scripts), ``maintenance`` (lock renewal and the
stalled check) and ``listeners`` (the hooks a host gives a Worker).
"""

from .active_job import ActiveJob
from .listeners import WorkerListener
from .worker import Worker

__all__ = ["ActiveJob", "Worker", "WorkerListener"]
