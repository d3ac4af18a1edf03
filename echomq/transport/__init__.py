"""The only code below redis-py's command API: ``connection`` (resolving, owning and closing
connections, dedicated clients), ``scripts`` (the Lua loader and each script's contract),
``calls`` (the one script runner and its pinned and pipelined fast paths) and ``blocking``
(dedicated blocking reads and how to interrupt them)."""
