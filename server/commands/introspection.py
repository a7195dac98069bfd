"""Introspection: INFO, CLIENT and COMMAND."""

from __future__ import annotations

import os
import platform
import resource
import time
from collections.abc import Callable

from rill.protocol.reply import OK, Map, ReplyError, Set, Status, Verbatim
from rill.storage.glob import compile_glob
from rill.storage.stream import GCStats

from .. import REDIS_VERSION, __version__
from ..blocking import UNBLOCKED_ERR, parse_timeout
from ..client import REPLY_OFF, REPLY_ON, REPLY_SKIP_NEXT, Client
from ..disk import master_side
from ..evict import evictor_of
from ..latency import percentiles_line
from ..memory import memory_of, rss
from ..outcomes import NO_REPLY
from ..process import hot_core
from ..replication.master import replica_address
from .args import SYNTAX_ERR, get_int, help_reply, string2ll
from .connection import set_client_name
from .table import arg, command, command_spec


def bytes_human(n: int) -> str:
    """Redis's bytesToHuman: B, K, M, G, T with two decimals."""
    for unit, size in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


# -- INFO ----------------------------------------------------------------------
def _server(c: Client) -> list[tuple[str, object]]:
    s = c.server
    uname = platform.uname()
    now = time.time()
    return [
        ("redis_version", REDIS_VERSION),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", "0"),
        ("redis_mode", "standalone"),
        ("os", f"{uname.system} {uname.release} {uname.machine}"),
        ("arch_bits", 64),
        ("monotonic_clock", "POSIX clock_gettime"),
        ("multiplexing_api", "epoll"),
        ("atomicvar_api", "c11-builtin"),
        ("gcc_version", "0.0.0"),
        ("process_id", s.pid),
        ("process_supervised", getattr(s, "supervised_mode", "no")),
        ("run_id", s.run_id),
        ("tcp_port", s.tcp_port or s.tls_port),  # as Redis: the TLS port when there is no plain one
        ("server_time_usec", int(now * 1_000_000)),
        ("uptime_in_seconds", s.uptime()),
        ("uptime_in_days", s.uptime() // 86400),
        ("hz", getattr(s, "hz", s.config["hz"])),  # dynamic-hz's current rate
        ("configured_hz", s.config["hz"]),
        ("lru_clock", int(now) & ((1 << 24) - 1)),
        ("executable", s.executable),
        ("config_file", s.config.config_file or ""),
        ("io_threads_active", 0),
        ("rill_version", __version__),
        ("rill_mode", hot_core()[0]),  # the hot core: compiled or pure Python
    ] + ([("shutdown_in_milliseconds", max(0, int((s.pending_shutdown.deadline - time.monotonic()) * 1000)))]
         if getattr(s, "pending_shutdown", None) is not None else [])


def _clients(c: Client) -> list[tuple[str, object]]:
    s = c.server
    peak_in = max((cl.querybuf_peak for cl in s.clients.values()), default=0)
    return [
        # Replicas are not clients here (Redis counts server.clients less server.slaves).
        ("connected_clients", sum(1 for cl in s.clients.values() if cl.id > 0 and cl.kind != "replica")),
        ("cluster_connections", 0),
        ("maxclients", s.maxclients),
        ("client_recent_max_input_buffer", peak_in),
        ("client_recent_max_output_buffer", 0),
        # Redis blocks a client whose command CLIENT PAUSE postponed (BLOCKED_POSTPONE).
        ("blocked_clients", s.blocking.blocked_clients + len(s.paused_clients)),
        ("tracking_clients", s.tracking.clients),
        ("clients_in_timeout_table", s.blocking.in_timeout_table()),
    ]


def _scripting_memory(s) -> list[tuple[str, object]]:
    """The interpreters' heaps and the script and function caches, as Redis 7.0 lists them."""
    lua = s.scripting
    functions = s.functions
    vm_eval = lua.memory()
    vm_functions = functions.vm_memory()
    scripts_eval = lua.scripts_mem
    functions_mem = functions.overhead()
    return [
        ("used_memory_lua", vm_eval),
        ("used_memory_vm_eval", vm_eval),
        ("used_memory_lua_human", bytes_human(vm_eval)),
        ("used_memory_scripts_eval", scripts_eval),
        ("number_of_cached_scripts", len(lua.scripts)),
        ("number_of_functions", len(functions.libs.functions)),
        ("number_of_libraries", len(functions.libs.libraries)),
        ("used_memory_vm_functions", vm_functions),
        ("used_memory_vm_total", vm_eval + vm_functions),
        ("used_memory_vm_total_human", bytes_human(vm_eval + vm_functions)),
        ("used_memory_functions", functions_mem),
        ("used_memory_scripts", scripts_eval + functions_mem),
        ("used_memory_scripts_human", bytes_human(scripts_eval + functions_mem)),
    ]


def _memory(c: Client) -> list[tuple[str, object]]:
    s = c.server
    fig = memory_of(s)
    fig.buffers()
    used = fig.used()
    rss_now = rss()
    overhead = fig.overhead()
    dataset = max(used - overhead, 0)
    net = max(used - fig.startup, 0)
    fig.peak = max(fig.peak, used)
    maxmemory = s.config.int("maxmemory")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return [
        ("used_memory", used),
        ("used_memory_human", bytes_human(used)),
        ("used_memory_rss", rss_now),
        ("used_memory_rss_human", bytes_human(rss_now)),
        ("used_memory_peak", fig.peak),
        ("used_memory_peak_human", bytes_human(fig.peak)),
        ("used_memory_peak_perc", f"{100.0 * used / max(fig.peak, 1):.2f}%"),
        ("used_memory_overhead", overhead),
        ("used_memory_startup", fig.startup),
        ("used_memory_dataset", dataset),
        ("used_memory_dataset_perc", f"{100.0 * dataset / max(net, 1):.2f}%"),
        # pymalloc has no allocator-level figures of its own: what it holds is the figure,
        # what it has resident is the process's.
        ("allocator_allocated", used),
        ("allocator_active", used),
        ("allocator_resident", rss_now),
        ("total_system_memory", total),
        ("total_system_memory_human", bytes_human(total)),
        *_scripting_memory(s),
        ("maxmemory", maxmemory),
        ("maxmemory_human", bytes_human(maxmemory)),
        ("maxmemory_policy", s.config["maxmemory-policy"]),
        ("allocator_frag_ratio", "1.00"),
        ("allocator_frag_bytes", 0),
        ("allocator_rss_ratio", f"{rss_now / max(used, 1):.2f}"),
        ("allocator_rss_bytes", rss_now - used),
        ("rss_overhead_ratio", "1.00"),
        ("rss_overhead_bytes", 0),
        ("mem_fragmentation_ratio", f"{rss_now / max(used, 1):.2f}"),
        ("mem_fragmentation_bytes", rss_now - used),
        ("mem_not_counted_for_evict", fig.not_counted_for_evict()),
        ("mem_replication_backlog", fig.backlog),
        ("mem_total_replication_buffers", fig.backlog + fig.clients_replicas),
        # rill: what stream-node garbage collection gave back (listpack bytes).
        ("stream_gc_runs", GCStats.runs),
        ("stream_gc_reclaimed_bytes", GCStats.reclaimed_bytes),
        ("mem_clients_slaves", fig.clients_replicas),
        ("mem_clients_normal", fig.clients_normal),
        ("mem_cluster_links", 0),
        ("mem_aof_buffer", fig.aof_buffer),
        ("mem_allocator", "pymalloc"),
        ("active_defrag_running", 0),
        ("lazyfree_pending_objects", 0),
        ("lazyfreed_objects", s.keyspace.lazyfreed_objects),
    ]


def _persistence(c: Client) -> list[tuple[str, object]]:
    s = c.server
    provider = getattr(s, "persistence_info", None)
    if provider is not None:
        return provider()
    return [
        ("loading", int(s.loading)),
        ("async_loading", 0),
        ("current_cow_peak", 0),
        ("current_cow_size", 0),
        ("current_cow_size_age", 0),
        ("current_fork_perc", "0.00"),
        ("current_save_keys_processed", 0),
        ("current_save_keys_total", 0),
        ("rdb_changes_since_last_save", s.dirty),
        ("rdb_bgsave_in_progress", 0),
        ("rdb_last_save_time", s.lastsave),
        ("rdb_last_bgsave_status", "ok"),
        ("rdb_last_bgsave_time_sec", -1),
        ("rdb_current_bgsave_time_sec", -1),
        ("rdb_saves", 0),
        ("rdb_last_cow_size", 0),
        ("rdb_last_load_keys_expired", 0),
        ("rdb_last_load_keys_loaded", 0),
        ("aof_enabled", 0),
        ("aof_rewrite_in_progress", 0),
        ("aof_rewrite_scheduled", 0),
        ("aof_last_rewrite_time_sec", -1),
        ("aof_current_rewrite_time_sec", -1),
        ("aof_last_bgrewrite_status", "ok"),
        ("aof_rewrites", 0),
        ("aof_rewrites_consecutive_failures", 0),
        ("aof_last_write_status", "ok"),
        ("aof_last_cow_size", 0),
        ("module_fork_in_progress", 0),
        ("module_fork_last_cow_size", 0),
    ]


def _stats(c: Client) -> list[tuple[str, object]]:
    s = c.server
    st = s.stats
    ks = s.keyspace
    ops, in_kbps, out_kbps, repl_in_kbps, repl_out_kbps = _instantaneous(s)
    pubsub = s.pubsub
    m = master_side(s)
    evictor = evictor_of(s)
    exceeded_total, exceeded_now = evictor.exceeded_ms()
    return [
        ("total_connections_received", st.total_connections_received),
        ("total_commands_processed", st.total_commands_processed),
        ("instantaneous_ops_per_sec", ops),
        # The totals include the replication link's traffic, reported apart as well.
        ("total_net_input_bytes", st.net_input_bytes + st.net_repl_input_bytes),
        ("total_net_output_bytes", st.net_output_bytes + st.net_repl_output_bytes),
        ("total_net_repl_input_bytes", st.net_repl_input_bytes),
        ("total_net_repl_output_bytes", st.net_repl_output_bytes),
        ("instantaneous_input_kbps", f"{in_kbps:.2f}"),
        ("instantaneous_output_kbps", f"{out_kbps:.2f}"),
        ("instantaneous_input_repl_kbps", f"{repl_in_kbps:.2f}"),
        ("instantaneous_output_repl_kbps", f"{repl_out_kbps:.2f}"),
        ("rejected_connections", st.rejected_connections),
        ("sync_full", m.sync_full),
        ("sync_partial_ok", m.sync_partial_ok),
        ("sync_partial_err", m.sync_partial_err),
        ("expired_keys", ks.expired_keys),
        ("expired_stale_perc", "0.00"),
        ("expired_time_cap_reached_count", 0),
        ("expire_cycle_cpu_milliseconds", 0),
        ("evicted_keys", evictor.evicted_keys),
        ("evicted_clients", evictor.figure.evicted_clients),
        ("total_eviction_exceeded_time", exceeded_total),
        ("current_eviction_exceeded_time", exceeded_now),
        ("keyspace_hits", ks.hits),
        ("keyspace_misses", ks.misses),
        ("pubsub_channels", pubsub.channel_count()),
        ("pubsub_patterns", pubsub.pattern_count()),
        ("pubsubshard_channels", len(pubsub.shard_channels)),
        ("latest_fork_usec", getattr(s, "latest_fork_usec", 0)),
        ("total_forks", getattr(s, "total_forks", 0)),
        ("migrate_cached_sockets", len(getattr(s, "migrate_links", ()) or ())),
        ("slave_expires_tracked_keys", 0),
        ("active_defrag_hits", 0),
        ("active_defrag_misses", 0),
        ("active_defrag_key_hits", 0),
        ("active_defrag_key_misses", 0),
        ("total_active_defrag_time", 0),
        ("current_active_defrag_time", 0),
        ("tracking_total_keys", len(s.tracking.table)),
        ("tracking_total_items", s.tracking.items),
        ("tracking_total_prefixes", len(s.tracking.prefixes)),
        ("unexpected_error_replies", st.unexpected_error_replies),
        ("total_error_replies", st.total_error_replies),
        ("dump_payload_sanitizations", st.dump_payload_sanitizations),
        ("total_reads_processed", st.total_reads_processed),
        ("total_writes_processed", st.total_writes_processed),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("reply_buffer_shrinks", st.reply_buffer_shrinks),
        ("reply_buffer_expands", st.reply_buffer_expands),
    ]


def _instantaneous(s) -> tuple[int, float, float, float, float]:
    """Ops/sec and kbps over the last samples the cron took (Redis samples every 100 ms):
    input and output with the replication link's traffic included, as Redis's are, then
    the replication link's alone."""
    samples = s.stats.instantaneous
    if len(samples) < 2:
        return 0, 0.0, 0.0, 0.0, 0.0
    t0, c0, i0, o0, ri0, ro0 = samples[0]
    t1, c1, i1, o1, ri1, ro1 = samples[-1]
    kb = max(t1 - t0, 1e-6) * 1024
    repl_in, repl_out = ri1 - ri0, ro1 - ro0
    return (int((c1 - c0) * 1024 / kb), (i1 - i0 + repl_in) / kb, (o1 - o0 + repl_out) / kb,
            repl_in / kb, repl_out / kb)


def _replication(c: Client) -> list[tuple[str, object]]:
    p = master_side(c.server)
    replicas = p.live_replicas()
    now = int(time.time())
    repl = c.server.replica_side
    following = repl.host is not None
    rows: list[tuple[str, object]] = repl.info() if following else [("role", "master")]
    rows.append(("connected_slaves", len(replicas)))
    if c.server.min_replicas is not None:
        rows.append(("min_slaves_good_slaves", p.good_replicas(c.server.min_replicas[1])))
    shown = [r for r in replicas if r.repl.state_name]  # a snapshot-only client that has it is not
    for i, r in enumerate(shown):
        link = r.repl
        rows.append((
            f"slave{i}",
            f"ip={replica_address(r)},port={link.listening_port},state={link.state_name},"
            f"offset={link.ack_offset},lag={now - link.ack_time if link.online else 0}",
        ))
    return rows + [
        ("master_failover_state", c.server.failover.state),
        ("master_replid", p.replid),
        ("master_replid2", p.replid2),
        ("master_repl_offset", p.repl_offset),
        ("second_repl_offset", p.second_repl_offset),
        ("repl_backlog_active", 0 if p.backlog is None else 1),
        ("repl_backlog_size", c.server.config["repl-backlog-size"]),
        ("repl_backlog_first_byte_offset", 0 if p.backlog is None else p.repl_offset - len(p.backlog) + 1),
        ("repl_backlog_histlen", 0 if p.backlog is None else len(p.backlog)),
    ]


def _cpu(c: Client) -> list[tuple[str, object]]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        ("used_cpu_sys", f"{me.ru_stime:.6f}"),
        ("used_cpu_user", f"{me.ru_utime:.6f}"),
        ("used_cpu_sys_children", f"{kids.ru_stime:.6f}"),
        ("used_cpu_user_children", f"{kids.ru_utime:.6f}"),
        ("used_cpu_sys_main_thread", f"{me.ru_stime:.6f}"),
        ("used_cpu_user_main_thread", f"{me.ru_utime:.6f}"),
    ]


