"""Convergence of ActiveStream: random local operations at 2-3 regions, each region's
journal shipped as effects and applied at the others in random causally allowed orders;
afterwards every region holds the same merged view (entries, groups, existence, top ID).

The harness plays the engine's part in miniature: effects carry their origin, sequence
and vector clock; a receiver applies an effect only after everything its origin had seen;
a group creation is dropped when it did not see a concurrent GDESTROY or DEL (the
tombstone rule, delete-wins).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.stream import ID_MAX, Stream, StreamIDError, make_id
from rill.storage.stream.active import ID_MODES, ActiveStream

KINDS = (
    "xadd", "xadd", "xadd", "xadd_ms", "xadd_full", "xdel", "xtrim_len", "xtrim_minid", "del",
    "gcreate", "gdestroy", "readgroup", "ack", "setid", "deliver", "deliver",
)
GROUPS = (b"g1", b"g2", b"g3")


class Region:
    def __init__(self, r: int) -> None:
        self.r = r
        self.s = ActiveStream(r)
        self.clock = 1000
        self.seq = 0
        self.applied: dict[int, int] = {}
        self.tombs: list[tuple[bytes | None, int, int]] = []  # (group or None = DEL, origin, seq)

    def vc(self) -> dict[int, int]:
        vc = dict(self.applied)
        vc[self.r] = self.seq
        return vc

    def can_apply(self, e) -> bool:
        origin, seq, vc, _ops = e
        if self.applied.get(origin, 0) != seq - 1:
            return False
        return all(self.applied.get(q, 0) >= n for q, n in vc.items() if q not in (origin, self.r))

    def apply(self, e) -> None:
        origin, seq, vc, ops = e
        for op in ops:
            if op[0] == b"GCREATE" and any(
                (g is None or g == op[1]) and vc.get(o, 0) < n for g, o, n in self.tombs
            ):
                continue
            self.s.apply(op)
            self._tomb(op, origin, seq)
        self.applied[origin] = seq

    def _tomb(self, op: list[bytes], origin: int, seq: int) -> None:
        if op[0] == b"GDESTROY":
            self.tombs.append((op[1], origin, seq))
        elif op[0] == b"DEL":
            self.tombs.append((None, origin, seq))


def local_op(reg: Region, kind: str, rnd: random.Random) -> list[list[bytes]]:
    """One local command's effect on the stream; its ops (the drained journal)."""
    s = reg.s
    reg.clock += rnd.randrange(3)
    fv = [b"f", b"%d" % rnd.randrange(100)] if rnd.random() < 0.7 else [b"a", b"1", b"b", b"2"]
    pre: list[list[bytes]] = []
    try:
        if kind == "xadd":
            s.add(fv, None, reg.clock)
        elif kind == "xadd_ms":
            ms = reg.clock - rnd.randrange(3)
            s.add(fv, s.explicit_id(make_id(ms, 0), True))
        elif kind == "xadd_full":
            s.add(fv, s.explicit_id(make_id(reg.clock - rnd.randrange(3), rnd.randrange(4))))
        elif kind == "xdel":
            ents = s.range()
            for sid, _fv in rnd.sample(ents, min(len(ents), rnd.randrange(1, 3))):
                s.delete(sid)
        elif kind == "xtrim_len":
            s.trim_maxlen(rnd.randrange(s.length + 1), rnd.random() < 0.5,
                          rnd.choice((0, 0, 2, 5)) if rnd.random() < 0.5 else 0)
        elif kind == "xtrim_minid":
            ents = s.range()
            minid = rnd.choice(ents)[0] if ents and rnd.random() < 0.8 else make_id(reg.clock, 0)
            s.trim_minid(minid, rnd.random() < 0.5)
        elif kind == "del":
            if not s.is_gone():
                op = [b"DEL", *s.observed()]
                s.apply(op)
                reg._tomb(op, reg.r, reg.seq + 1)
                pre.append(op)
        elif kind == "gcreate":
            name = rnd.choice(GROUPS)
            if s.get_group(name) is None:
                s.create_group(name, 0 if rnd.random() < 0.5 else s.last_id)
        elif kind == "gdestroy":
            name = rnd.choice(GROUPS)
            if s.destroy_group(name):
                reg._tomb([b"GDESTROY", name], reg.r, reg.seq + 1)
        elif kind == "readgroup":
            groups = s.groups()
            if groups:
                g = rnd.choice(groups)
                c, _ = g.get_or_create_consumer(rnd.choice((b"alice", b"bob")), reg.clock)
                s.read_group(g, c, rnd.randrange(4), reg.clock, rnd.random() < 0.2)
        elif kind == "ack":
            for g in s.groups():
                pending = list(g.pel.keys())
                if pending:
                    g.ack_many(rnd.sample(pending, rnd.randrange(1, len(pending) + 1)))
        elif kind == "setid":
            if s.last_id < ID_MAX - 10:
                s.set_id(s.last_id + rnd.randrange(3), s.entries_added + rnd.randrange(2))
    except StreamIDError:
        pass  # refused, as the command would be: nothing recorded
    return pre + s.drain()


