"""Configuration: every parameter Redis 7.0 has, parsed, validated and rendered as Redis does.

Every parameter either does what Redis's does, or is refused. The ones rill does not
implement (``UNSUPPORTED``) are accepted only at their default (so a stock redis.conf,
which spells out many defaults, still loads). Any other value is refused at
start-up and by CONFIG SET with an error naming the parameter; CONFIG GET answers
for all of them. tests/server/test_config.py checks the split against the code.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from rill.protocol.numbers import string2ll
from rill.protocol.parser import repr_body, split_args
from rill.storage.glob import compile_glob

from . import proctitle
from .acl import E_DUPLICATE, validate_user_directive
from .latency import format_percentile


class ConfigError(Exception):
    """A value a parameter refuses; the message is Redis's reason text."""


class ConfigLineError(ConfigError):
    """A start-up directive refused: Redis's report names the line and then the reason."""

    def __init__(self, reason: str, lineno: int, line: str) -> None:
        super().__init__(f"Reading the configuration file, at line {lineno}\n>>> '{line}'\n{reason}")


@dataclass
class Param:
    name: str
    kind: str  # bool | int | memory | memory_percent | octal | enum | string | special
    default: str
    alias: str | None = None
    immutable: bool = False
    choices: tuple[str, ...] = ()
    lo: int = 0
    hi: int = 0
    unsigned: bool = False
    multi_arg: bool = False
    # debugging knobs CONFIG GET only answers for by exact name, never for a pattern
    hidden: bool = False
    # secrets: CONFIG SET's value for them never shows in SLOWLOG or MONITOR
    sensitive: bool = False
    # names a file: CONFIG SET applies it even unchanged (a certificate reloads), as Redis's VOLATILE_CONFIG
    volatile: bool = False
    # special parameters normalise their value with their own function
    normalize: Callable[[str], str] | None = field(default=None, repr=False)


P = Param

