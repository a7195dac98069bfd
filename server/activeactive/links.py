"""Active-Active peer links: one outbound connection per configured peer, carrying this
instance's own effects to it (docs/active-active.md, "The link protocol").

A link's life:

1. dial the peer (server/outbound.py: the same connection a replica makes to its master,
   TLS when ``tls-replication`` is yes), log in with ``active-active-user``/``-auth``, and
   send ``ACTIVEACTIVE HELLO <my-id> <my-vc>``;
2. the reply names the peer's region and clock; its entry for this instance is how many of
   our effects it has applied. If the backlog still holds every effect after that, the link
   resumes there (partial sync). Otherwise, or when the reply asks for it, a forked child serialises the whole
   Active-Active state (``state.dump_state``) into a pipe, and the parent streams it to the
   peer as ``ACTIVEACTIVE MERGE`` as fast as the peer takes it, never blocking the loop
   (full sync); the effects made after the fork follow;
3. from then on the effects the engine seals go out in ``ACTIVEACTIVE APPLY`` commands,
   pipelined: once per loop iteration for all effects sealed in it, each APPLY carrying a
   run of compact records as the backlog holds them (at most ``APPLY_BATCH`` bytes), while
   the socket takes them; past its high-water mark the rest waits in the backlog until the
   transport drains. Each reply is the peer's applied count of our effects, its
   acknowledgement. An idle link sends
   ``ACTIVEACTIVE PING <my-id> <vc>`` every 100 ms, which is acknowledged the same way;
4. any error, or silence past ``repl-timeout`` with requests outstanding, drops the link;
   it is dialled again after a backoff (0.1 s doubling to 5 s; reset by a good handshake).

PAUSE stops what a link sends (effects queue in the backlog); RESUME sends the backlog.
ACTIVEACTIVE WAIT parks its client in the server's one blocking registry (as WAIT does)
and is answered from here when acknowledgements bring every peer up to its sequence.
Command handlers (server/commands/activeactive.py) call the methods of ``PeerLinks``;
nothing outside this module touches a link's transport.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from rill.persistence.aof import encode_command
from rill.protocol.effects import decode_vc, encode_vc
from rill.protocol.numbers import string2ll
from rill.protocol.reply_reader import INCOMPLETE, ErrorReply, ReplyProtocolError, ReplyReader

from ..outbound import dial
from ..outcomes import Block

if TYPE_CHECKING:
    from ..client import Client
    from ..server import Server

log = logging.getLogger("rill")
NOTICE = 25

PING_INTERVAL = 0.1  # seconds of silence after which a link sends a PING
BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
PIPE_CHUNK = 1 << 18  # the most read from a full-sync child's pipe at once
PIPE_BATCH = 1 << 20  # the most copied from it in one loop iteration
REAP_POLL = 0.01
# The most record bytes one APPLY carries: a peer applies a batch in one go, so this bounds
# how long it keeps its other clients waiting (a few hundred effects).
APPLY_BATCH = 1 << 14
_APPLY_HEAD = b"*3\r\n$12\r\nACTIVEACTIVE\r\n$5\r\nAPPLY\r\n"

# A peer's states.
DOWN = "down"  # no connection; dialled again at next_attempt
CONNECTING = "connecting"
HANDSHAKE = "handshake"  # AUTH and HELLO sent
FULL_SYNC = "full-sync"  # the MERGE is being streamed
UP = "up"  # effects flow

# What each request on a link was, to match the replies, which come in order.
R_AUTH, R_HELLO, R_APPLY, R_PING, R_MERGE = range(5)
_REQUEST_NAMES = {R_AUTH: "AUTH", R_HELLO: "ACTIVEACTIVE HELLO", R_APPLY: "ACTIVEACTIVE APPLY",
                  R_PING: "ACTIVEACTIVE PING", R_MERGE: "ACTIVEACTIVE MERGE"}


def _notice(msg: str, *args: object) -> None:
    log.log(NOTICE, msg, *args)


class LinkError(Exception):
    """The peer answered something the link cannot go on with; the link is dropped."""


class _FullSync:
    """A full sync under way: the child making the payload, the pipe it writes into, and
    the sequence and clock the snapshot stands for."""

    __slots__ = ("pid", "fd", "seq", "vc", "head", "left", "reading")

    def __init__(self, pid: int, fd: int, seq: int, vc: dict[int, int]) -> None:
        self.pid = pid
        self.fd = fd
        self.seq = seq
        self.vc = vc
        self.head = b""  # the payload's 8-byte length, until it is whole
        self.left = -1  # payload bytes still to copy (-1: length not read yet)
        self.reading = False  # the loop watches the pipe


class Peer:
    """One configured peer and where this instance's effects stand with it."""

    __slots__ = ("host", "port", "name", "id", "state", "conn", "gen", "sync", "paused", "sent",
                 "acked", "expect", "backoff", "next_attempt", "last_write", "last_read", "full")

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.name = f"{host}:{port}".encode()
        self.id = 0  # its region, once a handshake told us
        self.state = DOWN
        self.conn: PeerConnection | None = None
        self.gen = 0  # bumped by every dial: a connection from an older one is stale
        self.sync = b"none"  # what the last handshake led to: full / partial
        self.paused = False
        self.sent = 0  # the last of our sequences written to the current link
        self.acked = 0  # how many of our effects the peer has applied, as it said on this link
        # [request kind, seq, how many in a row] awaiting replies: the APPLYs written
        # together are one entry (a reply each would be an object each while a peer lags).
        self.expect: deque[list[int]] = deque()
        self.backoff = 0.0
        self.next_attempt = 0.0
        self.last_write = 0.0
        self.last_read = 0.0
        self.full: _FullSync | None = None


