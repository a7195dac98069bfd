"""Server administration: CONFIG, FLUSHDB/FLUSHALL, DBSIZE, TIME, DEBUG, OBJECT,
MEMORY, MONITOR, SLOWLOG, SHUTDOWN (LASTSAVE lives with persistence)."""

from __future__ import annotations

import logging
import sys
import time

from rill.protocol.reply import OK, BigNumber, Double, Map, Raw, ReplyError, Set, Status, Verbatim
from rill.storage.list import set_packed_threshold

from .. import shutdown as shutdown_seq
from ..client import REPLY_PEAK_RESET_MS, Client
from ..config import ConfigError, memtoull
from ..disk import master_side
from ..memory import STARTUP_RSS, dict_table, memory_of, purge, rss
from ..outcomes import LOADING_ERR, NO_REPLY, Block
from ..scripting import busy_error, running
from .args import (
    NO_SUCH_KEY,
    SYNTAX_ERR,
    get_int,
    get_positive,
    help_reply,
    redact,
    string2ll,
)
from .table import PROTECTED, command
from .values import digest_dataset, digest_value, key_encoding, key_refcount, memory_usage

_sizeof = sys.getsizeof


# -- FLUSHDB / FLUSHALL / DBSIZE ---------------------------------------------
def _flush_is_async(c: Client, argv: list[bytes]) -> bool:
    """ASYNC, SYNC, or lazyfree-lazy-user-flush's choice when neither is given."""
    if len(argv) > 2:
        raise SYNTAX_ERR
    if len(argv) == 2:
        mode = argv[1].lower()
        if mode not in (b"async", b"sync"):
            raise SYNTAX_ERR
        return mode == b"async"
    return c.server.config.bool("lazyfree-lazy-user-flush")


def flush_db(server, db, lazy: bool = False) -> None:
    """Empty one database, touching WATCHed keys and waking blocked clients as Redis does.

    ``lazy``: the keys count as lazily freed (INFO lazyfreed_objects), as Redis's
    asynchronous flush counts every key of the databases it hands to its free thread.
    """
    if db.watched:
        server.touch_all_watched(db)
    server.blocking.signal_db(db.id)
    server.dirty += len(db)
    if lazy:
        server.keyspace.lazyfreed_objects += len(db)
    db.flush()


@command("flushdb")
def flushdb(c: Client, argv: list[bytes]):
    flush_db(c.server, c.db, _flush_is_async(c, argv))
    c.server.tracking.flushed()
    c.server.dirty += 1
    return OK


@command("flushall")
def flushall(c: Client, argv: list[bytes]):
    lazy = _flush_is_async(c, argv)
    server = c.server
    for db in server.keyspace.dbs:
        flush_db(server, db, lazy)
    server.tracking.flushed()
    server.dirty += 1
    for hook in getattr(server, "flushall_hooks", ()):
        hook()
    return OK


@command("dbsize")
def dbsize(c: Client, argv: list[bytes]):
    return len(c.db)