def _modules(c: Client) -> list[tuple[str, object]]:
    return []


def _commandstats(c: Client) -> list[tuple[str, object]]:
    out = []
    cmdstats = c.server.cmdstats
    for cmd in c.server.table.all():
        st = cmdstats.get(cmd)
        if st is None or not (st.calls or st.rejected_calls or st.failed_calls):
            continue
        usec = st.nsec // 1000
        per = usec / st.calls if st.calls else 0.0
        out.append((
            "cmdstat_" + cmd.fullname,
            f"calls={st.calls},usec={usec},usec_per_call={per:.2f},"
            f"rejected_calls={st.rejected_calls},failed_calls={st.failed_calls}",
        ))
    return out


def _errorstats(c: Client) -> list[tuple[str, object]]:
    return [("errorstat_" + code.decode(errors="replace"), f"count={n}")
            for code, n in sorted(c.server.stats.errorstats.items())]


def _latencystats(c: Client) -> list[tuple[str, object]]:
    """Each command's latency percentiles (microseconds), while latency-tracking is on."""
    s = c.server
    if not s.latency_tracking:
        return []
    percentiles = s.latency_percentiles
    out = []
    for cmd in s.table.all():
        st = s.cmdstats.get(cmd)
        if st is not None and st.samples():
            out.append(("latency_percentiles_usec_" + cmd.fullname, percentiles_line(st, percentiles)))
    return out


