"""Cron patterns in BullMQ 6.7's dialect, and when they run next in a time zone.

``parse`` reads a pattern into value sets, ``tables`` turns them into calendar lookups,
``evaluate`` maps matching wall times to instants across daylight-saving changes, ``walk``
models cron-parser's search near the transitions where its answers follow no simple rule, and
``zones`` reads a ``tz`` as BullMQ does. Everything is pure: no Redis, the reference time is
always a parameter. docs/cron.md is the full account of the dialect and the DST rules.
"""

from .evaluate import CronSchedule, compile_schedule
from .parse import FIELD_NAMES, NICKNAMES, CronFields, parse_pattern, split_fields
from .zones import Zone, resolve_zone, tzinfo_for

__all__ = ["FIELD_NAMES", "NICKNAMES", "CronFields", "CronSchedule", "Zone", "compile_schedule", "parse_pattern",
           "resolve_zone", "split_fields", "tzinfo_for"]
