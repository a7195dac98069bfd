"""Node accounting as Redis keeps it (issue 20, finding 5): deleted entries count toward
stream-node-max-entries and -bytes, and node compaction (rill's GC) never changes what Redis's
layout decides -- where nodes split, which nodes ``~`` trims remove, XINFO's radix-tree
counters.

A stream with GC on is run next to one with GC off (whose nodes are Redis's bytes, as the
server-level tests against redis-server check) and the two must agree, node for node, on
everything Redis reads: node keys, live counts, deleted counts and byte sizes as Redis's
copy has them, and the first and last entry IDs (tombstones included)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from rill.storage.stream import (
    Stream,
    default_trim_limit,
    make_id,
    node_counts,
    validate_node,
)
from rill.storage.stream.node import _node_edge_id


class Limits(Stream):
    """Node limits shared by both streams of a test (the server's CONFIG globals)."""

    node_max_entries = 4
    node_max_bytes = 4096


class NoGC(Limits):
    gc_ratio = 0.0


class WithGC(Limits):
    gc_ratio = 0.5


def redis_layout(s: Stream) -> list[tuple[int, int, int, int, int | None, int | None]]:
    """Per node what Redis's copy of it holds: key, live and deleted counts, byte size,
    first and last entry ID (tombstones included)."""
    out = []
    for key, lp in s.raw_nodes():
        count, deleted = node_counts(lp)
        deleted, extra = s._redis_accounting(key, deleted)
        out.append((key, count, deleted, len(lp) + extra,
                    _node_edge_id(key, lp, True), _node_edge_id(key, lp, False)))
    return out


def apply(s: Stream, op: tuple) -> object:
    kind = op[0]
    if kind == "add":
        _, sid, fv = op
        if sid <= s.last_id:
            return "old"
        return s.add(fv, sid)
    if kind == "del":
        return s.delete(op[1])
    if kind == "maxlen":
        _, n, approx, limit = op
        return s.trim_maxlen(n, approx, limit if approx else 0)
    if kind == "minid":
        _, sid, approx, limit = op
        return s.trim_minid(sid, approx, limit if approx else 0)
    raise AssertionError(kind)


def check_pair(a: Stream, b: Stream) -> None:
    assert redis_layout(a) == redis_layout(b)
    assert b.range() == a.range()
    assert (a.length, a.first_id, a.edge_id(True, False)) == (b.length, b.first_id, b.edge_id(True, False))
    assert a.node_count() == b.node_count() and a.rax_node_count() == b.rax_node_count()
    for _key, lp in b.nodes():
        assert validate_node(lp, deep=True)


def run_pair(ops: list[tuple]) -> tuple[Stream, Stream]:
    a, b = NoGC(), WithGC()
    saved = Limits.node_max_entries, Limits.node_max_bytes
    try:
        for op in ops:
            if op[0] == "cfg":
                Limits.node_max_entries, Limits.node_max_bytes = op[1], op[2]
                continue
            assert apply(a, op) == apply(b, op), op
            check_pair(a, b)
    finally:
        Limits.node_max_entries, Limits.node_max_bytes = saved
    return a, b


# -- unit cases -----------------------------------------------------------------------------


def fill(s: Stream, lo: int, hi: int) -> None:
    for i in range(lo, hi + 1):
        s.add([b"f", b"v%d" % i], make_id(i, 0))


def test_xdel_counts_toward_max_entries():
    """Four entries fill a node even when two of them were deleted before the fourth."""
    s = NoGC()
    fill(s, 1, 3)
    s.delete(make_id(2, 0))
    s.delete(make_id(3, 0))
    fill(s, 4, 5)
    assert [(k >> 64, node_counts(lp)) for k, lp in s.raw_nodes()] == [(1, (2, 2)), (5, (1, 0))]


def test_exact_trim_counts_toward_max_entries():
    s = NoGC()
    fill(s, 1, 2)
    assert s.trim_maxlen(1) == 1  # flags 1-0 inside the tail node
    fill(s, 3, 5)
    assert [(k >> 64, node_counts(lp)) for k, lp in s.raw_nodes()] == [(1, (3, 1)), (5, (1, 0))]


def test_compaction_keeps_node_edges_and_redis_counters():
    a, b = NoGC(), WithGC()
    for s in (a, b):
        fill(s, 1, 9)  # nodes 1-4, 5-8, 9 (tail)
        for i in (1, 2, 3, 6, 7):
            s.delete(make_id(i, 0))
    # Node 1..4 went to 1 live of 4: compacted, keeping tombstone 1 (first) and entry 4.
    lp = b._rax.get(make_id(1, 0))
    assert node_counts(lp) == (1, 1)
    assert _node_edge_id(make_id(1, 0), lp, True) == make_id(1, 0)
    check_pair(a, b)


def test_compacted_node_that_becomes_the_tail_again_keeps_redis_limits():
    """Every node after a compacted one goes: XADD must still see its four entries (and its
    bytes, with a byte limit) as Redis does and open a new node."""
    for max_entries, max_bytes in ((4, 4096), (0, 0), (0, 60), (6, 4096)):
        ops: list[tuple] = [("cfg", max_entries, max_bytes)]
        ops += [("add", make_id(i, 0), [b"f", b"v%d" % i]) for i in range(1, 13)]
        ops += [("del", make_id(i, 0)) for i in (2, 3, 4, 6, 7, 5, 8, 9, 10, 11, 12)]
        ops += [("add", make_id(20 + i, 0), [b"f", b"%d" % i]) for i in range(4)]
        a, b = run_pair(ops)
        assert b._ghost or max_entries == 0  # a compaction happened (not with one node)


def test_ghost_bytes_follow_the_deleted_counter_encoding():
    """Redis's deleted counter passes 127 (a wider integer) while the compacted node's stays
    small: the size Redis's copy has must include that difference."""
    ops: list[tuple] = [("cfg", 300, 0)]
    ops += [("add", make_id(i, 0), [b"f", b"v%d" % i]) for i in range(1, 301)]
    ops += [("cfg", 0, 0)]
    ops += [("add", make_id(301, 0), [b"f", b"x"])]  # still node 1 (no limit now)
    ops += [("cfg", 300, 0)]  # full again: the next entry opens node 2
    ops += [("add", make_id(302, 0), [b"f", b"x"])]
    ops += [("del", make_id(i, 0)) for i in range(2, 200)]
    a, b = run_pair(ops)
    assert node_counts(a._rax.get(make_id(1, 0)))[1] == 198
    assert node_counts(b._rax.get(make_id(1, 0)))[1] < 128 <= 198
    # Redis's node 1 is 301 entries at 4096+ bytes; with a byte limit just above its size
    # it takes no new entry once it is the tail again, and rill must agree.
    size = redis_layout(a)[0][3]
    run_pair(ops + [("del", make_id(302, 0)), ("cfg", 0, size + 4), ("add", make_id(303, 0), [b"f", b"y"])])
    run_pair(ops + [("del", make_id(302, 0)), ("cfg", 0, size + 3), ("add", make_id(303, 0), [b"f", b"y"])])


def test_minid_exact_trim_may_leave_an_empty_node_as_redis_does():
    """The node's last entry is a tombstone, so MINID cannot drop the node whole; its live
    entries are flagged and the node stays with count 0 (Redis keeps it, and XINFO counts it)."""
    ops: list[tuple] = [("add", make_id(i, 0), [b"f", b"x"]) for i in range(1, 9)]
    ops += [("del", make_id(4, 0)), ("minid", make_id(4, 0), False, 0)]
    a, b = run_pair(ops)
    assert node_counts(a._rax.get(make_id(1, 0))) == (0, 4)
    assert b.node_count() == 2
    # An empty node goes whole with the next trim that reaches it, even a ``~`` one.
    for s in (a, b):
        assert s.trim_maxlen(3, True) == 0
    check_pair(a, b)
    assert a.node_count() == 1


def test_copy_keeps_the_ghost_accounting():
    a, b = NoGC(), WithGC()
    for s in (a, b):
        fill(s, 1, 12)
        for i in (1, 2, 3):
            s.delete(make_id(i, 0))
    assert b._ghost
    c, d = a.copy(), b.copy()
    check_pair(c, d)
    for s in (c, d):  # node 1 becomes the tail again: Redis's copy is full (1 live + 3 deleted)
        for i in range(5, 13):
            s.delete(make_id(i, 0))
        fill(s, 13, 13)
    check_pair(c, d)
    assert c.node_count() == 2


# -- random sequences -----------------------------------------------------------------------

sids = st.builds(make_id, st.integers(1, 60), st.integers(0, 2))
values = st.one_of(st.binary(max_size=12), st.sampled_from([b"1", b"-7", b"12345678901"]))
adds = st.builds(
    lambda sid, same, v, n: ("add", sid, ([b"f", v] if same else [b"g%d" % n, v, b"h", v])),
    sids, st.booleans(), values, st.integers(0, 3),
)
op = st.one_of(
    adds, adds, adds,
    st.tuples(st.just("del"), sids),
    st.tuples(st.just("del"), sids),
    st.tuples(st.just("maxlen"), st.integers(0, 30), st.booleans(), st.integers(0, 12)),
    st.tuples(st.just("minid"), sids, st.booleans(), st.integers(0, 12)),
    st.tuples(st.just("cfg"), st.integers(0, 10), st.sampled_from([0, 40, 80, 150, 4096])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=80))
# Node 1 is compacted (3 of 4 deleted, node 5 after it), node 5 goes, node 1 is the tail again.
@example([("cfg", 4, 4096)] + [("add", make_id(i, 0), [b"f", b"v"]) for i in range(1, 9)]
         + [("del", make_id(i, 0)) for i in (2, 3, 4, 6, 7, 8, 5)] + [("add", make_id(9, 0), [b"f", b"v"])])
def test_gc_never_changes_the_redis_layout(ops):
    run_pair(ops)


def test_default_trim_limit_is_a_hundred_nodes_clamped():
    assert default_trim_limit(100) == 10000
    assert default_trim_limit(4) == 400
    assert default_trim_limit(0) == 10000
    assert default_trim_limit(20000) == 1000000


def test_gc_sweep_compacts_closed_nodes_only():
    """Deletions made while GC was off are collected by a sweep, except in the open tail."""
    a, b = NoGC(), NoGC()
    for s in (a, b):
        fill(s, 1, 12)
        for i in (1, 2, 3, 5, 6, 7, 9, 10, 11):
            s.delete(make_id(i, 0))
    saved = NoGC.gc_ratio
    try:
        NoGC.gc_ratio = 0.5
        b.gc()
    finally:
        NoGC.gc_ratio = saved
    assert [node_counts(lp) for _k, lp in b.raw_nodes()] == [(1, 1), (1, 1), (1, 3)]
    check_pair(a, b)