def _cluster(c: Client) -> list[tuple[str, object]]:
    return [("cluster_enabled", 0)]


def _keyspace(c: Client) -> list[tuple[str, object]]:
    out = []
    for db in c.server.keyspace.dbs:
        if len(db):
            out.append((f"db{db.id}", f"keys={len(db)},expires={len(db.expires)},avg_ttl={db.avg_ttl}"))
    return out


def _active_active(c: Client) -> list[tuple[str, object]] | None:
    """The engine's figures, then one line per peer; no section while the mode is off."""
    engine = c.server.active_active
    if engine is None:
        return None
    fields = engine.info_fields()
    if engine.links is not None:
        for line in engine.links.info_lines():
            name, _, value = line.partition(":")
            fields.append((name, value))
    return fields


Section = Callable[[Client], list[tuple[str, object]] | None]
SECTIONS: dict[str, tuple[str, Section]] = {
    "server": ("Server", _server),
    "clients": ("Clients", _clients),
    "memory": ("Memory", _memory),
    "persistence": ("Persistence", _persistence),
    "stats": ("Stats", _stats),
    "replication": ("Replication", _replication),
    "cpu": ("CPU", _cpu),
    "modules": ("Modules", _modules),
    "commandstats": ("Commandstats", _commandstats),
    "errorstats": ("Errorstats", _errorstats),
    "latencystats": ("Latencystats", _latencystats),
    "cluster": ("Cluster", _cluster),
    "keyspace": ("Keyspace", _keyspace),
    "active_active": ("Active_Active", _active_active),
}
DEFAULT = ["server", "clients", "memory", "persistence", "stats", "replication", "cpu",
           "modules", "errorstats", "cluster", "keyspace", "active_active"]
