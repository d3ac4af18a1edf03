"""Helpers the tests share: seeding jobs without a Queue (``workers``), reading a queue's events
and keys back (``queues``)."""
