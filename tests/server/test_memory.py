"""used_memory (server/memory.py) against what CPython really allocates, and the INFO memory
section, MEMORY STATS and MEMORY DOCTOR next to Redis's."""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest
import rill.server.commands  # noqa: F401  (registers the command families)
from rill.server.memory import memory_of
from rill.server.server import Server

from tests.support import RawClient, encode_command, run_inproc, start_rill, wait_until


def _pairs(n: int, fmt: bytes) -> list[bytes]:
    out: list[bytes] = []
    for j in range(n):
        out += [b"%d.5" % j, fmt % j]
    return out


_R = random.Random(7)

# name -> (how many times, the commands of step i): each workload a few MB, of one type
# and one encoding, every value its own object (as values read off a socket are).
WORKLOADS = {
    "string-int": (30000, lambda i: [[b"SET", b"k%d" % i, b"%d" % (i * 7919)]]),
    "string-embstr": (30000, lambda i: [[b"SET", b"k%d" % i, b"%020d" % i]]),
    "string-raw": (1000, lambda i: [[b"SET", b"k%d" % i, b"%05000d" % i]]),
    "string-ttl": (30000, lambda i: [[b"SET", b"k%d" % i, b"%020d" % i, b"EX", b"1000"]]),
    "list-listpack": (3000, lambda i: [[b"RPUSH", b"l%d" % i] + [b"e%d-%d" % (i, j) for j in range(10)]]),
    "list-quicklist": (10, lambda i: [[b"RPUSH", b"l%d" % i] + [b"element-%d-%d" % (i, j) for j in range(5000)]]),
    "hash-listpack": (3000, lambda i: [[b"HSET", b"h%d" % i]
                                       + [x for j in range(10) for x in (b"f%d" % j, b"v%d-%d" % (i, j))]]),
    "hash-hashtable": (10, lambda i: [[b"HSET", b"h%d" % i]
                                      + [x for j in range(2000) for x in (b"field-%d" % j, b"value-%d" % j)]]),
    "set-intset": (3000, lambda i: [[b"SADD", b"s%d" % i] + [b"%d" % (i * 1000 + j) for j in range(10)]]),
    "set-hashtable": (10, lambda i: [[b"SADD", b"s%d" % i] + [b"member-%d-%d" % (i, j) for j in range(5000)]]),
    "zset-listpack": (3000, lambda i: [[b"ZADD", b"z%d" % i] + _pairs(10, b"m%d")]),
    "zset-skiplist": (10, lambda i: [[b"ZADD", b"z%d" % i]
                                     + [x for j in range(3000) for x in (b"%r" % _R.random(), b"member-%d" % j)]]),
    "stream": (1, lambda i: [[b"XADD", b"x%d" % (j % 2), b"*", b"f", b"value-%d" % j, b"g", b"w"]
                             for j in range(30000)]),
    "stream-groups": (1, lambda i: [[b"XADD", b"x", b"*", b"f", b"value-%d" % j] for j in range(20000)]
                      + [[b"XGROUP", b"CREATE", b"x", b"g", b"0"],
                         [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"10000", b"STREAMS", b"x", b">"]]),
}


def _figure_now(server: Server) -> int:
    """The figure with every database re-sampled (the cron would within a period)."""
    fig = memory_of(server)
    for sample in fig.samples:
        sample.at = 0.0
    fig.refresh()
    return fig.dataset() + sum(fig.db_overhead(db) for db in server.keyspace.dbs)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_the_figure_is_within_15_percent_of_what_tracemalloc_counts(name):
    times, step = WORKLOADS[name]
    server = Server()
    client = server.new_client()
    gc.collect()
    before = _figure_now(server)
    tracemalloc.start()
    try:
        start = tracemalloc.take_snapshot()
        for i in range(times):
            for argv in step(i):
                server.execute(client, argv)
            client.out.clear()
        gc.collect()
        end = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    true = sum(stat.size_diff for stat in end.compare_to(start, "filename"))
    figure = _figure_now(server) - before
    assert 0.85 <= figure / true <= 1.15, (name, figure, true)


def test_the_figure_falls_when_keys_go():
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    empty = fig.used()
    for i in range(5000):
        run_inproc(server, c, "SET", f"key:{i}", "v" * 100)
    full = fig.used()
    assert full - empty > 5000 * 100
    for i in range(2500):
        run_inproc(server, c, "DEL", f"key:{i}")
    half = fig.used()
    # the dict's table stays as large (as a Redis dict does until it resizes)
    assert full - half == pytest.approx(2500 * (full - empty) / 5000, rel=0.3)
    run_inproc(server, c, "FLUSHALL")
    fig.refresh()
    assert fig.used() - empty < 64 * 1024