ALL = [s for s in SECTIONS if s != "modules"]


def info_text(c: Client, args: list[bytes]) -> bytes:
    """The INFO report for the requested sections, as Redis lays it out."""
    wanted: set[str] = set()
    if not args:
        wanted.update(DEFAULT)
    for a in args:
        name = a.decode(errors="replace").lower()
        if name == "default":
            wanted.update(DEFAULT)
        elif name == "all":
            wanted.update(ALL)
        elif name == "everything":
            wanted.update(SECTIONS)
        else:
            wanted.add(name)
    parts = []
    for key, (title, fn) in SECTIONS.items():
        if key not in wanted:
            continue
        fields = fn(c)
        if fields is None:
            continue  # a section for a mode that is off (Active-Active)
        lines = [f"# {title}"]
        lines.extend(f"{k}:{v}" for k, v in fields)
        parts.append("\r\n".join(lines) + "\r\n")
    return "\r\n".join(parts).encode()


@command("info")
def info(c: Client, argv: list[bytes]):
    return Verbatim(info_text(c, argv[1:]))


# -- CLIENT ----------------------------------------------------------------------
_CLIENT_TYPES = {b"normal", b"master", b"replica", b"slave", b"pubsub"}


def _client_type(cl: Client) -> bytes:
    if cl.kind == "replica":
        return b"replica"
    if cl.kind == "master":
        return b"master"
    if cl.subscriptions:
        return b"pubsub"
    return b"normal"