# Facts about Redis 7.0's parameters (names, kinds, bounds, defaults).
PARAMS: list[Param] = [
    P('rdbchecksum', 'bool', 'yes', immutable=True),
    P('daemonize', 'bool', 'no', immutable=True),
    P('io-threads-do-reads', 'bool', 'no', immutable=True),
    P('always-show-logo', 'bool', 'no', immutable=True),
    P('protected-mode', 'bool', 'yes'),
    P('rdbcompression', 'bool', 'yes'),
    P('rdb-del-sync-files', 'bool', 'no'),
    P('activerehashing', 'bool', 'yes'),
    P('stop-writes-on-bgsave-error', 'bool', 'yes'),
    P('set-proc-title', 'bool', 'yes', immutable=True),
    P('dynamic-hz', 'bool', 'yes'),
    P('lazyfree-lazy-eviction', 'bool', 'no'),
    P('lazyfree-lazy-expire', 'bool', 'no'),
    P('lazyfree-lazy-server-del', 'bool', 'no'),
    P('lazyfree-lazy-user-del', 'bool', 'no'),
    P('lazyfree-lazy-user-flush', 'bool', 'no'),
    P('repl-disable-tcp-nodelay', 'bool', 'no'),
    P('repl-diskless-sync', 'bool', 'yes'),
    P('aof-rewrite-incremental-fsync', 'bool', 'yes'),
    P('no-appendfsync-on-rewrite', 'bool', 'no'),
    P('cluster-require-full-coverage', 'bool', 'yes'),
    P('rdb-save-incremental-fsync', 'bool', 'yes'),
    P('aof-load-truncated', 'bool', 'yes'),
    P('aof-use-rdb-preamble', 'bool', 'yes'),
    P('aof-timestamp-enabled', 'bool', 'no'),
    P('cluster-replica-no-failover', 'bool', 'no', alias='cluster-slave-no-failover'),
    P('replica-lazy-flush', 'bool', 'no', alias='slave-lazy-flush'),
    P('replica-serve-stale-data', 'bool', 'yes', alias='slave-serve-stale-data'),
    P('replica-read-only', 'bool', 'yes', alias='slave-read-only'),
    P('replica-ignore-maxmemory', 'bool', 'yes', alias='slave-ignore-maxmemory'),
    P('jemalloc-bg-thread', 'bool', 'yes'),
    P('activedefrag', 'bool', 'no'),
    P('syslog-enabled', 'bool', 'no', immutable=True),
    P('cluster-enabled', 'bool', 'no', immutable=True),
    P('appendonly', 'bool', 'no'),
    P('cluster-allow-reads-when-down', 'bool', 'no'),
    P('cluster-allow-pubsubshard-when-down', 'bool', 'yes'),
    P('crash-log-enabled', 'bool', 'yes'),
    P('crash-memcheck-enabled', 'bool', 'yes'),
    P('disable-thp', 'bool', 'yes', immutable=True),
    P('cluster-allow-replica-migration', 'bool', 'yes'),
    P('replica-announced', 'bool', 'yes'),
    P('latency-tracking', 'bool', 'yes'),
    P('aof-disable-auto-gc', 'bool', 'no'),
    P('replica-ignore-disk-write-errors', 'bool', 'no'),
    P('aclfile', 'string', '', immutable=True),
    P('unixsocket', 'string', '', immutable=True),
    P('pidfile', 'string', '', immutable=True),
    P('replica-announce-ip', 'string', '', alias='slave-announce-ip'),
    P('masteruser', 'string', '', sensitive=True),
    P('cluster-announce-ip', 'string', ''),
    P('cluster-config-file', 'string', 'nodes.conf', immutable=True),
    P('cluster-announce-hostname', 'string', ''),
    P('syslog-ident', 'string', 'redis', immutable=True),
    P('dbfilename', 'string', 'dump.rdb'),
    P('appendfilename', 'string', 'appendonly.aof', immutable=True),
    P('appenddirname', 'string', 'appendonlydir', immutable=True),
    P('server_cpulist', 'string', '', immutable=True),
    P('bio_cpulist', 'string', '', immutable=True),
    P('aof_rewrite_cpulist', 'string', '', immutable=True),
    P('bgsave_cpulist', 'string', '', immutable=True),
    P('ignore-warnings', 'string', ''),
    P('proc-title-template', 'string', '{title} {listen-addr} {server-mode}'),
    P('bind-source-addr', 'string', ''),
    P('logfile', 'string', '', immutable=True),
    P('masterauth', 'string', '', sensitive=True),
    P('requirepass', 'string', '', sensitive=True),
    P('supervised', 'enum', 'no', immutable=True, choices=('upstart', 'systemd', 'auto', 'no')),
    P('syslog-facility', 'enum', 'local0', immutable=True, choices=('user', 'local0', 'local1', 'local2', 'local3', 'local4', 'local5', 'local6', 'local7')),
    P('repl-diskless-load', 'enum', 'disabled', choices=('disabled', 'on-empty-db', 'swapdb')),
    P('loglevel', 'enum', 'notice', choices=('debug', 'verbose', 'notice', 'warning')),
    P('maxmemory-policy', 'enum', 'noeviction', choices=('volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl', 'allkeys-lru', 'allkeys-lfu', 'allkeys-random', 'noeviction')),
    P('appendfsync', 'enum', 'everysec', choices=('everysec', 'always', 'no')),
    P('oom-score-adj', 'enum', 'no', choices=('no', 'yes', 'relative', 'absolute')),
    P('acl-pubsub-default', 'enum', 'resetchannels', choices=('allchannels', 'resetchannels')),
    P('sanitize-dump-payload', 'enum', 'no', choices=('no', 'yes', 'clients')),
    P('enable-protected-configs', 'enum', 'no', immutable=True, choices=('no', 'yes', 'local')),
    P('enable-debug-command', 'enum', 'no', immutable=True, choices=('no', 'yes', 'local')),
    P('enable-module-command', 'enum', 'no', immutable=True, choices=('no', 'yes', 'local')),
    P('cluster-preferred-endpoint-type', 'enum', 'ip', choices=('ip', 'hostname', 'unknown-endpoint')),
    P('propagation-error-behavior', 'enum', 'ignore', choices=('ignore', 'panic', 'panic-on-replicas')),
    P('shutdown-on-sigint', 'enum', 'default', multi_arg=True,
      choices=('default', 'save', 'nosave', 'now', 'force')),
    P('shutdown-on-sigterm', 'enum', 'default', multi_arg=True,
      choices=('default', 'save', 'nosave', 'now', 'force')),
    P('databases', 'int', '16', immutable=True, lo=1, hi=2147483647),
    P('port', 'int', '6379', lo=0, hi=65535),
    P('io-threads', 'int', '1', immutable=True, lo=1, hi=128),
    P('auto-aof-rewrite-percentage', 'int', '100', lo=0, hi=2147483647),
    P('cluster-replica-validity-factor', 'int', '10', alias='cluster-slave-validity-factor', lo=0, hi=2147483647),
    P('list-max-listpack-size', 'int', '-2', alias='list-max-ziplist-size', lo=-2147483648, hi=2147483647),
    P('tcp-keepalive', 'int', '300', lo=0, hi=2147483647),
    P('cluster-migration-barrier', 'int', '1', lo=0, hi=2147483647),
    P('active-defrag-cycle-min', 'int', '1', lo=1, hi=99),
    P('active-defrag-cycle-max', 'int', '25', lo=1, hi=99),
    P('active-defrag-threshold-lower', 'int', '10', lo=0, hi=1000),
    P('active-defrag-threshold-upper', 'int', '100', lo=0, hi=1000),
    P('rdb-key-save-delay', 'int', '0', lo=-2147483648, hi=2147483647, hidden=True),
    P('key-load-delay', 'int', '0', lo=-2147483648, hi=2147483647, hidden=True),
    # How often (in bytes parsed) a load lets the event loop answer clients.
    P('loading-process-events-interval-bytes', 'int', '2097152', lo=1024, hi=2147483647, hidden=True),
    P('lfu-log-factor', 'int', '10', lo=0, hi=2147483647),
    P('lfu-decay-time', 'int', '1', lo=0, hi=2147483647),
    P('replica-priority', 'int', '100', alias='slave-priority', lo=0, hi=2147483647),
    P('repl-diskless-sync-delay', 'int', '5', lo=0, hi=2147483647),
    P('maxmemory-samples', 'int', '5', lo=1, hi=2147483647),
    P('maxmemory-eviction-tenacity', 'int', '10', lo=0, hi=100),
    P('timeout', 'int', '0', lo=0, hi=2147483647),
    P('replica-announce-port', 'int', '0', alias='slave-announce-port', lo=0, hi=65535),
    P('tcp-backlog', 'int', '511', immutable=True, lo=0, hi=2147483647),
    P('cluster-port', 'int', '0', immutable=True, lo=0, hi=65535),
    P('cluster-announce-bus-port', 'int', '0', lo=0, hi=65535),
    P('cluster-announce-port', 'int', '0', lo=0, hi=65535),
    P('cluster-announce-tls-port', 'int', '0', lo=0, hi=65535),
    P('repl-timeout', 'int', '60', lo=1, hi=2147483647),
    P('repl-ping-replica-period', 'int', '10', alias='repl-ping-slave-period', lo=1, hi=2147483647),
    P('list-compress-depth', 'int', '0', lo=0, hi=2147483647),
    P('active-expire-effort', 'int', '1', lo=1, hi=10),
    P('hz', 'int', '10', lo=0, hi=2147483647),
    P('min-replicas-to-write', 'int', '0', alias='min-slaves-to-write', lo=0, hi=2147483647),
    P('min-replicas-max-lag', 'int', '10', alias='min-slaves-max-lag', lo=0, hi=2147483647),
    P('shutdown-timeout', 'int', '10', lo=0, hi=2147483647),
    P('repl-diskless-sync-max-replicas', 'int', '0', lo=0, hi=2147483647),
    P('maxclients', 'int', '10000', lo=1, hi=4294967295, unsigned=True),
    P('unixsocketperm', 'octal', '0', immutable=True, lo=0, hi=511, unsigned=True),
    P('socket-mark-id', 'int', '0', immutable=True, lo=0, hi=4294967295, unsigned=True),
    P('active-defrag-max-scan-fields', 'int', '1000', lo=1, hi=9223372036854775807),
    P('slowlog-max-len', 'int', '128', lo=0, hi=9223372036854775807),
    P('acllog-max-len', 'int', '128', lo=0, hi=9223372036854775807),
    P('busy-reply-threshold', 'int', '5000', alias='lua-time-limit', lo=0, hi=9223372036854775807),
    P('cluster-node-timeout', 'int', '15000', lo=0, hi=9223372036854775807),
    P('slowlog-log-slower-than', 'int', '10000', lo=-1, hi=9223372036854775807),
    P('latency-monitor-threshold', 'int', '0', lo=0, hi=9223372036854775807),
    P('proto-max-bulk-len', 'memory', '536870912', lo=1048576, hi=9223372036854775807),
    P('stream-node-max-entries', 'int', '100', lo=0, hi=9223372036854775807),
    # rill: rewrite a stream node without its tombstones once they are this percent of it (0 = never, as Redis)
    P('stream-node-gc-percent', 'int', '50', lo=0, hi=100),
    # rill: Active-Active (docs/active-active.md): this instance's region (0 = off), XADD's ID
    # mode, and the bytes of own effects kept for resyncs (the links' parameters: links.py)
    P('active-active-id', 'int', '0', lo=0, hi=255),
    P('active-active-xadd-id-mode', 'enum', 'strict', choices=('strict', 'semi-strict', 'liberal')),
    P('active-active-backlog-size', 'memory', '16777216', lo=16384, hi=9223372036854775807),
    # rill: the ACL user and password this instance's peer links log in with
    P('active-active-user', 'string', '', sensitive=True),
    P('active-active-auth', 'string', '', sensitive=True),
    P('repl-backlog-size', 'memory', '1048576', lo=1, hi=9223372036854775807),
    P('maxmemory', 'memory', '0', lo=0, hi=18446744073709551615, unsigned=True),
    P('cluster-link-sendbuf-limit', 'memory', '0', lo=0, hi=18446744073709551615, unsigned=True),
    P('hash-max-listpack-entries', 'int', '512', alias='hash-max-ziplist-entries', lo=0, hi=9223372036854775807, unsigned=True),
    P('set-max-intset-entries', 'int', '512', lo=0, hi=9223372036854775807, unsigned=True),
    P('zset-max-listpack-entries', 'int', '128', alias='zset-max-ziplist-entries', lo=0, hi=9223372036854775807, unsigned=True),
    P('active-defrag-ignore-bytes', 'memory', '104857600', lo=1, hi=9223372036854775807, unsigned=True),
    P('hash-max-listpack-value', 'memory', '64', alias='hash-max-ziplist-value', lo=0, hi=9223372036854775807, unsigned=True),
    P('stream-node-max-bytes', 'memory', '4096', lo=0, hi=9223372036854775807, unsigned=True),
    P('zset-max-listpack-value', 'memory', '64', alias='zset-max-ziplist-value', lo=0, hi=9223372036854775807, unsigned=True),
    P('hll-sparse-max-bytes', 'memory', '3000', lo=0, hi=9223372036854775807, unsigned=True),
    P('tracking-table-max-keys', 'int', '1000000', lo=0, hi=9223372036854775807, unsigned=True),
    P('client-query-buffer-limit', 'memory', '1073741824', lo=1048576, hi=9223372036854775807, unsigned=True),
    P('maxmemory-clients', 'memory_percent', '0', lo=-100, hi=9223372036854775807),
    P('repl-backlog-ttl', 'int', '3600', lo=0, hi=9223372036854775807),
    P('auto-aof-rewrite-min-size', 'memory', '67108864', lo=0, hi=9223372036854775807),
    P('tls-port', 'int', '0', lo=0, hi=65535),
    P('tls-session-cache-size', 'int', '20480', lo=0, hi=2147483647),
    P('tls-session-cache-timeout', 'int', '300', lo=0, hi=2147483647),
    P('tls-cluster', 'bool', 'no'),
    P('tls-replication', 'bool', 'no'),
    P('tls-auth-clients', 'enum', 'yes', choices=('no', 'yes', 'optional')),
    P('tls-prefer-server-ciphers', 'bool', 'no'),
    P('tls-session-caching', 'bool', 'yes'),
    P('tls-cert-file', 'string', '', volatile=True),
    P('tls-key-file', 'string', '', volatile=True),
    P('tls-key-file-pass', 'string', ''),
    P('tls-client-cert-file', 'string', '', volatile=True),
    P('tls-client-key-file', 'string', '', volatile=True),
    P('tls-client-key-file-pass', 'string', ''),
    P('tls-dh-params-file', 'string', '', volatile=True),
    P('tls-ca-cert-file', 'string', '', volatile=True),
    P('tls-ca-cert-dir', 'string', '', volatile=True),
    P('tls-protocols', 'string', ''),
    P('tls-ciphers', 'string', ''),
    P('tls-ciphersuites', 'string', ''),
]


