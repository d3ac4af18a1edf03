"""The host layer: what the Django and Flask integrations share, framework-neutral.

Each integration is a thin adapter over it: it reads its framework's configuration (Django's
``settings.ECHOMQ``, Flask's ``app.config["ECHOMQ_*"]``), names the keys the way its users spell
them, and says when its process is under test or may start events readers. Everything else has
one home here, with one set of rules and messages:

- ``settings``: the keys both read (``URL``, ``CONNECTION``, ``PREFIX``, ``QUEUES``,
  ``SCHEDULES``, ``LISTENERS``, ``WORKER_NAME``, ``TEST_CONNECTION``,
  ``SCHEDULES_CHECK_INTERVAL``), their defaults and their checks, each problem with the id
  Django's system check reports;
- ``host``: a project's registry on the connection the settings give (or, under test, the test
  connection), its schedule sync and its worker command;
- ``readers``: one QueueEvents reader per queue and per process, started where the adapter
  allows, a failed automatic start logged and tried again later;
- ``keeper``: declared schedules whose Redis data was lost re-created by the worker processes.

Nothing here imports Django or Flask.
"""
