"""gunicorn configuration of the test project: the documented hooks, nothing else."""

from echomq.contrib.gunicorn import post_worker_init, worker_exit  # noqa: F401 - gunicorn reads them here
