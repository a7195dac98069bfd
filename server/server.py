"""The server state and the dispatcher: Redis's processCommand and call().

Everything here is synchronous: a connection hands complete commands to
``Server.execute`` and writes whatever the client's output holds afterwards.
Timers (blocking deadlines, the cron) are scheduled through ``self.loop``,
which the listener provides.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

from rill.protocol.parser import repr_body
from rill.protocol.reply import QUEUED, Raw, ReplyError, encode_into
from rill.storage import hash as _hash
from rill.storage import set as _set
from rill.storage import zset as _zset
from rill.storage.keyspace import Database, Keyspace
from rill.storage.stream import Stream
from rill.storage.stream.active import ActiveStream

from . import REDIS_VERSION, activeactive
from . import notify as events
from . import shutdown as shutdown_seq
from .acl import Acl
from .activeactive import ActiveActive
from .blocking import Blocking
from .client import REPLY_PEAK_RESET_MS, Client, resize_reply_buffer
from .commands import streams as _streams
from .commands.table import (
    ADMIN,
    ALLOW_BUSY,
    DENYOOM,
    FAST,
    LOADING,
    MAY_REPLICATE,
    NO_AUTH,
    NO_MULTI,
    PROTECTED,
    READONLY,
    SKIP_MONITOR,
    SKIP_SLOWLOG,
    STALE,
    TABLE,
    WRITE,
    Command,
)
from .commandstats import CommandStatsTable
from .config import Config, ConfigLineError, parse_percentile
from .disk import Persistence, master_side
from .evict import EVICT_FAIL, evictor_of
from .fastpath import ServerCore
from .fastpath import execute_all as _execute_all
from .functions import FunctionsEngine
from .iostats import IOStats
from .latency import HDR_OF, TABLE_NS, LatencyMonitor, record_long
from .memory import memory_of
from .outcomes import LOADING_ERR, MASTERDOWN_ERR, NO_REPLY, Block
from .propagation import Propagation
from .pubsub import PubSub
from .replication.failover import Failover
from .replication.master import MasterSide
from .replication.replica import ReplicaSide
from .scripting import LuaEngine, busy_error, running
from .tls import TLS
from .tracking import Tracking

log = logging.getLogger("rill")

NOAUTH = ReplyError("NOAUTH Authentication required.")
OOM_ERR = ReplyError("OOM command not allowed when used memory > 'maxmemory'.")
# A queued command's (command, argv) pair and its list slot, beside its argument bytes
# (CLIENT LIST multi-mem).
_QUEUED_ENTRY = 72
READONLY_ERR = ReplyError("READONLY You can't write against a read only replica.")
NOREPLICAS_ERR = ReplyError("NOREPLICAS Not enough good replicas to write.")

# Commands that run (not queue) inside MULTI.
_MULTI_PASSTHROUGH = {b"exec", b"discard", b"multi", b"watch", b"quit", b"reset"}
# Commands a RESP2 client may run while subscribed.
_PUBSUB_ALLOWED = {
    b"ping", b"subscribe", b"ssubscribe", b"unsubscribe", b"sunsubscribe",
    b"psubscribe", b"punsubscribe", b"quit", b"reset",
}


# Read-only script runners: what their scripts read decides what is tracked.
_SCRIPT_READS = frozenset({"eval_ro", "evalsha_ro", "fcall_ro"})

# A threshold no duration reaches (a monitor that is off).
_NEVER = (1 << 63) - 1

# Commands that may lazily expire keys they were not asked about (Redis's hidden
# CMD_TOUCHES_ARBITRARY_KEYS flag): their DELs are propagated unwrapped.
_TOUCHES_ARBITRARY_KEYS = frozenset({"scan", "randomkey"})
# Clients whose error replies nobody reads: Redis logs each one (afterErrorReply), as a
# sign of divergence between the two sides of a link or of a bad AOF. kind -> (this
# side, the other side) in its words.
_UNREAD_ERRORS = {"master": ("replica", "master"), "replica": ("master", "replica"),
                  "aof": ("server", "AOF-loading-client")}


class Stats(IOStats):
    """Counters INFO stats reports, reset by CONFIG RESETSTAT where Redis resets them
    (the network ones, which every read and write bumps, are IOStats's C fields)."""

    def __init__(self, cmdstats: CommandStatsTable) -> None:
        super().__init__()
        self.cmdstats = cmdstats
        self.reset()

    @property
    def total_commands_processed(self) -> int:
        """Every call() counts its command once (and CONFIG RESETSTAT zeroes both),
        so the total is the commands' sum: one counter less to bump per command."""
        return self.cmdstats.total_calls()

    def reset(self) -> None:
        self.reset_io()
        self.total_connections_received = 0
        self.rejected_connections = 0
        self.total_error_replies = 0
        self.unexpected_error_replies = 0
        self.errorstats: dict[bytes, int] = {}
        self.dump_payload_sanitizations = 0
        self.reply_buffer_shrinks = 0
        self.reply_buffer_expands = 0
        # The cron's samples: (when, commands, input bytes, output bytes, replication input
        # bytes, replication output bytes), the last 16 (Redis's STATS_METRIC_SAMPLES).
        self.instantaneous: deque[tuple[float, int, int, int, int, int]] = deque(maxlen=16)


class WatchedKey:
    """One key a client WATCHes, and whether it was already expired then."""

    __slots__ = ("client", "db", "key", "expired")

    def __init__(self, client: Client, db: Database, key: bytes, expired: bool) -> None:
        self.client = client
        self.db = db
        self.key = key
        self.expired = expired


class SlowlogEntry:
    __slots__ = ("id", "time", "duration", "argv", "addr", "name")

    def __init__(self, entry_id: int, when: int, duration: int, argv: list[bytes], addr: str, name: bytes) -> None:
        self.id = entry_id
        self.time = when
        self.duration = duration
        self.argv = argv
        self.addr = addr
        self.name = name


class _GatingState:
    """A Server attribute (kept in ``_<name>``) whose every assignment refreshes
    ``Server._special``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, server: Any, owner: type | None = None) -> Any:
        return self if server is None else getattr(server, self.slot)

    def __set__(self, server: Any, value: Any) -> None:
        setattr(server, self.slot, value)
        server._update_special()


class Server(ServerCore):
    """All shared state of one rill-server process."""

    def __init__(self, config: Config | None = None) -> None:
        self._special = self._gated = self._gated_beyond_memory = False
        self._active_active: ActiveActive | None = None
        self.config = config or Config()
        self.keyspace = Keyspace(self.config.int("databases"))
        self.keyspace.on_modified = self._key_modified
        self.keyspace.on_expired = self._expired
        self.table = TABLE.renamed(self.config.renames, ConfigLineError)
        self.commands = self.table.commands
        self.dispatch = self.table.dispatch
        self.clients: dict[int, Client] = {}
        self.next_client_id = 1
        # Each command's calls, time, rejections, failures and latency histogram on
        # this server (the command table holds only facts, shared by every Server).
        self.cmdstats = CommandStatsTable()
        self.stats = Stats(self.cmdstats)
        self.blocking = Blocking(self)  # blocked clients: parked, served, timed out (blocking.py)
        self.start_monotonic = time.monotonic()
        self.pid = os.getpid()
        self.run_id = os.urandom(20).hex()
        self.dirty = 0
        self.lastsave = int(time.time())
        self.loading = False
        self.slowlog: deque[SlowlogEntry] = deque()
        self.slowlog_next_id = 0
        self.latency = LatencyMonitor()
        # fork() statistics (INFO stats, LATENCY DOCTOR), kept by persistence.
        self.total_forks = 0
        self.latest_fork_usec = 0
        self.fork_rate = 0.0  # GB of memory per second of fork()
        self.monitors: list[Client] = []
        # The pause in force (see pause()): its end, and whether it holds writes only.
        self.pause_until = 0.0
        self.pause_writes_only = False
        self.pauses: dict[str, tuple[float, bool]] = {}  # purpose -> (end, writes only)
        self.paused_clients: list[Client] = []
        self.loop: Any = None
        self.tcp_port = 0
        self.tls_port = 0  # the TLS listener's port (0: none)
        self.tls = TLS(self.config)  # the tls-* contexts, built when TLS is in use
        self.executable = ""
        # The process title (server/proctitle.py's ProcTitle), which rill-server installs;
        # a background child calls its update with the child's name.
        self.proc_title: Any = None
        self.config_changed_hooks: dict[str, Callable[[], None]] = {}
        self.acl = Acl(self)  # users; every client gets one (the default user) when created
        self.tracking = Tracking(self)  # CLIENT TRACKING (client-side caching)
        # The one propagation path (server/propagation.py): (db id, argv) effects of
        # write commands go to its named feeds; ``propagating`` is True while any is
        # attached, so that nobody builds effects that no feed would take.
        self.propagating = False
        self.commands_wanted = False  # a feed that records commands (not only Active-Active's)
        self.aa_seal = None  # Active-Active's feed while it is the only one (propagation.py)
        self.propagation = Propagation(self)
        self._also: list[tuple[int, list[bytes]]] = []
        # Keys a writable replica's own clients gave a TTL (Redis's slaveKeysWithExpire): key ->
        # bitmap of the databases (0-63) it may be in. No master will DEL them, so the cron does.
        self.replica_keys_with_expire: dict[bytes, int] = {}
        self._rewritten: list[bytes] | None = None
        self._prevent_propagation = False
        self.before_write_hooks: list[Callable[[], None]] = []
        # The connection layer's reply batch (see server.connection.ReplyBatch).
        self.reply_batch: Any = None
        # Set by the connection layer: answer other clients while a script is past
        # busy-reply-threshold (the event loop itself is inside the script).
        self.serve_while_busy: Callable[[Client], None] | None = None
        self.active_expire_enabled = True
        self.cron_paused = False
        # Persistence and other subsystems attach here (load at start, save at exit).
        self.startup_hooks: list[Callable[[], None]] = []
        # The start-up load as steps (persistence's startup_steps), which rill-server
        # drives on its loop while answering clients with -LOADING.
        self.startup_load: Callable[[], Any] | None = None
        self.shutdown_hooks: list[Callable[[], None]] = []
        # Periodic duties of other subsystems (persistence: children, save points, fsync).
        self.cron_hooks: list[Callable[[], None]] = []
        # Run as this server starts or stops following a master (REPLICAOF), before the
        # command's reply: what depends on the role (oom-score-adj) follows at once.
        self.role_hooks: list[Callable[[], None]] = []
        # DEBUG REPLYBUFFER: the reply buffers' resizing and how often their peak restarts
        self.reply_buffer_resizing = True
        self.reply_buffer_peak_reset_ms = REPLY_PEAK_RESET_MS
        self.write_denied = None
        self.shutdown_event: Any = None
        self.pending_shutdown: Any = None  # a shutdown waiting for replicas (shutdown.py)
        # The signal (SIGTERM/SIGINT) whose shutdown the cron has yet to start (Redis's
        # shutdown_asap), 0 when none: SHUTDOWN ABORT can still cancel it.
        self.shutdown_asap = 0
        # Pub/Sub's subscriptions, which keyspace events publish through (notify.py).
        self.pubsub = PubSub()
        # Both Lua interpreters, EVAL's and FUNCTION's, each adding itself here
        # (SCRIPT KILL and the BUSY checks look in each); they share one random state.
        self.lua_vms: list[LuaEngine] = []
        self.scripting = LuaEngine(self)
        self.functions = FunctionsEngine(self)
        # The memory figure while maxmemory or maxmemory-clients is set (server/memory.py):
        # connections have it re-weigh their client as its buffers change.
        self.client_mem: Any = None
        self.config.listeners.append(self._config_changed)
        self._refresh_config()
        self.config_changed_hooks["notify-keyspace-events"] = lambda: events.configure(self)
        events.configure(self)
        # The dataset on disk and the master side of replication, which share the one
        # fork child (disk.py, replication/master.py), hooked into start-up, shutdown,
        # the cron and the propagation path; then the replica side, idle until
        # REPLICAOF (replication/replica.py), its cron after persistence's.
        self.persistence = Persistence(self)
        self.persistence.master = MasterSide(self, self.persistence)
        self.persistence.install()
        self.replica_side = ReplicaSide(self)
        self.cron_hooks.append(self.replica_side.cron)
        self.failover = Failover(self)  # FAILOVER's state; its cron after the replica's
        activeactive.install(self)

    def new_stream(self) -> Stream:
        """The stream a write creates: one with a sub-stream per region while
        Active-Active is on (docs/active-active.md), else an ordinary one."""
        engine = self.active_active
        return Stream() if engine is None else ActiveStream(engine.region)

    # -- server states that gate every command -----------------------------
    # loading, maxmemory, CLIENT PAUSE's end (a time.monotonic() reading, 0 when not
    # paused), MISCONF's check (set by persistence while a failed save or AOF
    # write must stop writes), client tracking (some client has it on: every
    # command goes through call(), which remembers what tracking clients read) and
    # following a master (REPLICAOF: writes are refused) and min-replicas-to-write
    # (writes need enough replicas acknowledging in time) are each rare, but
    # execute() asks about all of them for every command: setting any one
    # refreshes a combined flag, so the ordinary case costs a single test.
    # ``_gated`` is that flag for execute() (processCommand's checks); ``_special``
    # adds Active-Active for execute_all(), whose inline call() would bypass the
    # engine: its writes must take call(), but none of the gate's checks concern it.
    # ``_special``, ``_gated`` and ``_gated_beyond_memory`` are fields of ServerCore
    # (fastpath.py), set in __init__: a class attribute here would shadow the compiled
    # field, which the dispatcher reads. maxmemory alone (``_gated`` without
    # ``_gated_beyond_memory``) leaves a plain client's commands on execute_all()'s fast
    # path: of the gate's checks only eviction concerns them, and that is one call there.
    _loading = False
    _maxmemory = 0
    _pause_until = 0.0
    _write_denied: Callable[[], ReplyError | None] | None = None
    _tracking_active = False
    _replica_of: tuple[str, int] | None = None
    _min_replicas: tuple[int, int] | None = None
    # _active_active (the engine, or None) is a ServerCore field (fastpath.py): a class
    # attribute here would shadow it.

    def _update_special(self) -> None:
        self._gated_beyond_memory = bool(
            self._loading or self._pause_until or self._write_denied is not None
            or self._tracking_active or self._replica_of is not None or self._min_replicas is not None
        )
        self._gated = self._gated_beyond_memory or bool(self._maxmemory)
        self._special = self._gated or self._active_active is not None
        # A pause holds expiry still (Redis keeps the dataset constant while paused), and
        # so does following a master, whose DELs decide when keys go.
        self.keyspace.expire_paused = bool(self._pause_until) or self._replica_of is not None
        self.keyspace.on_set_expire = None if self._replica_of is None else self._replica_key_expire
        evictor = self.__dict__.get("evictor")
        if evictor is not None:  # it keeps its own copies of the states it reads per command
            evictor.gates_changed()

    def _replica_key_expire(self, db: Any, key: bytes) -> None:
        # The master's stream (and loading) runs with expiry disallowed: its keys are its own.
        if self.keyspace.expire_allowed and db.id < 64:
            self.replica_keys_with_expire[key] = self.replica_keys_with_expire.get(key, 0) | 1 << db.id

    def _expire_replica_keys(self) -> None:
        """Redis's expireSlaveKeys: delete the tracked keys whose time has passed, and stop
        tracking those that no longer have a TTL in any of their databases."""
        tracked = self.replica_keys_with_expire
        dbs = self.keyspace.dbs
        for key, bits in list(tracked.items()):
            left = 0
            for dbid in range(min(64, len(dbs))):
                if bits >> dbid & 1:
                    db = dbs[dbid]
                    if key in db.expires and not db.expire_if_due(key):
                        left |= 1 << dbid
            if left:
                tracked[key] = left
            else:
                del tracked[key]
        if self._also:
            self._flush_also()

    loading = _GatingState()
    maxmemory = _GatingState()
    pause_until = _GatingState()
    write_denied = _GatingState()
    tracking_active = _GatingState()
    replica_of = _GatingState()  # (host, port) of the master this server follows
    min_replicas = _GatingState()  # (min-replicas-to-write, min-replicas-max-lag), both set
    # The Active-Active engine (server/activeactive/), while the mode is on: every write
    # goes through call(), which hands it to the engine.
    active_active = _GatingState()

    # -- config ----------------------------------------------------------
    def _refresh_config(self) -> None:
        c = self.config
        self.requirepass = c["requirepass"]
        # Redis logs a command whose microseconds are >= the threshold (none when it
        # is negative); compared in nanoseconds, that is duration >= threshold * 1000.
        threshold = c.int("slowlog-log-slower-than")
        self.slowlog_threshold_ns = threshold * 1000 if threshold >= 0 else -1
        # The latency monitor takes an event of >= threshold ms (0: off); a command's
        # milliseconds are its nanoseconds // 10**6, so that is duration >= ms * 10**6.
        self.latency_threshold_ms = c.int("latency-monitor-threshold")
        self.latency_threshold_ns = self.latency_threshold_ms * 1_000_000 or _NEVER
        # The dispatcher compares each duration with the smaller of the two
        # thresholds only; slow_command() sorts out which of them it passed. At most
        # _NEVER, so that it fits the compiled dispatcher's 64-bit duration compare.
        self.slow_ns = min(
            self.latency_threshold_ns, self.slowlog_threshold_ns if threshold >= 0 else _NEVER, _NEVER
        )
        self.latency_tracking = c.bool("latency-tracking")
        # As given (CONFIG GET shows them rounded to 6 decimals; INFO uses the numbers).
        given = c.given.get("latency-tracking-info-percentiles", c["latency-tracking-info-percentiles"])
        self.latency_percentiles = [parse_percentile(p) for p in given.split(" ")] if given else []
        to_write, max_lag = c.int("min-replicas-to-write"), c.int("min-replicas-max-lag")
        self.min_replicas = (to_write, max_lag) if to_write and max_lag else None
        self.slowlog_max_len = c.int("slowlog-max-len")
        self.proto_max_bulk_len = c.int("proto-max-bulk-len")
        self.maxclients = c.int("maxclients")
        self.timeout = c.int("timeout")
        self.query_buffer_limit = c.int("client-query-buffer-limit")
        self.stream_node_max_bytes = c.int("stream-node-max-bytes")
        self.stream_node_max_entries = c.int("stream-node-max-entries")
        # XADD syncs Stream's class-wide node limits from these only when its server is
        # not the one they were last synced from (per call it compares no config).
        _streams.node_limits_changed(self)
        self.obuf_limits = _parse_obuf(c["client-output-buffer-limit"])
        # The least size a normal or pub/sub limit names: output that big is checked
        # before it is written, as Redis counts a reply against the limits when it is
        # queued, not when the socket refuses it.
        sizes = [v for kind in ("normal", "pubsub") for v in self.obuf_limits.get(kind, (0, 0, 0))[:2] if v]
        self.obuf_floor = min(sizes) if sizes else sys.maxsize
        self.maxmemory = c.int("maxmemory")
        if self.maxmemory:
            evictor_of(self).soon()  # a limit under the figure evicts at once
        elif c["maxmemory-clients"] != "0":
            memory_of(self)  # it follows both settings from now on
        policy = c["maxmemory-policy"]
        self.keyspace.set_lfu("lfu" in policy, c.int("lfu-log-factor"), c.int("lfu-decay-time"))
        # Redis stops sharing small integers under an LRU or LFU policy (each key needs
        # its own access stamp): OBJECT REFCOUNT then says 1.
        self.keyspace.shared_integers = not (self.maxmemory and ("lru" in policy or "lfu" in policy))
        # Storage's encoding thresholds and the streams' GC ratio are storage's own
        # module-wide settings (storage reads no config): the server sets them.
        _hash.set_limits(c.int("hash-max-listpack-entries"), c.int("hash-max-listpack-value"))
        _set.set_limits(c.int("set-max-intset-entries"))
        _zset.set_thresholds(c.int("zset-max-listpack-entries"), c.int("zset-max-listpack-value"))
        Stream.gc_ratio = c.int("stream-node-gc-percent") / 100.0

    def _config_changed(self, name: str) -> None:
        self._refresh_config()
        hook = self.config_changed_hooks.get(name)
        if hook is not None:
            hook()

    # -- clients -----------------------------------------------------------
    def new_client(self, addr: str = "", laddr: str = "", fd: int = -1) -> Client:
        client = Client(self, self.next_client_id, addr, laddr, fd)
        self.next_client_id += 1
        self.clients[client.id] = client
        return client

    def client_gone(self, client: Client) -> None:
        """Forget everything that references a disconnected client."""
        self.clients.pop(client.id, None)
        if client.mem:
            memory_of(self).forget(client)
        if client.blocked is not None:
            self.blocking.unpark(client.blocked)
        self.unwatch_all(client)
        if client.monitor and client in self.monitors:
            self.monitors.remove(client)
        if client in self.paused_clients:
            self.paused_clients.remove(client)
        if client.tracking:
            self.tracking.disable(client)
        self.pubsub.drop_client(client)

    # -- dispatch ----------------------------------------------------------
    def execute(self, client: Client, argv: list[bytes]) -> bool:
        """Run one command for ``client`` as Redis's processCommand does.

        Returns True when CLIENT PAUSE postponed the command: the caller keeps
        it (and what follows) until the pause ends.
        """
        cmd = self.dispatch.get(argv[0])
        if cmd is None:
            cmd = self.commands.get(argv[0].lower())
        if cmd is None or cmd.subcommands:
            cmd = self.table.lookup(argv)
            if cmd is None:
                client.last_cmd = None
                self._reject(client, None, ReplyError(_unknown_command(self.table, argv)))
                return False
        # Set before running, as processCommand does: CLIENT LIST shows the command
        # in progress for its own caller, and EXEC (not what it runs) afterwards.
        client.last_cmd = cmd
        if not cmd.min_argc <= len(argv) <= cmd.max_argc:
            return self._reject(
                client, cmd, ReplyError(f"ERR wrong number of arguments for '{cmd.fullname}' command")
            )
        if cmd.flags & PROTECTED and not self._protected_allowed(client, cmd):
            what, option = ("DEBUG", "enable-debug-command") if cmd.fullname == "debug" else (
                "MODULE", "enable-module-command")
            return self._reject(client, cmd, ReplyError(
                f"ERR {what} command not allowed. If the {option} option is set to \"local\", you can "
                "run it from a local connection, otherwise you need to set this option in the "
                "configuration file, and then restart the server."
            ))
        # The checks below concern states that are rare on the hot path; one
        # combined test lets an ordinary command skip all of them.
        if (
            self._gated
            or client.multi is not None
            or not client.authenticated
            or client.subscriptions
        ):
            return self._gate(client, cmd, argv)
        self.call(client, cmd, argv)
        if self.blocking.ready:
            self.blocking.serve_ready()
        return False

    def execute_busy(self, client: Client, argv: list[bytes]) -> None:
        """A command that arrives while a script is busy: only those Redis allows then
        (allow-busy: SCRIPT KILL, SHUTDOWN, MULTI, ...) run; the others are refused
        with BUSY (inside MULTI that aborts the transaction, as any refusal does)."""
        cmd = self.table.lookup(argv)
        if cmd is not None:
            if self._loading and not cmd.flags & LOADING:
                # a script in the file being loaded is the busy one: processCommand
                # answers LOADING (after its earlier checks) before it looks for BUSY
                self.execute(client, argv)
                return
            if cmd.min_argc <= len(argv) <= cmd.max_argc and not cmd.flags & ALLOW_BUSY:
                client.last_cmd = cmd
                self._reject(client, cmd, busy_error(running(self)))
                return
        self.execute(client, argv)  # unknown or wrong arity: its own error first, as Redis

    # The dispatcher's loop over one read's commands: a module of its own, which the
    # build compiles typed (fastpath.pxd).
    execute_all = _execute_all

    def _protected_allowed(self, client: Client, cmd: Command) -> bool:
        """enable-debug-command / enable-module-command: yes, no, or local (a unix
        socket or a loopback peer). Internal clients (AOF loading, scripts) may."""
        if client.id < 0:
            return True
        setting = self.config["enable-debug-command" if cmd.fullname == "debug" else "enable-module-command"]
        if setting == "yes":
            return True
        if setting == "local":
            return client.kind == "unix" or client.addr.rpartition(":")[0] in ("127.0.0.1", "::1")
        return False

    def _gate(self, client: Client, cmd: Command, argv: list[bytes]) -> bool:
        """processCommand's checks for clients and servers in a special state."""
        # Not "authenticated" means: needs AUTH first, or its ACL user is restricted.
        if not client.authenticated and not cmd.flags & NO_AUTH and self.acl.auth_required(client):
            self._reject(client, cmd, NOAUTH)
            return False
        if client.multi is not None and cmd.flags & NO_MULTI:
            self._reject(client, cmd, ReplyError("ERR Command not allowed inside a transaction"))
            return False
        if not client.authenticated:
            denied = self.acl.denied(client, cmd, argv)
            if denied is not None:
                self._reject(client, cmd, denied)
                return False
        if client.subscriptions and not client.resp3:
            if argv[0].lower() not in _PUBSUB_ALLOWED:
                return self._reject(
                    client,
                    cmd,
                    ReplyError(
                        f"ERR Can't execute '{cmd.fullname}': only (P|S)SUBSCRIBE / "
                        "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                    ),
                )
        if client.kind == "aof":
            # The AOF being loaded: Redis's loader calls each command directly, so no
            # server state (loading, stale data, maxmemory, min-replicas, a pause) may
            # refuse what the file already holds; only MULTI's queueing applies.
            return self._run_or_queue(
                client, cmd, argv, cmd.flags if cmd.flags_for is None else cmd.flags_for(client, argv))
        # The states themselves, not their gating descriptors: under any of them this
        # runs for every command.
        replica_of = self._replica_of
        if replica_of is not None and self._stale_denied(client, cmd, argv):
            self._reject(client, cmd, MASTERDOWN_ERR)
            return False
        if self._loading and not cmd.flags & LOADING:
            self._reject(client, cmd, LOADING_ERR)
            return False
        flags = cmd.flags if cmd.flags_for is None else cmd.flags_for(client, argv)
        if self._maxmemory and self._rejects_for_memory(client, flags, argv):
            self._reject(client, cmd, OOM_ERR)
            return False
        if self._write_denied is not None and self._denied_for_disk(client, cmd, flags, argv):
            return False
        if self._min_replicas is not None and not self.good_replicas_ok() and (
                flags & WRITE or (cmd.fullname == "exec" and client.multi_flags & WRITE)):
            self._reject(client, cmd, NOREPLICAS_ERR)
            return False
        if (replica_of is not None and flags & WRITE and client.kind != "master"
                and client.id >= 0 and self.config.bool("replica-read-only")):
            self._reject(client, cmd, READONLY_ERR)
            return False
        if self._pause_until and self._paused_for(client, cmd, flags):
            return True
        return self._run_or_queue(client, cmd, argv, flags)

    def _run_or_queue(self, client: Client, cmd: Command, argv: list[bytes], flags: int) -> bool:
        """The end of processCommand: queue inside MULTI, else call."""
        if client.multi is not None and argv[0].lower() not in _MULTI_PASSTHROUGH:
            client.multi.append((cmd, argv))
            client.multi_mem += sum(map(len, argv)) + _QUEUED_ENTRY
            client.multi_flags |= flags
            client.reply(QUEUED)
            return False
        self.call(client, cmd, argv)
        if self.blocking.ready:
            self.blocking.serve_ready()
        return False

    def good_replicas_ok(self) -> bool:
        """checkGoodReplicasStatus: a replica, or a master with at least
        min-replicas-to-write replicas that acknowledged within min-replicas-max-lag s."""
        if self.min_replicas is None or self.replica_of is not None:
            return True
        to_write, max_lag = self.min_replicas
        return master_side(self).good_replicas(max_lag) >= to_write

    def stale(self) -> bool:
        """A replica whose link to its master is not up, told by replica-serve-stale-data
        no not to serve its (stale) data."""
        return (self._replica_of is not None and not self.config.bool("replica-serve-stale-data")
                and self.replica_side.state != "connected")

    def _stale_denied(self, client: Client, cmd: Command, argv: list[bytes]) -> bool:
        """While stale(): only commands flagged stale (INFO, REPLICAOF, ...) run; EXEC
        only if all it holds are; EVAL and FCALL as their script's flags make them (a
        script or function flagged allow-stale runs, and only its stale commands then)."""
        if client.kind == "master" or not self.stale():
            return False
        if cmd.fullname == "exec" and client.multi is not None:
            return any(not queued.flags & STALE for queued, _ in client.multi)
        flags = cmd.flags if cmd.flags_for is None else cmd.flags_for(client, argv)
        return not flags & STALE

    def _rejects_for_memory(self, client: Client, flags: int, argv: list[bytes]) -> bool:
        """maxmemory: evict as maxmemory-policy says (before every command, as Redis's
        processCommand does); if memory is still over the limit, commands that may grow
        it are refused (and, in a transaction, whatever would be queued)."""
        if self.evictor.perform(client.db) != EVICT_FAIL:  # made when maxmemory was set
            return False
        name = argv[0].lower()
        flags |= client.multi_flags if name == b"exec" else 0
        if not flags & DENYOOM:
            return client.multi is not None and name not in (b"exec", b"discard", b"quit", b"reset")
        return True

    def _denied_for_disk(self, client: Client, cmd: Command, flags: int, argv: list[bytes]) -> bool:
        """MISCONF: writes (and PING) are refused while persistence reports a disk error."""
        if client.id < 0:
            return False
        name = argv[0].lower()
        flags |= client.multi_flags if name == b"exec" else 0
        if not flags & WRITE and name != b"ping":
            return False
        err = self.write_denied()
        if err is None:
            return False
        self._reject(client, cmd, err)
        return True

    def _paused_for(self, client: Client, cmd: Command, flags: int) -> bool:
        if time.monotonic() >= self.pause_until:
            self.settle_pauses()
            if not self.pause_until:
                return False
        if client.kind == "replica" or client.id < 0:
            return False  # replicas never pause; the master's stream does, as in Redis
        if self.pause_writes_only:
            flags |= client.multi_flags if cmd.fullname == "exec" else 0
            if not flags & (WRITE | MAY_REPLICATE):
                return False
        if client not in self.paused_clients:
            self.paused_clients.append(client)
        return True

    def pause(self, purpose: str, end: float, writes_only: bool) -> None:
        """pauseClients: hold clients' commands until ``end`` (a time.monotonic()
        reading), writes only or all. Each purpose (CLIENT PAUSE's "client", a
        shutdown waiting for its replicas, FAILOVER) keeps its latest end and its
        stricter kind, and ends on its own; the server pauses as the strictest of them,
        until the latest end among those of that kind."""
        held = self.pauses.get(purpose)
        if held is not None:
            end, writes_only = max(end, held[0]), writes_only and held[1]
        self.pauses[purpose] = (end, writes_only)
        self.settle_pauses()

    def unpause(self, purpose: str) -> None:
        """One purpose's pause is over (CLIENT UNPAUSE ends only CLIENT PAUSE's)."""
        if self.pauses.pop(purpose, None) is not None:
            self.settle_pauses()

    def settle_pauses(self) -> None:
        """Drop the pauses whose end has come and put the strictest left in force;
        clients it no longer holds run their commands (a weaker pause holds again
        those it still concerns)."""
        now = time.monotonic()
        pauses = self.pauses
        for purpose in [p for p, (end, _w) in pauses.items() if end <= now]:
            del pauses[purpose]
        was_all = bool(self.pause_until) and not self.pause_writes_only
        if not pauses:
            self.pause_until = 0.0
            self.pause_writes_only = False
        else:
            writes_only = all(w for _e, w in pauses.values())
            self.pause_until = max(e for e, w in pauses.values() if w == writes_only)
            self.pause_writes_only = writes_only
            if not (was_all and writes_only):
                return
        paused, self.paused_clients = self.paused_clients, []
        for client in paused:
            client.on_output(client)

    def protected_mode_refuses(self, unix: bool, transport: Any) -> bool:
        """Protected mode: no password for the default user -> only clients from 127.0.0.1,
        ::1 or the unix socket, whatever ``bind`` says (Redis 7.0's islocalClient)."""
        if unix or not self.config.bool("protected-mode") or not self.acl.default.nopass:
            return False
        peer = transport.get_extra_info("peername") or ("",)
        return peer[0] not in ("127.0.0.1", "::1")

    def _reject(self, client: Client, cmd: Command | None, err: ReplyError) -> bool:
        if client.multi is not None:
            client.multi_dirty = True
        if cmd is not None:
            self.cmdstats.of(cmd).rejected_calls += 1
            if cmd.fullname == "exec":
                self.discard_transaction(client)
                msg = err.message[1:] if err.message.startswith(b"-") else err.message
                err = ReplyError(b"EXECABORT Transaction discarded because of: " + msg)
        self.count_error(err)
        if client.kind in _UNREAD_ERRORS:
            self._unread_error(client, None if cmd is None else cmd.fullname, err)
        client.reply(err)
        return False

    def _unread_error(self, client: Client, cmdname: str | None, err: ReplyError) -> None:
        """afterErrorReply's warning for an error sent where nobody reads it (the master
        link, a replica's link, the AOF being loaded), counted as unexpected_error_replies."""
        this, other = _UNREAD_ERRORS[client.kind]
        log.warning("== CRITICAL == This %s is sending an error to its %s: '%s' after processing the command '%s'",
                    this, other, err.message[:4096].decode(errors="replace"), cmdname or "<unknown>")
        self.stats.unexpected_error_replies += 1

    def count_error(self, err: ReplyError) -> None:
        self.stats.total_error_replies += 1
        code = err.code
        stats = self.stats.errorstats
        if code in stats:
            stats[code] += 1
        elif len(stats) < 128:
            stats[code] = 1

    def call(self, client: Client, cmd: Command, argv: list[bytes]) -> Any:
        """Run a command's handler; record stats, slowlog, propagation and readiness.

        Returns the reply value (already queued to the client unless it blocked).
        execute_all() runs this same sequence inline for plain commands (a frame per
        pipelined command is measurable): a change here belongs there too.
        """
        client.cur_cmd = cmd
        client.argv = argv
        dirty = self.dirty
        # Two clock reads per command, as Redis's call() does: commandstats and
        # the slowlog need each command's own duration, and perf_counter_ns is
        # cheap next to the handler. Kept in nanoseconds: the microseconds are
        # worked out when someone reads them, not per command.
        start = perf_counter_ns()
        try:
            # The engine itself, not its gating descriptor: this runs for every command.
            engine = self._active_active
            if engine is None or not cmd.flags & WRITE:
                reply = cmd.handler(client, argv)
            else:
                reply = engine.run(client, cmd, argv)
        except ReplyError as err:
            reply = err
        duration = perf_counter_ns() - start
        try:
            st = self.cmdstats.by_cmd[cmd]
        except KeyError:  # its first call on this server
            st = self.cmdstats.of(cmd)
        st.nsec += duration
        latency_on = self.latency_tracking
        if latency_on:
            if duration < TABLE_NS:  # past the table: worked out, not met as an IndexError
                try:
                    st.hist[HDR_OF[duration]] += 1
                except IndexError:  # its first sample: the histogram is allocated now
                    record_long(st, duration)
            else:
                record_long(st, duration)
        else:
            st.untracked += 1
        blocks = type(reply) is Block
        reply = self._reply(client, cmd, argv, reply)
        if blocks and client.blocked is not None:
            self.blocking.sample_when_served(client.blocked, duration, latency_on)
        if duration >= self.slow_ns:
            self.slow_command(client, cmd, argv, duration)
        if self._also or (self.dirty != dirty and (self.blocking.waiters or self.propagating)):
            self._after_write(client, cmd, argv, self.dirty != dirty)
        elif self._rewritten is not None or self._prevent_propagation:
            # A command that changed nothing (or whose change nobody waits for or
            # records) must not leave its propagation choices behind for the next one.
            self._rewritten = None
            self._prevent_propagation = False
        if self.monitors and not cmd.flags & (SKIP_MONITOR | ADMIN):
            self.feed_monitors(client, argv)
        if self._tracking_active and cmd.flags & READONLY:
            self._tracking_read(client, cmd, argv)
        return reply

    def _tracking_read(self, client: Client, cmd: Command, argv: list[bytes]) -> None:
        """A read-only command ran: remember its keys for its client if that one tracks.

        A command a script runs stands for its caller, whose EVAL/FCALL declared the
        keys: those are remembered once the script reads anything. EVAL_RO and the
        like are left to what their script runs, as in Redis's call().
        """
        if client.id < 0:
            ctx = running(self)
            if ctx is None or ctx.client is not client or not ctx.caller.tracking:
                return
            caller = ctx.caller
            if caller.cur_cmd is not None:
                self.tracking.remember(caller, caller.cur_cmd, caller.argv)
        elif client.tracking and cmd.fullname not in _SCRIPT_READS:
            self.tracking.remember(client, cmd, argv)

    def _reply(self, client: Client, cmd: Command, argv: list[bytes], reply: Any) -> Any:
        """A handler's result: block the client on it, or count it as an error, and
        queue its encoding (unless CLIENT REPLY is off); returns what was replied."""
        if type(reply) is Block:
            if client.in_exec or client.id < 0:
                # Inside MULTI (or for internal clients) a blocking command never blocks.
                reply = reply.timeout_reply
            else:
                self.blocking.block(client, cmd, argv, reply)
                return NO_REPLY
        if reply is not NO_REPLY:
            if type(reply) is ReplyError:
                self.cmdstats.of(cmd).failed_calls += 1
                self.count_error(reply)
                if client.kind in _UNREAD_ERRORS:
                    self._unread_error(client, cmd.fullname, reply)
            if not client.reply_mode:
                # The one reply encoder; its first branches are the common replies.
                encode_into(reply, client.out, client.resp3)
        return reply

    def _after_write(self, client: Client, cmd: Command, argv: list[bytes], changed: bool = True) -> None:
        if self.blocking.waiters and cmd.flags & WRITE:
            self.blocking.signal_command(client.db.id, cmd, argv)
        ops = self._also
        if not self.commands_wanted and not ops and self._exec_ops is None:
            # Active-Active's feed alone (no AOF, replica or observer): it seals the
            # engine's unit and reads nothing of the command's argv, so none is built
            # and propagate() is skipped (what it would do comes to this). A sixth of
            # the feed's cost per write.
            feed = self.propagation.active_active
            if feed is not None and self._active_active.has_unit():
                feed(ops, False)
            self._rewritten = None
            self._prevent_propagation = False
            return
        if self.propagating:
            if changed and not self._prevent_propagation and cmd.flags & WRITE:
                ops.append((client.db.id, self._rewritten or argv))
            engine = self._active_active
            if ops or (engine is not None and engine.has_unit()):
                # Lazy expiry during SCAN/RANDOMKEY deletes unrelated keys: Redis sends
                # those DELs on their own, not wrapped as one transaction.
                self.propagate(ops, wrap=cmd.fullname not in _TOUCHES_ARBITRARY_KEYS)
        # A feed may keep the list it was handed, so a used one is replaced;
        # an untouched empty one is reused (most writes, with no feed attached).
        if ops:
            self._also = []
        self._rewritten = None
        self._prevent_propagation = False

    # -- propagation -------------------------------------------------------
    def also_propagate(self, db_id: int, argv: list[bytes]) -> None:
        """Record an extra effect of the running command (Redis's alsoPropagate)."""
        if self.propagating:
            self._also.append((db_id, argv))

    def rewrite_propagation(self, argv: list[bytes]) -> None:
        """Propagate the running command as ``argv`` instead of what the client sent."""
        self._rewritten = argv

    def propagate(self, ops: list[tuple[int, list[bytes]]], wrap: bool = True) -> None:
        """Hand the effects of one command (or one EXEC) to each feed, by name
        (server/propagation.py): the AOF, then the replicas, as Redis's propagateNow.

        Several effects travel wrapped in MULTI/EXEC so they apply atomically
        (unless ``wrap`` is False).
        """
        if self._exec_ops is not None:
            self._exec_ops.extend(ops)
            return
        feeds = self.propagation
        if feeds.active_active is not None:
            # First, so the unit is stamped before anything records it: the AOF keeps
            # the effect record beside the commands (a restart rebuilds the clocks and
            # the backlog from it); replicas get the commands only. The record's argv
            # is made only for the AOF.
            aof = feeds.aof
            record = feeds.active_active(ops, aof is not None)
            if aof is not None:
                aof_ops = ops if record is None else [*ops, (ops[-1][0] if ops else 0, record)]
                if wrap and len(aof_ops) > 1:
                    aof_ops = [(aof_ops[0][0], [b"MULTI"]), *aof_ops, (aof_ops[-1][0], [b"EXEC"])]
                if aof_ops:
                    aof(aof_ops)
            if not ops:
                return
            if wrap and len(ops) > 1:
                ops = [(ops[0][0], [b"MULTI"]), *ops, (ops[-1][0], [b"EXEC"])]
        else:
            if wrap and len(ops) > 1:
                ops = [(ops[0][0], [b"MULTI"]), *ops, (ops[-1][0], [b"EXEC"])]
            if feeds.aof is not None and ops:
                feeds.aof(ops)
            if not ops:
                return
        if feeds.replication is not None:
            feeds.replication(ops)
        if feeds.observer is not None:
            feeds.observer(ops)

    def propagate_applied(self, record: list[bytes] | None, ops: list[tuple[int, list[bytes]]]) -> None:
        """A peer's effect was applied (server/activeactive/engine.py): the AOF keeps its
        record (made only while the AOF is on, else None), replicas get the ordinary
        commands that mirror it."""
        feeds = self.propagation
        if feeds.aof is not None and record is not None:
            feeds.aof([(0, record)])
        if not ops:
            return
        if len(ops) > 1:
            ops = [(ops[0][0], [b"MULTI"]), *ops, (ops[-1][0], [b"EXEC"])]
        if feeds.replication is not None:
            feeds.replication(ops)
        if feeds.observer is not None:
            feeds.observer(ops)

    _exec_ops: list[tuple[int, list[bytes]]] | None = None
    # True while EXEC runs its queue (Redis's server.in_exec): what must not fork in the
    # middle of a transaction (CONFIG SET appendonly yes) waits for the cron instead.
    in_exec = False

    def begin_exec_propagation(self) -> bool:
        """Collect effects until end_exec_propagation() hands them on as one unit.

        Returns False, collecting into the open unit, when one is already open:
        a script that EXEC runs belongs to EXEC's transaction.
        """
        if self._exec_ops is not None:
            return False
        self._exec_ops = []
        return True

    def end_exec_propagation(self) -> None:
        ops, self._exec_ops = self._exec_ops, None
        if ops:
            self.propagate(ops)

    def _flush_also(self) -> None:
        ops, self._also = self._also, []
        for op in ops:
            self.propagate([op])

    # -- transactions --------------------------------------------------------
    def discard_transaction(self, client: Client) -> None:
        client.multi = None
        client.multi_mem = 0
        client.multi_dirty = False
        client.multi_flags = 0
        self.unwatch_all(client)

    def watch(self, client: Client, key: bytes) -> None:
        db = client.db
        for wk in client.watched:
            if wk.db is db and wk.key == key:
                return
        wk = WatchedKey(client, db, key, db.is_expired(key))
        client.watched.append(wk)
        db.watched.setdefault(key, []).append(wk)

    def unwatch_all(self, client: Client) -> None:
        for wk in client.watched:
            entries = wk.db.watched.get(wk.key)
            if entries is not None:
                try:
                    entries.remove(wk)
                except ValueError:
                    pass
                if not entries:
                    del wk.db.watched[wk.key]
        client.watched = []
        client.dirty_cas = False

    def _key_modified(self, db: Database, key: bytes) -> None:
        """The keyspace's modification signal (Redis's signalModifiedKey): WATCH and
        client tracking. The keyspace sends it for WATCHed keys only, or for every key
        while tracking needs them (Keyspace.set_signal_all)."""
        self._touch_watched(db, key)
        if self.keyspace.signal_all:
            self.tracking.invalidate(key, self.tracking.current)

    def _touch_watched(self, db: Database, key: bytes) -> None:
        """A key changed (Redis's touchWatchedKey): its watchers' EXEC will fail.

        A key that was already expired when watched and is now gone is no
        logical change, so it only loses its expired mark.
        """
        for wk in db.watched.get(key, ()):
            if wk.expired:
                if key not in db.data:
                    wk.expired = False
                    continue
            wk.client.dirty_cas = True

    def touch_all_watched(self, emptied: Database, replaced_with: Database | None = None) -> None:
        """FLUSHDB/FLUSHALL (``replaced_with`` None) and SWAPDB, before the change."""
        for key, entries in emptied.watched.items():
            exists = key in emptied.data
            if not (exists or (replaced_with is not None and key in replaced_with.data)):
                continue
            for wk in entries:
                if wk.expired:
                    if replaced_with is None or key not in replaced_with.data:
                        wk.expired = False
                        continue
                    if replaced_with.is_expired(key):
                        continue
                elif not exists and replaced_with is not None and replaced_with.is_expired(key):
                    wk.expired = True
                    continue
                wk.client.dirty_cas = True

    def watched_key_expired(self, client: Client) -> bool:
        return any(not wk.expired and wk.db.is_expired(wk.key) for wk in client.watched)

    # -- expiry ----------------------------------------------------------------
    def _expired(self, db: Database, key: bytes, value: Any = None) -> None:
        if db.watched:
            self._touch_watched(db, key)
            if self.keyspace.signal_all:
                self.tracking.invalidate(key, None)
        # An expired stream must wake its XREADGROUP waiters with their error.
        self.blocking.signal(db.id, key)
        if events.notifier is not None:
            events.notifier(db.id, "x", b"expired", key)
        if self.propagating:
            # Lazy expiry inside a command travels with that command's effects;
            # the cron flushes what active expiry produced.
            self._also.append((db.id, [b"DEL", key]))
            engine = self._active_active
            if engine is not None:
                engine.key_expired(db.id, key, value)

    # -- slowlog, latency and monitor ---------------------------------------------
    def slow_command(self, client: Client, cmd: Command, argv: list[bytes], duration: int) -> None:
        """A command at or past one of the two thresholds (``slow_ns``): the slowlog
        entry and the latency monitor's ``command``/``fast-command`` event, as Redis's
        call() records them."""
        if duration >= self.latency_threshold_ns:
            self.latency.add("fast-command" if cmd.flags & FAST else "command", duration // 1_000_000)
        if (duration >= self.slowlog_threshold_ns >= 0 and not cmd.flags & SKIP_SLOWLOG
                and client.blocked is None):  # one that blocked is logged when served
            self.slowlog_add(client, argv, duration // 1000)

    def latency_event(self, event: str, duration_ns: int) -> None:
        """Record ``event`` with the latency monitor if it took the threshold or longer."""
        if duration_ns >= self.latency_threshold_ns:
            self.latency.add(event, duration_ns // 1_000_000)

    def slowlog_add(self, client: Client, argv: list[bytes], duration: int) -> None:
        args = []
        limit = min(len(argv), 32)
        for i in range(limit):
            if limit == 32 and i == 31 and len(argv) > 32:
                args.append(b"... (%d more arguments)" % (len(argv) - 31))
                break
            a = argv[i]
            if len(a) > 128:
                a = a[:128] + b"... (%d more bytes)" % (len(a) - 128)
            args.append(a)
        self.slowlog.appendleft(
            SlowlogEntry(self.slowlog_next_id, int(time.time()), duration, args, client.addr, client.name)
        )
        self.slowlog_next_id += 1
        while len(self.slowlog) > self.slowlog_max_len:
            self.slowlog.pop()

    def feed_monitors(self, client: Client, argv: list[bytes]) -> None:
        now = time.time()
        origin = "unix:" + client.addr if client.kind == "unix" else client.addr
        if client.id < 0:
            origin = "lua" if client.kind == "lua" else "AOF"
        parts = [b'"' + repr_body(a) + b'"' for a in argv]
        line = b"+%.6f [%d %s] %s\r\n" % (now, client.db.id, origin.encode(), b" ".join(parts))
        for m in self.monitors:
            if m is not client:
                m.out.append(Raw(line))
                m.on_output(m)

    # -- housekeeping ----------------------------------------------------------
    def cron(self) -> None:
        """Periodic work, called ``hz`` times a second: active expiry, idle clients.

        DEBUG PAUSE-CRON 1 stops all of it until PAUSE-CRON 0, as in Redis.
        """
        if self.cron_paused:
            return
        st = self.stats
        st.instantaneous.append((time.monotonic(), st.total_commands_processed, st.net_input_bytes,
                                 st.net_output_bytes, st.net_repl_input_bytes, st.net_repl_output_bytes))
        self.keyspace.tick()
        if self._replica_of is not None and self.replica_keys_with_expire:
            self._expire_replica_keys()
        if self.active_expire_enabled and self.keyspace.expire_allowed:
            start = perf_counter_ns()
            for db in self.keyspace.dbs:
                if db.expires:
                    db.active_expire()
            if self._also:
                self._flush_also()
            self.latency_event("expire-cycle", perf_counter_ns() - start)
            if self.blocking.ready:
                self.blocking.serve_ready()
        if self.timeout:
            now = time.time()
            for client in list(self.clients.values()):
                if (
                    client.id > 0
                    and client.blocked is None
                    and not client.subscriptions
                    and client.kind not in ("replica",)
                    and now - client.last_interaction > self.timeout
                ):
                    client.kill_requested = True
                    client.on_output(client)
        if self.tracking.clients:
            self.tracking.limit()
        if self.reply_buffer_resizing:
            now_ms = time.monotonic() * 1000
            reset = self.reply_buffer_peak_reset_ms
            for client in self.clients.values():
                resized = resize_reply_buffer(client, now_ms, reset)
                if resized:
                    if resized < 0:
                        st.reply_buffer_shrinks += 1
                    else:
                        st.reply_buffer_expands += 1
        for hook in self.cron_hooks:
            hook()

    def request_shutdown(self) -> None:
        """Stop serving once the current batch is done (SHUTDOWN, SIGTERM)."""
        if self.shutdown_event is not None:
            self.shutdown_event.set()

    def shutdown(self, save: bool | None, force: bool = False, now: bool = False) -> bool:
        """SHUTDOWN, SIGTERM and SIGINT alike (Redis's prepareForShutdown): the final duties,
        then stop serving. ``save`` None follows the save points. A failed final save raises
        ReplyError and the server goes on serving, as Redis does, unless ``force``. False:
        lagging replicas are waited for first (shutdown-timeout, unless ``now``)."""
        return shutdown_seq.prepare(self, save, force, now)

    def uptime(self) -> int:
        return int(time.monotonic() - self.start_monotonic)

    @property
    def version(self) -> str:
        return REDIS_VERSION


def _parse_obuf(value: str) -> dict[str, tuple[int, int, int]]:
    parts = value.split()
    out = {}
    for i in range(0, len(parts) - 3, 4):
        out[parts[i]] = (int(parts[i + 1]), int(parts[i + 2]), int(parts[i + 3]))
    return out


def _unknown_command(table: Any, argv: list[bytes]) -> bytes:
    name = argv[0]
    container = table.commands.get(name.lower())
    if container is not None and container.subcommands and len(argv) > 1:
        return b"ERR unknown subcommand '%s'. Try %s HELP." % (argv[1][:128], name.upper())
    args = b""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + a[: 128 - len(args)] + b"' "
    return b"ERR unknown command '%s', with args beginning with: %s" % (name[:128], args)

