"""Every configuration parameter either does what Redis's does, or is refused.

The audit walks the parameter table: each parameter is implemented (and then named,
as a string constant, in the module that honours it), or in config.UNSUPPORTED (and
then named by no module but config.py, and refused at any value but its default).
A parameter added to the table without either fails here.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest
from rill.server.config import PARAMS, UNSUPPORTED, Config, ConfigError

from tests.support import RawClient, free_port, scratch_dir, start_redis, start_rill

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("server", "protocol", "storage", "persistence", "pipeline")

# Implemented parameters and the module (relative to the repository) that acts on each.
IMPLEMENTED: dict[str, str] = {
    "rdbchecksum": "server/disk.py",
    "daemonize": "server/main.py",
    "server_cpulist": "server/main.py",
    "disable-thp": "server/main.py",
    "protected-mode": "server/server.py",
    "rdbcompression": "server/disk.py",
    "stop-writes-on-bgsave-error": "server/disk.py",
    "lazyfree-lazy-expire": "server/commands/keys.py",
    "lazyfree-lazy-user-del": "server/commands/keys.py",
    "lazyfree-lazy-user-flush": "server/commands/admin.py",
    "aof-load-truncated": "server/disk.py",
    "aof-use-rdb-preamble": "server/disk.py",
    "replica-serve-stale-data": "server/server.py",
    "replica-read-only": "server/server.py",
    "appendonly": "server/disk.py",
    "replica-announced": "server/replication/replica.py",
    "latency-tracking": "server/server.py",
    "aclfile": "server/acl.py",
    "unixsocket": "server/main.py",
    "pidfile": "server/main.py",
    "masteruser": "server/replication/replica.py",
    "dbfilename": "server/disk.py",
    "appendfilename": "server/disk.py",
    "appenddirname": "server/disk.py",
    "logfile": "server/main.py",
    "always-show-logo": "server/main.py",
    "masterauth": "server/replication/replica.py",
    "requirepass": "server/acl.py",
    "supervised": "server/main.py",
    "loglevel": "server/main.py",
    "syslog-enabled": "server/main.py",
    "syslog-ident": "server/main.py",
    "syslog-facility": "server/main.py",
    "maxmemory-policy": "server/server.py",
    "appendfsync": "server/disk.py",
    "aof-timestamp-enabled": "server/disk.py",
    "oom-score-adj": "server/main.py",
    "set-proc-title": "server/main.py",
    "proc-title-template": "server/main.py",
    "oom-score-adj-values": "server/main.py",
    "acl-pubsub-default": "server/acl.py",
    "sanitize-dump-payload": "server/disk.py",
    "enable-debug-command": "server/server.py",
    "enable-protected-configs": "server/commands/admin.py",
    "enable-module-command": "server/server.py",
    "shutdown-on-sigint": "server/main.py",
    "shutdown-on-sigterm": "server/main.py",
    "databases": "server/server.py",
    "port": "server/main.py",
    "auto-aof-rewrite-percentage": "server/disk.py",
    "list-max-listpack-size": "server/commands/values.py",
    "list-compress-depth": "server/commands/values.py",
    "tcp-keepalive": "server/connection.py",
    "shutdown-timeout": "server/shutdown.py",
    "rdb-key-save-delay": "server/disk.py",
    "key-load-delay": "server/disk.py",
    "loading-process-events-interval-bytes": "server/disk.py",
    "lfu-log-factor": "server/server.py",
    "lfu-decay-time": "server/server.py",
    "replica-priority": "server/replication/replica.py",
    "timeout": "server/server.py",
    "tcp-backlog": "server/main.py",
    "repl-timeout": "server/replication/replica.py",
    "hz": "server/main.py",
    "dynamic-hz": "server/main.py",
    "min-replicas-to-write": "server/server.py",
    "min-replicas-max-lag": "server/server.py",
    "maxclients": "server/server.py",
    "unixsocketperm": "server/main.py",
    "slowlog-max-len": "server/server.py",
    "acllog-max-len": "server/acl.py",
    "busy-reply-threshold": "server/scripting.py",
    "slowlog-log-slower-than": "server/server.py",
    "latency-monitor-threshold": "server/server.py",
    "proto-max-bulk-len": "server/server.py",
    "stream-node-max-entries": "server/server.py",
    "stream-node-gc-percent": "server/server.py",
    "active-active-id": "server/activeactive/__init__.py",
    "active-active-xadd-id-mode": "server/activeactive/__init__.py",
    "active-active-backlog-size": "server/activeactive/__init__.py",
    "active-active-peers": "server/activeactive/__init__.py",
    "active-active-user": "server/activeactive/links.py",
    "active-active-auth": "server/activeactive/links.py",
    "repl-backlog-size": "server/replication/master.py",
    "repl-backlog-ttl": "server/replication/master.py",
    "maxmemory": "server/server.py",
    "maxmemory-samples": "server/evict.py",
    "maxmemory-clients": "server/memory.py",
    "maxmemory-eviction-tenacity": "server/evict.py",
    "replica-ignore-maxmemory": "server/evict.py",
    "lazyfree-lazy-eviction": "server/evict.py",
    "hash-max-listpack-entries": "server/server.py",
    "set-max-intset-entries": "server/server.py",
    "zset-max-listpack-entries": "server/server.py",
    "hash-max-listpack-value": "server/server.py",
    "stream-node-max-bytes": "server/server.py",
    "zset-max-listpack-value": "server/server.py",
    "hll-sparse-max-bytes": "server/commands/hyperloglog.py",
    "tracking-table-max-keys": "server/tracking.py",
    "client-query-buffer-limit": "server/server.py",
    "auto-aof-rewrite-min-size": "server/disk.py",
    "save": "server/disk.py",
    "bind": "server/main.py",
    "dir": "server/disk.py",
    "client-output-buffer-limit": "server/server.py",
    "notify-keyspace-events": "server/notify.py",
    "replicaof": "server/commands/replication.py",
    "latency-tracking-info-percentiles": "server/server.py",
    "repl-ping-replica-period": "server/replication/master.py",
    "repl-diskless-sync": "server/replication/master.py",
    "repl-diskless-sync-delay": "server/replication/master.py",
    "repl-diskless-sync-max-replicas": "server/replication/master.py",
    "rdb-del-sync-files": "server/replication/master.py",
    "aof-disable-auto-gc": "server/disk.py",
    "tls-port": "server/main.py",
    "tls-replication": "server/replication/replica.py",
    "tls-auth-clients": "server/tls.py",
    "tls-cert-file": "server/tls.py",
    "tls-key-file": "server/tls.py",
    "tls-key-file-pass": "server/tls.py",
    "tls-client-cert-file": "server/tls.py",
    "tls-client-key-file": "server/tls.py",
    "tls-client-key-file-pass": "server/tls.py",
    "tls-ca-cert-file": "server/tls.py",
    "tls-ca-cert-dir": "server/tls.py",
    "tls-dh-params-file": "server/tls.py",
    "tls-protocols": "server/tls.py",
    "tls-ciphers": "server/tls.py",
    "tls-ciphersuites": "server/tls.py",
    "tls-prefer-server-ciphers": "server/tls.py",
    "tls-session-caching": "server/tls.py",
    "tls-session-cache-size": "server/tls.py",
    "tls-session-cache-timeout": "server/tls.py",
}

# Being implemented elsewhere; move each to IMPLEMENTED, with its module, once it lands.
PENDING: set[str] = set()


def _string_constants() -> dict[str, set[str]]:
    """Every string constant, docstrings aside, of each module but config.py."""
    out: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            if rel == "server/config.py":
                continue
            tree = ast.parse(path.read_text())
            docstrings = set()
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    body = node.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                        docstrings.add(id(body[0].value))
            out[rel] = {
                n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            }
    return out


def _names(p) -> set[str]:
    return {p.name} | ({p.alias} if p.alias else set())


def test_every_parameter_is_implemented_or_refused():
    table = {p.name for p in PARAMS}
    accounted = set(IMPLEMENTED) | UNSUPPORTED | PENDING
    assert table - accounted == set(), "parameters neither implemented nor refused"
    assert accounted - table == set(), "names that are not parameters"
    assert not set(IMPLEMENTED) & UNSUPPORTED
    assert not PENDING & (set(IMPLEMENTED) | UNSUPPORTED)


def test_the_readme_lists_exactly_the_refused_parameters():
    """The README's list of parameters refused unless at their default is this table."""
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("Refused unless at their default:")
    listed = readme[start:readme.index("tests/server/test_config.py holds", start)]
    names = set(re.findall(r"`([a-z_-]+)`", listed))
    assert names == set(UNSUPPORTED)