def test_a_write_costs_the_figure_nothing_and_a_read_of_it_little():
    """No write path keeps a counter: the figure reads key counts, so it moves at once."""
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    run_inproc(server, c, "SET", "a", "x" * 50)
    fig.refresh()
    one = fig.used()
    run_inproc(server, c, "SET", "b", "y" * 50)
    assert fig.used() > one  # before any refresh


def _info(raw: bytes) -> dict[str, str]:
    text = raw.split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_info_memory_has_redis_fields_and_real_values(oracle_server):
    ours = start_rill()
    try:
        c = RawClient(ours.port)
        r = RawClient(oracle_server.port)
        mine, theirs = _info(c.call("INFO", "memory")), _info(r.call("INFO", "memory"))
        assert set(theirs) - set(mine) == set()
        assert int(mine["used_memory_rss"]) != int(mine["used_memory"])
        assert int(mine["used_memory_startup"]) <= int(mine["used_memory"])
        c.send_raw(b"".join(encode_command(["SET", f"k{i}", "v" * 1000]) for i in range(2000)))
        for _ in range(2000):
            assert c.read_reply() == b"+OK\r\n"
        full = _info(c.call("INFO", "memory"))
        assert int(full["used_memory_dataset"]) > 2000 * 1000
        assert float(full["mem_fragmentation_ratio"]) == pytest.approx(
            int(full["used_memory_rss"]) / int(full["used_memory"]), abs=0.02)
        stats = c.call("MEMORY", "STATS")
        their_stats = r.call("MEMORY", "STATS")
        for field in (b"peak.allocated", b"startup.allocated", b"replication.backlog", b"overhead.total",
                      b"keys.bytes-per-key", b"dataset.percentage", b"fragmentation.bytes"):
            assert field in stats and field in their_stats
        assert b"$4\r\ndb.0\r\n" in stats
        c.close()
        r.close()
    finally:
        ours.stop()


def test_memory_doctor_on_an_empty_server_says_what_redis_says(oracle_server):
    ours = start_rill()
    try:
        c = RawClient(ours.port)
        r = RawClient(oracle_server.port)
        r.call("FLUSHALL")
        assert c.call("MEMORY", "DOCTOR") == r.call("MEMORY", "DOCTOR")
        c.close()
        r.close()
    finally:
        ours.stop()


def test_memory_doctor_reports_a_peak():
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    for i in range(40000):
        run_inproc(server, c, "SET", f"key:{i}", "v" * 500)
    assert b"Peak memory" not in run_inproc(server, c, "MEMORY", "DOCTOR")
    for i in range(28000):
        run_inproc(server, c, "DEL", f"key:{i}")
    fig.refresh()
    report = run_inproc(server, c, "MEMORY", "DOCTOR")
    assert b" * Peak memory: In the past this instance used more than 150%" in report
    assert report.endswith(b"I'm here to keep you safe, Sam. I want to help you.\n\r\n")


def test_mem_replication_backlog_counts_the_backlog():
    from rill.server.disk import persistence_of

    server = Server()
    c = server.new_client()
    assert _info(run_inproc(server, c, "INFO", "memory"))["mem_replication_backlog"] == "0"
    persistence_of(server).master.backlog = bytearray(b"x" * 100_000)  # as PSYNC makes it
    memory_of(server).refresh()
    info = _info(run_inproc(server, c, "INFO", "memory"))
    assert info["mem_replication_backlog"] == "100000"


def test_mem_replication_backlog_once_a_replica_syncs():
    master, replica = start_rill(), start_rill()
    try:
        m, r = RawClient(master.port), RawClient(replica.port)
        assert _info(m.call("INFO", "memory"))["mem_replication_backlog"] == "0"
        r.call("REPLICAOF", "127.0.0.1", str(master.port))
        wait_until(lambda: b"master_link_status:up" in r.call("INFO", "replication"))
        m.call("SET", "k", "v" * 1000)
        wait_until(lambda: int(_info(m.call("INFO", "memory"))["mem_replication_backlog"]) >= 1000)
        m.close()
        r.close()
    finally:
        replica.stop()
        master.stop()