@command("client|id")
def client_id(c: Client, argv: list[bytes]):
    return c.id


@command("client|info")
def client_info(c: Client, argv: list[bytes]):
    return Verbatim(c.info_line() + b"\n")


@command("client|list")
def client_list(c: Client, argv: list[bytes]):
    clients = [cl for cl in c.server.clients.values() if cl.id > 0]
    if len(argv) == 4 and argv[2].lower() == b"type":
        kind = argv[3].lower()
        if kind not in _CLIENT_TYPES:
            raise ReplyError(b"ERR Unknown client type '%s'" % argv[3])
        if kind == b"slave":
            kind = b"replica"
        clients = [cl for cl in clients if _client_type(cl) == kind]
    elif len(argv) > 3 and argv[2].lower() == b"id":
        ids = []
        for a in argv[3:]:
            v = string2ll(a)
            if v is None or v <= 0:
                raise ReplyError("ERR Invalid client ID")
            ids.append(v)
        clients = [c.server.clients[i] for i in ids if i in c.server.clients]
    elif len(argv) != 2:
        raise SYNTAX_ERR
    return Verbatim(b"".join(cl.info_line() + b"\n" for cl in clients))


@command("client|setname")
def client_setname(c: Client, argv: list[bytes]):
    set_client_name(c, argv[2])
    return OK