def _norm_save(value: str) -> str:
    parts = value.split()
    if len(parts) % 2:
        raise ConfigError("Invalid save parameters")
    for i, p in enumerate(parts):
        body = p[1:] if p[:1] in "+-" else p
        if not body.isdigit() or int(p) < (1 if i % 2 == 0 else 0):
            raise ConfigError("Invalid save parameters")
    return " ".join(str(int(p)) for p in parts)


def _norm_bind(value: str) -> str:
    parts = value.split()
    if len(parts) > 16:
        raise ConfigError("Too many bind addresses specified.")
    return " ".join(parts)


_OBUF_CLASSES = {"normal", "replica", "slave", "pubsub"}


def _norm_obuf(value: str) -> str:
    parts = value.split()
    if len(parts) % 4:
        raise ConfigError("Wrong number of arguments in buffer limit configuration.")
    current = {"normal": [0, 0, 0], "slave": [268435456, 67108864, 60], "pubsub": [33554432, 8388608, 60]}
    for i in range(0, len(parts), 4):
        cls = parts[i].lower()
        if cls not in _OBUF_CLASSES:
            raise ConfigError("Invalid client class specified in buffer limit configuration.")
        try:
            hard, soft = memtoull(parts[i + 1]), memtoull(parts[i + 2])
            secs = int(parts[i + 3])
            if secs < 0:
                raise ValueError
        except ValueError:
            raise ConfigError("Error in hard, soft or soft_seconds setting in buffer limit configuration.") from None
        current["slave" if cls == "replica" else cls] = [hard, soft, secs]
    return " ".join(f"{c} {h} {s} {t}" for c, (h, s, t) in current.items())


