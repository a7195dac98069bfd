"""The chaos proxy on its own, between clients and plain rill-servers: it forwards bytes
unchanged and in order, its delays keep order, its cuts and partitions break connections,
and a replica following its master through it under chaos still ends equal to it."""

from __future__ import annotations

import socket

import pytest

from tests.server.activeactive.proxy import ChaosProxy
from tests.support import RawClient, start_rill, wait_until


@pytest.fixture(scope="module")
def server():
    srv = start_rill()
    yield srv
    srv.stop()


def test_forwards_requests_and_replies_unchanged(server):
    with ChaosProxy(server.port, seed=1) as proxy:
        c = RawClient(proxy.port)
        assert c.call("PING") == b"+PONG\r\n"
        big = b"x" * 1_000_000
        assert c.call("SET", "proxy:big", big) == b"+OK\r\n"
        assert c.call("GET", "proxy:big") == b"$1000000\r\n" + big + b"\r\n"
        c.call("DEL", "proxy:big")
        c.close()
        assert proxy.accepted == 1 and proxy.bytes > 2_000_000


def test_delays_keep_the_order_of_pipelined_replies(server):
    with ChaosProxy(server.port, seed=2) as proxy:
        proxy.chaos(max_delay=0.005, cut_every=0)
        c = RawClient(proxy.port)
        c.call("DEL", "proxy:n")
        # Many small writes, so the chunks (and their random delays) are many too.
        for _ in range(100):
            c.send_raw(b"INCR proxy:n\r\n")
        replies = [c.read_reply() for _ in range(100)]
        assert replies == [b":%d\r\n" % i for i in range(1, 101)]
        c.call("DEL", "proxy:n")
        c.close()


def test_cut_and_partition_break_connections(server):
    with ChaosProxy(server.port, seed=3) as proxy:
        c = RawClient(proxy.port)
        assert c.call("PING") == b"+PONG\r\n"
        proxy.cut()
        assert c.closed_by_peer()
        c.close()
        proxy.partition()
        wait_until(lambda: proxy.refusing)
        refused = RawClient(proxy.port)
        assert refused.closed_by_peer()
        refused.close()
        assert proxy.refused == 1
        proxy.partition(False)
        wait_until(lambda: not proxy.refusing)
        c = RawClient(proxy.port)
        assert c.call("PING") == b"+PONG\r\n"
        c.close()
        assert proxy.cuts >= 1


def test_the_same_seed_makes_the_same_schedule():
    a, b = ChaosProxy(1, seed=7), ChaosProxy(1, seed=7)
    assert [a.rng.random() for _ in range(5)] == [b.rng.random() for _ in range(5)]


def test_a_replica_through_the_proxy_under_chaos_ends_equal_to_its_master():
    """Two plain rill-servers, the replica's link to its master through the proxy: cut
    and delayed while the master takes writes, then calm; the replica ends equal."""
    master = start_rill()
    proxy = ChaosProxy(master.port, seed=4).start()
    replica = start_rill()
    try:
        m, r = RawClient(master.port), RawClient(replica.port)
        assert r.call("REPLICAOF", "127.0.0.1", proxy.port) == b"+OK\r\n"
        wait_until(lambda: b"master_link_status:up" in r.call("INFO", "replication"))
        proxy.chaos(max_delay=0.01, cut_every=0.3)
        for i in range(300):
            m.call("XADD", "s", "*", "i", i)
            if i % 50 == 0:
                m.call("SET", f"k{i}", i)
        wait_until(lambda: proxy.cuts >= 1, timeout=10)
        proxy.calm()
        want = m.call("XRANGE", "s", "-", "+")
        wait_until(lambda: r.call("XRANGE", "s", "-", "+") == want, timeout=30)
        assert r.call("DBSIZE") == m.call("DBSIZE")
        # The replica comes back after a cut (the last cut may fall after the last write
        # went through, so it need not have come back before it was equal).
        wait_until(lambda: proxy.accepted >= 2, timeout=30)
        m.close()
        r.close()
    finally:
        replica.stop()
        proxy.stop()
        master.stop()


def test_stop_closes_the_listener(server):
    proxy = ChaosProxy(server.port, seed=5).start()
    port = proxy.port
    proxy.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
