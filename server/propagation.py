"""The one path a write's effects take out of the server, and the feeds along it.

A write command's effects (the command as it must be replayed: XADD with the real
ID, BLPOP as LPOP, lazy-expiry DELs, a transaction's commands wrapped in
MULTI/EXEC) leave the server in one place, as in Redis's propagateNow:

    Server.call/execute -> Server._after_write -> Server.propagate -> each named feed

The feeds, called in this order for every unit of effects:

- ``aof``: the append-only file's writer (server/disk.py, ``_feed_aof``),
  attached while the AOF is on or its first rewrite is under way;
- ``replication``: the master side of replication (server/replication/master.py,
  ``_feed_replicas``): every replica's stream and the backlog, attached while
  either exists;
- ``observer``: an in-process watcher that sees every unit as the replication feed
  does (the tests' in-process servers record effects through it); never set by the
  running server;
- ``active_active``: the Active-Active engine (server/activeactive/engine.py), while the
  mode is on. It is called *first*, with the unit and whether the AOF is on: it stamps
  the unit's CRDT ops as this instance's next effect and returns the effect's record
  (made only when the AOF is on; None when the unit made no ops), which the AOF then
  keeps beside the commands. Replicas get the commands only. A peer's effect,
  once applied, takes ``Server.propagate_applied``: its record to the AOF, the ordinary
  commands that mirror it to the replicas.

A feed is attached only while it has somewhere to put effects. ``server.propagating``
says whether any is: command handlers ask it before building effects (an XCLAIM
per claimed entry) that nobody would record, and the dispatcher asks it before
calling ``_after_write`` at all, so a server with no AOF and no replicas pays one
attribute test per write. ``server.commands_wanted`` says whether a feed other than
Active-Active's is (that one takes its ops from the streams, never the commands): XADD
asks it before rewriting its argv with the real ID.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import Server

# One unit of effects: (db id, argv) pairs, applied together.
Ops = list[tuple[int, list[bytes]]]
Feed = Callable[[Ops], Any]
# The Active-Active feed also hears whether a record is wanted (the AOF is on).
RecordingFeed = Callable[[Ops, bool], Any]

FEEDS = ("aof", "replication", "observer", "active_active")


class Propagation:
    """The named feeds of one server; ``Server.propagate`` calls them by name."""

    __slots__ = ("server", *FEEDS)

    def __init__(self, server: Server) -> None:
        self.server = server
        self.aof: Feed | None = None
        self.replication: Feed | None = None
        self.observer: Feed | None = None
        self.active_active: RecordingFeed | None = None

    def attach(self, name: str, feed: Feed | RecordingFeed) -> None:
        """Make ``feed`` the feed called ``name`` (one of FEEDS)."""
        if name not in FEEDS:
            raise ValueError(f"no propagation feed named {name!r}")
        setattr(self, name, feed)
        self._refresh()

    def detach(self, name: str) -> None:
        """The feed called ``name`` has nowhere to put effects any more."""
        if name not in FEEDS:
            raise ValueError(f"no propagation feed named {name!r}")
        setattr(self, name, None)
        self._refresh()

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """No feed gets anything meanwhile: loading the AOF replays commands that are
        already in it and already in every replica's stream."""
        saved = [getattr(self, name) for name in FEEDS]
        for name in FEEDS:
            setattr(self, name, None)
        self._refresh()
        try:
            yield
        finally:
            for name, feed in zip(FEEDS, saved, strict=True):
                setattr(self, name, feed)
            self._refresh()

    def _refresh(self) -> None:
        commands = self.aof is not None or self.replication is not None or self.observer is not None
        self.server.commands_wanted = commands
        # Active-Active's feed, while no other is attached, is called straight from the
        # dispatcher's loop (fastpath.execute_all) rather than through _after_write.
        self.server.aa_seal = None if commands else self.active_active
        self.server.propagating = commands or self.active_active is not None