def test_implemented_parameters_are_read_where_the_audit_says():
    constants = _string_constants()
    params = {p.name: p for p in PARAMS}
    missing = {name: module for name, module in IMPLEMENTED.items()
               if not _names(params[name]) & constants.get(module, set())}
    assert missing == {}


def test_refused_parameters_are_read_nowhere():
    """A refused parameter that some module reads is implemented after all: move it."""
    constants = _string_constants()
    params = {p.name: p for p in PARAMS}
    read = {name: [m for m, consts in constants.items() if _names(params[name]) & consts]
            for name in UNSUPPORTED}
    assert {n: ms for n, ms in read.items() if ms} == {}


def _other_value(p) -> str | None:
    """A valid value of ``p`` other than its default."""
    if p.kind in ("bool", "enum"):
        choices = ("yes", "no") if p.kind == "bool" else p.choices
        return next((c for c in choices if c != p.default), None)
    if p.kind == "string":
        return "rill-test"
    candidates = [int(p.default) + 1, int(p.default) - 1, p.lo, p.hi]
    return str(next(v for v in candidates if p.lo <= v <= p.hi and v != int(p.default)))


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_parameter_is_accepted_at_its_default_only(name):
    c = Config()
    p = c.params[name]
    c.set(name, p.default, startup=True)  # a stock redis.conf spells out defaults
    other = _other_value(p)
    assert other is not None, "every value accepted: not refused at all"
    with pytest.raises(ConfigError, match=f"rill does not support '{name}'"):
        c.set(name, other, startup=True)
    assert c[name] == c.normalise(name, p.default)
    if not p.immutable:
        c.set_many([(name, p.default)])
        with pytest.raises(ConfigError) as e:
            c.set_many([("maxmemory", "12345"), (name, other)])
        assert e.value.param == name  # type: ignore[attr-defined]
        assert c["maxmemory"] == "0"  # the whole CONFIG SET undone


