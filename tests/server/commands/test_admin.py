"""CONFIG, INFO, CLIENT, COMMAND, DEBUG, OBJECT, SLOWLOG, MONITOR, SHUTDOWN."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest
import redis

from tests.conftest import SideBySide
from tests.support import (
    RawClient,
    encode_command,
    free_port,
    require_tool,
    start_redis,
    start_rill,
    wait_until,
)


def test_config_get_set_side_by_side(sbs):
    sbs.run([
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "GET", "list-max-ziplist-size"),
        ("CONFIG", "SET", "maxmemory", "100mb"),
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "SET", "maxmemory", "0"),
        ("CONFIG", "SET", "hz", "abc"),
        ("CONFIG", "SET", "nosuchparam", "1"),
        ("CONFIG", "SET", "daemonize", "yes"),
        ("CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"),
        ("CONFIG", "SET", "appendonly", "maybe"),
        ("CONFIG", "SET", "port"),
        ("CONFIG", "SET", "stream-node-max-entries", "50", "stream-node-max-bytes", "2kb"),
        ("CONFIG", "GET", "stream-node-max-entries"),
        ("CONFIG", "GET", "stream-node-max-bytes"),
        ("CONFIG", "SET", "stream-node-max-entries", "100", "stream-node-max-bytes", "4096"),
        ("CONFIG", "SET", "maxmemory-policy", "bogus"),
        ("CONFIG", "SET", "save", "100 x"),
        ("CONFIG", "GET"),
        ("CONFIG", "HELP"),
    ])


def test_config_get_exact_names_and_hidden_parameters_side_by_side(sbs):
    sbs.run([
        ("CONFIG", "GET", "MAXMEMORY"),  # named as asked
        ("CONFIG", "GET", "MAXMEMORY", "maxmemory"),  # once
        ("CONFIG", "GET", "key-load-delay"),  # hidden: by exact name only
        ("CONFIG", "GET", "key-load*"),
        ("CONFIG", "GET", "rdb-key-save-delay"),
        ("CONFIG", "GET", "*-delay"),
        ("CONFIG", "SET", "key-load-delay", "0"),
    ])


def test_rdb_key_save_delay_slows_a_background_save(rill_server):
    r = redis.Redis(port=rill_server.port)
    try:
        r.mset({f"k{i}": i for i in range(5)})
        r.config_set("rdb-key-save-delay", 200_000)  # 0.2 s per key: a second-long BGSAVE
        r.bgsave()
        time.sleep(0.3)
        assert r.info("persistence")["rdb_bgsave_in_progress"] == 1
        deadline = time.monotonic() + 10
        while r.info("persistence")["rdb_bgsave_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
    finally:
        r.config_set("rdb-key-save-delay", 0)
        r.flushall()


def _pings(port: int) -> bool:
    """Whether a new connection to ``port`` is accepted and answered."""
    try:
        c = RawClient(port)
    except ConnectionRefusedError:
        return False
    try:
        return c.call("PING") == b"+PONG\r\n"
    finally:
        c.close()


@pytest.mark.parametrize("start", [start_rill, start_redis], ids=["rill", "redis"])
def test_config_set_bind_moves_the_listeners_or_keeps_them(start):
    # Redis's changeBindAddr: an address that cannot be bound is refused and the old
    # listeners stay; "" closes every TCP listener; a new address opens them again.
    with start() as srv:
        c = RawClient(srv.port)
        assert c.call("CONFIG", "SET", "bind", "999.999.999.999") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'bind') - "
            b"Failed to bind to specified addresses.\r\n")
        assert c.call("CONFIG", "GET", "bind") == b"*2\r\n$4\r\nbind\r\n$6\r\n* -::*\r\n"
        assert _pings(srv.port)
        assert c.call("CONFIG", "SET", "bind", "") == b"+OK\r\n"
        assert not _pings(srv.port)
        assert c.call("PING") == b"+PONG\r\n"  # connections made before stay
        assert c.call("CONFIG", "SET", "bind", "127.0.0.1") == b"+OK\r\n"
        assert _pings(srv.port)
        c.close()


def test_protected_mode_ignores_bind_and_trusts_only_127_0_0_1_and_ipv6_loopback():
    # Redis 7.0 dropped bind from the rule: with protected mode on and no password,
    # only 127.0.0.1, ::1 and the unix socket are local, whatever bind lists.
    from rill.server.server import Server

    class Peer:
        def __init__(self, host: str) -> None:
            self.host = host

        def get_extra_info(self, name: str):
            return (self.host, 1234) if name == "peername" else None

    server = Server()
    for bind in ("* -::*", "*", "0.0.0.0", ""):
        server.config.values["bind"] = bind
        assert server.protected_mode_refuses(False, Peer("192.0.2.2"))
        assert server.protected_mode_refuses(False, Peer("127.0.0.2"))
        assert not server.protected_mode_refuses(False, Peer("127.0.0.1"))
        assert not server.protected_mode_refuses(False, Peer("::1"))
        assert not server.protected_mode_refuses(True, Peer(""))


def test_config_set_port_moves_the_listener_or_rolls_everything_back():
    srv = start_rill()
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        r = redis.Redis(port=srv.port)
        with pytest.raises(redis.ResponseError, match=r"^CONFIG SET failed \(possibly related to argument "
                           r"'port'\) - Unable to listen on this port"):
            r.execute_command("CONFIG", "SET", "maxmemory", 10_000_001, "port", busy.getsockname()[1])
        assert r.config_get("maxmemory") == {"maxmemory": "0"}  # rolled back with it
        assert r.config_get("port") == {"port": str(srv.port)}
        new_port = free_port()
        assert r.config_set("port", new_port)
        moved = redis.Redis(port=new_port)
        deadline = time.monotonic() + 5
        while True:
            try:
                assert moved.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert moved.info("server")["tcp_port"] == new_port
        assert r.ping()  # connections made before the move stay
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=srv.port, socket_connect_timeout=1).ping()
        srv.port = new_port  # so that stop() can reach it
    finally:
        busy.close()
        srv.stop()


def test_config_get_glob_and_aliases(r, oracle_server):
    oracle = redis.Redis(port=oracle_server.port)
    for pattern in ("stream-node-max-*", "*max-*-entries", "list-max-*", "save", "bind", "appendfsync"):
        assert r.config_get(pattern) == oracle.config_get(pattern), pattern
    assert r.config_get("dir")["dir"]


def test_config_set_is_atomic(r):
    with pytest.raises(redis.ResponseError):
        r.execute_command("CONFIG", "SET", "maxmemory", "10mb", "hz", "notanumber")
    assert r.config_get("maxmemory") == {"maxmemory": "0"}


def test_config_rewrite(tmp_path):
    conf = tmp_path / "redis.conf"
    conf.write_text("# my config\nport 0\nmaxmemory 1mb\n")
    server = start_rill(config_file=str(conf), workdir=str(tmp_path))
    try:
        r = redis.Redis(port=server.port)
        r.config_set("maxmemory", "2mb")
        r.config_set("hz", "20")
        r.config_rewrite()
        text = conf.read_text()
        assert "# my config" in text and "maxmemory 2097152" in text and "hz 20" in text
    finally:
        server.stop()


def test_info_sections(r):
    default = r.info()
    assert default["redis_version"] == "7.0.15" and default["redis_mode"] == "standalone"
    assert default["arch_bits"] == 64 and default["tcp_port"] > 0 and "used_memory" in default
    assert "cmdstat_ping" not in default
    r.ping()
    everything = r.info("everything")
    assert "cmdstat_ping" in everything and "role" in everything
    assert set(r.info("cpu")) == {"used_cpu_sys", "used_cpu_user", "used_cpu_sys_children",
                                  "used_cpu_user_children", "used_cpu_sys_main_thread",
                                  "used_cpu_user_main_thread"}
    r.set("k", "v")
    assert r.info("keyspace")["db0"]["keys"] == 1


def test_info_counts_errors_and_hits(r):
    r.config_resetstat()
    with pytest.raises(redis.ResponseError):
        r.execute_command("NOSUCHCMD")
    r.set("x", "1")
    r.get("x")
    r.get("missing")
    stats = r.info("stats")
    assert stats["total_error_replies"] == 1
    assert stats["keyspace_hits"] == 1 and stats["keyspace_misses"] == 1
    assert r.info("errorstats")["errorstat_ERR"] == {"count": 1}


def test_command_introspection_matches_redis(sbs, sbs3):
    for s in (sbs, sbs3):
        s.run([("COMMAND", "INFO", "get", "set", "config|get", "nosuch"),
               ("COMMAND", "DOCS", "get", "ping", "client|kill"),
               ("COMMAND", "GETKEYS", "SET", "a", "b"),
               ("COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"),
               ("COMMAND", "GETKEYS", "PING"),
               ("COMMAND", "GETKEYS", "NOSUCH"),
               ("COMMAND", "GETKEYS", "GET"),
               ("COMMAND", "GETKEYSANDFLAGS", "LMOVE", "a", "b", "LEFT", "RIGHT"),
               # SET and BITFIELD work their key's flags out from the arguments
               ("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v"),
               ("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "EX", "10", "get"),
               ("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "GETX"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "GET", "u8", "0"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "OVERFLOW", "SAT", "GET", "u8", "0"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "GET", "u8"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "GET", "u8", "0", "INCRBY", "u8", "0", "1"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", "k", "FOO"),
               ("COMMAND", "GETKEYSANDFLAGS", "BITFIELD_RO", "k", "GET", "u8", "0"),
               ("COMMAND", "GETKEYSANDFLAGS", "MSET", "k1", "v1", "k2", "v2"),
               ("COMMAND", "HELP"), ("CLIENT", "HELP"), ("OBJECT", "HELP"), ("MEMORY", "HELP"),
               ("SLOWLOG", "HELP")])


def test_command_getkeys_follows_key_specs_then_the_commands_own_finder(sbs):
    """getKeysFromCommandWithSpecs: specs first, the command's finder when a spec cannot be
    followed, Redis's errors for calls whose keys cannot be found."""
    sbs.run([("COMMAND", "GETKEYS", *args) for args in [
        ("ZUNIONSTORE", "d", "abc", "z"), ("ZUNIONSTORE", "d", "2", "z"), ("ZUNIONSTORE", "d", "1", "z"),
        ("ZINTERSTORE", "d", "0", "x"), ("EVAL", "return 1", "0"), ("EVAL", "return 1", "2", "k"),
        ("FCALL", "f", "0"), ("BLMPOP", "0", "abc", "a", "LEFT"), ("LMPOP", "2", "a", "b", "LEFT"),
        ("XREAD", "STREAMS", "a", "b", "c"), ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "a"),
        ("SORT", "k", "BY", "x", "STORE", "d", "GET", "y"), ("SORT_RO", "k", "BY", "x"),
        ("GEORADIUS", "k", "1", "2", "3", "m", "STORE", "d"), ("PUBLISH", "ch", "m"), ("CLIENT", "LIST"),
        ("MIGRATE", "h", "p", "k", "0", "5000"), ("MIGRATE", "h", "p", "", "0", "5000", "KEYS"),
        ("MIGRATE", "h", "p", "", "0", "5000", "KEYS", "a", "b"), ("MIGRATE", "h", "p", "x", "0", "5000", "KEYS", "a"),
        ("MIGRATE", "h", "p", "k", "0", "5000", "AUTH", "KEYS"),
        ("MIGRATE", "h", "p", "", "0", "5000", "AUTH2", "KEYS", "123", "KEYS", "w"),
    ]])


