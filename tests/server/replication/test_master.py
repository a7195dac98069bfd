"""The master's side of replication: REPLCONF, ROLE, INFO replication, and real Redis
clients of it (a redis-server replica following rill, ``redis-cli --rdb``)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
import redis

from tests.support import (
    RawClient,
    encode_command,
    require_tool,
    start_redis,
    start_rill,
    wait_until,
)


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
    srv = start_rill("--repl-diskless-sync-delay", "0")  # no diskless delay: the full sync starts at once
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
        # INFO's connected_clients leaves replicas out (the master's own count, this
        # client alone; the replica's, its master link), CLIENT LIST shows them.
        assert m.info("clients")["connected_clients"] == 1
        assert len(m.client_list()) == 2
        assert r.info("clients")["connected_clients"] == 2
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
        assert m.wait(1, 10_000) == 1
        assert r.xlen("s") == 1
        t = time.monotonic()
        assert m.wait(2, 300) == 1  # the timeout answers how many did acknowledge
        assert time.monotonic() - t >= 0.29
        pipe = m.pipeline(transaction=True)
        pipe.set("k", "v").wait(5, 0)
        # Inside EXEC, WAIT answers at once whatever the count: with timeout 0 it would
        # otherwise block for ever, and the test would hang instead of reaching the assert.
        ok, n = pipe.execute()
        assert ok is True and n in (0, 1)
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
    wait_until(lambda: len(m.client_list()) == 1)
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
    n = int(header.lstrip(b"\n")[1:-2])  # newlines keep the link alive while the snapshot is made
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
    with start_rill("--repl-diskless-sync-delay", "0") as master:
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

    with start_rill("--appendonly", "yes", "--repl-diskless-sync-delay", "0", workdir=str(tmp_path)) as master, \
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
        with start("--repl-diskless-sync-delay", "0") as master:
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


# -- full sync in a fork (issue 20, finding 2) --------------------------------------------------


class _RawReplica:
    """A replica speaking the protocol by hand: what the master sends, read as it comes."""

    def __init__(self, port: int, capa_eof: bool = True, psync: bool = True) -> None:
        self.c = RawClient(port, timeout=30.0)
        if capa_eof:
            assert self.c.call("REPLCONF", "capa", "eof", "capa", "psync2") == b"+OK\r\n"
        self.c.send_raw(b"PSYNC ? -1\r\n" if psync else b"SYNC\r\n")

    def _fill(self) -> None:
        data = self.c.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("closed by the master")
        self.c.buf += data

    def line(self) -> bytes:
        """The next reply line; newlines (the master's keepalives) before it are skipped."""
        while True:
            self.c.buf = self.c.buf.lstrip(b"\n")
            i = self.c.buf.find(b"\r\n")
            if i >= 0:
                line, self.c.buf = self.c.buf[:i], self.c.buf[i + 2:]
                return line
            self._fill()

    def snapshot(self) -> bytes:
        """The RDB, whether sent as ``$<len>`` or diskless as ``$EOF:<mark>``."""
        head = self.line()
        if head.startswith(b"$EOF:"):
            mark = head[5:]
            assert len(mark) == 40
            while (end := self.c.buf.find(mark)) < 0:
                self._fill()
            payload, self.c.buf = self.c.buf[:end], self.c.buf[end + 40:]
            return payload
        n = int(head[1:])
        while len(self.c.buf) < n:
            self._fill()
        payload, self.c.buf = self.c.buf[:n], self.c.buf[n:]
        return payload

    def commands(self, n: int) -> list[list[bytes]]:
        """The next ``n`` commands of the stream (PINGs of the heartbeat left out)."""
        from rill.persistence import aof

        while True:
            try:
                got = [argv for argv in aof.CommandParser(self.c.buf) if argv != [b"PING"]]
            except aof.AofTruncated:
                got = []
            if len(got) >= n:
                return got[:n]
            self._fill()

    def close(self) -> None:
        self.c.close()


def _sync_in_a_fork(start, diskless: str) -> dict:
    """A replica's full sync with a snapshot that takes 20 s to write (rdb-key-save-delay,
    a second per key): what the master shows, and does, while it is being written."""
    with start("--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        m.mset({f"k{i}": i for i in range(20)})
        m.config_set("rdb-key-save-delay", 1_000_000)
        forks, saves = m.info("stats")["total_forks"], m.info("persistence")["rdb_saves"]
        replica = _RawReplica(master.port)
        try:
            fullresync = replica.line()
            wait_until(lambda: m.info("persistence")["rdb_bgsave_in_progress"] == 1)
            seen = {"pong": m.ping(), "set": m.set("during", "1")}  # served while the child writes
            persistence, stats, repl = m.info("persistence"), m.info("stats"), m.info("replication")
            seen.update(
                fullresync=fullresync.split()[0],
                in_progress=persistence["rdb_bgsave_in_progress"],
                last_status=persistence["rdb_last_bgsave_status"],
                saves=persistence["rdb_saves"] - saves,
                forks=stats["total_forks"] - forks,
                fork_usec=stats["latest_fork_usec"] > 0,
                sync_full=stats["sync_full"],
                connected=repl["connected_slaves"],
                state=repl["slave0"]["state"],
                role=m.role()[2],  # only replicas online are listed
            )
        finally:
            replica.close()
            m.close()
    return seen


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_a_full_sync_snapshot_is_made_in_a_fork_side_by_side(diskless):
    """The master forks for a replica's snapshot, diskless or through the dump file, and
    serves its clients while the child writes; INFO's fork and save figures are Redis's
    (a diskless sync is no save: rdb_saves does not move)."""
    mine = _sync_in_a_fork(start_rill, diskless)
    assert mine == _sync_in_a_fork(start_redis, diskless)
    assert mine["in_progress"] == 1 and mine["forks"] == 1 and mine["state"] == "wait_bgsave"


def _racing_writes(master_port: int, stop: threading.Event, done: list[int]) -> None:
    with redis.Redis(port=master_port) as w:
        i = 0
        while not stop.is_set():
            with w.pipeline(transaction=False) as p:
                p.incr("n").xadd("s", {"i": i}).set(f"w:{i % 50}", i).execute()
            i += 1
            done[0] = i


@pytest.mark.parametrize("diskless", ["yes", "no"])
@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_writes_racing_a_full_sync_all_reach_the_replica(kind, diskless):
    """Writes made while the snapshot is in the fork are held for the replica and sent
    after it: the replica ends with exactly the master's data."""
    with start_rill("--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        m.mset({f"k{i}": i for i in range(2000)})
        m.config_set("rdb-key-save-delay", 500)  # about a second of snapshot to race
        stop, done = threading.Event(), [0]
        writer = threading.Thread(target=_racing_writes, args=(master.port, stop, done))
        writer.start()
        replica = start_redis() if kind == "redis" else start_rill()
        r = redis.Redis(port=replica.port)
        try:
            r.execute_command("REPLICAOF", "127.0.0.1", master.port)
            wait_until(lambda: m.info("persistence")["rdb_bgsave_in_progress"] == 1)
            during = done[0]
            wait_until(lambda: done[0] > during + 20)  # writes while the child works
            wait_until(lambda: r.info("replication")["master_link_status"] == "up", timeout=60)
            after = done[0]
            wait_until(lambda: done[0] > after + 20)  # and writes once the stream flows
            stop.set()
            writer.join(10)
            assert m.execute_command("WAIT", 1, 10_000) == 1
            wait_until(lambda: r.info("replication")["slave_repl_offset"]
                       == m.info("replication")["master_repl_offset"])
            assert r.get("n") == m.get("n") == b"%d" % done[0]
            assert r.xrange("s") == m.xrange("s")
            assert r.dbsize() == m.dbsize() == 2000 + 2 + min(done[0], 50)
            assert m.info("stats")["total_forks"] == 1
        finally:
            stop.set()
            writer.join(10)
            r.close()
            m.close()
            replica.stop()


def _shared_diskless_fork(start) -> dict:
    """Two replicas and repl-diskless-sync-max-replicas 2: one fork serves both."""
    with start("--repl-diskless-sync-delay", "60", "--repl-diskless-sync-max-replicas", "2") as master:
        m = redis.Redis(port=master.port)
        m.set("k", "v")
        first = _RawReplica(master.port)
        try:
            wait_until(lambda: m.info("replication")["connected_slaves"] == 1)
            assert m.info("persistence")["rdb_bgsave_in_progress"] == 0  # waiting for company
            second = _RawReplica(master.port)
            try:
                lines = [first.line(), second.line()]
                payloads = [first.snapshot(), second.snapshot()]
                return {
                    "offsets_equal": lines[0].split()[2] == lines[1].split()[2],
                    "same_snapshot": payloads[0] == payloads[1],
                    "forks": m.info("stats")["total_forks"],
                    "sync_full": m.info("stats")["sync_full"],
                }
            finally:
                second.close()
        finally:
            first.close()
            m.close()


def test_replicas_arriving_together_share_one_diskless_fork():
    mine = _shared_diskless_fork(start_rill)
    assert mine == _shared_diskless_fork(start_redis)
    assert mine == {"offsets_equal": True, "same_snapshot": True, "forks": 1, "sync_full": 2}


def _shared_disk_fork(start) -> dict:
    """A second replica arriving while the first one's dump is being written joins it:
    the same snapshot, and the writes recorded since the fork."""
    with start("--repl-diskless-sync", "no") as master:
        m = redis.Redis(port=master.port)
        m.mset({f"k{i}": i for i in range(100)})
        m.config_set("rdb-key-save-delay", 10_000)  # a second for the dump
        first = _RawReplica(master.port, capa_eof=False)
        try:
            offset1 = first.line().split()[2]
            m.set("written", "during the fork")
            second = _RawReplica(master.port, capa_eof=False)
            try:
                offset2 = second.line().split()[2]
                m.incr("after")
                same = first.snapshot() == second.snapshot()
                return {
                    "offsets_equal": offset1 == offset2,
                    "same_snapshot": same,
                    "streams": [first.commands(4), second.commands(4)],
                    "forks": m.info("stats")["total_forks"],
                    "sync_full": m.info("stats")["sync_full"],
                }
            finally:
                second.close()
        finally:
            first.close()
            m.close()


def test_a_replica_joins_the_dump_being_written_side_by_side():
    mine = _shared_disk_fork(start_rill)
    assert mine == _shared_disk_fork(start_redis)
    # The second replica's attach makes the next command name its db again, as in Redis.
    stream = [[b"SELECT", b"0"], [b"SET", b"written", b"during the fork"], [b"SELECT", b"0"], [b"INCRBY", b"after", b"1"]]
    assert mine == {"offsets_equal": True, "same_snapshot": True, "streams": [stream, stream],
                    "forks": 1, "sync_full": 2}


# -- the heartbeat (issue 20, finding 3) --------------------------------------------------------

PING_BYTES = len(b"*1\r\n$4\r\nPING\r\n")


def _replica_of(kind: str, master_port: int, *args: str):
    """A redis-server or rill replica of the master, linked."""
    replica = start_redis(*args) if kind == "redis" else start_rill(*args)
    r = redis.Redis(port=replica.port)
    r.execute_command("REPLICAOF", "127.0.0.1", master_port)
    wait_until(lambda: r.info("replication")["master_link_status"] == "up")
    r.close()
    return replica


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_clients_are_answered_throughout_a_full_sync(diskless):
    """The snapshot for a replica is written by a fork, never in the event loop: with
    its writing slowed to at least 2 s (rdb-key-save-delay), a client PINGing back to
    back all along is answered every time well within that (a loop that encoded the
    snapshot itself would hold a PING for the whole 2 s). The bound, a second, is far
    above a fork's few milliseconds, so a loaded machine does not fail the test."""
    keys = 2000
    with start_rill("--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        m.mset({f"k{i}": i for i in range(keys)})
        m.config_set("rdb-key-save-delay", 1000)  # 1 ms a key: the snapshot takes >= 2 s
        stop = threading.Event()
        waits: list[float] = []
        errors: list[BaseException] = []

        def probe() -> None:
            try:
                with redis.Redis(port=master.port, socket_timeout=60) as p:
                    while not stop.is_set():
                        t = time.monotonic()
                        assert p.ping()
                        waits.append(time.monotonic() - t)
            except BaseException as e:  # noqa: BLE001 - reported by the test's thread
                errors.append(e)

        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        started = time.monotonic()
        replica = start_redis("--replicaof", "127.0.0.1", str(master.port))
        r = redis.Redis(port=replica.port)
        try:
            wait_until(lambda: r.info("replication")["master_link_status"] == "up", timeout=120)
            took = time.monotonic() - started
            stop.set()
            thread.join(60)
            assert not errors
            assert r.dbsize() == keys
            assert m.info("stats")["total_forks"] == 1
            assert took >= 2.0  # the snapshot was slow to write, so the bound below means something
            assert len(waits) > 10 and max(waits) < 1.0
        finally:
            stop.set()
            r.close()
            m.close()
            replica.stop()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_an_idle_replica_keeps_its_link_through_the_masters_pings(kind):
    """With nothing written, the master PINGs its replicas every repl-ping-replica-period
    seconds, in the stream (the offset grows by a PING each time), so a replica with a
    repl-timeout of 2 s keeps its link well past 2 s of silence from clients."""
    with start_rill("--repl-ping-replica-period", "1", "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        replica = _replica_of(kind, master.port, "--repl-timeout", "2")
        r = redis.Redis(port=replica.port)
        try:
            start = m.info("replication")["master_repl_offset"]
            # Five PINGs take about five seconds: well past the replica's timeout.
            wait_until(lambda: m.info("replication")["master_repl_offset"] >= start + 5 * PING_BYTES, timeout=30)
            offset = m.info("replication")["master_repl_offset"]
            assert (offset - start) % PING_BYTES == 0  # nothing but PINGs went out
            wait_until(lambda: r.info("replication")["slave_repl_offset"] >= offset)
            assert r.info("replication")["master_link_status"] == "up"
            stats = m.info("stats")
            assert (stats["sync_full"], stats["sync_partial_ok"]) == (1, 0)  # never reconnected
            assert "MASTER timeout" not in replica.log()
            assert "Connection with master lost" not in replica.log()
        finally:
            r.close()
            m.close()
            replica.stop()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_silent_replica_is_dropped_after_repl_timeout(kind):
    """A replica that stops acknowledging (its process stopped) is disconnected once
    repl-timeout seconds pass without a REPLCONF ACK, as Redis logs it."""
    with start_rill("--repl-timeout", "2", "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        replica = _replica_of(kind, master.port)
        try:
            wait_until(lambda: m.info("replication")["connected_slaves"] == 1)
            wait_until(lambda: m.info("replication")["slave0"]["state"] == "online")
            os.kill(replica.proc.pid, signal.SIGSTOP)
            wait_until(lambda: m.info("replication")["connected_slaves"] == 0, timeout=30)
            assert "Disconnecting timedout replica (streaming sync): 127.0.0.1:" in master.log()
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
            m.close()
            replica.stop()


def test_a_replica_of_a_rill_replica_keeps_its_link_when_idle():
    """rill A <- rill B <- redis-server C: B feeds C its own stream, so B pings C too,
    and C, with a repl-timeout of 2 s, keeps its link while nothing is written."""
    period, delay = ("--repl-ping-replica-period", "1"), ("--repl-diskless-sync-delay", "0")
    with start_rill(*period, *delay) as a, start_rill(*period, *delay) as b:
        rb = redis.Redis(port=b.port)
        rb.execute_command("REPLICAOF", "127.0.0.1", a.port)
        wait_until(lambda: rb.info("replication")["master_link_status"] == "up")
        c = _replica_of("redis", b.port, "--repl-timeout", "2")
        rc = redis.Redis(port=c.port)
        try:
            start = rc.info("replication")["slave_repl_offset"]
            wait_until(lambda: rc.info("replication")["slave_repl_offset"] >= start + 5 * PING_BYTES, timeout=30)
            assert rc.info("replication")["master_link_status"] == "up"
            assert (rb.info("stats")["sync_full"], rb.info("stats")["sync_partial_ok"]) == (1, 0)
            assert "MASTER timeout" not in c.log()
        finally:
            rc.close()
            rb.close()
            c.stop()


def _dump_left_after_sync(start) -> bool:
    with start("--repl-diskless-sync", "no", "--rdb-del-sync-files", "yes") as master:
        redis.Redis(port=master.port).set("k", "v")
        path = os.path.join(master.workdir, "dump.rdb")
        with start_redis("--replicaof", "127.0.0.1", str(master.port)) as replica:
            r = redis.Redis(port=replica.port)
            wait_until(lambda: r.info("replication")["master_link_status"] == "up" and r.get("k") == b"v")
            r.close()
            wait_until(lambda: not os.path.exists(path))
            return "Removing the RDB file used to feed replicas in a persistence-less instance" in master.log()


def test_rdb_del_sync_files_side_by_side():
    """A master without persistence removes the dump it wrote only for a replica's sync."""
    assert _dump_left_after_sync(start_rill) is _dump_left_after_sync(start_redis) is True


def _dump_stopped_when_its_replica_leaves(start) -> tuple:
    with start("--repl-diskless-sync", "no") as master:
        m = redis.Redis(port=master.port)
        m.mset({f"k{i}": i for i in range(100)})
        m.config_set("rdb-key-save-delay", 1_000_000)  # 100 s of dump: only a kill ends it soon
        replica = _RawReplica(master.port, capa_eof=False)
        replica.line()
        wait_until(lambda: m.info("persistence")["rdb_bgsave_in_progress"] == 1)
        replica.close()
        wait_until(lambda: m.info("persistence")["rdb_bgsave_in_progress"] == 0)
        seen = (m.info("persistence")["rdb_last_bgsave_status"], m.info("replication")["connected_slaves"])
        m.close()
        return seen


def test_a_dump_nobody_waits_for_is_stopped_side_by_side():
    """Without save points, the dump written for a replica that left is not finished."""
    assert _dump_stopped_when_its_replica_leaves(start_rill) == _dump_stopped_when_its_replica_leaves(start_redis) \
        == ("ok", 0)


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_stopped_replica_stalls_no_pipelining_client(kind):
    """With its replica's process stopped, the master keeps serving a client that writes
    a whole pipeline before reading (Redis's "slave buffer are counted correctly"): the
    stream to the replica piles up in the master's replica buffer, the replies in the
    client's, and neither the client nor the master waits on the replica."""
    start = start_redis if kind == "redis" else start_rill
    with start("--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        m.config_set("client-output-buffer-limit", "replica 100000000 100000000 300")
        replica = _replica_of("rill", master.port)
        c = RawClient(master.port, timeout=30)
        try:
            os.kill(replica.proc.pid, signal.SIGSTOP)
            payload = b"A" * 100_000
            c.send_raw((encode_command([b"SET", b"k", payload]) + encode_command([b"GET", b"k"])) * 150)
            for _ in range(150):
                assert c.read_reply() == b"+OK\r\n"
                assert c.read_reply() == b"$100000\r\n" + payload + b"\r\n"
            assert m.info("memory")["mem_clients_slaves"] > 2 * 1024 * 1024
            assert m.dbsize() == 1
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
            c.close()
            m.close()
            replica.stop()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_info_memory_weighs_a_replica_stream_when_asked(kind):
    """INFO memory and MEMORY STATS sum the clients' buffers when called, not at the last
    cron: with the cron paused, the stream a stopped replica has not taken is already in
    mem_clients_slaves (a pipeline served between two ticks once read 0 there)."""
    start = start_redis if kind == "redis" else start_rill
    with start("--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        m.config_set("client-output-buffer-limit", "replica 100000000 100000000 300")
        replica = _replica_of("rill", master.port)
        try:
            wait_until(lambda: m.info("replication")["slave0"]["state"] == "online")
            os.kill(replica.proc.pid, signal.SIGSTOP)
            m.execute_command("DEBUG", "PAUSE-CRON", "1")
            payload = b"A" * 100_000
            with m.pipeline(transaction=False) as p:
                for _ in range(100):
                    p.set("k", payload)
                p.execute()
            assert m.info("memory")["mem_clients_slaves"] > 2 * 1024 * 1024
            assert m.memory_stats()["clients.slaves"] > 2 * 1024 * 1024
        finally:
            m.execute_command("DEBUG", "PAUSE-CRON", "0")
            os.kill(replica.proc.pid, signal.SIGCONT)
            m.close()
            replica.stop()


@pytest.mark.parametrize("limit", ["replica 1mb 0 0", "replica 0 1mb 1"])
@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_replica_past_its_output_buffer_limit_is_disconnected(kind, limit):
    """client-output-buffer-limit's replica class: with its replica's process stopped,
    the stream piling up for it passes the hard limit (or the soft one for more than its
    seconds) and the master drops it, logging it as Redis does."""
    start = start_redis if kind == "redis" else start_rill
    with start("--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        replica = _replica_of("rill", master.port)
        try:
            wait_until(lambda: m.info("replication")["connected_slaves"] == 1)
            wait_until(lambda: m.info("replication")["slave0"]["state"] == "online")
            m.config_set("client-output-buffer-limit", limit)
            os.kill(replica.proc.pid, signal.SIGSTOP)
            payload = b"A" * 64 * 1024

            def written_until_dropped() -> bool:
                for _ in range(16):  # 1 MB of stream a round, more than the socket buffers take
                    m.set("k", payload)
                return m.info("replication")["connected_slaves"] == 0

            wait_until(written_until_dropped, timeout=60)
            # Closed by the write that found it over, or (the soft limit) by the cron once
            # its seconds lapsed between two writes: Redis logs the two differently.
            log = master.log()
            assert ("scheduled to be closed ASAP for overcoming of output buffer limits." in log
                    or "closed for overcoming of output buffer limits." in log)
            assert " flags=S " in log
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
            m.close()
            replica.stop()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_replica_past_its_soft_limit_is_closed_by_the_cron(kind):
    """A replica past the soft limit with nothing more written to it is closed by the
    clients cron once the soft seconds lapse, logged as closed (not scheduled)."""
    start = start_redis if kind == "redis" else start_rill
    with start("--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        replica = _replica_of("rill", master.port)
        try:
            wait_until(lambda: m.info("replication")["connected_slaves"] == 1)
            wait_until(lambda: m.info("replication")["slave0"]["state"] == "online")
            m.config_set("client-output-buffer-limit", "replica 0 1mb 1")
            os.kill(replica.proc.pid, signal.SIGSTOP)
            payload = b"A" * 64 * 1024
            for _ in range(128):  # 8 MB at once: well past what the socket buffers take
                m.set("k", payload)
            wait_until(lambda: m.info("replication")["connected_slaves"] == 0, timeout=10)
            assert "closed for overcoming of output buffer limits." in master.log()
            assert "scheduled to be closed ASAP" not in master.log()
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
            m.close()
            replica.stop()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_the_stream_held_for_a_replica_counts_as_its_buffer(kind):
    """After a diskless sync the stream waits for the replica's first ACK; what waits is
    that replica's output all the same: INFO's mem_clients_slaves and the replica's
    CLIENT LIST omem and tot-mem count it (in Redis, the replica's share of the
    replication buffer)."""
    start = start_redis if kind == "redis" else start_rill
    with start("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0") as master:
        m = redis.Redis(port=master.port)
        replica = _RawReplica(master.port)
        try:
            assert replica.line().startswith(b"+FULLRESYNC")
            replica.snapshot()
            wait_until(lambda: m.info("replication").get("slave0", {}).get("state") == "online")
            m.set("k", b"A" * 2_000_000)
            # Redis shares one buffer between the backlog and the replicas and shows the
            # replicas what passes the backlog's size (1mb by default): about 0.96 MB here.
            # (rill sums the buffers each cron tick: wait for one)
            wait_until(lambda: m.info("memory")["mem_clients_slaves"] > 2_000_000 - (1 << 20))
            line = next(x for x in m.execute_command("CLIENT", "LIST").split(b"\n") if b" flags=S " in x)
            fields = dict(f.split(b"=", 1) for f in line.split())
            # Redis adds its buffer blocks' headers: a few hundred bytes more.
            assert 2_000_000 <= int(fields[b"omem"]) < 2_010_000
            assert int(fields[b"tot-mem"]) >= int(fields[b"omem"])
        finally:
            replica.c.close()
            m.close()


def _net(r: redis.Redis) -> dict:
    stats = r.info("stats")
    assert isinstance(stats["instantaneous_output_repl_kbps"], float)
    return {k: stats[k] for k in ("total_net_input_bytes", "total_net_output_bytes",
                                  "total_net_repl_input_bytes", "total_net_repl_output_bytes")}


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_what_a_master_sends_its_replicas_counts_as_replication_output(kind):
    """INFO stats counts a master's replication stream (the snapshot and the commands) in
    total_net_repl_output_bytes, and in total_net_output_bytes with its clients' replies,
    for a rill master as for a redis-server one."""
    require_tool("redis-server")
    start = start_rill if kind == "rill" else start_redis
    master = start("--repl-diskless-sync-delay", "0")
    replica = _replica_of("redis", master.port)
    m = redis.Redis(port=master.port)
    r = redis.Redis(port=replica.port)
    try:
        synced = _net(m)
        assert synced["total_net_repl_output_bytes"] > 0  # the snapshot, at least its header
        m.set("big", "x" * 200_000)
        wait_until(lambda: r.strlen("big") == 200_000)
        after = _net(m)
        repl = after["total_net_repl_output_bytes"] - synced["total_net_repl_output_bytes"]
        assert repl >= 200_000
        clients = after["total_net_output_bytes"] - synced["total_net_output_bytes"] - repl
        assert 0 < clients < 20_000  # this client's replies (SET's, INFO's)
        # The replica's side: what it reads from its master is replication input.
        assert r.info("stats")["total_net_repl_input_bytes"] >= 200_000
    finally:
        m.close()
        r.close()
        replica.stop()
        master.stop()