def test_a_bad_value_is_reported_before_an_unsupported_one():
    """CONFIG SET names the first invalid value (Redis's error) even when an
    unsupported parameter precedes it, as Redis's own suite checks maxmemory-clients."""
    c = Config()
    with pytest.raises(ConfigError, match="percentage argument must be less or equal to 100") as e:
        c.set_many([("activedefrag", "yes"), ("maxmemory-clients", "200%")])
    assert c["activedefrag"] == "no"
    del e


STOCK_REDIS_CONF = """
# The directives Redis 7.0's redis.conf sets, at the values it ships with
bind 127.0.0.1 -::1
protected-mode yes
tcp-backlog 511
timeout 0
tcp-keepalive 300
daemonize no
loglevel notice
databases 16
always-show-logo no
set-proc-title yes
proc-title-template "{title} {listen-addr} {server-mode}"
stop-writes-on-bgsave-error yes
rdbcompression yes
rdbchecksum yes
dbfilename dump.rdb
rdb-del-sync-files no
replica-serve-stale-data yes
replica-read-only yes
repl-diskless-sync yes
repl-diskless-sync-delay 5
repl-diskless-sync-max-replicas 0
repl-diskless-load disabled
repl-disable-tcp-nodelay no
replica-priority 100
acllog-max-len 128
lazyfree-lazy-eviction no
lazyfree-lazy-expire no
lazyfree-lazy-server-del no
replica-lazy-flush no
lazyfree-lazy-user-del no
lazyfree-lazy-user-flush no
oom-score-adj no
oom-score-adj-values 0 200 800
disable-thp yes
appendonly no
appendfilename "appendonly.aof"
appenddirname "appendonlydir"
appendfsync everysec
no-appendfsync-on-rewrite no
auto-aof-rewrite-percentage 100
auto-aof-rewrite-min-size 64mb
aof-load-truncated yes
aof-use-rdb-preamble yes
aof-timestamp-enabled no
slowlog-log-slower-than 10000
slowlog-max-len 128
latency-monitor-threshold 0
notify-keyspace-events ""
hash-max-listpack-entries 512
hash-max-listpack-value 64
list-max-listpack-size -2
list-compress-depth 0
set-max-intset-entries 512
zset-max-listpack-entries 128
zset-max-listpack-value 64
hll-sparse-max-bytes 3000
stream-node-max-bytes 4096
stream-node-max-entries 100
activerehashing yes
client-output-buffer-limit normal 0 0 0
client-output-buffer-limit replica 256mb 64mb 60
client-output-buffer-limit pubsub 32mb 8mb 60
hz 10
dynamic-hz yes
aof-rewrite-incremental-fsync yes
rdb-save-incremental-fsync yes
jemalloc-bg-thread yes
"""


