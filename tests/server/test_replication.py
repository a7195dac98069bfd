"""The master's side of replication: REPLCONF, ROLE, INFO replication, and real Redis
clients of it (a redis-server replica following rill, ``redis-cli --rdb``)."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest
import redis

from tests.support import RawClient, require_tool, start_redis, start_rill, wait_until


@pytest.mark.parametrize("args", [
    ("REPLCONF",),
    ("REPLCONF", "listening-port"),
    ("REPLCONF", "listening-port", "6380"),
    ("REPLCONF", "listening-port", "x"),
    ("REPLCONF", "LISTENING-PORT", "1", "capa", "eof", "capa", "psync2", "capa", "whatever"),
    ("REPLCONF", "ip-address", "10.0.0.1"),
    ("REPLCONF", "ip-address", "x" * 256),
    ("REPLCONF", "ip-address", "x" * 255),
    ("REPLCONF", "rdb-only", "0"),
    ("REPLCONF", "rdb-only", "2"),
    ("REPLCONF", "rdb-only", "-1"),
    ("REPLCONF", "rdb-only", "z"),
    ("REPLCONF", "rdb-filter-only", "functions"),
    ("REPLCONF", "rdb-filter-only", ""),
    ("REPLCONF", "rdb-filter-only", "functions keys"),
    ("REPLCONF", "rdb-filter-only", '"functions'),
    ("REPLCONF", "nope", "1"),
    ("REPLCONF", "capa", "eof", "nope", "1"),
    ("ROLE", "extra"),
    ("WAIT", "0", "0"),
    ("WAIT", "1", "50"),
    ("WAIT", "x", "0"),
    ("WAIT", "1", "-1"),
    ("WAIT", "1", "1.5"),
    ("WAIT", "1"),
])
def test_replconf_and_role_replies(sbs, args):
    sbs.check(*args)


def test_ack_and_getack_are_never_answered(sbs):
    for c in (sbs.rill, sbs.oracle):
        c.send_raw(b"REPLCONF ACK 10\r\nREPLCONF GETACK *\r\nREPLCONF ack notanumber\r\nPING\r\n")
        assert c.read_reply() == b"+PONG\r\n"  # the only reply the four produced
    sbs.check("ECHO", "next")


def test_role_and_info_without_replicas(rill_server):
    r = redis.Redis(port=rill_server.port)
    try:
        role = r.role()
        assert role[0] == b"master" and role[2] == [] and isinstance(role[1], int)
        info = r.info("replication")
        assert info["role"] == "master" and info["connected_slaves"] == 0
        assert info["master_repl_offset"] == role[1]
    finally:
        r.close()


@pytest.fixture
def master():
    srv = start_rill()
    yield srv
    srv.stop()


def test_a_redis_replica_follows_rill(master):
    require_tool("redis-server")
    m = redis.Redis(port=master.port)
    m.set("before", "1")
    m.xadd("s", {"f": "v"}, id="1-1")
    replica = start_redis("--replicaof", "127.0.0.1", str(master.port))
    r = redis.Redis(port=replica.port)
    try:
        wait_until(lambda: r.info("replication")["master_link_status"] == "up")
        m.xadd("s", {"g": "w"}, id="2-1")
        m.xgroup_create("s", "grp", id="0")
        m.xreadgroup("grp", "alice", {"s": ">"}, count=1)
        with redis.Redis(port=master.port, db=3) as m3:
            m3.set("k", "v", px=100_000)
        wait_until(lambda: r.xinfo_groups("s") and r.xpending("s", "grp")["pending"] == 1)
        assert r.xrange("s") == m.xrange("s")
        with redis.Redis(port=replica.port, db=3) as r3:
            wait_until(lambda: r3.get("k") == b"v")
            assert 0 < r3.pttl("k") <= 100_000
        assert r.get("before") == b"1"
        # The replica acknowledges every second: ROLE and INFO then show it caught up.
        offset = m.info("replication")["master_repl_offset"]
        assert offset > 0

        def caught_up():
            role = m.role()
            return role if role[2] and role[2][0][2] == str(offset).encode() else None

        role = wait_until(caught_up)
        assert role[:2] == [b"master", offset]
        assert role[2] == [[b"127.0.0.1", str(replica.port).encode(), str(offset).encode()]]
        info = m.info("replication")
        assert info["connected_slaves"] == 1
        slave = info["slave0"]
        assert (slave["ip"], slave["port"], slave["state"], slave["offset"]) == (
            "127.0.0.1", replica.port, "online", offset)
        assert 0 <= slave["lag"] <= 2
        assert r.info("replication")["slave_repl_offset"] == offset
        # A replica that goes away leaves ROLE and INFO.
        replica.stop()
        wait_until(lambda: m.role()[2] == [])
        assert m.info("replication")["connected_slaves"] == 0
    finally:
        r.close()
        m.close()
        replica.stop()


def test_wait_for_a_real_replica(master):
    require_tool("redis-server")
    m = redis.Redis(port=master.port)
    replica = start_redis("--replicaof", "127.0.0.1", str(master.port))
    r = redis.Redis(port=replica.port)
    try:
        wait_until(lambda: r.info("replication")["master_link_status"] == "up")
        m.xadd("s", {"f": "v"}, id="1-1")
        # The GETACK that WAIT sends makes the replica answer well before its 1 s ACK.
        t = time.monotonic()
        assert m.wait(1, 10_000) == 1
        assert time.monotonic() - t < 0.9
        assert r.xlen("s") == 1
        t = time.monotonic()
        assert m.wait(2, 300) == 1  # the timeout answers how many did acknowledge
        assert time.monotonic() - t >= 0.29
        pipe = m.pipeline(transaction=True)
        pipe.set("k", "v").wait(5, 0)
        t = time.monotonic()
        ok, n = pipe.execute()  # inside EXEC, WAIT answers at once, whatever the count
        assert ok is True and n in (0, 1) and time.monotonic() - t < 0.5
        # CLIENT UNBLOCK ends a WAIT with the count, as its timeout would.
        blocked = redis.Redis(port=master.port)
        blocked_id = blocked.client_id()
        result = []
        target = m.info("replication")["master_repl_offset"]  # what the WAIT below waits for
        th = threading.Thread(target=lambda: result.append(blocked.wait(3, 0)))
        th.start()
        wait_until(lambda: m.info("clients")["blocked_clients"] == 1)
        # The replica's ACK (to the GETACK that WAIT sent) must be in before the UNBLOCK,
        # or the count is still 0: on a loaded machine it can come later than INFO's reply.
        wait_until(lambda: m.info("replication")["slave0"]["offset"] >= target)
        assert m.client_unblock(blocked_id) is True
        th.join(5)
        assert result == [1]
        blocked.close()
    finally:
        r.close()
        m.close()
        replica.stop()


@pytest.mark.parametrize("flag, keys", [("--rdb", 2), ("--functions-rdb", 0)])
def test_redis_cli_snapshot_of_rill(master, tmp_path, flag, keys):
    m = redis.Redis(port=master.port)
    m.set("a", "1")
    m.xadd("s", {"f": "v"})
    path = str(tmp_path / "snap.rdb")
    subprocess.run(["redis-cli", "-p", str(master.port), flag, path], check=True, capture_output=True, timeout=30)
    check = subprocess.run(["redis-check-rdb", path], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and f"{keys} keys read" in check.stdout
    # The snapshot-only client is closed, not kept as a replica.
    wait_until(lambda: m.info("clients")["connected_clients"] == 1)
    assert m.info("replication")["connected_slaves"] == 0
    m.close()
    assert os.path.getsize(path) > 0


def test_a_raw_replica_acknowledges(master):
    c = RawClient(master.port)
    c.call("REPLCONF", "listening-port", "7777")
    c.call("REPLCONF", "ip-address", "10.1.2.3")
    c.send_raw(b"SYNC\r\n")
    header = b""
    while not header.endswith(b"\r\n"):
        header += c.sock.recv(1)
    n = int(header[1:-2])
    while n:
        n -= len(c.sock.recv(n))
    m = redis.Redis(port=master.port)
    try:
        m.set("x", "y")
        offset = m.info("replication")["master_repl_offset"]
        assert m.role()[2] == [[b"10.1.2.3", b"7777", b"0"]]
        c.send_raw(b"REPLCONF ACK %d\r\n" % offset)
        wait_until(lambda: m.role()[2] == [[b"10.1.2.3", b"7777", str(offset).encode()]])
        c.send_raw(b"REPLCONF ACK 1\r\n")  # offsets only move forward
        m.ping()
        assert m.role()[2][0][2] == str(offset).encode()
    finally:
        m.close()
        c.close()


def test_a_redis_replica_continues_from_the_backlog():
    """A redis-server replica of rill whose link drops asks to continue at its offset;
    rill answers +CONTINUE from its backlog instead of a full resync, and INFO shows
    the backlog and the counts."""
    with start_rill() as master:
        m = redis.Redis(port=master.port)
        assert m.info("replication")["repl_backlog_active"] == 0
        m.set("k", "0")
        with start_redis("--replicaof", "127.0.0.1", str(master.port)) as replica:
            r = redis.Redis(port=replica.port)
            wait_until(lambda: r.info("replication")["master_link_status"] == "up")
            for i in range(1, 4):
                m.incr("k")
                assert m.execute_command("WAIT", 1, 5000) == 1
                assert m.client_kill_filter(_type="replica") == 1
                m.incr("k")  # written while the replica is away: the backlog keeps it
                want = b"%d" % (2 * i)
                wait_until(lambda want=want: r.info("replication")["master_link_status"] == "up"
                           and r.get("k") == want)
            stats = m.info("stats")
            assert (stats["sync_full"], stats["sync_partial_ok"], stats["sync_partial_err"]) == (1, 3, 0)
            info = m.info("replication")
            assert info["repl_backlog_active"] == 1
            assert info["repl_backlog_histlen"] == info["master_repl_offset"]  # all of it, so far
            assert info["repl_backlog_first_byte_offset"] == 1
            assert r.info("replication")["slave_repl_offset"] == info["master_repl_offset"]
            r.close()
        m.close()


def test_an_unknown_history_gets_a_full_resync():
    with start_rill() as srv:
        c = RawClient(srv.port)
        c.call("REPLCONF", "listening-port", "1")
        c.send_raw(b"*3\r\n$5\r\nPSYNC\r\n$40\r\n" + b"f" * 40 + b"\r\n$3\r\n100\r\n")
        assert c.read_reply().startswith(b"+FULLRESYNC ")
        c.close()
        stats = redis.Redis(port=srv.port).info("stats")
        assert (stats["sync_full"], stats["sync_partial_err"]) == (1, 1)


def test_publish_reaches_the_subscribers_of_replicas_but_not_the_aof(tmp_path):
    """PUBLISH and SPUBLISH travel to replicas (a redis-server replica of rill, and a
    rill replica of that rill), which deliver them to their own subscribers; the AOF
    has none of them, as Redis propagates them to replicas only."""
    from rill.persistence import aof

    with start_rill("--appendonly", "yes", workdir=str(tmp_path)) as master, \
            start_redis("--replicaof", "127.0.0.1", str(master.port)) as twin, start_rill() as rill:
        m = redis.Redis(port=master.port)
        redis.Redis(port=rill.port).execute_command("REPLICAOF", "127.0.0.1", master.port)
        subs = []
        for port in (twin.port, rill.port):
            wait_until(lambda port=port: redis.Redis(port=port).info("replication")["master_link_status"] == "up")
            sub = RawClient(port)
            sub.call("SUBSCRIBE", "news")
            sub.call("SSUBSCRIBE", "shard")
            subs.append(sub)
        m.set("k", "v")
        with m.pipeline(transaction=True) as p:
            p.publish("news", "in a transaction")
            p.incr("n")
            p.execute()
        assert m.publish("news", "hello") == 0  # nobody subscribed on the master itself
        m.execute_command("SPUBLISH", "shard", "sharded")
        for sub in subs:
            assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$16\r\nin a transaction\r\n"
            assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
            assert sub.read_reply() == b"*3\r\n$8\r\nsmessage\r\n$5\r\nshard\r\n$7\r\nsharded\r\n"
            sub.close()
        incr = [f for f in os.listdir(tmp_path / "appendonlydir") if f.endswith(".incr.aof")]
        logged = [argv for name in incr
                  for argv in aof.CommandParser(open(tmp_path / "appendonlydir" / name, "rb").read())]
        names = [a[0].upper() for a in logged]
        assert b"PUBLISH" not in names and b"SPUBLISH" not in names
        assert names[0] == b"SELECT" and names[1] == b"SET" and names[2] == b"MULTI" and names[-1] == b"EXEC"
        m.close()


def test_min_replicas_to_write_side_by_side():
    """min-replicas-to-write: writes (and EXEC of writes, and scripts that write) are
    refused with NOREPLICAS until enough replicas acknowledge in time."""
    def scenario(start) -> list:
        seen = []
        with start() as master:
            c = RawClient(master.port)
            c.call("CONFIG", "SET", "min-replicas-to-write", "1")
            for args in [("SET", "k", "v"), ("GET", "k"), ("MULTI",), ("SET", "k", "v"), ("EXEC",),
                         ("EVAL", "return redis.call('set', 'k', 'v')", "0"),
                         ("EVAL", "return redis.call('get', 'k')", "0"),
                         ("EVAL", "#!lua flags=no-writes\nreturn 1", "0"),
                         ("EVAL", "#!lua\nreturn 1", "0")]:
                seen.append(c.call(*args))
            info = redis.Redis(port=master.port).info("replication")
            seen.append(info["min_slaves_good_slaves"])
            with start_redis("--replicaof", "127.0.0.1", str(master.port)):
                wait_until(lambda: redis.Redis(port=master.port).info("replication")["min_slaves_good_slaves"] == 1)
                seen.append(c.call("SET", "k", "v"))
            c.close()
        return seen

    mine = scenario(start_rill)
    assert mine == scenario(start_redis)
    assert mine[0] == b"-NOREPLICAS Not enough good replicas to write.\r\n" and mine[-1] == b"+OK\r\n"