_NOTIFY_FLAGS = "Ag$lshzxeKEtmdn"
_NOTIFY_ALL = "g$lshzxetd"


def _norm_notify(value: str) -> str:
    """Redis's keyspaceEventsFlagsToString(StringToFlags(value))."""
    for ch in value:
        if ch not in _NOTIFY_FLAGS:
            raise ConfigError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    flags = set(value)
    if "A" in flags:
        flags |= set(_NOTIFY_ALL)
    if set(_NOTIFY_ALL) <= flags:
        out = "A"
    else:
        out = "".join(c for c in "g$lshzxetdn" if c in flags)
    return out + "".join(c for c in "KEm" if c in flags)


def _norm_oom(value: str) -> str:
    parts = value.split()
    if len(parts) != 3:
        raise ConfigError("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")
    for p in parts:
        try:
            v = int(p)
        except ValueError:
            raise ConfigError("Invalid oom-score-adj-values, elements must be between -2000 and 2000.") from None
        if not -2000 <= v <= 2000:
            raise ConfigError("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")
    return " ".join(str(int(p)) for p in parts)


def _norm_any(value: str) -> str:
    return " ".join(value.split())


def _norm_replicaof(value: str) -> str:
    """replicaof as Redis loads it: a host and a port (0-65535, all digits bar a sign),
    or "no one"; nothing at all (the default) follows no master either."""
    words = value.split()
    if not words:
        return ""
    if len(words) != 2:
        raise ConfigError("wrong number of arguments")
    if words[0].lower() == "no" and words[1].lower() == "one":
        return ""
    port = words[1]
    digits = port[1:] if port[:1] in "+-" else port
    if not (digits.isascii() and digits.isdigit()) or not 0 <= int(port) <= 65535:
        raise ConfigError("Invalid master port")
    return " ".join(words)