def test_command_count_lists_what_rill_serves(r):
    names = {n.decode() if isinstance(n, bytes) else n for n in r.command_list()}
    assert {"get", "set", "config|get", "client|list", "ping", "multi"} <= names
    assert r.command_count() == len([n for n in names if "|" not in n])


def test_client_commands(rill_server):
    a = redis.Redis(port=rill_server.port)
    b = RawClient(rill_server.port)
    a.client_setname("alpha")
    b.call("CLIENT", "SETNAME", "beta")
    listing = a.client_list()
    names = {c["name"] for c in listing}
    assert {"alpha", "beta"} <= names
    assert a.client_getname() == "alpha"
    bid = int(b.call("CLIENT", "ID")[1:-2])
    assert a.client_kill_filter(_id=bid) == 1
    assert b.closed_by_peer()
    with pytest.raises(redis.ResponseError, match="No such client"):
        a.execute_command("CLIENT", "KILL", "1.2.3.4:5")
    with pytest.raises(redis.ResponseError, match="Client names cannot contain spaces"):
        a.client_setname("a b")


def test_client_list_cmd_field_matches_redis(rill_server, oracle_server):
    """cmd= is set when a command starts (processCommand), so CLIENT LIST shows itself,
    EXEC rather than what it ran, the command an arity error refused, NULL for unknown."""

    def cmd_field(listing: bytes, client_id: str) -> str:
        line = next(ln for ln in listing.decode().splitlines() if ln.startswith(f"id={client_id} "))
        return line.split(" cmd=")[1].split(" ")[0]

    def seen(port: int, before: list[tuple]) -> tuple[str, str]:
        watcher, subject = RawClient(port), RawClient(port)
        try:
            sid = subject.call("CLIENT", "ID")[1:-2].decode()
            for args in before:
                subject.call(*args)
            by_watcher = cmd_field(watcher.call("CLIENT", "LIST"), sid)
            by_itself = cmd_field(subject.call("CLIENT", "LIST"), sid)
            return by_watcher, by_itself
        finally:
            watcher.close()
            subject.close()

    cases = [
        ([], ("client|id", "client|list")),
        ([("MULTI",), ("SET", "k", "v"), ("EXEC",)], ("exec", "client|list")),
        ([("GET",)], ("get", "client|list")),
        ([("NOSUCHCMD",)], ("NULL", "client|list")),
        ([("SET", "k", "v")], ("set", "client|list")),
    ]
    for before, expected in cases:
        assert seen(oracle_server.port, before) == expected
        assert seen(rill_server.port, before) == expected, before


