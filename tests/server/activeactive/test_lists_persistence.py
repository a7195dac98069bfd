"""Active-Active lists on disk and on plain replicas, with real rill-server processes: kill -9
with appendfsync always loses no acknowledged list write and the positions survive (the
restarted region keeps merging concurrent pushes, pops and inserts in the agreed order);
a redis-server replica follows the merged list."""

from __future__ import annotations

from tests.server.activeactive.cluster import Cluster
from tests.server.activeactive.test_types_persistence import Plain, values, view
from tests.support import start_redis, wait_until


def lists(node) -> dict:
    return {k: node.call("LRANGE", k, 0, -1) for k in ("L", "Q", "M")}


def test_kill_9_keeps_every_acknowledged_list_write_and_the_order_rules():
    with Cluster(2, appendonly=True) as c:
        r1, r2 = c
        r1.call("RPUSH", "L", *"abcdef")
        r2.call("LPUSH", "Q", "q1", "q2")
        c.sync()
        assert r1.call("ACTIVEACTIVE", "PAUSE") == b"OK"
        r1.call("LINSERT", "L", "AFTER", "c", "c2")
        r1.call("LPOP", "L")
        r1.call("LSET", "L", 0, "B")
        r1.call("LMOVE", "L", "M", "RIGHT", "LEFT")
        r1.call("LREM", "Q", 0, "q1")
        before = lists(r1)
        c.kill(0)
        c.restart(0)
        assert lists(r1) == before
        c.wait_links()
        c.sync()
        assert lists(r1) == lists(r2) == before
        # The positions came back too: concurrent inserts after the restart merge alike.
        c.pause_all()
        r1.call("LINSERT", "L", "AFTER", "c", "from1")
        r2.call("LINSERT", "L", "AFTER", "c", "from2")
        r2.call("RPOP", "L")
        r1.call("LPUSH", "Q", "q3")
        c.sync()
        assert lists(r1) == lists(r2)
        assert view(r1) == view(r2)
        r1.call("DEBUG", "RELOAD")
        c.pause_all()
        r1.call("RPUSH", "L", "after-reload")
        r2.call("LPUSH", "L", "other")
        c.sync()
        assert view(r1) == view(r2)


def test_redis_server_replica_follows_merged_lists():
    with Cluster(2) as c:
        r1, r2 = c
        r1.call("RPUSH", "L", *"abcdef")
        c.sync()
        # The full sync starts at once (by default the master waits 5 s for more replicas).
        assert r1.call("CONFIG", "SET", "repl-diskless-sync-delay", "0") == b"OK"
        replica = start_redis("--replicaof", "127.0.0.1", str(r1.port))
        try:
            rc = Plain(replica.port)
            wait_until(lambda: b"master_link_status:up" in rc.client.call("INFO", "replication"))
            wait_until(lambda: values(rc) == values(r1))
            c.pause_all()
            r2.call("RPUSH", "L", "tail")
            r2.call("LPUSH", "L", "head")
            r2.call("LINSERT", "L", "BEFORE", "d", "mid")
            r2.call("LREM", "L", 0, "b")
            r2.call("LSET", "L", 2, "C")
            r1.call("RPUSH", "L", "mine")
            c.sync()
            wait_until(lambda: values(rc) == values(r1))
            r2.call("DEL", "L")
            c.sync()
            wait_until(lambda: values(rc) == values(r1))
            assert rc.call("EXISTS", "L") == 0
        finally:
            replica.stop()