def parse_percentile(text: str) -> float:
    """Redis's string2d (strtod, the whole string, no leading space, no NaN, no overflow)."""
    if not text or text[0].isspace() or text[-1].isspace() or "_" in text:
        raise ValueError(text)
    try:
        v = float(text)
    except ValueError:
        if not text.lower().lstrip("+-").startswith("0x"):
            raise
        v = float.fromhex(text)
    if math.isnan(v) or (math.isinf(v) and "inf" not in text.lower()):
        raise ValueError(text)  # overflow, which strtod reports as ERANGE
    if v == 0.0 and any(c in "123456789" for c in text.lower().partition("e")[0]) and "x" not in text.lower():
        raise ValueError(text)  # underflow, likewise
    return v


def _norm_percentiles(value: str) -> str:
    """latency-tracking-info-percentiles: numbers in [0, 100] separated by single
    spaces ("" for none), shown as ``%f`` without trailing zeros."""
    out = []
    for part in value.split(" ") if value else []:
        try:
            p = parse_percentile(part)
        except ValueError:
            raise ConfigError("Invalid latency-tracking-info-percentiles parameters") from None
        if p > 100.0 or p < 0.0:
            raise ConfigError("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
        out.append(format_percentile(p))
    return " ".join(out)


def _norm_dir(value: str) -> str:
    try:
        os.chdir(value)
    except OSError as e:
        raise ConfigError(e.strerror or str(e)) from None
    return os.getcwd()


def parse_peers(value: str) -> list[tuple[str, int]]:
    """``active-active-peers``: ``"host:port host:port ..."`` -> [(host, port), ...] with
    duplicates dropped (an IPv6 host may be bracketed); ConfigError on an entry that is not
    host:port with a port in 1..65535."""
    peers: list[tuple[str, int]] = []
    for item in value.split():
        host, sep, port = item.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"Invalid Active-Active peer '{item}' (expected host:port)")
        if (host, int(port)) not in peers:
            peers.append((host, int(port)))
    return peers


def _norm_peers(value: str) -> str:
    parse_peers(value)
    return " ".join(value.split())


PARAMS += [
    # rill: Active-Active: the peers this instance links to (server/activeactive/links.py)
    P("active-active-peers", "special", "", multi_arg=True, normalize=_norm_peers),
    P("save", "special", "3600 1 300 100 60 10000", multi_arg=True, normalize=_norm_save),
    P("bind", "special", "* -::*", multi_arg=True, normalize=_norm_bind),
    P("dir", "special", "", normalize=_norm_dir),
    P("client-output-buffer-limit", "special",
      "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
      multi_arg=True, normalize=_norm_obuf),
    P("notify-keyspace-events", "special", "", normalize=_norm_notify),
    P("oom-score-adj-values", "special", "0 200 800", multi_arg=True, normalize=_norm_oom),
    P("replicaof", "special", "", alias="slaveof", immutable=True, multi_arg=True, normalize=_norm_replicaof),
    P("latency-tracking-info-percentiles", "special", "50 99 99.9", multi_arg=True, normalize=_norm_percentiles),
]

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}


def memtoull(value: str) -> int:
    """Parse a memory value like Redis (``1gb``, ``100mb``, ``4096``); ValueError if invalid."""
    v = value.strip().lower()
    i = len(v)
    while i and not v[i - 1].isdigit():
        i -= 1
    num, unit = v[:i], v[i:]
    if unit not in _UNITS or not num or not num.isdigit():
        raise ValueError(value)
    return int(num) * _UNITS[unit]


def _parse_numeric(p: Param, value: str) -> int:
    res: int | None = None
    if p.kind in ("memory", "memory_percent"):
        try:
            res = memtoull(value)
        except ValueError:
            res = None
    if res is None and p.kind == "memory_percent" and len(value) > 1 and value.endswith("%"):
        pct = string2ll(value[:-1].encode(errors="surrogateescape"))
        if pct is not None and pct >= 0:
            res = -pct
    if res is None and p.kind == "octal":
        try:
            res = int(value, 8)
        except ValueError:
            res = None
    if res is None and p.kind == "int":
        res = string2ll(value.encode(errors="surrogateescape"))
    if res is None:
        raise ConfigError({
            "memory_percent": "argument must be a memory or percent value",
            "memory": "argument must be a memory value",
            "octal": "argument couldn't be parsed as an octal number",
        }.get(p.kind, "argument couldn't be parsed into an integer"))
    if p.unsigned:
        if res < 0 or res > p.hi or res < p.lo:
            if p.kind == "octal":
                raise ConfigError(f"argument must be between {p.lo:o} and {p.hi:o} inclusive")
            raise ConfigError(f"argument must be between {p.lo} and {p.hi} inclusive")
    elif p.kind == "memory_percent" and res < 0:
        if res < p.lo:
            raise ConfigError(f"percentage argument must be less or equal to {-p.lo}")
    elif res > p.hi or res < p.lo:
        if p.kind == "octal":
            raise ConfigError(f"argument must be between {p.lo:o} and {p.hi:o} inclusive")
        raise ConfigError(f"argument must be between {p.lo} and {p.hi} inclusive")
    return res