def deliver_one(regions: list[Region], outbox: list[tuple], rnd: random.Random,
                receiver: Region | None = None) -> bool:
    """Apply one causally ready effect somewhere (at ``receiver`` when given)."""
    cands = []
    for reg in regions if receiver is None else [receiver]:
        for e in outbox:
            if e[0] != reg.r and reg.applied.get(e[0], 0) < e[1] and reg.can_apply(e):
                cands.append((reg, e))
    if not cands:
        return False
    reg, e = rnd.choice(cands)
    reg.apply(e)
    return True


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 3),
    mode=st.sampled_from(ID_MODES),
    steps=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(KINDS), st.integers(0, 2**32)),
                   max_size=60),
    order=st.randoms(use_true_random=False),
)
def test_regions_converge(n, mode, steps, order):
    saved = ActiveStream.id_mode, Stream.node_max_entries
    ActiveStream.id_mode = mode
    Stream.node_max_entries = 4  # several nodes per sub-stream, whole-node trims
    try:
        regions = [Region(r + 1) for r in range(n)]
        outbox: list[tuple] = []
        for who, kind, seed in steps:
            reg = regions[who % n]
            rnd = random.Random(seed)
            if kind == "deliver":
                deliver_one(regions, outbox, rnd, reg)
                continue
            ops = local_op(reg, kind, rnd)
            if ops:
                vc = reg.vc()
                reg.seq += 1
                outbox.append((reg.r, reg.seq, vc, ops))
        while deliver_one(regions, outbox, order):
            pass
        for reg in regions:
            assert all(reg.applied.get(o.r, 0) == o.seq for o in regions if o is not reg)
        first = regions[0].s
        for reg in regions[1:]:
            s = reg.s
            assert s.range() == first.range()
            assert s.range(rev=True) == first.range(rev=True)
            assert [g.name for g in s.groups()] == [g.name for g in first.groups()]
            assert s.is_gone() == first.is_gone()
            assert (s.length, s.last_id, s.first_id) == (first.length, first.last_id, first.first_id)
            assert s.to_plain().range() == first.to_plain().range()
    finally:
        ActiveStream.id_mode, Stream.node_max_entries = saved


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 3),
    steps=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(("xadd", "xadd", "deliver", "read")),
                             st.integers(0, 2**32)), max_size=80),
    order=st.randoms(use_true_random=False),
)
def test_xreadgroup_never_skips(n, steps, order):
    """One group, created at 0 before any write; region 1 reads ``>`` now and then while
    the others write concurrently and effects arrive in any causal order: in the end it
    has delivered every entry exactly once."""
    regions = [Region(r + 1) for r in range(n)]
    outbox: list[tuple] = []
    regions[0].s.create_group(b"g", 0)
    outbox.append((1, 1, {}, regions[0].s.drain()))
    regions[0].seq = 1
    s1 = regions[0].s
    delivered: list[int] = []

    def read(count: int) -> None:
        g = s1.get_group(b"g")
        c, _ = g.get_or_create_consumer(b"c", 0)
        delivered.extend(sid for sid, _fv in s1.read_group(g, c, count))

    for who, kind, seed in steps:
        reg = regions[who % n]
        rnd = random.Random(seed)
        if kind == "deliver":
            deliver_one(regions, outbox, rnd, reg)
        elif kind == "read":
            read(rnd.randrange(3))
        else:
            reg.clock += rnd.randrange(3)
            reg.s.add([b"f", b"v"], None, reg.clock)
            vc = reg.vc()
            reg.seq += 1
            outbox.append((reg.r, reg.seq, vc, reg.s.drain()))
    while deliver_one(regions, outbox, order):
        pass
    read(0)
    assert sorted(delivered) == [sid for sid, _fv in s1.range()]
