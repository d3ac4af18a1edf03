"""Running worker processes: the worker command's core, for every host that runs it.

``echomq worker`` (``echomq.cli.worker``), ``manage.py echomq_worker`` and ``flask echomq worker``
(``echomq.contrib``) are one command: its options (``arguments``), what it loads (``loading``),
its plan and start (``command``), each worker process (``serving``), the supervisor of a pool
(``supervisor``), what stops them (``signals``) and how they log (``logformat``). It lives below
the command line and the framework integrations so that both use it and neither imports the
other.

This is the hosts' code, not the library's: it installs signal handlers, configures logging and
writes to stderr, which no library module does. Call it only from a command's main thread
(``run_worker`` returns the command's exit status); an application's own code uses ``Worker``.
"""