# Parameters rill does not implement: accepted at their default only.
UNSUPPORTED: frozenset[str] = frozenset({
    # clustering (tls-cluster: TLS on a cluster bus rill does not have)
    "tls-cluster", "cluster-enabled", "cluster-config-file", "cluster-port", "cluster-node-timeout",
    "cluster-require-full-coverage", "cluster-replica-no-failover", "cluster-replica-validity-factor",
    "cluster-migration-barrier", "cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down",
    "cluster-allow-replica-migration", "cluster-announce-ip", "cluster-announce-hostname",
    "cluster-announce-port", "cluster-announce-bus-port", "cluster-announce-tls-port",
    "cluster-preferred-endpoint-type", "cluster-link-sendbuf-limit",
    # memory allocator, defragmentation, rehashing, threads: C Redis internals
    "activedefrag", "active-defrag-cycle-min", "active-defrag-cycle-max",
    "active-defrag-threshold-lower", "active-defrag-threshold-upper", "active-defrag-ignore-bytes",
    "active-defrag-max-scan-fields", "jemalloc-bg-thread", "activerehashing",
    "io-threads", "io-threads-do-reads", "bio_cpulist", "aof_rewrite_cpulist",
    "bgsave_cpulist", "lazyfree-lazy-server-del",
    "active-expire-effort",
    # persistence knobs
    "rdb-save-incremental-fsync", "aof-rewrite-incremental-fsync",
    "no-appendfsync-on-rewrite",
    # replication knobs
    "repl-disable-tcp-nodelay", "repl-diskless-load", "replica-lazy-flush",
    "replica-ignore-disk-write-errors", "replica-announce-ip", "replica-announce-port",
    "bind-source-addr", "propagation-error-behavior",
    # crash reports, sockets
    "crash-log-enabled", "crash-memcheck-enabled", "ignore-warnings",
    "socket-mark-id",
})