@command("client|getname")
def client_getname(c: Client, argv: list[bytes]):
    return c.name or None


@command("client|reply")
def client_reply(c: Client, argv: list[bytes]):
    mode = argv[2].lower()
    if mode == b"on":
        c.reply_mode = REPLY_ON
        return OK
    if mode == b"off":
        c.reply_mode = REPLY_OFF
    elif mode == b"skip":
        if c.reply_mode == REPLY_ON:
            c.reply_mode = REPLY_SKIP_NEXT
    else:
        raise SYNTAX_ERR
    return NO_REPLY


@command("client|no-evict")
def client_no_evict(c: Client, argv: list[bytes]):
    mode = argv[2].lower()
    if mode not in (b"on", b"off"):
        raise SYNTAX_ERR
    c.no_evict = mode == b"on"
    figure = c.server.client_mem
    if not c.no_evict and figure is not None and figure.clients_limit:
        c.server.loop.call_soon(figure.evict_clients)  # it may be the one over the limit
    return OK


@command("client|kill")
def client_kill(c: Client, argv: list[bytes]):
    server = c.server
    addr = laddr = kind = user = None
    cid = 0
    skipme = True
    if len(argv) == 3:
        addr = argv[2].decode(errors="replace")
        skipme = False
    else:
        i = 2
        while i < len(argv):
            more = i + 1 < len(argv)
            opt = argv[i].lower()
            if opt == b"id" and more:
                v = string2ll(argv[i + 1])
                if v is None or v < 1:
                    raise ReplyError("ERR client-id should be greater than 0")
                cid = v
            elif opt == b"type" and more:
                kind = argv[i + 1].lower()
                if kind not in _CLIENT_TYPES:
                    raise ReplyError(b"ERR Unknown client type '%s'" % argv[i + 1])
                if kind == b"slave":
                    kind = b"replica"
            elif opt == b"addr" and more:
                addr = argv[i + 1].decode(errors="replace")
            elif opt == b"laddr" and more:
                laddr = argv[i + 1].decode(errors="replace")
            elif opt == b"user" and more:
                user = server.acl.users.get(argv[i + 1])
                if user is None:
                    raise ReplyError(b"ERR No such user '%s'" % argv[i + 1])
            elif opt == b"skipme" and more:
                val = argv[i + 1].lower()
                if val == b"yes":
                    skipme = True
                elif val == b"no":
                    skipme = False
                else:
                    raise SYNTAX_ERR
            else:
                raise SYNTAX_ERR
            i += 2
    killed = 0
    for cl in list(server.clients.values()):
        if cl.id < 0:
            continue
        if addr is not None and cl.addr != addr:
            continue
        if laddr is not None and cl.laddr != laddr:
            continue
        if kind is not None and _client_type(cl) != kind:
            continue
        if cid and cl.id != cid:
            continue
        if user is not None and cl.user is not user:
            continue
        if cl is c and skipme:
            continue
        if cl is c:
            c.close_after_reply = True
        else:
            cl.kill_requested = True
            cl.on_output(cl)
        killed += 1
    if len(argv) == 3:
        if not killed:
            raise ReplyError("ERR No such client")
        return OK
    return killed


