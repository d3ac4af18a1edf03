"""Live job events (docs/events.md): ``queue_events`` (the QueueEvents reader thread and its
lifecycle), ``delivery`` (handing each read's entries on, the hot path), ``subscribers`` (who
gets each event, the Handler base class), ``reads`` (XINFO + XREAD), ``cursor`` (where the
reader stands, what it delivered, what was trimmed ahead of it), ``servers`` (a failover or a
restart under the reader?), ``divergence`` (what to deliver from a stream that replaced the one
it read), ``switches`` (running those settlements), ``entries`` (stream ids and reply shapes)
and ``settings`` (the checks that refuse bad settings at construction). The wire contract
itself, the event types and their decoding, is ``protocol.events``.
"""

from ..protocol.events import EventType, GapNotice, GapReason, parse_event_type
from .queue_events import QueueEvents
from .subscribers import EVENT_TAG, GAP_TAG, Handler

__all__ = ["EVENT_TAG", "GAP_TAG", "EventType", "GapNotice", "GapReason", "Handler", "QueueEvents",
           "parse_event_type"]
