"""The Active-Active merge state of strings, hashes, sets, sorted sets and geo on disk and on
plain replicas, with real rill-server processes (test_persistence.py does streams):

- kill -9 with appendfsync always loses no acknowledged write of any type, and the
  restarted instance keeps merging with its peer by the rules (concurrent writes after
  the restart: counters accumulate, adds win over removes they did not see, the longest
  TTL wins), which needs the merge state (cells, counters' totals, TTL registers) back,
  not only the values;
- the same through SAVE, an AOF rewrite then a restart, and DEBUG RELOAD; the files pass
  redis-check-aof and redis-check-rdb;
- a redis-server 7.0.15 replica of an Active-Active instance holds what it holds while a
  peer's writes of every type arrive.
"""

from __future__ import annotations

import glob
import os
import subprocess

from tests.server.activeactive.cluster import Cluster, ReplyError, decode
from tests.server.activeactive.convergence import type_snapshot
from tests.server.activeactive.test_persistence import _rewrite_done
from tests.support import RawClient, require_tool, start_redis, wait_until

# Writes of every type, region 1's then region 2's (both before the first sync).
WRITES_1 = [
    ("SET", "s", "hello"), ("APPEND", "s", " world"), ("SETRANGE", "s", 0, "J"),
    ("SETBIT", "bits", 7, 1), ("BITFIELD", "bits", "SET", "u8", "#1", 200),
    ("INCRBY", "n", 7), ("INCRBYFLOAT", "f", "1.5"), ("SETEX", "t", 5000, "x"),
    ("MSET", "m1", "a", "m2", "b"), ("GETDEL", "m2"), ("GETEX", "m1", "EX", 7000),
    ("HSET", "h", "a", "1", "b", "2"), ("HINCRBY", "h", "c", 3), ("HINCRBYFLOAT", "h", "d", "0.5"),
    ("HDEL", "h", "b"), ("HSETNX", "h", "e", "x"),
    ("SADD", "set", "a", "b", "c"), ("SREM", "set", "c"), ("SADD", "other", "b", "z"),
    ("SUNIONSTORE", "union", "set", "other"),
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZINCRBY", "z", "1.5", "a"), ("ZREM", "z", "c"),
    ("ZADD", "z", "GT", "CH", "5", "b"), ("ZRANGESTORE", "zcopy", "z", 0, -1),
    ("GEOADD", "geo", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
    ("EXPIRE", "h", 5000),
]
WRITES_2 = [
    ("INCRBY", "n", 3), ("HINCRBY", "h", "c", 10), ("SADD", "set", "x"), ("ZINCRBY", "z", 2, "a"),
    ("SET", "s2", "from 2"), ("HSET", "h2", "f", "v"), ("EXPIRE", "h", 9000),
]
# Region 1 writes these with its links paused, then is killed: only its AOF has them.
UNSHIPPED = [
    ("INCRBY", "n", 2), ("INCRBYFLOAT", "f", "0.25"), ("HINCRBY", "h", "c", 4), ("HSET", "h", "g", "7"),
    ("SADD", "set", "d"), ("SREM", "set", "b"), ("ZINCRBY", "z", 1, "a"), ("ZADD", "z", "7", "q"),
    ("SET", "s3", "unshipped"), ("PEXPIRE", "set", 8000000), ("DEL", "zcopy"),
    ("GEOADD", "geo", "2.349014", "48.864716", "Paris"),
]


def run(node, writes) -> None:
    for w in writes:
        node.call(*w)


def view(node) -> dict:
    """Every key's type, value (unordered ones sorted), absolute expiry, and the digest."""
    return type_snapshot(node)


def converged(c) -> dict:
    views = [view(n) for n in c]
    for v in views[1:]:
        assert v == views[0]
    return views[0]


def merges_concurrent_writes(c) -> None:
    """Both regions write concurrently and the rules hold at both: the merge state of
    every type survived whatever region 1 went through."""
    r1, r2 = c
    before_n = int(r1.call("GET", "n"))
    before_c = int(r1.call("HGET", "h", "c"))
    r1.call("EXPIRE", "set", 1000)  # for the PERSIST below to change
    c.sync()
    c.pause_all()
    r1.call("INCRBY", "n", 100)
    r2.call("INCRBY", "n", 1000)
    r1.call("HINCRBY", "h", "c", 100)
    r2.call("HINCRBY", "h", "c", 1000)
    r1.call("HDEL", "h", "a")
    r2.call("HSET", "h", "a", "kept")  # add wins over a remove that did not see it
    r1.call("SREM", "set", "a")
    r2.call("SADD", "set", "a")
    r1.call("ZREM", "z", "a")
    r2.call("ZINCRBY", "z", 10, "a")  # the removal took what it saw: 10 remains
    r1.call("EXPIRE", "s", 100)
    r2.call("EXPIRE", "s", 20000)  # the longest wins
    r1.call("PERSIST", "set")
    r2.call("EXPIRE", "set", 5)  # PERSIST beats every TTL
    c.sync()
    v = converged(c)
    assert int(r1.call("GET", "n")) == before_n + 1100
    assert int(r1.call("HGET", "h", "c")) == before_c + 1100
    assert r1.call("HGET", "h", "a") == b"kept"
    assert r1.call("SISMEMBER", "set", "a") == 1
    assert r1.call("ZSCORE", "z", "a") == b"10"
    assert 19000 < r1.call("TTL", "s") <= 20000
    assert r1.call("TTL", "set") == -1
    assert v["keys"]


def test_kill_9_loses_no_acknowledged_write_of_any_type_and_merging_goes_on():
    with Cluster(2, appendonly=True) as c:
        r1, r2 = c
        run(r1, WRITES_1)
        run(r2, WRITES_2)
        c.sync()
        converged(c)
        assert r1.call("ACTIVEACTIVE", "PAUSE") == b"OK"
        run(r1, UNSHIPPED)
        before = view(r1)
        seq, vc = r1.seq(), r1.info()["active_active_vc"]
        c.kill(0)
        c.restart(0)
        assert view(r1) == before
        assert (r1.seq(), r1.info()["active_active_vc"]) == (seq, vc)
        c.wait_links()
        c.sync()
        after = converged(c)
        assert after["s3"][1] == b"unshipped" and r2.call("SISMEMBER", "set", "d") == 1
        merges_concurrent_writes(c)
        # And once more after a second kill, with region 2's writes in region 1's AOF.
        c.kill(0)
        c.restart(0)
        c.wait_links()
        c.sync()
        converged(c)
        merges_concurrent_writes(c)


def test_rdb_aof_rewrite_and_reload_keep_the_merge_state_and_pass_redis_checks():
    check_aof = require_tool("redis-check-aof")
    check_rdb = require_tool("redis-check-rdb")
    with Cluster(2, appendonly=True) as c:
        r1, r2 = c
        run(r1, WRITES_1)
        run(r2, WRITES_2)
        c.sync()
        workdir = r1.proc.workdir
        manifest = glob.glob(os.path.join(workdir, "appendonlydir", "*.manifest"))[0]

        def check_files() -> None:
            out = subprocess.run([check_aof, manifest], capture_output=True, text=True, errors="replace")
            assert out.returncode == 0, out.stdout + out.stderr
            assert r1.call("SAVE") == b"OK"
            out = subprocess.run([check_rdb, os.path.join(workdir, "dump.rdb")], capture_output=True,
                                 text=True, errors="replace")
            assert out.returncode == 0 and "RDB looks OK" in out.stdout, out.stdout + out.stderr

        check_files()
        # The rewrite's base holds the values and the aa-state (the cells); the incr file
        # after it, the writes since.
        assert r1.call("BGREWRITEAOF").startswith(b"Background")
        wait_until(lambda: _rewrite_done(r1))
        assert r1.call("ACTIVEACTIVE", "PAUSE") == b"OK"
        run(r1, UNSHIPPED)
        check_files()
        before = view(r1), r1.seq(), r1.info()["active_active_vc"]
        c.kill(0)
        c.restart(0)
        assert (view(r1), r1.seq(), r1.info()["active_active_vc"]) == before
        c.wait_links()
        c.sync()
        converged(c)
        merges_concurrent_writes(c)
        # DEBUG RELOAD: the RDB round trip on a live instance, then merging goes on.
        before = view(r1), r1.seq(), r1.info()["active_active_vc"]
        assert r1.call("DEBUG", "RELOAD") == b"OK"
        assert (view(r1), r1.seq(), r1.info()["active_active_vc"]) == before
        merges_concurrent_writes(c)
        check_files()


def values(node) -> dict:
    """view() without the digest: rill's DEBUG DIGEST is its own hash, not Redis's."""
    out = view(node)
    del out["digest"]
    return out


class Plain:
    """A redis-server connection read like a Node (decoded replies)."""

    def __init__(self, port: int) -> None:
        self.client = RawClient(port)

    def call(self, *args):
        value = decode(self.client.call(*args))
        if isinstance(value, Exception):
            raise ReplyError(str(value))
        return value


def test_redis_server_replica_equals_the_active_active_instance_under_every_type():
    with Cluster(2) as c:
        r1, r2 = c
        run(r1, WRITES_1)
        c.sync()
        # The full sync starts at once (by default the master waits 5 s for more replicas).
        assert r1.call("CONFIG", "SET", "repl-diskless-sync-delay", "0") == b"OK"
        replica = start_redis("--replicaof", "127.0.0.1", str(r1.port))
        try:
            rc = Plain(replica.port)
            wait_until(lambda: b"master_link_status:up" in rc.call("INFO", "replication"))
            wait_until(lambda: values(rc) == values(r1))
            # A peer's writes of every type arrive, concurrent with region 1's own.
            c.pause_all()
            run(r2, WRITES_2)
            run(r2, UNSHIPPED)
            r1.call("INCRBY", "n", 5)
            r1.call("HDEL", "h", "g")
            r1.call("SADD", "set", "local")
            c.sync()
            wait_until(lambda: values(rc) == values(r1))
            c.pause_all()
            r2.call("INCRBYFLOAT", "f", "0.1")
            r2.call("HINCRBYFLOAT", "h", "d", "0.2")
            r2.call("DEL", "bits")
            r2.call("SET", "h2", "now a string")  # another type replaces the key
            r2.call("SPOP", "other")
            r2.call("ZPOPMIN", "z")
            r2.call("ZUNIONSTORE", "zu", 2, "z", "zcopy")
            r2.call("GEOSEARCHSTORE", "near", "geo", "FROMLONLAT", 14, 38, "BYRADIUS", 300, "km", "ASC")
            r2.call("RENAME", "s", "renamed")
            r2.call("PERSIST", "h")
            r1.call("HSET", "h", "g", "again")
            r1.call("ZINCRBY", "z", 3, "b")
            c.sync()
            wait_until(lambda: values(rc) == values(r1))
            assert view(r1) == view(r2)
            # MULTI/EXEC at the peer: one effect, several keys and types.
            r2.call("MULTI")
            r2.call("INCR", "n")
            r2.call("HSET", "h", "m", "1")
            r2.call("SREM", "set", "a", "x")
            r2.call("ZADD", "z", "XX", "INCR", "1", "b")
            r2.call("EXEC")
            c.sync()
            wait_until(lambda: values(rc) == values(r1))
            assert view(r1) == view(r2)
        finally:
            replica.stop()


def test_a_replica_holds_the_float_counters_text_the_instance_holds():
    """An Active-Active float counter stores its exact sum rounded once, which drifts from
    the step-by-step long double sum the command computed (76.4802 against
    76.48019999999999999 after a hundred increments of 1.7, 0.1 and the like): the replica
    gets the stored text, not the command's."""
    with Cluster(1) as c:
        (r1,) = c
        # The full sync starts at once (by default the master waits 5 s for more replicas).
        assert r1.call("CONFIG", "SET", "repl-diskless-sync-delay", "0") == b"OK"
        replica = start_redis("--replicaof", "127.0.0.1", str(r1.port))
        try:
            rc = Plain(replica.port)
            wait_until(lambda: b"master_link_status:up" in rc.call("INFO", "replication"))
            steps = ["0.1", "1.7", "-0.35", "3.3333", "1e-3", "0.2"]
            for i in range(120):
                r1.call("INCRBYFLOAT", "f", steps[i % len(steps)])
                r1.call("HINCRBYFLOAT", "h", "x", steps[i % len(steps)])
                r1.call("ZINCRBY", "z", steps[i % len(steps)], "m")
            r1.call("MULTI")
            for i in range(20):
                r1.call("ZINCRBY", "z", steps[i % len(steps)], "m")
                r1.call("INCRBYFLOAT", "f", steps[i % len(steps)])
            r1.call("EXEC")
            r1.call("EVAL", "for i = 1, 20 do redis.call('ZINCRBY', KEYS[1], '1.7', 'm') end", 1, "z")
            r1.call("SET", "end", "1")
            wait_until(lambda: rc.call("EXISTS", "end") == 1)
            assert values(rc) == values(r1)
        finally:
            replica.stop()
