"""Active-Active data on disk and on plain replicas, with real rill-server processes:

- appendfsync always: every XADD acknowledged before kill -9 is there after the restart, with
  the instance's sequence, clock and backlog of own records;
- the AOF (effect records beside the commands) passes redis-check-aof, the RDB
  (rill-aast module values, aa-state) passes redis-check-rdb, and both load back, also
  through an AOF rewrite (an RDB base whatever aof-use-rdb-preamble says) and DEBUG RELOAD;
- a server that is not Active-Active refuses those files;
- a redis-server 7.0.15 replica of an Active-Active instance holds its data as ordinary
  streams and follows it.
"""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from tests.server.activeactive.cluster import Cluster, decode, ids
from tests.support import RawClient, require_tool, rill_process, start_redis, wait_until


def xrange(node_or_client, key: str) -> list:
    if isinstance(node_or_client, RawClient):
        return decode(node_or_client.call("XRANGE", key, "-", "+"))
    return node_or_client.call("XRANGE", key, "-", "+")


class Single:
    """One Active-Active instance (region 1, no peers) with appendfsync always."""

    def __init__(self, *args: str) -> None:
        self.proc = rill_process("--active-active-id", "1", "--appendonly", "yes", "--appendfsync", "always",
                                 *args).start()
        self.client = RawClient(self.proc.port)

    def call(self, *args):
        return decode(self.client.call(*args))

    def info(self) -> dict[str, str]:
        lines = self.call("INFO", "active_active").decode().splitlines()
        return dict(line.split(":", 1) for line in lines if ":" in line)

    def state(self) -> tuple:
        info = self.info()
        # name, consumers, pending, last-delivered-id (entries-read does not survive an AOF
        # replay, in Redis 7.0 either: XCLAIM ... LASTID does not carry it)
        groups = [g[1:8:2] for g in self.call("XINFO", "GROUPS", "s")]
        return (self.client.call("XRANGE", "s", "-", "+"), groups,
                self.client.call("XPENDING", "s", "g"), info["active_active_seq"], info["active_active_vc"])

    def kill_and_restart(self) -> None:
        self.client.close()
        self.proc.kill()
        self.proc.start()
        self.client = RawClient(self.proc.port)

    def stop(self) -> None:
        self.client.close()
        self.proc.stop()


