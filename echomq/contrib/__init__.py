"""Integrations with other tools, each behind an extra of its own so the core needs nothing more:
``echomq.contrib.django`` and ``echomq.contrib.flask`` (thin adapters over the framework-neutral
host layer, ``echomq.contrib.host``), ``echomq.contrib.gunicorn``, ``echomq.contrib.prometheus``
(``pip install 'echomq[prometheus]'``), and ``echomq.contrib.schedules_sync``, the declared
schedules' sync. Nothing here is imported by ``echomq`` itself; import the module you use.
"""