@command("client|unblock")
def client_unblock(c: Client, argv: list[bytes]):
    error = False
    if len(argv) == 4:
        reason = argv[3].lower()
        if reason == b"error":
            error = True
        elif reason != b"timeout":
            raise ReplyError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    cid = get_int(argv[2])
    target = c.server.clients.get(cid)
    if target is None or target.blocked is None:
        return 0
    if error:
        c.server.blocking.unblock(target, UNBLOCKED_ERR, sample=True)
    else:
        c.server.blocking.unblock(target, target.blocked.timeout_reply, sample=True)
    return 1


@command("client|pause")
def client_pause(c: Client, argv: list[bytes]):
    writes_only = False
    if len(argv) == 4:
        mode = argv[3].lower()
        if mode == b"write":
            writes_only = True
        elif mode != b"all":
            raise ReplyError("ERR CLIENT PAUSE mode must be WRITE or ALL")
    timeout = parse_timeout(argv[2], unit_ms=True)
    server = c.server
    server.pause("client", time.monotonic() + timeout, writes_only)
    if server.loop is not None:
        server.loop.call_later(timeout + 0.001, _pause_check, server)
    return OK


def _pause_check(server) -> None:
    if server.pause_until and time.monotonic() >= server.pause_until:
        server.settle_pauses()


@command("client|unpause")
def client_unpause(c: Client, argv: list[bytes]):
    c.server.unpause("client")
    return OK


@command("client|help")
def client_help(c: Client, argv: list[bytes]):
    return help_reply([
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
    ])


# CLIENT SETINFO and NO-TOUCH arrived in Redis 7.2; their facts are declared here.
_SETINFO_SPEC = command_spec(
    "client|setinfo", 4, ["noscript", "loading", "stale"], ["@slow", "@connection"], group="connection",
    summary="Sets information specific to the client or connection.", since="7.2.0", complexity="O(1)",
    args=[arg("attr", "oneof", args=[arg("libname", "string", "LIB-NAME"), arg("libver", "string", "LIB-VER")])],
)
_NO_TOUCH_SPEC = command_spec(
    "client|no-touch", 3, ["noscript", "loading", "stale"], ["@slow", "@connection"], group="connection",
    summary="Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
    since="7.2.0", complexity="O(1)",
    args=[arg("enabled", "oneof", args=[arg("on", "pure-token", "ON"), arg("off", "pure-token", "OFF")])],
)


@command("client|setinfo", spec=_SETINFO_SPEC)
def client_setinfo(c: Client, argv: list[bytes]):
    attr = argv[2].lower()
    value = argv[3]
    if attr not in (b"lib-name", b"lib-ver"):
        raise ReplyError(b"ERR Unrecognized option '%s'" % argv[2])
    for ch in value:
        if ch < 33 or ch > 126:
            raise ReplyError(
                b"ERR %s cannot contain spaces, newlines or special characters." % argv[2]
            )
    if attr == b"lib-name":
        c.lib_name = value
    else:
        c.lib_ver = value
    return OK


