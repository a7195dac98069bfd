"""Client-side caching: the tracking table and invalidation messages (Redis's tracking.c).

A client that turns CLIENT TRACKING on has the keys of its read-only commands
remembered here (key -> ids of clients that may cache it); when such a key is
modified, each of those clients is sent one ``invalidate`` message and the
key is forgotten until read again. In BCAST mode nothing is remembered:
every modified key that starts with one of the client's prefixes is collected
during the loop iteration and broadcast once, before replies are written.

Messages are RESP3 pushes (``>2 invalidate [keys]``) on the client's own
connection, or go to the connection named by REDIRECT: a push there too if it
speaks RESP3, else a Pub/Sub message on ``__redis__:invalidate`` when it is
subscribed. A flush invalidates everything with a null instead of a key list.
Keys are global, as in Redis: a write in any database invalidates the name.

The server drives this object: ``remember`` after each read-only command,
``invalidate`` from the keyspace's modification signal (the keyspace signals
every key while the table or a prefix needs it), ``begin``/``end`` around each
top-level command so that a client's own invalidations follow its reply, and
``limit`` to keep the table within ``tracking-table-max-keys``.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from rill.protocol.reply import Push, Raw

from .client import (
    TRACKING_BCAST,
    TRACKING_BROKEN_REDIR,
    TRACKING_CACHING,
    TRACKING_NOLOOP,
    TRACKING_ON,
    TRACKING_OPTIN,
    TRACKING_OPTOUT,
)
from .commands.table import PUBSUB

if TYPE_CHECKING:
    from .client import Client
    from .commands.table import Command
    from .server import Server

CHANNEL = b"__redis__:invalidate"
# "Everything is invalid", in the protocol of the client that tracks (Redis sends the
# tracking client's null even when the message goes to a redirect of the other protocol).
_NULL = {False: Raw(b"$-1\r\n"), True: Raw(b"_\r\n")}


class Prefix:
    """One BCAST prefix: its subscribers, and the keys modified since the last broadcast
    with the client that modified each last (None for expiry), for NOLOOP."""

    __slots__ = ("clients", "keys")

    def __init__(self) -> None:
        self.clients: dict[Client, None] = {}
        self.keys: dict[bytes, Client | None] = {}


class Tracking:
    """The tracking table, the BCAST prefixes and the invalidations waiting to be sent."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.table: dict[bytes, dict[int, None]] = {}  # key -> ids of clients that may cache it
        self.items = 0  # ids summed over the table (INFO tracking_total_items)
        self.prefixes: dict[bytes, Prefix] = {}
        self.clients = 0  # clients with tracking on (INFO tracking_clients)
        # The client whose command runs now; invalidations it causes for itself wait in
        # ``pending`` (a key, or None for a flush) until its reply is queued.
        self.current: Client | None = None
        self.pending: list[bytes | None] = []
        self._broadcast_scheduled = False
        self._limit_rounds = 0

    # -- client state ----------------------------------------------------------
    def enable(self, c: Client, redirect: int, options: int, prefixes: list[bytes]) -> None:
        """CLIENT TRACKING ON with checked options (enableTracking)."""
        if not c.tracking:
            self.clients += 1
        c.tracking = TRACKING_ON | (c.tracking & TRACKING_CACHING)
        c.tracking_redir = redirect
        if options & TRACKING_BCAST:
            c.tracking |= TRACKING_BCAST
            for prefix in prefixes or [b""]:
                state = self.prefixes.get(prefix)
                if state is None:
                    state = self.prefixes[prefix] = Prefix()
                state.clients[c] = None
                if c.tracking_prefixes is None:
                    c.tracking_prefixes = {}
                c.tracking_prefixes[prefix] = None
        c.tracking |= options & (TRACKING_OPTIN | TRACKING_OPTOUT | TRACKING_NOLOOP)
        self._update()

    def disable(self, c: Client) -> None:
        """CLIENT TRACKING OFF, RESET, or the client is gone (disableTracking).

        Its ids stay in the table: they are dropped lazily, when their keys are
        invalidated, as Redis does, so a client that tracked many keys leaves cheaply.
        """
        if c.tracking_prefixes is not None:
            for prefix in c.tracking_prefixes:
                state = self.prefixes[prefix]
                del state.clients[c]
                if not state.clients:
                    del self.prefixes[prefix]
            c.tracking_prefixes = None
        if c.tracking:
            self.clients -= 1
            c.tracking = 0
        self._update()

    def _update(self) -> None:
        """Keep the server's gates in step: commands take the path that remembers keys
        while a client tracks; the keyspace signals every modification while a key or
        prefix may need an invalidation."""
        server = self.server
        server.tracking_active = self.clients > 0
        server.keyspace.set_signal_all(bool(self.table or self.prefixes))

    # -- reads -------------------------------------------------------------------
    def remember(self, c: Client, cmd: Command, argv: list[bytes]) -> None:
        """After a read-only command of ``c`` (or of a script ``c`` runs): its keys
        (trackingRememberKeys). ``cmd``/``argv`` are what declares the keys: the
        command itself, or for a script the EVAL/FCALL that called it."""
        flags = c.tracking
        if not flags & TRACKING_ON or flags & TRACKING_BCAST:
            return
        if flags & TRACKING_OPTIN and not flags & TRACKING_CACHING:
            return
        if flags & TRACKING_OPTOUT and flags & TRACKING_CACHING:
            return
        if cmd.flags & PUBSUB:
            return  # shard channels are keys only for routing, never cached
        positions = cmd.key_positions(argv)
        if not positions:
            return
        table = self.table
        was_empty = not table
        cid = c.id
        for pos in positions:
            key = argv[pos]
            ids = table.get(key)
            if ids is None:
                ids = table[key] = {}
            if cid not in ids:
                ids[cid] = None
                self.items += 1
        if was_empty:
            self._update()

    # -- writes ------------------------------------------------------------------
    def invalidate(self, key: bytes, modifier: Client | None, bcast: bool = True) -> None:
        """``key`` was modified (by ``modifier``; None for expiry and evictions of the
        table itself): tell the clients that may cache it (trackingInvalidateKey)."""
        if bcast and self.prefixes:
            scheduled = False
            for prefix, state in self.prefixes.items():
                if key.startswith(prefix):
                    state.keys[key] = modifier
                    scheduled = True
            if scheduled:
                self._schedule_broadcast()
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.items -= len(ids)
        if not self.table:
            self._update()
        clients = self.server.clients
        current = self.current
        for cid in ids:
            target = clients.get(cid)
            if target is None or not target.tracking & TRACKING_ON or target.tracking & TRACKING_BCAST:
                continue
            if target is current:
                if target.tracking & TRACKING_NOLOOP:
                    continue
                self.pending.append(key)  # after the reply to the command running now
            else:
                self.send(target, [key])

    def flushed(self) -> None:
        """FLUSHALL/FLUSHDB (or a reload): every tracking client learns that all its
        keys are invalid, and the table is emptied (trackingInvalidateKeysOnFlush)."""
        if self.clients:
            for c in list(self.server.clients.values()):
                if c.tracking:
                    if c is self.current:
                        self.pending.append(None)
                    else:
                        self.send(c, None)
        if self.table:
            self.table = {}
            self.items = 0
            self._update()

    # -- the command boundary ----------------------------------------------------
    def begin(self, c: Client) -> None:
        """Before a top-level command of ``c``: trim the table, then hold ``c``'s own
        invalidations until its reply is out (processCommand's part)."""
        if self.clients and self.table:
            self.limit()
        self.current = c

    def end(self, c: Client, cmd_name: bytes) -> None:
        """After ``c``'s top-level command: its held invalidations follow the reply
        (afterCommand), and CLIENT CACHING's one-command effect ends unless the command
        was CLIENT or is queued in a transaction (resetClient)."""
        self.current = None
        if self.pending:
            self._send_pending(c)
        if c.tracking & TRACKING_CACHING and c.multi is None and cmd_name.lower() != b"client":
            c.tracking &= ~TRACKING_CACHING

    def hold(self, c: Client) -> tuple[Client | None, list[bytes | None]]:
        """Make ``c`` the current client for a while (a blocked client being served
        inside another's command); returns what ``release`` restores."""
        held = (self.current, self.pending)
        self.current, self.pending = c, []
        return held

    def release(self, c: Client, held: tuple[Client | None, list[bytes | None]]) -> None:
        if self.pending:
            self._send_pending(c)
        self.current, self.pending = held

    def _send_pending(self, c: Client) -> None:
        pending, self.pending = self.pending, []
        for key in pending:
            self.send(c, [key] if key is not None else None)

    # -- delivery ------------------------------------------------------------------
    def send(self, c: Client, keys: list[bytes] | None) -> None:
        """One invalidation message for tracking client ``c`` (sendTrackingMessage)."""
        target = c
        redirected = False
        if c.tracking_redir:
            target = self.server.clients.get(c.tracking_redir)
            if target is None:
                c.tracking |= TRACKING_BROKEN_REDIR
                if c.resp3:
                    c.push(Push([b"tracking-redir-broken", c.tracking_redir]))
                return
            redirected = True
        value = keys if keys is not None else _NULL[c.resp3]
        if target.resp3:
            target.push(Push([b"invalidate", value]))
        elif redirected and target.subscriptions:
            target.push(Push([b"message", CHANNEL, value]))

    def _schedule_broadcast(self) -> None:
        if self._broadcast_scheduled:
            return
        loop = self.server.loop
        if loop is None:
            return  # in-process use: broadcast() is called by hand
        self._broadcast_scheduled = True
        loop.call_soon(self.broadcast)

    def broadcast(self) -> None:
        """Send each prefix's modified keys to its subscribers, once per loop iteration
        (trackingBroadcastInvalidationMessages); NOLOOP clients miss their own changes."""
        self._broadcast_scheduled = False
        for state in list(self.prefixes.values()):
            if not state.keys:
                continue
            keys, state.keys = state.keys, {}
            everything = sorted(keys)
            for c in list(state.clients):
                if c.tracking & TRACKING_NOLOOP:
                    own = [k for k in everything if keys[k] is not c]
                    if own:
                        self.send(c, own)
                else:
                    self.send(c, everything)

    # -- the table's size ------------------------------------------------------------
    def limit(self) -> None:
        """Keep the table within tracking-table-max-keys by invalidating keys as if they
        had changed (trackingLimitUsedSlots): up to 100 per call, 100 more each time a
        call could not get under the limit. Redis picks them by random walk; the oldest
        entries go first here, which a dict gives without a scan."""
        max_keys = self.server.config.int("tracking-table-max-keys")
        table = self.table
        if not max_keys or len(table) <= max_keys:
            self._limit_rounds = 0
            return
        effort = 100 * (self._limit_rounds + 1)
        for key in list(islice(table, min(effort, len(table) - max_keys))):
            self.invalidate(key, None, bcast=False)
        if len(self.table) <= max_keys:
            self._limit_rounds = 0
        else:
            self._limit_rounds += 1

    # -- introspection ---------------------------------------------------------------
    def info(self, c: Client) -> dict:
        """CLIENT TRACKINGINFO's fields for ``c``."""
        flags = c.tracking
        names = [b"on" if flags & TRACKING_ON else b"off"]
        if flags & TRACKING_BCAST:
            names.append(b"bcast")
        if flags & TRACKING_OPTIN:
            names.append(b"optin")
            if flags & TRACKING_CACHING:
                names.append(b"caching-yes")
        if flags & TRACKING_OPTOUT:
            names.append(b"optout")
            if flags & TRACKING_CACHING:
                names.append(b"caching-no")
        if flags & TRACKING_NOLOOP:
            names.append(b"noloop")
        if flags & TRACKING_BROKEN_REDIR:
            names.append(b"broken_redirect")
        return {
            "flags": names,
            "redirect": c.tracking_redir if flags & TRACKING_ON else -1,
            "prefixes": sorted(c.tracking_prefixes or ()),
        }