class PeerConnection(asyncio.Protocol):
    """The socket to one peer: requests out, replies in (parsed, then handed to PeerLinks)."""

    def __init__(self, links: PeerLinks, peer: Peer, gen: int) -> None:
        self.links = links
        self.peer = peer
        self.gen = gen
        self.transport: asyncio.Transport | None = None
        self.reader = ReplyReader()
        self.closed = False
        self.writing_paused = False  # the peer is behind: its socket buffers are full

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.links._link_up(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.links._link_lost(self, exc)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        links = self.links
        try:
            while not self.closed:
                acks = reader.integers()
                if acks:
                    links._integers(self, acks)
                    continue
                reply = reader.gets()
                if reply is INCOMPLETE:
                    break
                links._reply(self, reply)
        except (LinkError, ReplyProtocolError) as e:
            links._drop(self.peer, str(e), self)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.links._writable(self)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(b), b)


class PeerLinks:
    """This instance's links to its peers (``active-active-peers``), and what the
    ACTIVEACTIVE commands and INFO ask of them."""

    def __init__(self, server: Server, engine: Any) -> None:
        self.server = server
        self.engine = engine
        self.peers: list[Peer] = []
        # ACTIVEACTIVE WAIT: (client, sequence it waits for, marker of its wait), oldest first
        self.waiters: list[tuple[Client, int, Any]] = []
        self._flush_pending = False
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        engine.on_sealed.append(self._sealed)
        if server.loop is not None:
            self._start()
        else:
            server.startup_hooks.append(self._start)  # the loop exists once they run

    # -- configuration ---------------------------------------------------------------------
    def configure(self, peers: list[tuple[str, int]]) -> None:
        """Make the links exactly ``peers``, in that order: links to peers still named
        keep their state; links to peers no longer named are closed; new ones are dialled."""
        old = {(p.host, p.port): p for p in self.peers}
        kept: list[Peer] = []
        for host, port in peers:
            p = old.pop((host, port), None)
            if p is None:
                if any(q.host == host and q.port == port for q in kept):
                    continue
                p = Peer(host, port)
            kept.append(p)
        self.peers = kept
        for p in old.values():
            self._stop(p)
            _notice("Active-Active peer %s removed", p.name.decode(errors="replace"))
        if self.server.loop is not None and not self._closed and not self.server.loading:
            for p in kept:
                if p.state == DOWN:
                    self._connect(p)
        self._wake()  # fewer peers may be all a waiter needed

    def close(self) -> None:
        """Drop every link (shutdown): no reconnection, no child left behind."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for p in self.peers:
            self._stop(p)
        if self._sealed in self.engine.on_sealed:
            self.engine.on_sealed.remove(self._sealed)

    def _start(self) -> None:
        if self._closed or self._timer is not None:
            return
        if not self.server.loading:
            for p in self.peers:
                if p.state == DOWN:
                    self._connect(p)
        self._timer = self.server.loop.call_later(PING_INTERVAL, self._tick)

    # -- introspection -----------------------------------------------------------------------
    def _lag(self, p: Peer, now_ms: int) -> tuple[int, int]:
        """(own effects the peer lacks, age in ms of the oldest of them)."""
        engine = self.engine
        lag = max(0, engine.seq - p.acked)
        if not lag:
            return 0, 0
        backlog = engine.backlog
        ts = backlog.ts_of(p.acked + 1)
        if ts is None:  # no longer held: the oldest one held is the best bound we have
            ts = backlog.ts_of(backlog.first_seq)
        return lag, max(0, now_ms - ts) if ts is not None else 0

    def status(self) -> list[dict[str, bytes | int]]:
        """ACTIVEACTIVE STATUS: one map per peer, in ``active-active-peers`` order."""
        now_ms = int(time.time() * 1000)
        backlog = self.engine.backlog
        rows: list[dict[str, bytes | int]] = []
        for p in self.peers:
            lag, lag_ms = self._lag(p, now_ms)
            rows.append({
                "peer": p.name,
                "id": p.id,
                "link": b"up" if p.state == UP else b"down",
                "sync": p.sync,
                "paused": int(p.paused),
                "effects-sent": p.sent,
                "effects-acked": p.acked,
                "lag-effects": lag,
                "lag-ms": lag_ms,
                "backlog-bytes": backlog.bytes_after(p.acked),
            })
        return rows

    def info_lines(self) -> list[str]:
        """INFO active_active's per-peer lines (after the engine's own fields)."""
        lines = []
        for i, row in enumerate(self.status()):
            p = self.peers[i]
            lines.append(
                f"peer{i}:host={p.host},port={p.port},id={row['id']},link={row['link'].decode()},"
                f"sync={row['sync'].decode()},paused={row['paused']},sent={row['effects-sent']},"
                f"acked={row['effects-acked']},lag_effects={row['lag-effects']},lag_ms={row['lag-ms']},"
                f"backlog_bytes={row['backlog-bytes']}")
        return lines

    def _named(self, name: bytes | None) -> list[Peer] | None:
        """The peers ``name`` means: all for None, else the one with that host:port or
        region id; None when there is no such peer."""
        if name is None:
            return self.peers
        for p in self.peers:
            if p.name == name:
                return [p]
        region = string2ll(name)
        if region is not None and region > 0:
            found = [p for p in self.peers if p.id == region]
            if found:
                return found
        return None

    # -- PAUSE / RESUME -----------------------------------------------------------------------
    def pause(self, peer: bytes | None) -> bool:
        """Stop sending effects to ``peer`` (host:port or region id), or to all; False when
        there is no such peer. The effects queue in the backlog meanwhile."""
        found = self._named(peer)
        if found is None:
            return False
        for p in found:
            p.paused = True
        return True

    def resume(self, peer: bytes | None) -> bool:
        """Send again to ``peer``, or to all, starting with what queued while paused."""
        found = self._named(peer)
        if found is None:
            return False
        for p in found:
            p.paused = False
            self._send(p)
        return True

    # -- WAIT -----------------------------------------------------------------------------------
    def caught_up(self, seq: int) -> int:
        """Peers that have applied our effects up to ``seq``."""
        return sum(1 for p in self.peers if p.acked >= seq)

    def peer_regions(self) -> list[int]:
        """The regions of the configured peers (0 for one not yet heard from)."""
        return [p.id for p in self.peers]

    def wait(self, client: Client, seq: int, timeout: float) -> int | Block:
        """ACTIVEACTIVE WAIT: the number of peers that applied our effects up to ``seq``,
        at once if that is all of them (or inside MULTI), else a Block that the
        acknowledgements end (or the timeout, in seconds; 0 waits forever)."""
        n = self.caught_up(seq)
        if n >= len(self.peers) or client.in_exec:
            return n

        def at_timeout() -> int:
            return self.caught_up(seq)

        self.add_waiter(client, seq, at_timeout)
        return Block([], timeout, timeout_reply=at_timeout)

    def add_waiter(self, client: Client, seq: int, marker: Any) -> None:
        """Answer ``client``, blocked with ``marker`` as its timeout reply, once every peer
        has applied our effects up to ``seq`` (WAIT's mechanism: master.py's ack_waiters)."""
        self.waiters.append((client, seq, marker))

    def _wake(self) -> None:
        """Acknowledgements moved (or the peers changed): free what every peer has, and
        answer the waiters now satisfied."""
        self._release()
        if not self.waiters:
            return
        waiting = []
        everyone = len(self.peers)
        for entry in self.waiters:
            client, seq, marker = entry
            wait = client.blocked
            if wait is None or wait.timeout_reply is not marker:
                continue  # timed out, unblocked or gone since
            n = self.caught_up(seq)
            if n >= everyone:
                self.server.blocking.unblock(client, n)
            else:
                waiting.append(entry)
        self.waiters = waiting

    def _release(self) -> None:
        """Free the backlog's records every configured peer has acknowledged: a peer
        resumes after its own acknowledgement, so no partial resync asks for them again
        (one that restarted from an older snapshot gets a full sync, as after an
        overflow). Nothing goes while a peer has not said who it is or never
        acknowledged anything, nor with no peer configured (one added later resumes
        from the backlog if it reaches back far enough)."""
        peers = self.peers
        if not peers:
            return
        # A loop, not min() and all() over generators: this runs at every acknowledgement.
        floor = None
        for p in peers:
            if not p.id:
                return
            if floor is None or p.acked < floor:
                floor = p.acked
        if floor:
            self.engine.backlog.release(floor)

    # -- the links' lives ----------------------------------------------------------------------
    def _connect(self, p: Peer) -> None:
        p.state = CONNECTING
        p.gen += 1
        gen = p.gen

        def failed(reason: str) -> None:
            if p.gen == gen and p.state == CONNECTING:
                log.warning("Error connecting to Active-Active peer %s: %s", p.name.decode(errors="replace"),
                            reason)
                self._down(p)

        if not dial(self.server, lambda: PeerConnection(self, p, gen), p.host, p.port, failed):
            self._down(p)

    def _link_up(self, conn: PeerConnection) -> None:
        p = conn.peer
        if conn.gen != p.gen or p.state != CONNECTING or not any(q is p for q in self.peers):
            conn.close()  # removed, or redialled, while connecting
            return
        p.conn = conn
        p.state = HANDSHAKE
        p.last_read = p.last_write = time.monotonic()
        p.expect.clear()
        config = self.server.config
        out = []
        password = config["active-active-auth"]
        if password:
            user = config["active-active-user"]
            auth = [b"AUTH", user.encode()] if user else [b"AUTH"]
            out.append(encode_command([*auth, password.encode()]))
            p.expect.append([R_AUTH, 0, 1])
        engine = self.engine
        out.append(encode_command([b"ACTIVEACTIVE", b"HELLO", b"%d" % engine.region, encode_vc(engine.vc)]))
        p.expect.append([R_HELLO, 0, 1])
        conn.write(b"".join(out))

    def _link_lost(self, conn: PeerConnection, exc: Exception | None) -> None:
        p = conn.peer
        if conn is not p.conn:
            return
        log.warning("Connection with Active-Active peer %s lost%s", p.name.decode(errors="replace"),
                    f": {exc}" if exc else "")
        self._down(p)

    def _down(self, p: Peer) -> None:
        """The link is gone: dial again after the backoff."""
        self._stop(p)
        p.backoff = min(max(BACKOFF_MIN, p.backoff * 2), BACKOFF_MAX)
        p.next_attempt = time.monotonic() + p.backoff

    def _stop(self, p: Peer) -> None:
        conn, p.conn = p.conn, None
        p.state = DOWN
        # What the peer said on this link no longer holds: it may be restarting without
        # the effects it acknowledged, so WAIT must not count it as caught up. The next
        # HELLO's reply says what it has.
        p.acked = 0
        p.gen += 1
        p.expect.clear()
        self._abort_full_sync(p)
        if conn is not None:
            conn.close()

    def _drop(self, p: Peer, reason: str, conn: PeerConnection | None = None) -> None:
        """Give up on the current link with ``p`` (logged) and dial again later."""
        if conn is not None and conn is not p.conn:
            conn.close()
            return
        log.warning("Active-Active link to %s dropped: %s", p.name.decode(errors="replace"), reason)
        self._down(p)

    def _tick(self) -> None:
        """Every 100 ms: dial links that are due, PING idle ones, drop silent ones. Nothing
        is dialled while the dataset loads: a HELLO would carry a clock not yet restored."""
        self._timer = None
        if self._closed:
            return
        loading = self.server.loading
        now = time.monotonic()
        timeout = max(1, self.server.config.int("repl-timeout"))
        engine = self.engine
        for p in self.peers:
            if p.state == DOWN:
                if now >= p.next_attempt and not loading:
                    self._connect(p)
                continue
            conn = p.conn
            if conn is None:
                continue
            if p.expect and now - p.last_read > timeout:
                self._drop(p, f"no reply for {timeout} seconds")
            elif p.full is not None and p.full.left >= 0 and now - p.last_write > timeout:
                # The payload is going out (making it may take long) but the peer takes none.
                self._drop(p, f"the full sync made no progress for {timeout} seconds")
            elif p.state == UP and not conn.writing_paused and now - p.last_write >= PING_INTERVAL:
                conn.write(encode_command([b"ACTIVEACTIVE", b"PING", b"%d" % engine.region,
                                           encode_vc(engine.vc)]))
                p.expect.append([R_PING, 0, 1])
                p.last_write = now
                if len(p.expect) == 1:
                    p.last_read = now  # silence is counted from the oldest request unanswered
        self._timer = self.server.loop.call_later(PING_INTERVAL, self._tick)

    # -- replies -------------------------------------------------------------------------------
    def _reply(self, conn: PeerConnection, reply: Any) -> None:
        p = conn.peer
        if conn is not p.conn:
            return
        p.last_read = time.monotonic()
        if not p.expect:
            raise LinkError("a reply to no request")
        head = p.expect[0]
        kind, seq = head[0], head[1]
        if head[2] > 1:
            head[2] -= 1
        else:
            p.expect.popleft()
        if type(reply) is ErrorReply:
            raise LinkError(f"{_REQUEST_NAMES[kind]} refused: {reply.decode(errors='replace')}")
        if kind == R_APPLY or kind == R_PING:
            if type(reply) is not int:
                raise LinkError(f"unexpected reply to {_REQUEST_NAMES[kind]}: {reply!r}")
            if reply > p.acked:
                p.acked = reply
                self._wake()
        elif kind == R_HELLO:
            self._hello(p, reply)
        elif kind == R_MERGE:
            _notice("Full sync to Active-Active peer %s merged", p.name.decode(errors="replace"))
            if seq > p.acked:
                p.acked = seq
                self._wake()

    def _integers(self, conn: PeerConnection, replies: list[int]) -> None:
        """Integer replies in a row, the usual traffic (APPLY's and PING's
        acknowledgements): what _reply does with each, waking WAIT's waiters once."""
        p = conn.peer
        if conn is not p.conn:
            return
        p.last_read = time.monotonic()
        expect = p.expect
        acked = p.acked
        for reply in replies:
            head = expect[0] if expect else None
            if head is not None and (head[0] == R_APPLY or head[0] == R_PING):
                if head[2] > 1:
                    head[2] -= 1
                else:
                    expect.popleft()
                if reply > acked:
                    acked = reply
                continue
            if acked > p.acked:
                p.acked = acked
                self._wake()
            self._reply(conn, reply)  # another request's reply (or none's: LinkError)
            if conn.closed or conn is not p.conn:
                return
            acked = p.acked
        if acked > p.acked:
            p.acked = acked
            self._wake()

    def _hello(self, p: Peer, reply: Any) -> None:
        """The peer's region, clock and wish: resume from its count of our effects (partial
        sync) if the backlog holds all after it, else, or when the peer asks for it (it
        lost effects of its own that our state holds), send the whole state first."""
        if type(reply) is not list or len(reply) != 3:
            raise LinkError(f"unexpected reply to ACTIVEACTIVE HELLO: {reply!r}")
        try:
            peer_id = int(reply[0])
            peer_vc = decode_vc(reply[1])
            wants_full = int(reply[2]) == 1
        except (TypeError, ValueError):
            raise LinkError(f"unexpected reply to ACTIVEACTIVE HELLO: {reply!r}") from None
        engine = self.engine
        me = engine.region
        if peer_id == me:
            raise LinkError(f"the peer has this instance's own active-active-id {me}")
        p.id = peer_id
        theirs = peer_vc.get(me, 0)
        seq = engine.seq
        if theirs > seq:
            # We restarted from older data: the peer's own link to us makes our sequence
            # jump past what it holds (engine.hello), and then this link resumes.
            raise LinkError(f"the peer has applied {theirs} effects of this instance, which made only {seq}")
        p.acked = theirs
        p.backoff = 0.0
        backlog = engine.backlog
        partial = not wants_full and (theirs == seq or backlog.first_seq <= theirs + 1 <= backlog.last_seq)
        if not partial and engine.recovering is not None:
            # Our state lacks own effects a peer is bringing back: a snapshot of it now
            # would tell this peer it has them. Retry once that merge is done.
            raise LinkError("own lost effects are still being recovered; full sync postponed")
        if partial:
            p.sync = b"partial"
            p.state = UP
            p.sent = theirs
            _notice("Active-Active peer %s (id %d): partial sync from effect %d", p.name.decode(errors="replace"),
                    peer_id, theirs + 1)
            self._send(p)
        else:
            p.sync = b"full"
            p.state = FULL_SYNC
            self._start_full_sync(p)
        self._wake()

    # -- sending effects ------------------------------------------------------------------------
    def _sealed(self, seq: int) -> None:
        """The engine made effect ``seq``: send it (with any others made in this loop
        iteration) once the iteration's commands are done."""
        if self._flush_pending:
            return
        loop = self.server.loop
        if loop is None:
            self._flush()
            return
        self._flush_pending = True
        # The flush sends every effect sealed until it runs: the engine need not tell
        # us of the rest of this turn's writes (a Python call each, otherwise).
        self.engine.quiet_seals = True
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Send every peer what it lacks. Peers level with one another (all links up and
        keeping up: the usual case) are sent the same APPLYs, read from the backlog and
        framed once for all of them."""
        self._flush_pending = False
        engine = self.engine
        engine.quiet_seals = False
        seq = engine.seq
        shared: dict[int, tuple[int, bytes]] = {}
        for p in self.peers:
            if p.sent < seq:
                self._send(p, shared)

    def _send(self, p: Peer, shared: dict[int, tuple[int, bytes]] | None = None) -> None:
        """Write what the peer has not been sent, unless paused or it is behind. A chunk
        of the backlog at a time, until the socket's buffer passes its high-water mark:
        the rest waits in the backlog (resume_writing comes back here), not copied into
        the transport's buffer as well. ``shared`` holds the APPLY already framed in this
        flush, by the sequence it starts from, for the next peer that starts there."""
        conn = p.conn
        if p.state != UP or p.paused or conn is None or conn.writing_paused or p.sent >= self.engine.seq:
            return
        start = p.sent + 1
        framed = shared.get(start) if shared is not None else None
        if framed is not None:
            applies: list[tuple[int, bytes]] = [framed]
        else:
            # The backlog holds the records as they go out: a run of them is one APPLY's argument.
            pieces = self.engine.backlog.wires_from(start, APPLY_BATCH)
            if pieces is None:
                self._drop(p, f"the backlog no longer holds effect {start}; a full sync follows")
                return
            if not pieces:
                return
            applies = pieces
        expect = p.expect
        now = time.monotonic()
        if not expect:
            p.last_read = now
        for last, piece in applies:
            if expect and expect[-1][0] == R_APPLY:
                expect[-1][2] += 1
            else:
                expect.append([R_APPLY, 0, 1])
            if framed is None:
                piece = b"".join((_APPLY_HEAD, b"$%d\r\n" % len(piece), piece, b"\r\n"))
                if shared is not None and len(applies) == 1:
                    # One APPLY (a loop turn's effects, the usual case): a peer level with
                    # this one is sent it as it is.
                    shared[start] = (last, piece)
            conn.write(piece)
            p.sent = last
            if conn.writing_paused or conn.closed:
                break
        p.last_write = now

    def _writable(self, conn: PeerConnection) -> None:
        p = conn.peer
        if conn is not p.conn:
            return
        if p.state == FULL_SYNC:
            self._pump(p)
        else:
            self._send(p)

    # -- full sync --------------------------------------------------------------------------------
    def _start_full_sync(self, p: Peer) -> None:
        """Fork a child that writes the payload's length and the payload into a pipe; the
        parent copies it to the peer as the MERGE's last argument (_pump)."""
        try:
            # The payload is aapersist's (server/activeactive/state.py), imported when first
            # needed so that a server with no peer to resync never loads it.
            from .state import dump_state
        except ImportError as e:
            raise LinkError(f"no full-sync payload available: {e}") from None

        server = self.server
        engine = self.engine
        read_fd, write_fd = os.pipe()

        def work() -> None:
            os.close(read_fd)
            payload = dump_state(server)
            with open(write_fd, "wb", buffering=PIPE_CHUNK) as f:
                f.write(struct.pack(">Q", len(payload)))
                f.write(payload)

        seq, vc = engine.seq, dict(engine.vc)
        try:
            pid = server.persistence.fork(work, "rill-active-active-sync", reports=False)  # no Redis counterpart
        except OSError as e:
            os.close(read_fd)
            os.close(write_fd)
            raise LinkError(f"can't fork for a full sync: {e}") from None
        os.close(write_fd)  # the pipe ends (EOF) when the child closes its end
        os.set_blocking(read_fd, False)
        p.full = _FullSync(pid, read_fd, seq, vc)
        _notice("Active-Active peer %s (id %d): full sync of effects up to %d started by pid %d",
                p.name.decode(errors="replace"), p.id, seq, pid)
        self._pump(p)

    def _watch(self, p: Peer, on: bool) -> None:
        full = p.full
        loop = self.server.loop
        if full is None or loop is None or full.reading == on:
            return
        full.reading = on
        if on:
            loop.add_reader(full.fd, self._pump, p)
        else:
            loop.remove_reader(full.fd)

    def _pump(self, p: Peer) -> None:
        """Copy what the child has written to the peer, while the peer keeps up."""
        full, conn = p.full, p.conn
        if full is None or conn is None:
            return
        copied = 0
        while copied < PIPE_BATCH and not conn.writing_paused:
            try:
                data = os.read(full.fd, PIPE_CHUNK)
            except BlockingIOError:
                break
            except OSError as e:
                self._drop(p, f"reading the full-sync child: {e}")
                return
            if not data:
                self._drop(p, "the full-sync child ended before the whole payload")
                return
            if full.left < 0:
                full.head += data
                if len(full.head) < 8:
                    continue
                (full.left,) = struct.unpack(">Q", full.head[:8])
                data = full.head[8:]
                full.head = b""
                conn.write(b"*5\r\n$12\r\nACTIVEACTIVE\r\n$5\r\nMERGE\r\n" + _bulk(b"%d" % self.engine.region)
                           + _bulk(encode_vc(full.vc)) + b"$%d\r\n" % full.left)
            if len(data) > full.left:
                self._drop(p, "the full-sync child wrote more than its payload")
                return
            conn.write(data)
            full.left -= len(data)
            copied += len(data)
            p.last_write = time.monotonic()
            if full.left == 0:
                conn.write(b"\r\n")
                self._full_sync_sent(p)
                return
        self._watch(p, not conn.writing_paused)

    def _full_sync_sent(self, p: Peer) -> None:
        """The MERGE is written: the effects made since the fork follow it."""
        full = p.full
        assert full is not None
        self._abort_full_sync(p)
        p.expect.append([R_MERGE, full.seq, 1])
        p.last_read = time.monotonic()
        p.sent = full.seq
        p.state = UP
        self._send(p)

    def _abort_full_sync(self, p: Peer) -> None:
        """Stop watching the child's pipe and let the child go (killed if still running)."""
        full, p.full = p.full, None
        if full is None:
            return
        self._watch_off(full)
        os.close(full.fd)
        try:
            done, _ = os.waitpid(full.pid, os.WNOHANG)
        except ChildProcessError:
            return
        if not done:
            if full.left != 0:
                try:
                    os.kill(full.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._reap(full.pid)

    def _watch_off(self, full: _FullSync) -> None:
        loop = self.server.loop
        if full.reading and loop is not None:
            loop.remove_reader(full.fd)
        full.reading = False

    def _reap(self, pid: int) -> None:
        """Collect an ended child without waiting on the loop (it exits once its pipe is read)."""
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        loop = self.server.loop
        if not done:
            if loop is None:
                os.waitpid(pid, 0)
            else:
                loop.call_later(REAP_POLL, self._reap, pid)
