"""The one fault after which a command may always be sent again: it did not run.

A connection that finds out, before it sends, that its server is no longer the master (the
sentinels named another, a ``+switch-master``, a cluster slot that moved), or a server that
answers ``MOVED``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN`` or ``READONLY`` (refused
before the command ran, or at a script's first write, so nothing was written), raises
:class:`NotRunError`. It is a ``redis.ConnectionError``, so every reconnect loop handles it
as it handles a lost connection; the executor (``stream_calls.run_calls``) resends such calls itself
(docs/deployment.md, "When an add is sent again").

Any other connection error after a command was sent leaves its outcome unknown: the server may
have run it and the reply been lost. Only the caller can decide to send it again
(``echomq.errors.OutcomeUnknownError`` for an add).
"""

from __future__ import annotations

import redis


class NotRunError(redis.ConnectionError):
    """The command was not run (nothing was written): sending it again is safe.

    ``code`` is what told so: a server's error code (``"MOVED"``, ``"READONLY"`` ...),
    ``"DEMOTING"`` (the sentinels are promoting another node), ``"MOVED-MASTER"`` (they named
    another master) or ``"REFUSED"`` (the connection could not be opened)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