class Config:
    """The parameter values, as strings normalised the way CONFIG GET shows them.

    Typed views (``config.int("port")``) are computed on demand; the server
    caches the few it reads on hot paths and refreshes them through listeners.
    """

    def __init__(self) -> None:
        self.params: dict[str, Param] = {}
        self.aliases: dict[str, str] = {}
        for p in PARAMS:
            self.params[p.name] = p
            if p.alias:
                self.aliases[p.alias] = p.name
        self.values: dict[str, str] = {p.name: p.default for p in PARAMS}
        # Values as given, where the shown form drops information Redis still acts on:
        # notify-keyspace-events "KEnA" shows as "AKE" but keeps the 'n' class.
        self.given: dict[str, str] = {}
        # CONFIG SET side effects that can fail (port: bind the new listener). An
        # applier raises ConfigError to refuse; the whole CONFIG SET is then undone.
        self.appliers: dict[str, Callable[[str], None]] = {}
        self.values["dir"] = os.getcwd()
        self.listeners: list[Callable[[str], None]] = []
        self.config_file: str | None = None
        self._save_loaded = False
        # ``user <name> <rules...>`` lines, checked here and loaded by the ACL at start-up.
        self.user_directives: list[list[bytes]] = []
        # rename-command lines, in order, with where they stand for the error report:
        # (old name, new name or b"" to remove, line number, line)
        self.renames: list[tuple[bytes, bytes, int, str]] = []
        # Directives CONFIG REWRITE writes from live state: name -> its lines, or None to leave them.
        self.rewrite_hooks: dict[str, Callable[[], list[str] | None]] = {}

    # -- typed access ------------------------------------------------------
    def canonical(self, name: str) -> str | None:
        name = name.lower()
        if name in self.params:
            return name
        return self.aliases.get(name)

    def __getitem__(self, name: str) -> str:
        return self.values[self.canonical(name) or name]

    def int(self, name: str) -> int:
        p = self.params[name]
        v = self.values[name]
        if p.kind == "octal":
            return int(v, 8)
        if p.kind == "memory_percent" and v.endswith("%"):
            return -int(v[:-1])
        return int(v)

    def bool(self, name: str) -> bool:
        return self.values[name] == "yes"

    # -- setting -----------------------------------------------------------
    def normalise(self, name: str, value: str) -> str:
        """Validate ``value`` for parameter ``name``; return the form CONFIG GET shows."""
        p = self.params[name]
        if p.kind == "bool":
            v = value.lower()
            if v not in ("yes", "no"):
                raise ConfigError("argument must be 'yes' or 'no'")
            return v
        if p.kind == "enum":
            words = value.lower().split() if p.multi_arg else [value.lower()]
            for w in words or [""]:  # no word at all is refused too
                if w not in p.choices:
                    raise ConfigError("argument(s) must be one of the following: " + ", ".join(p.choices))
            if not p.multi_arg:
                return words[0]
            # Flags (shutdown-on-sig*): a set, shown in the table's order; the first
            # choice is no flag at all.
            if "save" in words and "nosave" in words:
                raise ConfigError("shutdown options SAVE and NOSAVE can't be used simultaneously")
            return " ".join(c for c in p.choices[1:] if c in words) or p.choices[0]
        if name == "proc-title-template" and not proctitle.valid(value, self.values, self.config_file):
            raise ConfigError(proctitle.INVALID_TEMPLATE)
        if p.kind == "string":
            return value
        if p.kind == "special":
            assert p.normalize is not None
            return p.normalize(value)
        res = _parse_numeric(p, value)
        if name == "hz":  # accepted from 0 but kept within 1..500, as Redis's updateHZ
            res = max(1, min(500, res))
        if p.kind == "memory_percent" and res < 0:
            return f"{-res}%"
        if p.kind == "octal":
            return f"{res:o}"
        return str(res)

    def check_supported(self, name: str, normalised: str) -> None:
        """Refuse a value of a parameter rill does not implement, unless it is the default."""
        if name not in UNSUPPORTED:
            return
        default = self.normalise(name, self.params[name].default)
        if normalised == default:
            return
        raise ConfigError(
            f"rill does not support '{name}' (only its default, {_quote(default)}, is accepted)"
        )

    def set(self, name: str, value: str, *, startup: bool = False) -> None:
        """Set one parameter; ConfigError if the value is refused."""
        canon = self.canonical(name)
        if canon is None:
            raise KeyError(name)
        normalised = self.normalise(canon, value)
        self.check_supported(canon, normalised)
        if canon == "save" and startup and self._save_loaded and normalised:
            # In config files and on the command line the first `save` replaces
            # the default and later ones add save points, as in Redis.
            normalised = f"{self.values['save']} {normalised}".strip()
        if canon == "save" and startup:
            self._save_loaded = True
        self.values[canon] = normalised
        self.given[canon] = value
        if not startup:
            for listener in self.listeners:
                listener(canon)

    def set_many(self, pairs: list[tuple[str, str]]) -> None:
        """CONFIG SET of several parameters: all apply or none (old values restored)."""
        old, old_given = dict(self.values), dict(self.given)
        try:
            for name, value in pairs:
                canon = self.canonical(name)
                assert canon is not None
                self.values[canon] = self.normalise(canon, value)
                self.given[canon] = value
            for name, _ in pairs:  # after every value parsed: a bad value is reported first
                canon = self.canonical(name) or name
                try:
                    self.check_supported(canon, self.values[canon])
                except ConfigError as e:
                    e.param = name  # type: ignore[attr-defined]
                    raise
        except ConfigError:
            self.values, self.given = old, old_given
            raise
        applied: list[str] = []
        for name, _ in pairs:
            canon = self.canonical(name) or name
            applier = self.appliers.get(canon)
            if applier is None or (self.values[canon] == old[canon] and not self.params[canon].volatile):
                continue
            if any(self.appliers[done] is applier for done in applied):
                continue  # one applier serves several parameters (TLS): once, after all are set
            try:
                applier(self.values[canon])
            except ConfigError as e:
                self.values, self.given = old, old_given
                for done in reversed(applied):  # put back what already took effect
                    try:
                        self.appliers[done](old[done])
                    except ConfigError:
                        pass
                e.param = name  # type: ignore[attr-defined]
                raise
            applied.append(canon)
        for name, _ in pairs:
            for listener in self.listeners:
                listener(self.canonical(name) or name)

    def matching(self, pattern: str) -> list[tuple[str, str]]:
        """CONFIG GET: (name, value) pairs whose name (or alias) matches the glob."""
        if not any(ch in pattern for ch in "[*?"):
            # A plain name (or alias) is looked up directly, hidden parameters included.
            canon = self.canonical(pattern)
            return [] if canon is None else [(pattern, self.values[canon])]  # named as asked
        match = compile_glob(pattern.lower().encode(), True)
        out = []
        for p in self.params.values():
            if p.hidden:
                continue
            if match(p.name.encode()):
                out.append((p.name, self.values[p.name]))
            if p.alias and match(p.alias.encode()):
                out.append((p.alias, self.values[p.name]))
        return out

    # -- files and the command line ----------------------------------------
    def load_lines(self, lines: Iterable[str], first_line: int = 1) -> None:
        """Apply redis.conf-style lines; a ConfigLineError names the bad line as Redis does.
        ``first_line`` numbers them after what came before (the command line's options
        follow the file's lines in Redis's count)."""
        for lineno, raw in enumerate(lines, first_line):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            args = split_args(line.encode(errors="surrogateescape"))
            if args is None:
                raise ConfigLineError("Unbalanced quotes in configuration line", lineno, line)
            if not args:
                continue
            name = args[0].decode(errors="replace").lower()
            values = [a.decode(errors="surrogateescape") for a in args[1:]]
            if name == "include":
                for path in values:
                    with open(path) as f:
                        self.load_lines(f.read().splitlines())
                continue
            if name == "user" and len(args) >= 2:
                self._add_user(args[1:], lineno, line)
                continue
            if name == "rename-command" and len(args) == 3:
                self.renames.append((args[1].lower(), args[2].lower(), lineno, line))
                continue
            canon = self.canonical(name)
            if canon is None:
                if name in _IGNORED_DIRECTIVES:
                    continue
                raise ConfigLineError("Bad directive or wrong number of arguments", lineno, line)
            p = self.params[canon]
            if canon == "save" and values == [""]:
                values = []
            if not p.multi_arg and len(values) != 1:
                raise ConfigLineError("wrong number of arguments", lineno, line)
            try:
                self.set(canon, " ".join(values), startup=True)
            except ConfigError as e:
                raise ConfigLineError(str(e), lineno, line) from None

    def _add_user(self, args: list[bytes], lineno: int, line: str) -> None:
        """ACLAppendUserForLoading: one definition per user, rules checked for syntax."""
        problem = (1, E_DUPLICATE) if any(u[0] == args[0] for u in self.user_directives) else None
        problem = problem or validate_user_directive(args)
        if problem is not None:
            idx, reason = problem
            # Redis names argv[idx] of the whole line ("user" is argv[0]).
            what = (b"user", *args)[idx].decode(errors="replace") if idx <= len(args) else ""
            raise ConfigLineError(f"Error in user declaration '{what}': {reason}", lineno, line)
        self.user_directives.append(args)

    def load_argv(self, argv: list[str], stdin: TextIO | None = None) -> None:
        """``rill-server [configfile] [-] [--name value ...]`` as redis-server reads it: the
        file's lines, then stdin's (``-`` first or last), then the options, as one count."""
        args = list(argv)
        text = ""
        if args and not args[0].startswith("-"):
            self.config_file = os.path.abspath(args.pop(0))
            with open(self.config_file) as f:
                text = f.read()
        options, from_stdin = options_from_argv(args, first=not self.config_file)
        if from_stdin:
            text += (stdin or sys.stdin).read()
        # One text, as Redis joins it: a newline, then the options, one per line.
        self.load_lines((text + "\n" + "\n".join(options)).split("\n"))

    def rewrite(self, force_all: bool = False) -> None:
        """CONFIG REWRITE: keep the file's comments and order, update changed values;
        ``force_all`` (DEBUG CONFIG-REWRITE-FORCE-ALL) writes defaults too."""
        if not self.config_file:
            raise ConfigError("The server is running without a config file")
        try:
            with open(self.config_file) as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        written: set[str] = set()
        out: list[str] = []
        generated = {name: hook() for name, hook in self.rewrite_hooks.items()}
        for raw in lines:
            args = split_args(raw.strip().encode()) if raw.strip() and not raw.strip().startswith("#") else None
            if not args:
                out.append(raw)
                continue
            directive = args[0].decode(errors="replace").lower()
            if generated.get(directive) is not None:
                # The first such line makes way for the live ones; the others go.
                if directive not in written:
                    out.extend(generated[directive] or ())
                    written.add(directive)
                continue
            canon = self.canonical(args[0].decode(errors="replace"))
            if canon is None or canon in written:
                if canon is None:
                    out.append(raw)
                continue
            written.add(canon)
            if force_all or self.values[canon] != self.params[canon].default:
                out.append(self._render(canon))
        for name, p in self.params.items():
            if name not in written and (force_all or (self.values[name] != p.default and name != "dir")):
                out.append(self._render(name))
        for directive, extra in generated.items():
            if extra and directive not in written:
                out.extend(extra)
        tmp = self.config_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(out) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.config_file)

    def _render(self, name: str) -> str:
        value = self.values[name]
        p = self.params[name]
        if p.multi_arg:
            return f"{name} {value}" if value else f'{name} ""'
        return f"{name} {_quote(value)}"