def test_object_idletime_and_freq_side_by_side(rill_server, oracle_server):
    """LRU stamps move on access only (not on TYPE, EXISTS, TTL, OBJECT, MEMORY USAGE);
    RESTORE sets them; under an LFU policy FREQ replaces IDLETIME."""

    def transcript(port: int) -> list:
        r = RawClient(port)
        try:
            r.call("FLUSHALL")
            r.call("SET", "src", "v")
            payload = redis.Redis(port=port).dump("src")
            out = [r.call("RESTORE", "k", "0", payload, "IDLETIME", "1000")]
            for args in (("TYPE", "k"), ("EXISTS", "k"), ("TTL", "k"), ("PTTL", "k"),
                         ("OBJECT", "ENCODING", "k"), ("MEMORY", "USAGE", "k")):
                r.call(*args)
            idle = int(r.call("OBJECT", "IDLETIME", "k")[1:-2])
            out.append(1000 <= idle <= 1002)
            out.append(r.call("OBJECT", "FREQ", "k"))
            r.call("TOUCH", "k")
            out.append(r.call("OBJECT", "IDLETIME", "k"))
            r.call("RESTORE", "k2", "0", payload, "IDLETIME", "500")
            r.call("GET", "k2")
            out.append(r.call("OBJECT", "IDLETIME", "k2"))
            out.append(r.call("OBJECT", "IDLETIME", "missing"))
            out.append(r.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"))
            r.call("SET", "fresh", "v")
            out.append(r.call("OBJECT", "FREQ", "fresh"))
            out.append(r.call("RESTORE", "f", "0", payload, "FREQ", "100"))
            out.append(r.call("OBJECT", "FREQ", "f"))
            out.append(r.call("OBJECT", "IDLETIME", "f"))
            return out
        finally:
            r.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
            r.close()

    assert transcript(rill_server.port) == transcript(oracle_server.port)


def test_client_info_qbuf_counts_the_request_being_run(rill_server, oracle_server):
    # Redis's query buffer still holds the bytes of the read being processed.
    def qbuf(port: int, pipelined: bool) -> tuple[str, str]:
        r = RawClient(port)
        try:
            if pipelined:
                r.send_raw(encode_command(["PING"]) + encode_command(["CLIENT", "INFO"]))
                r.read_reply()
                info = r.read_reply().decode()
            else:
                info = r.call("CLIENT", "INFO").decode()
            other = RawClient(port)
            sid = r.call("CLIENT", "ID")[1:-2].decode()
            listing = other.call("CLIENT", "LIST").decode()
            other.close()
            idle = next(ln for ln in listing.splitlines() if ln.startswith(f"id={sid} "))
            return info.split(" qbuf=")[1].split(" ")[0], idle.split(" qbuf=")[1].split(" ")[0]
        finally:
            r.close()

    for pipelined in (False, True):
        assert qbuf(rill_server.port, pipelined) == qbuf(oracle_server.port, pipelined)


def test_client_reply_off_and_skip(rill_server):
    c = RawClient(rill_server.port)
    c.send_raw(b"CLIENT REPLY OFF\r\nPING\r\nCLIENT REPLY ON\r\nECHO a\r\n")
    assert c.read_reply() == b"+OK\r\n"
    assert c.read_reply() == b"$1\r\na\r\n"
    c.send_raw(b"CLIENT REPLY SKIP\r\nECHO skipped\r\nECHO b\r\n")
    assert c.read_reply() == b"$1\r\nb\r\n"
    c.close()


def test_client_pause_write(rill_server):
    a = RawClient(rill_server.port)
    b = RawClient(rill_server.port)
    # A pause far longer than the test, ended by UNPAUSE: nothing depends on the clock.
    assert a.call("CLIENT", "PAUSE", "60000", "WRITE") == b"+OK\r\n"
    assert b.call("GET", "x") == b"$-1\r\n"  # reads are not paused
    b.send_raw(encode_command(["SET", "x", "1"]))  # writes wait for the pause to end
    b.sock.settimeout(0.3)
    with pytest.raises(TimeoutError):
        b.sock.recv(1)
    b.sock.settimeout(10)
    assert a.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
    assert b.read_reply() == b"+OK\r\n"
    a.call("CLIENT", "PAUSE", "5000")
    b.send_raw(b"PING\r\n")
    time.sleep(0.1)
    a.call("CLIENT", "UNPAUSE")
    assert b.read_reply() == b"+PONG\r\n"
    a.close()
    b.close()


def test_slowlog(r):
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    r.set("a", "b")
    entries = r.slowlog_get()
    assert any(e["command"] == b"SET a b" for e in entries)
    assert r.slowlog_len() >= 1
    r.config_set("slowlog-log-slower-than", 10000)


def _blocked_slowlog(port: int) -> list:
    """The SLOWLOG commands of blocking commands: logged when served, as sent, and not
    when they block or time out."""
    r = redis.Redis(port=port)
    waiter = RawClient(port)
    try:
        r.flushall()
        r.config_set("slowlog-log-slower-than", 0)
        waiter.send_raw(encode_command(["BLPOP", "l", "0"]))
        deadline = time.monotonic() + 5
        while r.info("clients")["blocked_clients"] != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        r.slowlog_reset()
        pipe = r.pipeline(transaction=True)
        pipe.lpush("l", "foo")
        pipe.execute()
        waiter.read_reply()
        served = [e["command"] for e in r.slowlog_get()]
        r.slowlog_reset()
        waiter.call("BLPOP", "nothing", "0.05")  # times out
        waiter.call("XREAD", "BLOCK", "10", "STREAMS", "s", "$")
        timed_out = [e["command"] for e in r.slowlog_get()]
        return [served, timed_out]
    finally:
        r.config_set("slowlog-log-slower-than", 10000)
        r.close()
        waiter.close()


def test_slowlog_of_blocked_commands_side_by_side(rill_server, oracle_server):
    mine = _blocked_slowlog(rill_server.port)
    assert mine == _blocked_slowlog(oracle_server.port)
    assert mine[0][0] == b"BLPOP l 0" and mine[1] == [b"SLOWLOG RESET"]


def _info_field(client: RawClient, section: str, field: str) -> int:
    text = client.call("INFO", section).decode()
    return int(text.split(field + ":", 1)[1].split("\r\n", 1)[0])


def _pause_scenario(port: int) -> list:
    """What a client sees of CLIENT PAUSE WRITE: postponed writers count as blocked,
    and keys whose time passes during the pause read as missing but stay until it ends."""
    a, b = RawClient(port), RawClient(port)
    seen: list = []
    a.call("FLUSHALL")
    a.call("CONFIG", "RESETSTAT")
    a.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    a.call("SET", "gone", "x", "PX", "30")
    a.call("SET", "kept", "y")
    seen.append(a.call("CLIENT", "PAUSE", "10000", "WRITE"))
    b.send_raw(encode_command(["SET", "w", "1"]))
    deadline = time.monotonic() + 5
    while _info_field(a, "clients", "blocked_clients") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    seen.append(_info_field(a, "clients", "blocked_clients"))
    flags = [line.split(" flags=")[1].split(" ")[0] for line in a.call("CLIENT", "LIST").decode().splitlines()
             if " cmd=set " in line]
    seen.append(flags)  # the postponed writer is flagged blocked
    time.sleep(0.3)  # "gone" expires; active expiry would run several times in this window
    seen += [a.call("GET", "gone"), a.call("EXISTS", "gone"), a.call("DBSIZE"),
             _info_field(a, "stats", "expired_keys")]
    seen.append(a.call("CLIENT", "UNPAUSE"))
    seen.append(b.read_reply())
    seen += [a.call("GET", "gone"), _info_field(a, "stats", "expired_keys"), a.call("DBSIZE"),
             _info_field(a, "clients", "blocked_clients")]
    a.close()
    b.close()
    return seen


def test_client_pause_blocks_writers_and_holds_expiry_side_by_side(rill_server, oracle_server):
    mine = _pause_scenario(rill_server.port)
    assert mine == _pause_scenario(oracle_server.port)
    assert mine[1:3] == [1, ["b"]] and mine[3:7] == [b"$-1\r\n", b":0\r\n", b":2\r\n", 0]


def _held_by_pause_write(port: int) -> list:
    """Which commands CLIENT PAUSE WRITE holds: writes, and those Redis flags
    may-replicate without COMMAND INFO showing it (PFCOUNT, PUBLISH, scripts that
    may write), but not reads or no-writes scripts."""
    a = RawClient(port)
    a.call("FLUSHALL")
    a.call("PFADD", "h", "x")
    a.call("CLIENT", "PAUSE", "10000", "WRITE")
    held = []
    waiting: list[RawClient] = []  # the held ones, open until the pause ends
    for args in [("GET", "h"), ("PFCOUNT", "h"), ("PUBLISH", "ch", "m"), ("SPUBLISH", "ch", "m"),
                 ("EVAL", "return 1", "0"), ("EVAL", "#!lua\nreturn 1", "0"),
                 ("EVAL", "#!lua flags=no-writes\nreturn 1", "0"), ("SET", "k", "v")]:
        b = RawClient(port)
        b.send_raw(encode_command(list(args)))
        # A command not held is answered; a held one makes b a postponed client, which
        # INFO counts as blocked, and has no answer. Whichever shows first decides: no
        # timeout stands in for "never answers".
        wait_until(lambda b=b: _has_reply(b)
                   or _info_field(a, "clients", "blocked_clients") == len(waiting) + 1)
        if _has_reply(b):
            b.read_reply()
            held.append((args[0], False))
            b.close()
        else:
            held.append((args[0], True))
            waiting.append(b)
    a.call("CLIENT", "UNPAUSE")
    for b in waiting:  # each held command runs once the pause ends
        b.read_reply()
        b.close()
    a.close()
    return held


def _has_reply(c: RawClient) -> bool:
    """Whether any reply bytes have reached ``c``, without waiting for them."""
    return bool(c.buf) or not c.silent(0)


def test_client_pause_write_holds_what_may_replicate_side_by_side(rill_server, oracle_server):
    mine = _held_by_pause_write(rill_server.port)
    assert mine == _held_by_pause_write(oracle_server.port)
    assert [name for name, held in mine if held] == ["PFCOUNT", "PUBLISH", "SPUBLISH", "EVAL", "EVAL", "SET"]


def test_monitor(rill_server):
    m = RawClient(rill_server.port)
    assert m.call("MONITOR") == b"+OK\r\n"
    c = RawClient(rill_server.port)
    c.call("ECHO", "hi there")
    line = m.read_reply()
    assert line.startswith(b"+") and b'"ECHO" "hi there"' in line
    m.close()
    c.close()


_SECRETS = [
    ("ACL", "SETUSER", "u1", "on", ">s3cret-acl", "+@all", "~*"),
    ("AUTH", "u1", "s3cret-acl"),
    ("AUTH", "s3cret-wrong"),
    ("AUTH", "a", "b", "c"),  # a syntax error: nothing is redacted
    ("HELLO", "2", "AUTH", "u1", "s3cret-acl"),
    ("HELLO", "2", "AUTH", "u1", "s3cret-bad"),
    ("HELLO", "4", "AUTH", "u1", "pw-before-noproto"),  # fails first: shown as sent
    ("CONFIG", "SET", "masterauth", "s3cret-master", "maxmemory", "0"),
    ("CONFIG", "SET", "nosuch", "x", "masteruser", "s3cret-user"),  # fails, still hidden
    ("CONFIG", "SET", "requirepass", "s3cret-pass"),
    ("AUTH", "s3cret-pass"),
    ("CONFIG", "SET", "requirepass", ""),
    ("ACL", "SETUSER", "u2", "on"),
    ("ACL", "DELUSER", "u2"),
    ("SET", "k", "v"),
]


def _secrets_scenario(port: int) -> tuple[list[list[bytes]], list[bytes]]:
    """SLOWLOG entries and MONITOR lines (without their timestamps) for _SECRETS."""
    m = RawClient(port)
    assert m.call("MONITOR") == b"+OK\r\n"
    r = redis.Redis(port=port)
    r.config_set("slowlog-log-slower-than", 0)
    c = RawClient(port)
    c.call("SLOWLOG", "RESET")
    for cmd in _SECRETS:
        c.call(*cmd)
    r.config_set("slowlog-log-slower-than", 10000)
    logged = [e["command"].split(b" ") for e in reversed(r.slowlog_get(100))]
    lines = []
    m.sock.settimeout(0.5)
    while True:
        try:
            line = m.read_reply()
        except (TimeoutError, ConnectionError):
            break
        if b"CLIENT" not in line:  # redis-py's own CLIENT SETINFO (Redis 7.2+), which 7.0 rejects
            lines.append(line.split(b"]", 1)[1])
    for x in (m, c):
        x.close()
    r.close()
    return logged, lines


def test_secrets_are_redacted_in_slowlog_and_monitor_side_by_side():
    """Passwords never show in SLOWLOG or MONITOR: AUTH, HELLO AUTH, ACL SETUSER, and
    CONFIG SET of masterauth/masteruser/requirepass (even when the SET fails)."""
    require_tool("redis-server")
    servers = [start_rill(), start_redis()]
    try:
        mine, theirs = (_secrets_scenario(s.port) for s in servers)
    finally:
        for s in servers:
            s.stop()
    assert mine == theirs
    logged, lines = mine
    everything = b" ".join(b" ".join(e) for e in logged) + b" ".join(lines)
    assert b"s3cret" not in everything
    assert [b"AUTH", b"(redacted)", b"(redacted)"] in logged
    assert [b"AUTH", b"a", b"b", b"c"] in logged
    assert [b"CONFIG", b"SET", b"nosuch", b"x", b"masteruser", b"(redacted)"] in logged
    assert b'"HELLO" "4" "AUTH" "u1" "pw-before-noproto"' in b"".join(lines)


def test_object_and_debug(sbs):
    sbs.run([("SET", "n", "12345"), ("SET", "s", "hello"), ("SET", "l", "x" * 50),
             ("OBJECT", "ENCODING", "n"), ("OBJECT", "ENCODING", "s"), ("OBJECT", "ENCODING", "l"),
             ("OBJECT", "ENCODING", "missing"), ("OBJECT", "REFCOUNT", "n"), ("OBJECT", "FREQ", "n"),
             ("OBJECT", "NOPE", "n"), ("DEBUG", "PROTOCOL", "bignum"), ("DEBUG", "PROTOCOL", "nope")])


def test_debug_error_is_sent_as_is_and_not_counted(sbs):
    for c in (sbs.rill, sbs.oracle):
        c.call("CONFIG", "RESETSTAT")
    sbs.run([("DEBUG", "ERROR", "LOADING Redis is loading the dataset in memory"),
             ("DEBUG", "ERROR", "two\r\nlines"), ("DEBUG", "ERROR", "")])
    for c in (sbs.rill, sbs.oracle):
        assert b"total_error_replies:0\r\n" in c.call("INFO", "stats")


def test_dbsize_flush_time(sbs):
    sbs.run([("SET", "a", "1"), ("SET", "b", "2"), ("DBSIZE",), ("FLUSHDB", "ASYNC"), ("DBSIZE",),
             ("FLUSHALL", "bogus"), ("FLUSHALL", "SYNC")])
    t = sbs.rill.call("TIME")
    assert t.startswith(b"*2\r\n")


def test_shutdown_nosave_stops_the_server(tmp_path):
    server = start_rill(workdir=str(tmp_path))
    c = RawClient(server.port)
    c.send_raw(b"SHUTDOWN NOSAVE\r\n")
    assert c.closed_by_peer(5)
    assert server.proc.wait(10) == 0
    assert "ready to exit" in server.log()


def test_sigterm_shuts_down_cleanly(tmp_path):
    server = start_rill(workdir=str(tmp_path))
    os.kill(server.proc.pid, signal.SIGTERM)
    assert server.proc.wait(10) == 0
    log = server.log()
    assert "Received SIGTERM scheduling shutdown" in log and "Ready to accept connections" in log


def test_maxclients(tmp_path):
    server = start_rill("--maxclients", "2", workdir=str(tmp_path))
    try:
        a, b = RawClient(server.port), RawClient(server.port)
        a.call("PING")
        b.call("PING")
        s = socket.create_connection(("127.0.0.1", server.port))
        assert s.recv(100) == b"-ERR max number of clients reached\r\n"
        s.close()
    finally:
        server.stop()


def _counts(c: RawClient) -> tuple[str, ...]:
    info = c.call("INFO", "stats").decode()
    fields = dict(line.split(":", 1) for line in info.split("\r\n") if ":" in line)
    return fields["total_connections_received"], fields["rejected_connections"]


def test_maxclients_refusals_count_as_rejected_not_received_side_by_side():
    """A connection refused at maxclients counts in rejected_connections and not in
    total_connections_received (Redis counts a connection once it is admitted)."""
    seen = []
    for server in (start_rill("--maxclients", "2"), start_redis("--maxclients", "2")):
        try:
            a, b = RawClient(server.port), RawClient(server.port)
            b.call("PING")
            s = socket.create_connection(("127.0.0.1", server.port))
            refusal = s.recv(100)
            s.close()
            seen.append((refusal, _counts(a)))
            a.close()
            b.close()
        finally:
            server.stop()
    assert seen[0] == seen[1]
    assert seen[0][0] == b"-ERR max number of clients reached\r\n"


def test_idle_timeout_disconnects(tmp_path):
    server = start_rill("--timeout", "1", workdir=str(tmp_path))
    try:
        c = RawClient(server.port)
        c.call("PING")
        assert c.closed_by_peer(4)
    finally:
        server.stop()


@pytest.mark.parametrize("setting", ["no", "local", "yes"])
def test_debug_and_module_are_protected_as_in_redis(setting):
    """enable-debug-command / enable-module-command (default no): refused, allowed from
    loopback with "local", allowed with "yes"; counted as rejected, as Redis does."""
    require_tool("redis-server")
    opts = ("--enable-debug-command", setting, "--enable-module-command", setting)
    mine, theirs = start_rill(*opts), start_redis(*opts)
    try:
        s = SideBySide(mine.port, theirs.port)
        for args in (("DEBUG", "SLEEP", "0"), ("DEBUG",), ("DEBUG", "NOPE"), ("MODULE", "LIST"),
                     ("MODULE", "HELP"), ("MODULE", "UNLOAD", "nosuchmodule"), ("MODULE", "LOAD"),
                     ("MODULE", "NOPE"), ("MULTI",), ("DEBUG", "SLEEP", "0"), ("EXEC",)):
            s.check(*args)
        counts = [_call_counts(c.call("INFO", "commandstats")) for c in (s.rill, s.oracle)]
        assert counts[0] == counts[1]
        s.close()
    finally:
        mine.stop()
        theirs.stop()


def _call_counts(info: bytes) -> dict[bytes, list[bytes]]:
    """cmdstat lines of DEBUG and MODULE without their timings: name -> counters."""
    out = {}
    for line in info.split(b"\r\n"):
        name, _, fields = line.partition(b":")
        if name.startswith((b"cmdstat_debug", b"cmdstat_module")):
            out[name] = [f for f in fields.split(b",") if not f.startswith(b"usec")]
    return out


def test_module_load_fails_and_says_why():
    server = start_rill("--enable-module-command", "yes")
    try:
        c = RawClient(server.port)
        assert c.call("MODULE", "LOAD", "/opt/redis-stack/lib/redisearch.so") == (
            b"-ERR Error loading the extension. Please check the server logs.\r\n")
        assert c.call("MODULE", "LIST") == b"*0\r\n"
        c.close()
        assert "rill does not run Redis modules" in server.log()
    finally:
        server.stop()


def test_info_keyspace_avg_ttl_follows_active_expiry(rill_server, oracle_server):
    """avg_ttl is the running average active expiry keeps (0 until it has sampled)."""
    def avg_ttl(port: int) -> int:
        r = redis.Redis(port=port)
        try:
            r.flushall()
            for i in range(50):
                r.set(f"ttl:{i}", "v", px=100_000)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                value = r.info("keyspace")["db0"]["avg_ttl"]
                if value:
                    return value
                time.sleep(0.05)
            return 0
        finally:
            r.flushall()
            r.close()

    for port in (rill_server.port, oracle_server.port):
        assert 90_000 < avg_ttl(port) <= 100_000


def test_debug_populate_as_in_redis(sbs):
    """count, prefix and size as Redis takes them; an existing key is left alone; the
    errors for a bad count or size are Redis's."""
    sbs.check("SET", "key:1", "mine")
    sbs.check("DEBUG", "POPULATE", "3")
    for key in (b"key:0", b"key:1", b"key:2"):
        sbs.check("GET", key)
    sbs.check("DEBUG", "POPULATE", "2", "p", "12")
    sbs.check("GET", "p:0")
    sbs.check("DEBUG", "POPULATE", "2", "q", "3")
    sbs.check("GET", "q:1")
    sbs.check("DEBUG", "POPULATE", "2", "r", "0")
    sbs.check("GET", "r:1")
    sbs.check("DBSIZE")
    for bad in (["x"], ["-1"], ["1", "k", "x"], ["1", "k", "-1"], ["1", "k", "1", "extra"]):
        sbs.check("DEBUG", "POPULATE", *bad)


def test_debug_config_rewrite_force_all_writes_every_parameter(tmp_path):
    """Every parameter lands in the file, defaults too, and a server started from it
    reads back the same CONFIG GET *."""
    from tests.support import start_rill

    conf = tmp_path / "rill.conf"
    conf.write_text("# kept\nmaxmemory-policy allkeys-lru\n")
    srv = start_rill("--enable-debug-command", "yes", config_file=str(conf), workdir=str(tmp_path))
    try:
        c = RawClient(srv.port)
        before = c.call("CONFIG", "GET", "*")
        assert c.call("DEBUG", "CONFIG-REWRITE-FORCE-ALL") == b"+OK\r\n"
        c.close()
    finally:
        srv.stop()
    text = conf.read_text()
    assert text.startswith("# kept\nmaxmemory-policy allkeys-lru\n")
    assert "\nhz 10\n" in text and "\nappendonly no\n" in text  # defaults, written
    srv = start_rill(config_file=str(conf), workdir=str(tmp_path))
    try:
        c = RawClient(srv.port)
        after = c.call("CONFIG", "GET", "*")
        c.close()
    finally:
        srv.stop()
    def pairs(reply: bytes) -> dict[bytes, bytes]:
        words = reply.split(b"\r\n")[2::2]  # the bulk strings, past each $len
        return dict(zip(words[::2], words[1::2], strict=True))

    # each start gets a free port on its command line, which overrides the file's
    assert {**pairs(after), b"port": b""} == {**pairs(before), b"port": b""}
