"""Active-Active lists (lists.py, storage/activelist.py) on real instances, following Redis
Enterprise's list tables, and in-process for the orders and full syncs."""

from __future__ import annotations

import time

import pytest
from rill.server.activeactive.state import dump_state, merge_state
from rill.storage.activelist import between

from tests.server.activeactive.test_engine import Region, sync
from tests.support import Waiter


@pytest.fixture
def cluster(pooled_cluster):
    """Clusters shared across this module's tests, each handed over clean (conftest's
    ClusterPool): the tests change keys only."""
    return pooled_cluster


def lrange(n):
    return n.call("LRANGE", "L", 0, -1)


def same(c):
    replies = [lrange(n) for n in c]
    assert all(r == replies[0] for r in replies), replies
    return replies[0]


def test_between_orders_positions():
    a = between(None, None, (1, 1, 0))
    b = between(a, None, (1, 1, 1))
    x = between(a, b, (2, 5, 0))
    y = between(a, b, (1, 7, 0))
    assert a < x < b and a < y < b and x != y
    z = between(x, y, (3, 1, 0)) if x < y else between(y, x, (3, 1, 0))
    assert min(x, y) < z < max(x, y)
    h = between(None, a, (1, 2, 0))
    assert h < a


def test_pushes_in_order_and_concurrent_inserts(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("LPUSH", "L", "hello")
    c.sync()
    r2.call("LPUSH", "L", "world")
    c.sync()
    assert same(c) == [b"world", b"hello"]
    # Concurrent insertions after the same element: both kept, one order everywhere.
    r1.call("DEL", "L")
    r1.call("LPUSH", "L", "x")
    c.sync()
    c.pause_all()
    r1.call("LINSERT", "L", "AFTER", "x", "y1")
    r2.call("LINSERT", "L", "AFTER", "x", "y2")
    c.sync()
    got = same(c)
    assert got[0] == b"x" and sorted(got[1:]) == [b"y1", b"y2"]


def test_del_removes_only_observed_elements(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("LPUSH", "L", "x")
    c.sync()
    c.pause_all()
    r1.call("LPUSH", "L", "y")
    r2.call("DEL", "L")
    c.sync()
    assert same(c) == [b"y"]


def test_concurrent_pops_may_return_the_same_element(cluster):
    c = cluster(2)
    r1, r2 = c
    r1.call("LPUSH", "L", "x", "y", "z")
    c.sync()
    assert r2.call("RPOP", "L") == b"x"
    c.sync()
    assert r1.call("RPOP", "L") == b"y"
    c.sync()
    c.pause_all()
    assert r1.call("RPOP", "L") == b"z"
    assert r2.call("RPOP", "L") == b"z"  # at-least-once
    c.sync()
    assert same(c) == []
    assert r1.call("EXISTS", "L") == r2.call("EXISTS", "L") == 0


def test_a_peers_push_wakes_a_blocked_pop(cluster):
    c = cluster(2)
    r1, r2 = c
    waiter = Waiter(r1.port)
    try:
        waiter.send("BLPOP", "L", "10")
        time.sleep(0.2)
        r2.call("RPUSH", "L", "a", "b")
        assert waiter.reply() == b"*2\r\n$1\r\nL\r\n$1\r\na\r\n"
    finally:
        waiter.close()
    c.sync()
    assert same(c) == [b"b"]


def test_every_list_write_converges(cluster):
    c = cluster(3)
    r1, r2, r3 = c
    r1.call("RPUSH", "L", *"abcdefgh")
    c.sync()
    c.pause_all()
    r1.call("LSET", "L", 0, "A")
    r2.call("LREM", "L", 0, "c")
    r3.call("LTRIM", "L", 1, -2)
    r1.call("LMOVE", "L", "M", "RIGHT", "LEFT")
    r2.call("RPOPLPUSH", "L", "L")
    r3.call("LINSERT", "L", "BEFORE", "e", "E")
    r1.call("EXPIRE", "L", 1000)
    c.sync()
    same(c)
    assert [n.call("LRANGE", "M", 0, -1) for n in c] == [[b"h"]] * 3
    digests = {n.call("DEBUG", "DIGEST") for n in c}
    assert len(digests) == 1


def test_lists_in_process_orders_and_full_sync():
    a, b, whole = Region(1), Region(2), Region(3)
    a("RPUSH", "L", "1", "2", "3")
    sync(a, b, whole)
    a("LPUSH", "L", "a0")
    a("LINSERT", "L", "AFTER", "2", "a2")
    b("RPUSH", "L", "b9")
    b("LREM", "L", "0", "2")
    b("LSET", "L", "0", "B1")
    a.send(whole)
    b.send(whole)
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    assert a("LRANGE", "L", "0", "-1") == b("LRANGE", "L", "0", "-1") == whole("LRANGE", "L", "0", "-1")
    assert b"a2" in whole("LRANGE", "L", "0", "-1") and b"$1\r\n2\r\n" not in whole("LRANGE", "L", "0", "-1")