def test_single_instance_survives_kill_9_rewrite_and_reload():
    """Strict mode's generated IDs come back from the AOF (the commands beside each record
    carry full IDs, which a client could not send), with the sequence, clock and backlog;
    then through an AOF rewrite (an RDB base with rill-aast values) and DEBUG RELOAD."""
    check_aof = require_tool("redis-check-aof")
    check_rdb = require_tool("redis-check-rdb")
    a = Single()
    try:
        acked = [a.call("XADD", "s", "*", "n", str(i)) for i in range(100)]
        a.call("XGROUP", "CREATE", "s", "g", "0")
        a.call("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">")
        a.call("XDEL", "s", acked[50])
        a.call("MULTI")
        a.call("XADD", "s", "*", "in", "multi")
        a.call("XACK", "s", "g", acked[0])
        a.call("EXEC")
        before = a.state()
        backlog = a.info()["active_active_backlog_bytes"]
        assert before[3] == "103"  # 100 XADDs, XGROUP CREATE, XDEL, the transaction
        a.kill_and_restart()
        assert a.state() == before
        assert a.info()["active_active_backlog_bytes"] == backlog  # own records refilled it
        manifest = glob.glob(os.path.join(a.proc.workdir, "appendonlydir", "*.manifest"))[0]
        out = subprocess.run([check_aof, manifest], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0, out.stdout + out.stderr
        assert a.call("SAVE") == b"OK"
        out = subprocess.run([check_rdb, os.path.join(a.proc.workdir, "dump.rdb")], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0 and "RDB looks OK" in out.stdout, out.stdout + out.stderr
        assert a.call("BGREWRITEAOF").startswith(b"Background")
        wait_until(lambda: _rewrite_done(a))
        base = glob.glob(os.path.join(a.proc.workdir, "appendonlydir", "*.base.*"))
        assert [open(f, "rb").read(9) for f in base] == [b"REDIS0010"]
        a.call("XADD", "s", "*", "after", "rewrite")
        before = a.state()
        backlog = a.info()["active_active_backlog_bytes"]
        a.kill_and_restart()
        assert a.state() == before
        # The base holds the backlog as it was (AUX aa-backlog), the incr file the rest.
        assert a.info()["active_active_backlog_bytes"] == backlog
        out = subprocess.run([check_aof, manifest], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0, out.stdout + out.stderr
        assert a.call("DEBUG", "RELOAD") == b"OK"
        assert a.state() == before
        assert a.info()["active_active_backlog_bytes"] == backlog
    finally:
        a.stop()


def test_active_active_files_are_refused_without_the_mode(tmp_path):
    """A server that is not Active-Active cannot keep such data converging: it refuses to
    start on its RDB (aa-state) or its AOF (effect records), rather than drop what it holds."""
    a = Single("--aof-use-rdb-preamble", "no")
    try:
        a.call("XADD", "s", "*", "n", "1")
        a.call("SAVE")
        workdir = a.proc.workdir
    finally:
        a.stop()
    for args in (["--appendonly", "yes"], ["--appendonly", "no"]):
        proc = rill_process(*args, workdir=workdir)
        with pytest.raises(RuntimeError, match="Active-Active"):
            proc.start()
        proc.stop()


def test_an_rdb_whose_backlog_has_an_unknown_version_is_refused(tmp_path):
    """An ``aa-backlog`` of a layout this build does not know (a newer rill's) stops the
    start with a clear error, rather than lose the records or misread them."""
    from rill.persistence import rdb
    from rill.server.activeactive import enable
    from rill.server.commands import load_all
    from rill.server.server import Server

    load_all()
    state = enable(Server(), 1).export_state()
    options = rdb.SaveOptions(extra_aux=[(rdb.AA_STATE_AUX, state), (rdb.AA_BACKLOG_AUX, b"\x00\x09\x00\x00")])
    with open(tmp_path / "dump.rdb", "wb") as f:
        rdb.save_file(f, [], options)
    proc = rill_process("--active-active-id", "1", workdir=str(tmp_path))
    with pytest.raises(RuntimeError, match="Bad Active-Active state in the RDB: unknown Active-Active backlog version 9"):
        proc.start(timeout=60)  # it exits as soon as it reads the file
    proc.stop()


def test_redis_server_replica_of_a_single_instance():
    a = Single("--aof-use-rdb-preamble", "no")
    replica = None
    try:
        for i in range(100):
            a.call("XADD", "s", "*", "n", str(i))
        a.call("XGROUP", "CREATE", "s", "g", "0")
        # The full sync starts at once (by default the master waits 5 s for more replicas).
        assert a.call("CONFIG", "SET", "repl-diskless-sync-delay", "0") == b"OK"
        replica = start_redis("--replicaof", "127.0.0.1", str(a.proc.port))
        rc = RawClient(replica.port)
        wait_until(lambda: b"master_link_status:up" in rc.call("INFO", "replication"))
        wait_until(lambda: rc.call("XRANGE", "s", "-", "+") == a.client.call("XRANGE", "s", "-", "+"))
        a.call("XADD", "s", "*", "after", "sync")
        a.call("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">")
        wait_until(lambda: rc.call("XPENDING", "s", "g") == a.client.call("XPENDING", "s", "g"))
        assert rc.call("XRANGE", "s", "-", "+") == a.client.call("XRANGE", "s", "-", "+")
        # RENAME drops an Active-Active stream's groups; a plain RENAME would keep them.
        a.call("RENAME", "s", "s2")
        a.call("XADD", "s2", "*", "after", "rename")
        wait_until(lambda: rc.call("XRANGE", "s2", "-", "+") == a.client.call("XRANGE", "s2", "-", "+"))
        assert rc.call("XINFO", "GROUPS", "s2") == a.client.call("XINFO", "GROUPS", "s2") == b"*0\r\n"
        rc.close()
        # The base written when the AOF started is an RDB all the same.
        base = glob.glob(os.path.join(a.proc.workdir, "appendonlydir", "*.base.*"))
        assert [open(f, "rb").read(5) for f in base] == [b"REDIS"]
    finally:
        if replica is not None:
            replica.stop()
        a.stop()


def _rewrite_done(node) -> bool:
    info = node.call("INFO", "persistence").decode()
    return "aof_rewrite_in_progress:0" in info and "aof_rewrite_scheduled:0" in info
def test_kill_9_with_appendfsync_always_loses_no_acknowledged_write():
    with Cluster(2, appendonly=True) as c:
        a, b = c[0], c[1]
        a.call("XADD", "s", "*", "n", "0")
        c.sync()
        # Region 2 stops hearing region 1: what region 1 writes now exists only in its AOF.
        assert a.call("ACTIVEACTIVE", "PAUSE") == b"OK"
        acked = [a.call("XADD", "s", "*", "n", str(i)) for i in range(1, 201)]
        a.call("XGROUP", "CREATE", "s", "g", "0")
        b.call("XADD", "s", "*", "from", "2")  # region 2's own, concurrent
        seq, vc = a.seq(), a.info()["active_active_vc"]
        before = xrange(a, "s")
        c.kill(0)
        c.restart(0)
        assert xrange(a, "s") == before
        assert {x.decode() for x in acked} <= set(ids(xrange(a, "s")))
        assert a.seq() == seq
        assert a.info()["active_active_vc"] == vc
        assert [g[1] for g in a.call("XINFO", "GROUPS", "s")] == [b"g"]
        # The effects region 2 never got are still shipped (from the backlog the AOF refilled).
        c.wait_links()
        c.sync()
        assert xrange(a, "s") == xrange(b, "s")
        assert len(xrange(b, "s")) == 202
        assert [g[1] for g in b.call("XINFO", "GROUPS", "s")] == [b"g"]


def test_files_pass_redis_checks_and_reload():
    check_aof = require_tool("redis-check-aof")
    check_rdb = require_tool("redis-check-rdb")
    with Cluster(2, appendonly=True) as c:
        a, b = c[0], c[1]
        for i in range(50):
            a.call("XADD", "s", "*", "n", str(i))
            b.call("XADD", "s", "*", "m", str(i))
        a.call("XGROUP", "CREATE", "s", "g", "0")
        a.call("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">")
        c.sync()
        a.call("XDEL", "s", ids(xrange(a, "s"))[5])
        c.sync()
        workdir = a.proc.workdir
        manifest = glob.glob(os.path.join(workdir, "appendonlydir", "*.manifest"))[0]
        out = subprocess.run([check_aof, manifest], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0, out.stdout + out.stderr
        assert a.call("SAVE") == b"OK"
        out = subprocess.run([check_rdb, os.path.join(workdir, "dump.rdb")], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "RDB looks OK" in out.stdout
        before = xrange(a, "s"), a.seq(), a.info()["active_active_vc"]
        # An AOF rewrite's base carries the Active-Active form: the restart rebuilds it all.
        assert a.call("BGREWRITEAOF").startswith(b"Background")
        wait_until(lambda: _rewrite_done(a))
        out = subprocess.run([check_aof, manifest], capture_output=True, text=True, errors="replace")
        assert out.returncode == 0, out.stdout + out.stderr
        c.kill(0)
        c.restart(0)
        assert (xrange(a, "s"), a.seq(), a.info()["active_active_vc"]) == before
        assert a.call("XPENDING", "s", "g")[0] == 3
        # DEBUG RELOAD: the RDB round trip (module values and aa-state) on a live instance.
        assert a.call("DEBUG", "RELOAD") == b"OK"
        assert (xrange(a, "s"), a.seq(), a.info()["active_active_vc"]) == before


def test_redis_server_replica_equals_the_active_active_instance():
    with Cluster(2) as c:
        a, b = c[0], c[1]
        for i in range(30):
            a.call("XADD", "s", "*", "n", str(i))
            b.call("XADD", "s", "*", "m", str(i))
            b.call("XADD", "t", "*", "m", str(i))
        a.call("XGROUP", "CREATE", "s", "g", "0")
        c.sync()
        # The full sync starts at once (by default the master waits 5 s for more replicas).
        assert a.call("CONFIG", "SET", "repl-diskless-sync-delay", "0") == b"OK"
        replica = start_redis("--replicaof", "127.0.0.1", str(a.port))
        try:
            rc = RawClient(replica.port)
            wait_until(lambda: b"master_link_status:up" in rc.call("INFO", "replication"))
            wait_until(lambda: xrange(rc, "s") == xrange(a, "s") and xrange(rc, "t") == xrange(a, "t"))
            # Remote effects keep arriving: appends after the last ID, entries landing before
            # it, deletions, trims, group changes and TTLs, each mirrored to the replica.
            for i in range(30, 60):
                b.call("XADD", "s", "*", "m", str(i))
                a.call("XADD", "s", "*", "n", str(i))
            b.call("XDEL", "s", ids(xrange(b, "s"))[3])
            b.call("XTRIM", "t", "MAXLEN", "10")
            b.call("XGROUP", "CREATE", "t", "h", "$")
            b.call("PEXPIRE", "t", "100000000")
            c.sync()
            b.call("XGROUP", "DESTROY", "s", "g")
            b.call("XADD", "u", "*", "x", "1")
            b.call("DEL", "u")
            c.sync()

            def same() -> bool:
                return all(xrange(rc, k) == xrange(a, k) for k in ("s", "t", "u"))

            wait_until(same)
            assert rc.call("XINFO", "GROUPS", "s") == a.raw("XINFO", "GROUPS", "s") == b"*0\r\n"
            assert [g[1] for g in c[0].call("XINFO", "GROUPS", "t")] == [b"h"]
            assert rc.call("PTTL", "t") != b":-1\r\n"
            assert rc.call("EXISTS", "u") == b":0\r\n"
            # A peer's acknowledged prefix moves the group here and drops pending entries:
            # the replica's group follows (rebuilt), local deliveries included.
            a.call("XGROUP", "CREATE", "t", "k", "0")
            c.sync()
            a.call("XREADGROUP", "GROUP", "k", "alice", "COUNT", "2", "STREAMS", "t", ">")
            got = b.call("XREADGROUP", "GROUP", "k", "bob", "COUNT", "6", "STREAMS", "t", ">")
            b.call("XACK", "t", "k", *[e[0] for e in got[0][1]])
            c.sync()

            def group_view(reply: bytes) -> list:
                return [g[1:8:2] for g in decode(reply)]  # name, consumers, pending, last-delivered-id

            wait_until(lambda: group_view(rc.call("XINFO", "GROUPS", "t")) == group_view(a.raw("XINFO", "GROUPS", "t")))
            assert rc.call("XPENDING", "t", "k") == a.raw("XPENDING", "t", "k")
            assert group_view(a.raw("XINFO", "GROUPS", "t"))[1][2] == 0  # the peer's prefix covered alice's
            rc.close()
        finally:
            replica.stop()