def options_from_argv(args: list[str], first: bool = True) -> tuple[list[str], bool]:
    """redis-server's options after the config file, as config lines; and whether ``-``
    asked for config on stdin (``first``: whether ``args[0]`` is argv's first argument).

    ``--name`` starts a directive unless the one before still waits for its value, so
    a value may itself begin with ``--`` (``--proc-title-template --my--title``). A value
    is written quoted (``port "6379" "6380"``) and an argument holding a name and its
    value (``"--maxmemory 700mb"``) as given. ``--save`` followed by another option or
    nothing means ``save ""``, as before Redis 7.0.1 broke and restored it.
    """
    options: list[str] = []
    from_stdin = False
    has_value = True  # the last directive has at least one argument
    for i, a in enumerate(args):
        last = i == len(args) - 1
        if a == "-" and ((first and i == 0) or last):
            from_stdin = True
        elif has_value and a.startswith("--"):
            words = split_args(a.encode(errors="surrogateescape"))
            options.append(a[2:] + " ")
            has_value = words is not None and len(words) > 1
            if not has_value and a.lower() == "--save" and (last or args[i + 1].startswith("--")):
                options[-1] += '""'
                has_value = True
        else:
            options[-1:] = [(options[-1] if options else "") + _repr(a) + " "]
            has_value = True
    return options, from_stdin


def _repr(value: str) -> str:
    """An argument as Redis quotes it into a config line: always in double quotes, the
    quote, backslash and control characters escaped, other bytes outside ASCII as \\xHH."""
    return '"' + repr_body(value.encode(errors="surrogateescape")).decode("ascii") + '"'


def _quote(value: str) -> str:
    if value and all(c.isalnum() or c in "-_./:*%@,+" for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Directives a redis.conf may carry that configure features rill does not have.
_IGNORED_DIRECTIVES = {"user", "loadmodule", "sentinel"}
