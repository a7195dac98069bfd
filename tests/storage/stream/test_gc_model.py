"""Model-based check of stream deletions, reference policies and node GC: random
XADD/XDEL/XDELEX/XACKDEL/XTRIM/XREADGROUP sequences run on a stream without GC (Redis's
layout), one with GC and small nodes, and a plain-dict model; every reply and the
visible state must agree, and every node must stay a valid Redis stream node."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.stream import (
    ID_MAX,
    REF_ACKED,
    REF_DEL,
    REF_KEEP,
    Stream,
    make_id,
    validate_node,
)


class NoGC(Stream):
    gc_ratio = 0.0
    node_max_entries = 8


class WithGC(Stream):
    gc_ratio = 0.5
    node_max_entries = 8


class Model:
    def __init__(self) -> None:
        self.entries: dict[int, list[bytes]] = {}
        self.last_delivered = 0
        self.pel: set[int] = set()

    def referenced(self, sid: int) -> bool:
        return sid in self.pel or sid > self.last_delivered

    def delete(self, sid: int, policy: int) -> int:
        if sid not in self.entries:
            if policy == REF_DEL:
                self.pel.discard(sid)
            return -1
        if policy == REF_ACKED and self.referenced(sid):
            return 2
        del self.entries[sid]
        if policy == REF_DEL:
            self.pel.discard(sid)
        return 1


def apply(s: Stream, op: tuple) -> object:
    kind = op[0]
    if kind == "add":
        return s.add(op[2], op[1])
    if kind == "del":
        return s.delete(op[1])
    if kind == "delex":
        return s.delete_ex(op[1], op[2])
    if kind == "ackdel":
        g = s.get_group(b"g")
        g.ack(op[1])
        return s.delete_ex(op[1], op[2])
    if kind == "trim":
        return s.trim_maxlen(op[1], False, 0, op[2])
    if kind == "read":
        g = s.get_group(b"g")
        c, _ = g.get_or_create_consumer(b"c", 0)
        return [sid for sid, _ in s.read_group(g, c, op[1], 0)]
    raise AssertionError(kind)


def apply_model(m: Model, op: tuple) -> object:
    kind = op[0]
    if kind == "add":
        m.entries[op[1]] = op[2]
        return op[1]
    if kind == "del":
        return m.entries.pop(op[1], None) is not None
    if kind == "delex":
        return m.delete(op[1], op[2])
    if kind == "ackdel":
        m.pel.discard(op[1])
        return m.delete(op[1], op[2])
    if kind == "trim":
        removed = 0
        for sid in sorted(m.entries):
            if len(m.entries) <= op[1]:
                break
            if op[2] == REF_ACKED and m.referenced(sid):
                continue
            del m.entries[sid]
            if op[2] == REF_DEL:
                m.pel.discard(sid)
            removed += 1
        return removed
    if kind == "read":
        got = [sid for sid in sorted(m.entries) if sid > m.last_delivered][: op[1] or None]
        if got:
            m.last_delivered = got[-1]
        m.pel.update(got)
        return got
    raise AssertionError(kind)


policies = st.sampled_from([REF_KEEP, REF_DEL, REF_ACKED])
ids = st.integers(1, 120).map(lambda i: make_id(i, 0))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("del"), ids),
        st.tuples(st.just("delex"), ids, policies),
        st.tuples(st.just("ackdel"), ids, policies),
        st.tuples(st.just("trim"), st.integers(0, 60), policies),
        st.tuples(st.just("read"), st.integers(0, 10)),
    ),
    max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 120), ops, st.booleans(), st.booleans())
def test_random_sequences_agree_with_model_gc_on_and_off(n, seq, same_fields, big):
    # ``big`` values make nodes larger than the size below which a compacted node moves to
    # a new exact copy, so compaction also runs inside the node's own buffer.
    m = Model()
    streams = [NoGC(), WithGC()]
    for s in streams:
        s.create_group(b"g", 0, 0)
    pad = b"." * 60 if big else b""
    adds = [("add", make_id(i, 0), [b"f", b"%d" % i + pad] if same_fields or i % 3 else [b"x%d" % i, b"v"])
            for i in range(1, n + 1)]
    for op in adds + seq:
        want = apply_model(m, op)
        got = [apply(s, op) for s in streams]
        assert got[0] == got[1] == want, op
    for s in streams:
        assert s.range() == sorted(m.entries.items())
        assert s.range(0, ID_MAX, 5, rev=True) == sorted(m.entries.items(), reverse=True)[:5]
        assert s.length == len(m.entries)
        assert set(s.get_group(b"g").pel.keys()) == m.pel
        for _key, lp in s.nodes():
            assert validate_node(lp, deep=True)
    a, b = streams
    assert (a.first_id, a.last_id, a.max_deleted_entry_id, a.entries_added) == (
        b.first_id, b.last_id, b.max_deleted_entry_id, b.entries_added)
    # Compaction never moves node boundaries (XINFO and ``~`` trims see Redis's layout).
    assert [k for k, _ in a.nodes()] == [k for k, _ in b.nodes()]


def test_gc_after_random_90_percent_deletion_is_much_smaller():
    import random

    rnd = random.Random(3)
    a, b = NoGC(), WithGC()
    a.node_max_entries = b.node_max_entries = 100
    for i in range(1, 5001):
        for s in (a, b):
            s.add([b"f", b"%d" % i], make_id(i, 0))
    for i in rnd.sample(range(1, 5001), 4500):
        assert a.delete(make_id(i, 0)) and b.delete(make_id(i, 0))
    assert a.range() == b.range()
    assert b.memory_usage(0) * 3 < a.memory_usage(0)
    # The tail node is an ordinary append target after GC.
    for s in (a, b):
        s.add([b"f", b"new"], make_id(6000, 0))
    assert a.range() == b.range()


def test_compaction_keeps_a_big_node_in_its_buffer_until_it_is_small():
    """A node bigger than _GC_MOVE_BYTES compacts inside its own bytearray (no new block for
    each halving); once compacted to that size or less it moves into an exact ``bytes``. At
    every step the node is a valid Redis node holding exactly the live entries and its two
    edges, and MEMORY USAGE counts the buffer the node really holds."""
    from rill.storage.stream.stream import _GC_MOVE_BYTES

    s = WithGC()
    s.node_max_entries = 100
    for i in range(1, 201):  # two nodes of 100; the first is closed
        s.add([b"f", b"v%03d" % i], make_id(i, 0))
    key = make_id(1, 0)
    live = set(range(1, 101))
    buffers = []
    moved = False
    for i in range(2, 100):  # the edges stay: compaction keeps them anyway
        before = s._rax.get(key)
        assert s.delete(make_id(i, 0))
        live.discard(i)
        lp = s._rax.get(key)
        assert validate_node(lp, deep=True)
        if not moved:
            if type(lp) is bytes:
                # The move: a compaction at or under the threshold, from a bigger buffer.
                moved = True
                assert len(lp) <= _GC_MOVE_BYTES < len(before)
            else:
                buffers.append((lp, len(lp)))
        got = [sid for sid, _ in s.range(make_id(1, 0), make_id(100, 0))]
        assert got == [make_id(j, 0) for j in sorted(live)]
    # One buffer from the first XDEL to the last compaction inside it (several ran: the
    # node shrank at least twice before it moved).
    assert moved and all(b is buffers[0][0] for b, _n in buffers)
    sizes = [n for _b, n in buffers]
    assert sum(1 for a, b in zip(sizes, sizes[1:], strict=False) if b < a) >= 2
    assert s.range(make_id(1, 0), make_id(100, 0)) == [(make_id(1, 0), [b"f", b"v001"]),
                                                       (make_id(100, 0), [b"f", b"v100"])]
    assert s.memory_usage(0) >= sum(sys.getsizeof(n) for _k, n in s.raw_nodes())
