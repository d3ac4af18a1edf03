"""The producer's and operator's side: Queue (add, flows, admin) and Job (one job's hash).

``queue`` is the Queue, ``job`` a Job and the single-job operations, ``enqueue`` the planning
of add calls, ``flows`` parents and children, ``admin`` counts, listings and queue-wide
operations.
"""

from .job import Job
from .queue import Queue

__all__ = ["Job", "Queue"]
