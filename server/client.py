"""Per-client state: identity, selected database, protocol, transaction, output.

A Client knows nothing of sockets: the connection that owns it drains
``out`` to its transport and acts on ``close_after_reply``/``kill_requested``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rill.protocol.reply import encode_into

from .fastpath import ClientCore

if TYPE_CHECKING:
    from rill.storage.keyspace import Database

    from .server import Server

# CLIENT TRACKING state bits (Client.tracking; 0 when tracking is off)
TRACKING_ON = 1 << 0
TRACKING_BCAST = 1 << 1
TRACKING_OPTIN = 1 << 2
TRACKING_OPTOUT = 1 << 3
TRACKING_CACHING = 1 << 4  # CLIENT CACHING yes/no given for the next command
TRACKING_NOLOOP = 1 << 5
TRACKING_BROKEN_REDIR = 1 << 6

# CLIENT REPLY modes
REPLY_ON = 0
REPLY_OFF = 1
REPLY_SKIP_NEXT = 2


def _nothing_queued() -> int:
    return 0


def _nothing_to_close() -> None:
    return None


def _no_connection(on: bool) -> None:
    return None


# What an idle connection holds besides its buffers: the Client, its Connection and
# parser, the transport and the socket (measured: about 3 KB of resident memory per
# connection, 500 idle connections against none).
CLIENT_BASE = 3072
# Redis's reply buffer sizes: PROTO_REPLY_CHUNK_BYTES (a new client's, and the most the
# cron grows one to) and PROTO_REPLY_MIN_BYTES (the least it shrinks one to).
REPLY_CHUNK = 16 * 1024
REPLY_MIN = 1024
REPLY_PEAK_RESET_MS = 5000  # REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME
# One WATCHed key: its WatchedKey entry and the slots that list it (client, database).
_WATCH_ENTRY = 96
# One BCAST prefix of client tracking: the bytes object and its dict slot.
_PREFIX_ENTRY = 80
_sizeof = sys.getsizeof


class Client(ClientCore):
    """One connected (or internal) client."""

    __slots__ = (
        "id",
        "name",
        "lib_name",
        "lib_ver",
        "logged_in",
        "user",
        "addr",
        "laddr",
        "fd",
        "kind",
        "created",
        "multi_dirty",
        "multi_flags",
        "watched",
        "dirty_cas",
        "monitor",
        "pubsub_channels",
        "pubsub_patterns",
        "pubsub_shard_channels",
        "on_output",
        "output_backlog",
        "rbp_at",
        "obuf_soft_since",
        "in_exec",
        "propagate",
        "no_evict",
        "no_touch",
        "repl",
        "tracking",
        "tracking_redir",
        "tracking_prefixes",
        "mem",
        "multi_mem",
        "close_now",
        "input_args",
        "as_replica",
    )

    def __init__(self, server: Server, client_id: int, addr: str = "", laddr: str = "", fd: int = -1) -> None:
        self.id = client_id
        self.server = server
        self.db: Database = server.keyspace[0]
        self.resp3 = False
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        # ACL: the user, Redis's c->authenticated (``logged_in``), and ``authenticated``,
        # true only while nothing needs checking (logged in, or no password needed, as
        # a user who may run everything): the one flag the dispatcher's fast path tests.
        server.acl.init_client(self)
        self.addr = addr
        self.laddr = laddr
        self.fd = fd
        self.kind = "normal"
        now = time.time()
        self.created = now
        self.last_interaction = now
        self.out: list[bytes] = []
        self.reply_mode = REPLY_ON
        self.close_after_reply = False
        self.kill_requested = False
        # MULTI state: queued (command, argv) pairs, or None outside a transaction
        self.multi: list | None = None
        self.multi_dirty = False  # EXECABORT: an error while queuing
        self.multi_flags = 0
        self.watched: list = []  # WatchedKey entries
        self.dirty_cas = False
        self.blocked: Any = None  # a blocking.Wait while the client waits
        self.last_cmd = None
        self.cur_cmd = None
        self.argv: list[bytes] = []
        self.pending: list = []  # parsed commands waiting behind a blocked one
        self.monitor = False
        self.pubsub_channels: set[bytes] = set()
        self.pubsub_patterns: set[bytes] = set()
        self.pubsub_shard_channels: set[bytes] = set()
        # Channels + patterns + shard channels, kept by the pub/sub commands: one test
        # on the dispatch path for "this client is in subscribed mode".
        self.subscriptions = 0
        # Called when output is produced outside the connection's own batch
        # (a blocked client served, a MONITOR feed, a pub/sub message).
        self.on_output: Callable[[Client], None] = lambda c: None
        # Bytes written but not yet taken by the peer (the connection sets it): a
        # replica's snapshot is sent only as fast as the replica reads it.
        self.output_backlog: Callable[[], int] = _nothing_queued
        self.querybuf_len = 0
        self.querybuf_peak = 0
        # Room the query buffer keeps for the rest of a big argument under way: Redis
        # sizes it for the whole argument once its length is read (tot-mem, qbuf-free).
        self.querybuf_room = 0
        # Redis's reply buffer (CLIENT LIST rbs= and rbp=): its size, starting at 16 KB
        # and resized by the cron (resize_reply_buffer), and the most a write took from
        # it since rbp_at (ms), as Redis's buf_peak.
        self.rbs = REPLY_CHUNK
        self.rbp = 0
        self.rbp_at = time.monotonic() * 1000
        self.obuf_soft_since = 0  # unixtime (whole seconds) its output first passed the soft limit
        self.in_exec = False
        self.propagate = True
        self.no_evict = False
        self.no_touch = False
        # A replica's link state (REPLCONF settings, acknowledged offset); None for
        # every other client, which is nearly all of them.
        self.repl: Any = None
        # Client-side caching (server/tracking.py): TRACKING_* bits, the client id
        # invalidations go to (0: this connection), and the BCAST prefixes.
        self.tracking = 0
        self.tracking_redir = 0
        self.tracking_prefixes: dict[bytes, None] | None = None
        # Memory accounting (server/memory.py): the usage last counted in the clients'
        # sum, the argument bytes of the commands a MULTI queued, and how the connection
        # drops this client at once, output and all (client eviction).
        self.mem = 0
        self.multi_mem = 0
        self.close_now: Callable[[], None] = _nothing_to_close
        # The bytes of the arguments parsed so far of a command still arriving (the
        # connection sets it; CLIENT LIST argv-mem).
        self.input_args: Callable[[], int] = _nothing_queued
        # Tells the connection its client became a replica (or stopped being one): from
        # then on its output counts as replication traffic in INFO stats.
        self.as_replica: Callable[[bool], None] = _no_connection

    def reply(self, value: Any) -> None:
        """Queue one reply (honouring CLIENT REPLY OFF/SKIP)."""
        if self.reply_mode:
            return
        encode_into(value, self.out, self.resp3)

    def push(self, value: Any) -> None:
        """Queue an out-of-band message (pub/sub, MONITOR) and wake the connection."""
        encode_into(value, self.out, self.resp3)
        self.on_output(self)

    def output_bytes(self) -> int:
        """Replies not yet taken by the peer: those queued for this loop iteration's
        write and those the transport still holds (CLIENT LIST omem). A replica's
        include the stream held back for it during its sync: in Redis that is its share
        of the replication buffer, counted in its omem and against its output limit."""
        out = self.out
        size = (sum(map(len, out)) if out else 0) + self.output_backlog()
        repl = self.repl
        return size + repl.held_bytes if repl is not None else size

    def memory_usage(self) -> int:
        """CLIENT LIST tot-mem, what client eviction weighs (Redis's getClientMemoryUsage):
        the buffers, what a MULTI queued, WATCHed keys, subscriptions, tracking prefixes."""
        # Output up to the reply buffer's size (rbs) weighs the buffer's size, as in Redis,
        # where a reply that fits its static buffer adds nothing: a client's own CLIENT
        # LIST reply must not get another client evicted (client-eviction's "evict
        # clients only until below limit").
        out = self.output_bytes()
        mem = (CLIENT_BASE + self.querybuf_len + self.querybuf_room + self.input_args()
               + (out if out > self.rbs else self.rbs) + self.multi_mem)
        if self.watched:
            mem += len(self.watched) * _WATCH_ENTRY
        if self.subscriptions:
            mem += (_sizeof(self.pubsub_channels) + _sizeof(self.pubsub_patterns)
                    + _sizeof(self.pubsub_shard_channels))
        prefixes = self.tracking_prefixes
        if prefixes:
            mem += _sizeof(prefixes) + len(prefixes) * _PREFIX_ENTRY
        return mem

    def flags_string(self) -> str:
        """The ``flags=`` field of CLIENT LIST."""
        f = ""
        if self.kind == "replica":
            f += "S"
        if self.monitor:
            f += "O"
        if self.kind == "master":
            f += "M"
        if self.subscriptions:
            f += "P"
        if self.multi is not None:
            f += "x"
        if self.blocked is not None or self in self.server.paused_clients:
            f += "b"  # a command postponed by CLIENT PAUSE is blocked too, as in Redis
        if self.tracking:
            f += "t"
            if self.tracking & TRACKING_BROKEN_REDIR:
                f += "R"
            if self.tracking & TRACKING_BCAST:
                f += "B"
        if self.dirty_cas:
            f += "d"
        if self.close_after_reply:
            f += "c"
        if self.kind == "unix":
            f += "U"
        if self.no_evict:
            f += "e"
        if self.no_touch:
            f += "T"
        return f or "N"

    def info_line(self) -> bytes:
        """This client's line in CLIENT LIST and CLIENT INFO (and in an ACL LOG entry)."""
        now = time.time()
        multi = len(self.multi) if self.multi is not None else -1
        cmd = self.last_cmd.fullname if self.last_cmd is not None else "NULL"
        return (
            f"id={self.id} addr={self.addr} laddr={self.laddr} fd={self.fd} name={self.name.decode(errors='replace')} "
            f"age={int(now - self.created)} idle={int(now - self.last_interaction)} flags={self.flags_string()} "
            f"db={self.db.id} sub={len(self.pubsub_channels)} psub={len(self.pubsub_patterns)} ssub={len(self.pubsub_shard_channels)} "
            f"multi={multi} qbuf={self.querybuf_len} qbuf-free={self.querybuf_room} argv-mem={self.input_args()} multi-mem={self.multi_mem} rbs={self.rbs} rbp={self.rbp} "
            f"obl=0 oll=0 omem={self.output_bytes()} tot-mem={self.memory_usage()} events=r cmd={cmd} user={self.user.name.decode(errors='replace')} redir={self.tracking_redir if self.tracking else -1} "
            f"resp={3 if self.resp3 else 2}"
        ).encode()


def resize_reply_buffer(client: Client, now_ms: float, peak_reset_ms: int) -> int:
    """clientsCronResizeOutputBuffer: halve a reply buffer whose peak stayed under half
    of it (down to what the peak needs, at least 1 KB), double one a write filled (up to
    16 KB), and start a new peak every ``peak_reset_ms`` (never when negative). rill
    writes replies without such a buffer; this keeps CLIENT LIST's rbs/rbp and DEBUG
    REPLYBUFFER meaning what they mean in Redis. Returns -1 for a shrink, 1 for an
    expansion, 0 otherwise (INFO's reply_buffer_shrinks and reply_buffer_expands)."""
    size = client.rbs
    peak = client.rbp
    resized = 0
    if size // 2 >= REPLY_MIN and peak < size // 2:
        client.rbs = max(REPLY_MIN, peak + 1)
        resized = -1
    elif size * 2 < REPLY_CHUNK * 2 and peak == size:
        client.rbs = min(REPLY_CHUNK, size * 2)
        resized = 1
    if peak_reset_ms >= 0 and now_ms - client.rbp_at >= peak_reset_ms:
        client.rbp = 0  # Redis's bufpos: rill's replies leave within the loop iteration
        client.rbp_at = now_ms
    return resized


def output_limit_reached(client: Client, size: int, hard: int, soft: int, soft_secs: int) -> bool:
    """checkClientOutputBufferLimits for ``size`` bytes of output the client has not
    taken: past the hard limit, or past the soft one for more whole seconds than
    ``soft_secs`` (Redis's unixtime clock; they start when it first passes it)."""
    over = bool(hard) and size >= hard
    if soft and size >= soft:
        now = int(time.time())
        if not client.obuf_soft_since:
            client.obuf_soft_since = now
        elif now - client.obuf_soft_since > soft_secs:
            over = True
    else:
        client.obuf_soft_since = 0
    return over


def reply_cap(client: Client, count: int, least_bytes: int) -> int:
    """How many of ``count`` reply elements, each at least ``least_bytes`` long, to build.

    Redis writes the elements of HRANDFIELD, SRANDMEMBER and ZRANDMEMBER with a negative
    count one by one and stops once the output passes the client's hard output-buffer
    limit (the client is then closed, unanswered). rill builds a reply whole; building
    all of a count like -999999999 would take gigabytes only to be thrown away. So:
    ``count``, or the fewer elements that are certainly past that limit, whose write
    closes the client just the same. Clients without a limit get all: internal ones
    (scripts', id -1, as Redis's Lua client) and replicas (their own limits)."""
    if client.id < 0 or client.repl is not None:
        return count
    hard = client.server.obuf_limits.get("pubsub" if client.subscriptions else "normal", (0, 0, 0))[0]
    return min(count, hard // least_bytes + 1) if hard else count


def log_output_limit_close(client: Client, from_cron: bool) -> None:
    """Redis's two log lines: a write found it over ("scheduled to be closed ASAP"), or
    the clients cron did ("closed")."""
    logging.getLogger("rill").warning(
        "Client %s %s for overcoming of output buffer limits.",
        client.info_line().decode(errors="replace"),
        "closed" if from_cron else "scheduled to be closed ASAP")
