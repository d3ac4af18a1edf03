"""Integrations with other tools, each behind an extra of its own so the core needs nothing more:
``echomq.contrib.prometheus`` (``pip install 'echomq[prometheus]'``). Nothing here is imported
by ``echomq`` itself; import the module you use.
"""