def test_a_stock_redis_conf_loads():
    c = Config()
    c.load_lines(STOCK_REDIS_CONF.splitlines())
    assert c["activerehashing"] == "yes"


def test_config_set_refuses_an_unsupported_value_and_get_still_answers():
    with start_rill() as srv:
        c = RawClient(srv.port)
        assert c.call("CONFIG", "SET", "activerehashing", "yes") == b"+OK\r\n"
        assert c.call("CONFIG", "SET", "activerehashing", "no") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'activerehashing') - "
            b"rill does not support 'activerehashing' (only its default, yes, is accepted)\r\n")
        assert c.call("CONFIG", "SET", "lazyfree-lazy-server-del", "no", "activedefrag", "yes").startswith(
            b"-ERR CONFIG SET failed (possibly related to argument 'activedefrag') - rill does not support")
        assert c.call("CONFIG", "GET", "activerehashing") == b"*2\r\n$15\r\nactiverehashing\r\n$3\r\nyes\r\n"
        # Immutable ones keep Redis's error.
        assert c.call("CONFIG", "SET", "io-threads", "4").endswith(b"- can't set immutable config\r\n")
        c.close()


@pytest.mark.parametrize("how", ["command line", "config file"])
def test_startup_refuses_an_unsupported_value(how):
    workdir = scratch_dir("rill-config-")
    argv = [sys.executable, "-m", "rill.server.main"]
    if how == "config file":
        path = pathlib.Path(workdir) / "rill.conf"
        path.write_text(f"port {free_port()}\nactivedefrag yes\n")
        argv.append(str(path))
    else:
        argv += ["--port", str(free_port()), "--activedefrag", "yes"]
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    # Redis's count: the options follow the file's text after a newline, so with no
    # file the first option is line 2
    line = 2 if how == "config file" else 3
    written = "activedefrag yes" if how == "config file" else 'activedefrag "yes"'
    assert proc.stderr == (
        f"\n*** FATAL CONFIG FILE ERROR (rill {_version()}) ***\n"
        f"Reading the configuration file, at line {line}\n>>> '{written}'\n"
        f"rill does not support 'activedefrag' (only its default, no, is accepted)\n")


def test_dynamic_hz_doubles_the_rate_with_many_clients():
    from rill.server.main import effective_hz

    assert effective_hz(10, True, 2000) == 10
    assert effective_hz(10, True, 2010) == 20
    assert effective_hz(10, False, 100000) == 10
    assert effective_hz(100, True, 10**6) == 500
    assert effective_hz(0, True, 0) == 1
    assert effective_hz(1000, False, 0) == 500


def test_info_shows_the_running_hz_and_configured_hz():
    with start_rill("--hz", "1000") as srv:
        c = RawClient(srv.port)
        info = c.call("INFO", "server").decode()
        assert "\r\nhz:500\r\n" in info and "\r\nconfigured_hz:500\r\n" in info
        assert c.call("CONFIG", "SET", "hz", "0") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "hz") == b"*2\r\n$2\r\nhz\r\n$1\r\n1\r\n"
        c.close()


def _version() -> str:
    from rill.server import __version__

    return __version__