@command("time")
def time_(c: Client, argv: list[bytes]):
    now = time.time_ns() // 1000
    return [b"%d" % (now // 1_000_000), b"%d" % (now % 1_000_000)]


# -- CONFIG ------------------------------------------------------------------
@command("config|get")
def config_get(c: Client, argv: list[bytes]):
    seen: dict[str, tuple[bytes, bytes]] = {}  # by lower-case name: Redis matches names so
    for pattern in argv[2:]:
        for name, value in c.server.config.matching(pattern.decode(errors="replace")):
            seen.setdefault(name.lower(), (name.encode(), value.encode()))
    return Map(dict(seen.values()))


@command("config|set")
def config_set(c: Client, argv: list[bytes]):
    if len(argv) % 2:
        raise ReplyError("ERR wrong number of arguments for 'config|set' command")
    config = c.server.config
    values = list(argv)
    # Every secret is hidden, even when an earlier pair is about to fail the command.
    for i in range(2, len(argv), 2):
        canon = config.canonical(argv[i].decode(errors="replace"))
        if canon is not None and config.params[canon].sensitive:
            redact(argv, i + 1)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i in range(2, len(argv), 2):
        name = argv[i].decode(errors="replace")
        canon = config.canonical(name)
        if canon is None:
            raise ReplyError(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
        if config.params[canon].immutable:
            raise ReplyError(
                f"ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
            )
        if canon in _PROTECTED_CONFIGS and not _protected_allowed(c, config["enable-protected-configs"]):
            raise ReplyError(
                f"ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config"
            )
        if canon in _DENY_LOADING_CONFIGS and c.server.loading:
            raise LOADING_ERR  # as Redis: this error, not an -ERR, so clients retry later
        if canon in seen:
            raise ReplyError(
                f"ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            )
        seen.add(canon)
        pairs.append((canon, values[i + 1].decode(errors="surrogateescape")))
    try:
        config.set_many(pairs)
    except ConfigError as e:
        bad = getattr(e, "param", None) or _failing_param(config, pairs)
        raise ReplyError(f"ERR CONFIG SET failed (possibly related to argument '{bad}') - {e}") from None
    return OK


# Where files go: CONFIG SET may change them only as enable-protected-configs allows.
_PROTECTED_CONFIGS = frozenset({"dir", "dbfilename"})
# What a load in progress depends on: refused until it ends (Redis's DENY_LOADING_CONFIG;
# its third, the replica's diskless-load mode, rill accepts only at its default).
_DENY_LOADING_CONFIGS = frozenset({"dir", "appendonly"})


def _protected_allowed(c: Client, setting: str) -> bool:
    """enable-protected-configs: yes, no, or local (a unix socket or a loopback peer)."""
    if setting == "yes" or c.id < 0:
        return True
    if setting == "local":
        return c.kind == "unix" or c.addr.rpartition(":")[0] in ("127.0.0.1", "::1")
    return False


def _failing_param(config, pairs: list[tuple[str, str]]) -> str:
    for name, value in pairs:
        try:
            config.normalise(name, value)
        except ConfigError:
            return name
    return pairs[0][0]


@command("config|resetstat")
def config_resetstat(c: Client, argv: list[bytes]):
    server = c.server
    server.stats.reset()
    ks = server.keyspace
    ks.hits = ks.misses = ks.expired_keys = ks.lazyfreed_objects = 0
    evictor = server.__dict__.get("evictor")
    if evictor is not None:
        evictor.reset_stats()
    figure = server.__dict__.get("memory")
    if figure is not None:
        figure.evicted_clients = 0
    server.cmdstats.reset()
    master_side(server).reset_stats()
    server.total_forks = 0
    server.latest_fork_usec = 0
    server.fork_rate = 0.0
    return OK


@command("config|rewrite")
def config_rewrite(c: Client, argv: list[bytes]):
    try:
        c.server.config.rewrite()
    except ConfigError as e:
        raise ReplyError(f"ERR {e}") from None
    except OSError as e:
        raise ReplyError(f"ERR Rewriting config file: {e.strerror}") from None
    return OK


_CONFIG_HELP = [
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
]


@command("config|help")
def config_help(c: Client, argv: list[bytes]):
    return help_reply(_CONFIG_HELP)


# -- OBJECT / MEMORY ---------------------------------------------------------
@command("object|encoding")
def object_encoding_cmd(c: Client, argv: list[bytes]):
    db = c.db
    value = db.peek(argv[2])
    if value is None:
        return None
    return key_encoding(db, argv[2], value)


@command("object|refcount")
def object_refcount(c: Client, argv: list[bytes]):
    db = c.db
    value = db.peek(argv[2])
    if value is None:
        return None
    return key_refcount(db, argv[2], value)


@command("object|idletime")
def object_idletime(c: Client, argv: list[bytes]):
    db = c.db
    if db.peek(argv[2]) is None:
        return None
    if db.lfu:
        raise ReplyError(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
            "switching between policies at runtime LRU and LFU data will take some time to adjust."
        )
    return db.idle_seconds(argv[2])


@command("object|freq")
def object_freq(c: Client, argv: list[bytes]):
    db = c.db
    if db.peek(argv[2]) is None:
        return None
    if not db.lfu:
        raise ReplyError(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
            "that when switching between policies at runtime LRU and LFU data will take some time "
            "to adjust."
        )
    return db.frequency(argv[2])


@command("object|help")
def object_help(c: Client, argv: list[bytes]):
    return help_reply([
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ])


@command("memory|usage")
def memory_usage_cmd(c: Client, argv: list[bytes]):
    samples = 5
    i = 3
    while i < len(argv):
        if argv[i].lower() == b"samples" and i + 1 < len(argv):
            samples = get_int(argv[i + 1])
            if samples < 0:
                raise SYNTAX_ERR
            i += 2
        else:
            raise SYNTAX_ERR
    db = c.db
    value = db.peek(argv[2])
    if value is None:
        return None
    return memory_usage(argv[2], value, c.server.config, samples,
                        encoding=key_encoding(db, argv[2], value) if type(value) is bytes else None)


@command("memory|help")
def memory_help(c: Client, argv: list[bytes]):
    return help_reply([
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    ])


@command("memory|doctor")
def memory_doctor(c: Client, argv: list[bytes]):
    return Verbatim(doctor_report(c.server).encode())


_DOCTOR_EMPTY = (
    "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be "
    "used in these conditions. Please, leave for your mission on Earth and fill it with some data. "
    "The new Sam and I will be back to our programming as soon as I finished rebooting.\n")
_DOCTOR_FINE = ("Hi Sam, I can't find any memory issue in your instance. "
                "I can only account for what occurs on this base.\n")
_DOCTOR_ISSUES = (
    ("peak", " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n"),  # noqa: E501
    ("frag", ' * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is "pymalloc".\n\n'),  # noqa: E501
    ("replicas", " * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n"),  # noqa: E501
    ("clients", " * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n"),  # noqa: E501
    ("scripts", " * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n"),  # noqa: E501
)


def doctor_report(s) -> str:
    """MEMORY DOCTOR: Redis's checks on the figure. Fragmentation is judged on the
    resident size beyond the interpreter's at start-up (STARTUP_RSS, tens of MB that
    Redis does not have and the figure does not count)."""
    fig = memory_of(s)
    fig.buffers()
    used = fig.used()
    if used < 5 << 20:
        return _DOCTOR_EMPTY
    resident = rss() - STARTUP_RSS
    replicas = sum(1 for cl in s.clients.values() if cl.repl is not None or cl.kind == "replica")
    normal = max(len(s.clients) - replicas, 1)
    lua = s.scripting
    found = {
        "peak": fig.peak / used > 1.5,
        "frag": resident / used > 1.4 and resident - used > 10 << 20,
        "replicas": replicas > 0 and fig.clients_replicas > 10 << 20,
        "clients": fig.clients_normal // normal > 200 << 10,
        "scripts": len(lua.scripts) > 1000,
    }
    if not any(found.values()):
        return _DOCTOR_FINE
    parts = ["Sam, I detected a few issues in this Redis instance memory implants:\n\n"]
    parts += [text for name, text in _DOCTOR_ISSUES if found[name]]
    parts.append("I'm here to keep you safe, Sam. I want to help you.\n")
    return "".join(parts)


@command("memory|purge")
def memory_purge(c: Client, argv: list[bytes]):
    purge()  # Redis replies OK whether or not its allocator had pages to give back
    return OK


@command("memory|malloc-stats")
def memory_malloc_stats(c: Client, argv: list[bytes]):
    return Verbatim(b"Stats not supported for the current allocator")


@command("memory|stats")
def memory_stats(c: Client, argv: list[bytes]):
    s = c.server
    fig = memory_of(s)
    fig.buffers()
    used = fig.used()
    resident = rss()
    overhead = fig.overhead()
    dataset = max(used - overhead, 0)
    keys = sum(len(db) for db in s.keyspace.dbs)
    lua = s.scripting
    functions = s.functions
    dbs = [(b"db.%d" % db.id, Map([
        (b"overhead.hashtable.main", dict_table(len(db.data)) + dict_table(len(db.access))),
        (b"overhead.hashtable.expires", fig.db_overhead(db) - dict_table(len(db.data)) - dict_table(len(db.access))),
        (b"overhead.hashtable.slot-to-keys", 0),
    ])) for db in s.keyspace.dbs if db.data]
    return Map([
        (b"peak.allocated", fig.peak),
        (b"total.allocated", used),
        (b"startup.allocated", fig.startup),
        (b"replication.backlog", fig.backlog),
        (b"clients.slaves", fig.clients_replicas),
        (b"clients.normal", fig.clients_normal),
        (b"cluster.links", 0),
        (b"aof.buffer", fig.aof_buffer),
        (b"lua.caches", lua.scripts_mem),
        (b"functions.caches", functions.overhead()),
        *dbs,
        (b"overhead.total", overhead),
        (b"keys.count", keys),
        (b"keys.bytes-per-key", (used - fig.startup) // keys if keys else 0),
        (b"dataset.bytes", dataset),
        (b"dataset.percentage", Double(dataset * 100.0 / max(used - fig.startup, 1))),
        (b"peak.percentage", Double(used * 100.0 / max(fig.peak, 1))),
        (b"allocator.allocated", used),
        (b"allocator.active", used),
        (b"allocator.resident", resident),
        (b"allocator-fragmentation.ratio", Double(1.0)),
        (b"allocator-fragmentation.bytes", 0),
        (b"allocator-rss.ratio", Double(resident / max(used, 1))),
        (b"allocator-rss.bytes", resident - used),
        (b"rss-overhead.ratio", Double(1.0)),
        (b"rss-overhead.bytes", 0),
        (b"fragmentation", Double(resident / max(used, 1))),
        (b"fragmentation.bytes", resident - used),
    ])


# -- DEBUG -------------------------------------------------------------------
@command("debug", hidden_flags=PROTECTED)
def debug(c: Client, argv: list[bytes]):
    sub = argv[1].lower()
    server = c.server
    if sub == b"sleep" and len(argv) == 3:
        secs = float(argv[2])
        time.sleep(secs)
        return OK
    if sub == b"log" and len(argv) == 3:
        logging.getLogger("rill").warning("DEBUG LOG: %s", argv[2].decode(errors="replace"))
        return OK
    if sub == b"error" and len(argv) == 3:
        # Written as is, like any reply: clients test their error handling with it,
        # and Redis does not count it in the error stats.
        msg = argv[2].replace(b"\n", b" ").replace(b"\r", b" ")
        return Raw(b"-" + msg + b"\r\n")
    if sub == b"replicate" and len(argv) >= 3:
        # Lets a test make a replica diverge (it gets a command nothing else does).
        master_side(server).feed_verbatim(argv[2:])
        return OK
    if sub == b"set-active-expire" and len(argv) == 3:
        server.active_expire_enabled = argv[2] != b"0"
        return OK
    if sub == b"pause-cron" and len(argv) == 3:
        server.cron_paused = argv[2] != b"0"
        return OK
    if sub == b"set-disable-deny-scripts" and len(argv) == 3:
        # Lets scripts run noscript commands (DEBUG PROTOCOL, CLIENT LIST...): Redis's
        # own tests use it to reach replies no script could otherwise get.
        server.script_disable_deny_script = string2ll(argv[2]) or 0
        return OK
    if sub == b"object" and len(argv) == 3:
        db = c.db
        key = argv[2]
        value = db.data.get(key)  # as Redis's dictFind: a key past its expiry is still shown
        if value is None:
            raise NO_SUCH_KEY
        enc = key_encoding(db, key, value).decode()
        refcount = key_refcount(db, key, value)
        stamp = db.access.get(key, db.access_base) & 0xFFFFFF
        return Status(
            f"Value at:0x0 refcount:{refcount} encoding:{enc} "
            f"serializedlength:{_serialized_length(value)} "
            f"lru:{stamp} lru_seconds_idle:{db.idle_seconds(key)}".encode()
        )
    if sub == b"digest-value":
        return [digest_value(c.db.lookup(k)) for k in argv[2:]]
    if sub == b"digest" and len(argv) == 2:
        return Status(digest_dataset(server.keyspace))
    if sub == b"quicklist-packed-threshold" and len(argv) == 3:
        try:
            size = memtoull(argv[2].decode(errors="replace"))
        except ValueError:
            size = -1
        if size < 0 or not set_packed_threshold(size):
            raise ReplyError("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
        return OK
    if sub == b"protocol" and len(argv) == 3:
        return _debug_protocol(c, argv[2].lower())
    if sub == b"populate" and 3 <= len(argv) <= 5:
        return _debug_populate(c, argv)
    if sub == b"config-rewrite-force-all" and len(argv) == 2:
        try:
            server.config.rewrite(force_all=True)
        except (ConfigError, OSError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ReplyError(f"ERR CONFIG-REWRITE-FORCE-ALL failed: {reason}") from None
        return OK
    if sub == b"replybuffer" and len(argv) == 4:
        what, arg = argv[2].lower(), argv[3]
        if what == b"peak-reset-time":
            if arg.lower() == b"never":
                server.reply_buffer_peak_reset_ms = -1
            elif arg.lower() == b"reset":
                server.reply_buffer_peak_reset_ms = REPLY_PEAK_RESET_MS
            else:
                ms = string2ll(arg)
                if ms is None:
                    raise ReplyError("ERR value is not an integer or out of range")
                server.reply_buffer_peak_reset_ms = ms
        elif what == b"resizing":
            digits = len(arg) - len(arg.lstrip(b"-+0123456789"))  # C's atoi: the leading number
            server.reply_buffer_resizing = bool(string2ll(arg[:digits]) if digits else 0)
        else:
            raise ReplyError(
                b"ERR unknown subcommand or wrong number of arguments for '%s'. Try DEBUG HELP." % argv[1][:128])
        return OK
    if sub == b"help":
        return help_reply([
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "AOF-FLUSH-SLEEP <microsec>",
            "    Server will sleep before flushing the AOF, this is used for testing.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "DIGEST",
            "DIGEST-VALUE <key> [<key> ...]",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "OBJECT <key>",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas.",
            "PROTOCOL <type>",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
            "    In case NEVER is provided the last observed peak will never be reset",
            "    In case RESET is provided the peak reset time will be restored to the default value",
            "REPLYBUFFER RESIZING <0|1>",
            "    Enable or disable the reply buffer resize cron job",
            "SET-ACTIVE-EXPIRE <0|1>",
            "SLEEP <seconds>",
            "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
            "REPLICATE <string>",
            "    Replicates the provided string to replicas, allowing data divergence.",
        ])
    handler = getattr(server, "debug_handlers", {}).get(sub)
    if handler is not None:
        return handler(c, argv)
    # DEBUG is one command, not a container: Redis answers with its generic
    # subcommand-or-arity error.
    raise ReplyError(
        b"ERR unknown subcommand or wrong number of arguments for '%s'. Try DEBUG HELP." % argv[1][:128]
    )


def _debug_populate(c: Client, argv: list[bytes]):
    """DEBUG POPULATE count [prefix] [size]: keys prefix:0.. holding "value:N" (cut or
    zero-padded to ``size`` bytes when given); a key that exists is left as it is. A
    debugging aid, as in Redis: no notification, nothing propagated, no dirty count."""
    count = get_positive(argv[2])
    size = get_positive(argv[4]) if len(argv) == 5 else 0
    prefix = argv[3] if len(argv) >= 4 else b"key"
    db = c.db
    for j in range(count):
        key = b"%s:%d" % (prefix, j)
        if db.lookup(key) is not None:
            continue
        value = b"value:%d" % j
        if size:
            value = value[:size].ljust(size, b"\0")
        db.set(key, value)
        db.modified(key)
    return OK


def _serialized_length(value) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return memory_usage(b"", value)


def _debug_protocol(c: Client, kind: bytes):
    if kind == b"string":
        return b"Hello World"
    if kind == b"integer":
        return 12345
    if kind == b"double":
        return Double(3.141)
    if kind == b"bignum":
        return BigNumber(b"1234567999999999999999999999999999999")
    if kind == b"null":
        return None
    if kind == b"array":
        return [0, 1, 2]
    if kind == b"set":
        return Set([0, 1, 2])
    if kind == b"map":
        return Map([(0, False), (1, True), (2, False)])
    if kind == b"attrib":
        # An attribute is only visible in RESP3; it precedes the reply it annotates.
        if c.resp3:
            c.out.append(Raw(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"))
        return b"Some real reply following the attribute"
    if kind == b"push":
        if not c.resp3:
            raise ReplyError("ERR RESP2 is not supported by this command")
        c.out.append(Raw(b">2\r\n$6\r\nserver\r\n$4\r\npush\r\n"))
        return b"Some real reply following the push reply"
    if kind == b"true":
        return True
    if kind == b"false":
        return False
    if kind == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring", b"txt")
    raise ReplyError(
        "ERR Wrong protocol type name. Please use one of the following: "
        "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"
    )


# -- MONITOR / SLOWLOG ---------------------------------------------------------
@command("monitor")
def monitor(c: Client, argv: list[bytes]):
    if c.monitor:
        return OK
    c.monitor = True
    c.server.monitors.append(c)
    return OK


@command("slowlog|get")
def slowlog_get(c: Client, argv: list[bytes]):
    count = 10
    if len(argv) == 3:
        count = get_int(argv[2], "count should be greater than or equal to -1")
        if count < -1:
            raise ReplyError("ERR count should be greater than or equal to -1")
        if count == -1:
            count = len(c.server.slowlog)
    out = []
    for e in list(c.server.slowlog)[:count]:
        out.append([e.id, e.time, e.duration, list(e.argv), e.addr.encode(), e.name])
    return out


@command("slowlog|len")
def slowlog_len(c: Client, argv: list[bytes]):
    return len(c.server.slowlog)


@command("slowlog|reset")
def slowlog_reset(c: Client, argv: list[bytes]):
    c.server.slowlog.clear()
    return OK


@command("slowlog|help")
def slowlog_help(c: Client, argv: list[bytes]):
    return help_reply([
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ])


# -- SHUTDOWN -------------------------------------------------------------
@command("shutdown")
def shutdown(c: Client, argv: list[bytes]):
    save = None
    force = abort = flagged = now = False
    for arg in argv[1:]:
        a = arg.lower()
        if a == b"nosave":
            if save is True:
                raise SYNTAX_ERR
            save = False
        elif a == b"save":
            if save is False:
                raise SYNTAX_ERR
            save = True
        elif a == b"force":
            force = True
        elif a == b"abort":
            abort = True
            continue
        elif a == b"now":  # do not wait for lagging replicas (shutdown-timeout)
            now = True
        else:
            raise SYNTAX_ERR
        flagged = True
    server = c.server
    if abort:
        if flagged:
            raise SYNTAX_ERR
        if not shutdown_seq.abort(server):
            raise ReplyError("ERR No shutdown in progress.")
        return OK
    ctx = running(server)
    if ctx is not None and ctx.timed_out:
        # Only NOSAVE may stop a server whose script (or function) is busy: it is
        # stopped with it, and what it half did is neither saved nor propagated.
        if save is not False:
            raise busy_error(ctx)
        ctx.shutdown = ctx.killed = True
    # ReplyError "Errors trying to SHUTDOWN. Check logs." if it can't
    if not server.shutdown(save, force, now):
        # Waiting for lagging replicas: the caller waits too, until the server exits
        # (no reply) or the shutdown is aborted or fails (the error).
        server.pending_shutdown.clients.append(c)
        return Block([], 0, timeout_reply=shutdown_seq.SHUTDOWN_FAILED)
    c.close_after_reply = True
    return NO_REPLY


# -- MODULE ----------------------------------------------------------------------
# rill cannot load Redis modules: they are C libraries written against Redis's own
# module API. LIST is therefore always empty and every load fails the way a module
# that does not load fails in Redis, with the reason in the log.
_MODULE_LOAD_ERR = ReplyError("ERR Error loading the extension. Please check the server logs.")


@command("module|list")
def module_list(c: Client, argv: list[bytes]):
    return []


@command("module|load", hidden_flags=PROTECTED)
def module_load(c: Client, argv: list[bytes]):
    logging.getLogger("rill").warning(
        "Module %s failed to load: rill does not run Redis modules (C extensions of Redis's module API)",
        argv[2].decode(errors="replace"),
    )
    raise _MODULE_LOAD_ERR


@command("module|loadex", hidden_flags=PROTECTED)
def module_loadex(c: Client, argv: list[bytes]):
    return module_load(c, argv)


@command("module|unload", hidden_flags=PROTECTED)
def module_unload(c: Client, argv: list[bytes]):
    raise ReplyError("ERR Error unloading module: no such module with that name")


@command("module|help")
def module_help(c: Client, argv: list[bytes]):
    return help_reply([
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        "    Load a module library from <path>, while passing it module configurations and optional arguments.",
        "UNLOAD <name>",
        "    Unload a module.",
    ])
