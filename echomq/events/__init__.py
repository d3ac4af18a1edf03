"""Live job events (docs/events.md): ``queue_events`` (the QueueEvents reader thread and its
lifecycle), ``delivery`` (handing each read's entries on, the hot path), ``subscribers`` (who
gets each event, the Handler base class), ``cursor`` (where the reader stands and what was
trimmed ahead of it, what it delivered), ``divergence`` (a stream replaced under the reader:
a failover, a restart), ``switches`` (running those settlements), ``reads`` (XINFO + XREAD),
``entries`` (stream ids and reply shapes) and ``settings`` (the checks that refuse bad settings at construction).
The wire contract itself, the event types and their decoding, is ``protocol.events``.
"""

from ..protocol.events import EventType, GapNotice, GapReason, parse_event_type
from .queue_events import QueueEvents
from .subscribers import EVENT_TAG, GAP_TAG, Handler

__all__ = ["EVENT_TAG", "GAP_TAG", "EventType", "GapNotice", "GapReason", "Handler", "QueueEvents",
           "parse_event_type"]