@command("client|no-touch", spec=_NO_TOUCH_SPEC)
def client_no_touch(c: Client, argv: list[bytes]):
    mode = argv[2].lower()
    if mode not in (b"on", b"off"):
        raise SYNTAX_ERR
    c.no_touch = mode == b"on"
    return OK


# -- COMMAND -----------------------------------------------------------------------
@command("command")
def command_(c: Client, argv: list[bytes]):
    return [cmd.info_reply() for cmd in c.server.table.commands.values()]


@command("command|count")
def command_count(c: Client, argv: list[bytes]):
    return len(c.server.table.commands)


@command("command|info")
def command_info(c: Client, argv: list[bytes]):
    table = c.server.table
    if len(argv) == 2:
        return [cmd.info_reply() for cmd in table.commands.values()]
    out = []
    for name in argv[2:]:
        cmd = table.lookup_name(name)
        out.append(cmd.info_reply() if cmd is not None else None)
    return out


@command("command|docs")
def command_docs(c: Client, argv: list[bytes]):
    table = c.server.table
    if len(argv) == 2:
        return Map((cmd.fullname.encode(), cmd.docs_reply()) for cmd in table.commands.values())
    out = Map()
    for name in argv[2:]:
        cmd = table.lookup_name(name)
        if cmd is not None:
            out[cmd.fullname.encode()] = cmd.docs_reply()
    return out


@command("command|list")
def command_list(c: Client, argv: list[bytes]):
    cmds = c.server.table.all()
    if len(argv) == 2:
        return [cmd.fullname.encode() for cmd in cmds]
    if len(argv) != 5 or argv[2].lower() != b"filterby":
        raise SYNTAX_ERR
    kind, value = argv[3].lower(), argv[4]
    if kind == b"module":
        return []
    if kind == b"aclcat":
        cat = b"@" + value.lower()
        return [cmd.fullname.encode() for cmd in cmds
                if any(x.encode() == cat for x in cmd.categories)]
    if kind == b"pattern":
        match = compile_glob(value, True)
        return [cmd.fullname.encode() for cmd in cmds if match(cmd.fullname.encode())]
    raise SYNTAX_ERR


@command("command|getkeys")
def command_getkeys(c: Client, argv: list[bytes]):
    return [argv[2 + i] for i in _getkeys(c, argv[2:])]


@command("command|getkeysandflags")
def command_getkeysandflags(c: Client, argv: list[bytes]):
    sub = argv[2:]
    _getkeys(c, sub)
    cmd = c.server.table.lookup(sub)
    if cmd.key_flags is not None:
        return [[sub[1], Set(Status(f) for f in cmd.key_flags(sub))]]
    specs = cmd.key_specs
    return [[sub[i], Set(Status(f.encode()) for f in specs[index].get("flags", []))]
            for i, index in cmd.keys(sub)]


def _getkeys(c: Client, sub: list[bytes]) -> list[int]:
    """The key positions in ``sub``, with Redis's checks in Redis's order: a command that
    takes no keys at all, then the arity, then a call whose keys cannot be found (an empty
    answer only for commands whose keys are optional)."""
    cmd = c.server.table.lookup(sub)
    if cmd is None:
        raise ReplyError("ERR Invalid command specified")
    if not cmd.has_keys:
        raise ReplyError("ERR The command has no key arguments")
    argc = len(sub)
    if (cmd.arity > 0 and cmd.arity != argc) or argc < -cmd.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    positions = cmd.key_positions(sub)
    if not positions and "no_mandatory_keys" not in cmd.flag_names:
        raise ReplyError("ERR Invalid arguments specified for command")
    return positions


@command("command|help")
def command_help(c: Client, argv: list[bytes]):
    return help_reply([
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
    ])

