"""MIGRATE between rill and redis-server, both ways, against Redis's own behaviour."""

from __future__ import annotations

import glob
import os
import time

import pytest
from rill.persistence import aof

from tests.support import RawClient, free_port, start_redis, start_rill

pytestmark = pytest.mark.requires("redis-server")


@pytest.fixture(scope="module")
def servers():
    """Two rills and two redis-servers: sources and targets for each direction."""
    procs = {"rill": start_rill(), "rill2": start_rill(), "redis": start_redis(), "redis2": start_redis()}
    yield procs
    for p in procs.values():
        p.stop()


def _scenario(src: int, dst: int) -> list[bytes]:
    """Every MIGRATE form and error, with what both sides hold afterwards."""
    s, d = RawClient(src), RawClient(dst)
    for c in (s, d):
        c.call("FLUSHALL")
    s.call("SET", "k", "v")
    s.call("PEXPIRE", "k", "100000")
    s.call("RPUSH", "l", *range(100))
    s.call("XADD", "st", "1-1", "f", "v")
    s.call("HSET", "h", "f", "v")
    host = "127.0.0.1"
    out = [
        s.call("MIGRATE", host, dst, "k", "3", "1000"),
        s.call("EXISTS", "k"),
        d.call("SELECT", "3"),
        d.call("GET", "k"),
        d.call("EVAL", "local t = redis.call('PTTL', 'k') return t > 90000 and t <= 100000", "0"),
        d.call("SELECT", "0"),
        s.call("MIGRATE", host, dst, "l", "0", "1000", "COPY"),
        s.call("MIGRATE", host, dst, "l", "0", "1000", "COPY"),  # BUSYKEY from the target
        s.call("MIGRATE", host, dst, "l", "0", "1000", "COPY", "REPLACE"),
        s.call("LLEN", "l"),
        d.call("LRANGE", "l", "0", "-1"),
        s.call("MIGRATE", host, dst, "", "0", "1000", "KEYS", "nokey", "st", "h", "nokey2"),
        s.call("DBSIZE"),
        d.call("XRANGE", "st", "-", "+"),
        d.call("HGETALL", "h"),
        s.call("MIGRATE", host, dst, "", "0", "1000", "KEYS", "nokey"),
        s.call("MIGRATE", host, dst, "nokey", "0", "1000"),
        s.call("MIGRATE", host, dst, "x", "0", "1000", "KEYS", "nokey"),
        s.call("MIGRATE", host, dst, "x", "0", "1000", "BOGUS"),
        s.call("MIGRATE", host, dst, "x", "0", "1000", "AUTH"),
        s.call("MIGRATE", host, dst, "x", "0", "1000", "AUTH2", "u"),
        s.call("MIGRATE", host, dst, "x", "a", "b"),
        s.call("SET", "x", "1"),
        s.call("MIGRATE", host, dst, "x", "a", "b"),  # the timeout is checked first
        s.call("MIGRATE", host, dst, "x", "0", "b"),
        s.call("MIGRATE", host, dst, "x", "99", "1000"),  # the target refuses the SELECT
        s.call("MIGRATE", host, dst, "x", "0", "1000", "AUTH", "pw"),
        s.call("MIGRATE", host, dst, "x", "0", "1000", "AUTH2", "u", "pw"),
        s.call("MIGRATE", host, str(free_port()), "x", "0", "200"),  # refused: a write error
        s.call("EXISTS", "x"),
        s.call("MIGRATE", host, dst, "x", "0", "0"),  # timeout 0 means 1000 ms
        s.call("EXISTS", "x"),
        d.call("DBSIZE"),
    ]
    s.close()
    d.close()
    return out


@pytest.mark.parametrize("direction", ["rill->redis", "redis->rill"])
def test_migrate_side_by_side(servers, direction):
    """The same script from rill and from redis-server to the other kind gives the same
    replies as redis-server to redis-server."""
    src, dst = direction.split("->")
    mine = _scenario(servers[src].port, servers[dst].port)
    other = "redis" if src == "redis" else "redis2"
    target = "redis2" if other == "redis" else "redis"
    theirs = _scenario(servers[other].port, servers[target].port)
    assert mine == theirs
    assert mine[0] == b"+OK\r\n" and mine[7].startswith(b"-ERR Target instance replied with error: BUSYKEY")