@pytest.mark.parametrize("setting, allowed", [("no", False), ("yes", True), ("local", True)])
def test_protected_configs_side_by_side(setting, allowed):
    """dir and dbfilename change under CONFIG SET only as enable-protected-configs allows
    (local: from a loopback or unix socket client, as this test's connection is)."""
    replies = []
    for start in (start_rill, start_redis):
        with start("--enable-protected-configs", setting) as srv:
            c = RawClient(srv.port)
            replies.append([c.call("CONFIG", "SET", "dbfilename", "other.rdb"),
                            c.call("CONFIG", "SET", "dir", srv.workdir),
                            c.call("CONFIG", "SET", "maxmemory", "0", "dbfilename", "x.rdb")])
            c.close()
    assert replies[0] == replies[1]
    assert (replies[0][0] == b"+OK\r\n") == allowed
    if not allowed:
        assert replies[0][0] == (b"-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - "
                                 b"can't set protected config\r\n")


# The command lines Redis's own unit/introspection tries ("redis-server command line
# arguments"), and a few more around the same rules.
BAD_COMMAND_LINES = [
    ["--port"],
    ["--port", "6380", "--loglevel"],
    ["--port", "6379", "6380"],
    ["--port", "--loglevel", "verbose"],
    ["--port", "--bla", "--loglevel", "verbose"],
    ["--logfile", "--my--log--file", "--loglevel", "--bla"],
    ["--shutdown-on-sigint"],
    ["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
    ["--maxmemory", 'a "quoted"\tword\x01'],
    ["--port", "1", "--nosuchdirective", "x"],
    ["--replicaof", "127.0.0.1", "abc"],
    ["--replicaof", "--127.0.0.1", "abc"],
    ["--replicaof", "--127.0.0.1", "--abc"],
    ["--replicaof", "h", "70000"],
    ["--replicaof", "h", "-1"],
]


@pytest.mark.parametrize("argv", BAD_COMMAND_LINES, ids=" ".join)
def test_a_bad_command_line_is_reported_as_redis_reports_it(argv, tmp_path):
    """Which line, written how, and why: byte for byte redis-server's report, but for the
    name and version in its first line."""
    from tests.support import require_tool

    def report(server: list[str]) -> list[str]:
        done = subprocess.run([*server, *argv], cwd=tmp_path, capture_output=True, timeout=60)
        assert done.returncode == 1
        lines = done.stderr.decode(errors="replace").splitlines()
        assert lines[1].startswith("*** FATAL CONFIG FILE ERROR (")
        return lines[2:]

    assert report([sys.executable, "-m", "rill.server.main"]) == report([require_tool("redis-server")])


def test_a_bad_line_is_counted_after_the_files_lines(tmp_path):
    conf = tmp_path / "rill.conf"
    conf.write_text("port 0\n\n# a comment\n")
    c = Config()
    with pytest.raises(ConfigError) as e:
        c.load_argv([str(conf), "--save", "--databases"])
    # the file's three lines, the newline Redis puts before the options, then --save ""
    assert str(e.value) == "Reading the configuration file, at line 6\n>>> 'databases'\nwrong number of arguments"


@pytest.mark.parametrize("argv, expected", [
    # a value may begin with -- when the directive still waits for its value
    (["--logfile", "--my--log", "--loglevel", "verbose"], {"logfile": "--my--log", "loglevel": "verbose"}),
    # a name and its value in one argument, quotes as a config file has them
    (["--maxmemory 700mb", "--maxmemory-policy 'volatile-lru'"],
     {"maxmemory": "734003200", "maxmemory-policy": "volatile-lru"}),
    (["loglevel", "verbose", "--maxmemory '700mb'"], None),  # a first word not an option: the file
    # --save with no value before another option, or last: save ""
    (["--save", "--loglevel", "verbose"], {"save": "", "loglevel": "verbose"}),
    (["--loglevel", "verbose", "--save"], {"save": "", "loglevel": "verbose"}),
    (["--save", "", "--loglevel", "verbose"], {"save": "", "loglevel": "verbose"}),
    (["--logfile", "--save", "--save", "", "--loglevel", "verbose"],
     {"logfile": "--save", "save": "", "loglevel": "verbose"}),
    (["--shutdown-on-sigint", "now force"], {"shutdown-on-sigint": "now force"}),
    (["--shutdown-on-sigint", "now", "force"], {"shutdown-on-sigint": "now force"}),
])
def test_command_line_options_read_as_redis_reads_them(argv, expected):
    c = Config()
    if expected is None:
        with pytest.raises(FileNotFoundError):
            c.load_argv(argv)
        return
    c.load_argv(argv)
    assert {name: c[name] for name in expected} == expected


def test_a_lone_dash_reads_config_from_stdin_before_the_options(tmp_path):
    import io

    c = Config()
    c.load_argv(["-", "--loglevel", "verbose"], stdin=io.StringIO("loglevel warning\nmaxmemory 1mb\n"))
    assert (c["loglevel"], c["maxmemory"]) == ("verbose", "1048576")
    c = Config()
    c.load_argv(["--loglevel", "verbose", "-"], stdin=io.StringIO("loglevel warning\n"))
    assert c["loglevel"] == "verbose"
    c = Config()
    with pytest.raises(ConfigError, match="at line 2\n>>> 'maxmemory \"-\"'"):
        c.load_argv(["--maxmemory", "-", "--port", "0"], stdin=io.StringIO(""))


@pytest.mark.parametrize("value", ["nosave force now", "force now save", "now now", "default now", "default",
                                   "save nosave", "", "now bogus"])
def test_shutdown_flags_are_a_set_shown_in_redis_order(sbs, value):
    """shutdown-on-sigint takes flags in any order and repeats, shows them as Redis does,
    and refuses SAVE with NOSAVE; the refusal leaves the old value."""
    sbs.check("CONFIG", "SET", "shutdown-on-sigint", "default")
    sbs.check("CONFIG", "SET", "shutdown-on-sigint", value)
    sbs.check("CONFIG", "GET", "shutdown-on-sigint")
    sbs.check("CONFIG", "SET", "shutdown-on-sigint", "default")


RENAMES = ["--rename-command", "flushdb", "badger", "--rename-command", "flushall", "",
           "--rename-command", "badger", "Otter"]


def test_rename_command_side_by_side():
    """A renamed command answers to its new name only (chains follow the order), one
    renamed to "" to none; its facts keep the original name."""
    rill, redis = start_rill(*RENAMES), start_redis(*RENAMES)
    try:
        a, b = RawClient(rill.port), RawClient(redis.port)
        for args in (["SET", "k", "v"], ["FLUSHDB"], ["BADGER"], ["flushall"], ["DBSIZE"], ["otter", "x"],
                     ["OTTER"], ["DBSIZE"], ["COMMAND", "INFO", "otter"], ["COMMAND", "INFO", "flushdb"],
                     ["MULTI"], ["otter"], ["flushdb"], ["EXEC"]):
            assert a.call(*args) == b.call(*args), args
    finally:
        rill.stop()
        redis.stop()


@pytest.mark.parametrize("argv", [["--rename-command", "nosuch", "x"], ["--rename-command", "get", "set"],
                                  ["--rename-command", "get"]], ids=" ".join)
def test_a_bad_rename_command_is_reported_as_redis_reports_it(argv, tmp_path):
    from tests.support import require_tool

    def report(server: list[str]) -> list[str]:
        done = subprocess.run([*server, *argv], cwd=tmp_path, capture_output=True, timeout=60)
        assert done.returncode == 1
        return done.stderr.decode(errors="replace").splitlines()[2:]

    assert report([sys.executable, "-m", "rill.server.main"]) == report([require_tool("redis-server")])


def test_config_rewrite_keeps_rename_command(tmp_path):
    conf = tmp_path / "rill.conf"
    conf.write_text("rename-command flushdb badger\n")
    srv = start_rill(config_file=str(conf), workdir=str(tmp_path))
    try:
        c = RawClient(srv.port)
        assert c.call("CONFIG", "REWRITE") == b"+OK\r\n"
    finally:
        srv.stop()
    srv = start_rill(config_file=str(conf), workdir=str(tmp_path))
    try:
        c = RawClient(srv.port)
        assert c.call("FLUSHDB").startswith(b"-ERR unknown command 'FLUSHDB'")
        assert c.call("BADGER") == b"+OK\r\n"
    finally:
        srv.stop()