def test_migrate_caches_its_connection_and_reports_a_dead_target(servers):
    src = RawClient(servers["rill2"].port)  # the one server no other test migrates from
    target = start_redis()
    try:
        src.call("SET", "a", "1")
        assert src.call("MIGRATE", "127.0.0.1", target.port, "a", "0", "1000") == b"+OK\r\n"
        assert b"migrate_cached_sockets:1\r\n" in src.call("INFO", "stats")
        src.call("SET", "a", "1")
        assert src.call("MIGRATE", "127.0.0.1", target.port, "a", "0", "1000", "REPLACE") == b"+OK\r\n"
        assert b"migrate_cached_sockets:1\r\n" in src.call("INFO", "stats")
        # The cached connection dies with its server; the one retry finds nobody listening.
        target.stop()
        src.call("SET", "c", "3")
        assert src.call("MIGRATE", "127.0.0.1", target.port, "c", "0", "500") == (
            b"-IOERR error or timeout writing to target instance\r\n"
        )
        assert src.call("EXISTS", "c") == b":1\r\n"
        assert b"migrate_cached_sockets:0\r\n" in src.call("INFO", "stats")
    finally:
        target.stop()
        src.call("DEL", "a", "c")
        src.close()


def test_migrate_reconnects_to_a_restarted_target(servers):
    src = RawClient(servers["rill"].port)
    port = free_port()
    target = start_rill(port=port)
    try:
        src.call("SET", "a", "1")
        assert src.call("MIGRATE", "127.0.0.1", port, "a", "0", "1000") == b"+OK\r\n"
        target.stop()
        target = start_rill(port=port)
        src.call("SET", "b", "2")
        assert src.call("MIGRATE", "127.0.0.1", port, "b", "0", "1000") == b"+OK\r\n"
        assert RawClient(port).call("EXISTS", "a", "b") == b":1\r\n"
    finally:
        target.stop()
        src.close()


def test_migrate_times_out_on_a_busy_target(servers):
    src = RawClient(servers["rill"].port)
    target = RawClient(servers["redis2"].port)
    src.call("SET", "slow", "1")
    target.send_raw(b"DEBUG SLEEP 1\r\n")
    time.sleep(0.1)
    t0 = time.monotonic()
    assert src.call("MIGRATE", "127.0.0.1", servers["redis2"].port, "slow", "0", "300") == (
        b"-IOERR error or timeout reading to target instance\r\n"
    )
    assert time.monotonic() - t0 < 0.9  # not retried after a timeout
    assert src.call("EXISTS", "slow") == b":1\r\n"
    target.read_reply()
    src.close()
    target.close()


def test_migrate_propagates_a_del_of_the_acknowledged_keys():
    """Replicas and the AOF see MIGRATE as DEL of the keys the target took."""
    src = start_rill("--appendonly", "yes", "--appendfsync", "always")
    target = start_redis()
    try:
        s, t = RawClient(src.port), RawClient(target.port)
        s.call("MSET", "a", "1", "b", "2", "c", "3", "d", "4")
        t.call("SET", "b", "busy")
        reply = s.call("MIGRATE", "127.0.0.1", target.port, "", "0", "1000", "KEYS", "a", "b", "c")
        assert reply.startswith(b"-ERR Target instance replied with error: BUSYKEY")
        assert s.call("MIGRATE", "127.0.0.1", target.port, "d", "0", "1000", "COPY") == b"+OK\r\n"
        assert s.call("EXISTS", "a", "b", "c", "d") == b":2\r\n"
        (incr,) = glob.glob(os.path.join(src.workdir, "appendonlydir", "*.incr.aof"))
        with open(incr, "rb") as f:
            commands = list(aof.CommandParser(f.read()))
        assert commands[-1] == [b"DEL", b"a", b"c"]
        assert not any(cmd[0] in (b"MIGRATE", b"migrate") for cmd in commands)
    finally:
        src.stop()
        target.stop()


def test_migrate_auth_is_redacted_and_reaches_the_target(servers):
    s = RawClient(servers["rill"].port)
    target = start_redis("--requirepass", "tpw")
    try:
        s.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        s.call("SET", "key", "v")
        assert s.call("MIGRATE", "127.0.0.1", target.port, "key", "0", "1000", "AUTH", "tpw") == b"+OK\r\n"
        s.call("SET", "key", "v")
        assert s.call("MIGRATE", "127.0.0.1", target.port, "key", "0", "1000", "AUTH2", "default", "bad") == (
            b"-ERR Target instance replied with error: WRONGPASS invalid username-password pair or "
            b"user is disabled.\r\n"
        )
        s.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        log = s.call("SLOWLOG", "GET", "4")
        assert b"tpw" not in log and b"bad" not in log
        assert log.count(b"(redacted)") == 3
    finally:
        s.call("DEL", "key")
        s.close()
        target.stop()
