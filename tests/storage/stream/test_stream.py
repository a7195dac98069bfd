"""The stream: XADD/XDEL/XTRIM semantics, ranges, nodes in and out, radix-tree size, memory,
a node-aware model state machine, and (when a redis-server binary is around) side-by-side
runs against real Redis 7 comparing DUMPed node bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from rill.storage import listpack as L
from rill.storage import stream as S
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    Stream,
    StreamIDError,
    format_sid,
)

from tests.storage.stream.support import (
    I,
    dump_nodes,
    node_list,
    pairs,
    parse_id,
    stream_with,
    to_int64,
)

# ------------------------------------------------------------------------------------------
# Ranges, lookups, edges
# ------------------------------------------------------------------------------------------


@pytest.fixture
def s300():
    s = Stream()
    for i in range(300):
        s.add([b"k", b"%d" % i], I(10 + i // 3, i % 3))
    return s


def test_range_basics(s300):
    all_ids = [I(10 + i // 3, i % 3) for i in range(300)]
    assert [sid for sid, _ in s300.range()] == all_ids
    assert [sid for sid, _ in s300.range(rev=True)] == all_ids[::-1]
    assert [sid for sid, _ in s300.range(I(50, 1), I(60, 0))] == [
        x for x in all_ids if I(50, 1) <= x <= I(60, 0)
    ]
    assert [sid for sid, _ in s300.range(I(50, 1), I(60, 0), rev=True)] == [
        x for x in all_ids if I(50, 1) <= x <= I(60, 0)
    ][::-1]
    assert [sid for sid, _ in s300.range(I(40), ID_MAX, 5)] == all_ids[90:95]
    assert [sid for sid, _ in s300.range(0, I(40), 5, rev=True)] == all_ids[90::-1][:5]
    assert s300.range(I(60), I(50)) == []
    assert s300.range(I(500)) == []
    assert s300.first_entry() == (I(10, 0), [b"k", b"0"])
    assert s300.last_entry() == (I(109, 2), [b"k", b"299"])
    assert s300.lookup(I(20, 1)) == [b"k", b"31"]
    assert s300.lookup(I(20, 3)) is None
    assert s300.exists(I(20, 1)) and not s300.exists(I(5)) and not s300.exists(I(500))
    assert list(s300.iter_range(I(100))) == s300.range(I(100))
    assert list(s300.iter_range(0, I(12), rev=True)) == s300.range(0, I(12), rev=True)


def test_repeated_reads_use_the_cache_consistently(s300):
    S.clear_node_cache()
    first = s300.range(I(30), I(80), 40)
    for _ in range(3):
        assert s300.range(I(30), I(80), 40) == first
        assert s300.range(I(30), I(80), 40, rev=True) == s300.range(I(30), I(80))[::-1][:40]
    # tail node cached, then appended to, deleted from, trimmed
    tail = s300.range(I(100))
    s300.range(I(100))
    s300.add([b"k", b"new"], I(200))
    assert s300.range(I(100)) == tail + [(I(200), [b"k", b"new"])]
    assert s300.lookup(I(200)) == [b"k", b"new"]
    assert s300.delete(I(105, 1))
    assert I(105, 1) not in [sid for sid, _ in s300.range(I(100))]
    s300.trim_maxlen(10)
    assert len(s300.range()) == 10
    S.clear_node_cache()
    assert len(s300.range()) == 10


def test_edges_with_tombstones():
    s = Stream()
    for i in range(1, 6):
        s.add([b"f", b"v"], I(i))
    s.delete(I(1))
    s.delete(I(5))
    assert s.edge_id(True, True) == I(2) == s.first_id
    assert s.edge_id(True, False) == I(1)
    assert s.edge_id(False, True) == I(4) == s.last_valid_id()
    assert s.edge_id(False, False) == I(5)
    assert s.last_id == I(5)
    e = Stream()
    assert e.edge_id(True) == ID_MAX and e.edge_id(False) == 0
    assert e.first_entry() is None and e.last_entry() is None and e.range() == []


# ------------------------------------------------------------------------------------------
# XDEL
# ------------------------------------------------------------------------------------------


def test_delete_flags_in_place_and_counters():
    s = Stream()
    for i in range(1, 4):
        s.add([b"f", b"%d" % i], I(i))
    before = node_list(s)[0][1]
    assert s.delete(I(2))
    assert not s.delete(I(2))  # already a tombstone
    assert not s.delete(I(9))
    after = node_list(s)[0][1]
    assert len(after) == len(before)
    els = L.elements(after)
    assert els[:2] == [2, 1]  # count 2, deleted 1
    assert els[10] == 3  # flags SAMEFIELDS|DELETED
    assert s.length == 2 and s.max_deleted_entry_id == I(2) and s.last_id == I(3)
    assert s.first_id == I(1)
    assert s.delete(I(1))
    assert s.first_id == I(3) and s.max_deleted_entry_id == I(2)  # max only grows
    assert s.delete(I(3))
    assert s.length == 0 and s.first_id == 0 and s.last_id == I(3)
    assert s.node_count() == 0  # the node went with its last live entry
    assert s.max_deleted_entry_id == I(3)
    s.add([b"f", b"v"], I(4))
    assert s.first_id == I(4) and s.node_count() == 1


def test_delete_frees_node_only_when_last_live_entry_goes():
    s = stream_with(node_max_entries=2)
    for i in range(1, 7):
        s.add([b"f", b"v"], I(i))
    assert s.node_count() == 3
    assert s.delete(I(3)) and s.node_count() == 3
    assert s.delete(I(4)) and s.node_count() == 2
    assert [k for k, _ in node_list(s)] == [I(1), I(5)]
    assert s.delete_many([I(1), I(1), I(2), I(7)]) == 2
    assert [k for k, _ in node_list(s)] == [I(5)] and s.first_id == I(5)


# ------------------------------------------------------------------------------------------
# XTRIM (the live checks from the reference)
# ------------------------------------------------------------------------------------------


def make_248():
    """250 entries in nodes of 100/100/50, then 2 deleted from the first: 98/100/50 live."""
    s = Stream()
    for i in range(1, 251):
        s.add([b"f", b"v"], I(i))
    s.delete(I(5))
    s.delete(I(6))
    return s


def test_trim_maxlen_approx_removes_whole_nodes_only():
    s = make_248()
    assert s.length == 248
    assert s.trim_maxlen(120, approx=True) == 98
    assert s.length == 150 and s.first_id == I(101)
    assert [k for k, _ in node_list(s)] == [I(101), I(201)]
    assert s.trim_maxlen(120, approx=True) == 0  # 150-100 < 120: the node must stay


def test_trim_maxlen_exact_marks_entries_inside_one_node():
    s = make_248()
    s.trim_maxlen(120, approx=True)
    assert s.trim_maxlen(110) == 40
    assert s.length == 110 and s.first_id == I(141)
    lp = node_list(s)[0][1]
    assert S.node_counts(lp) == (60, 40)
    assert S.validate_node(lp, deep=True)
    assert s.max_deleted_entry_id == I(6)  # trimming does not touch it


def test_trim_limit():
    s = make_248()
    assert s.trim_maxlen(0, approx=True, limit=150) == 98  # second node would exceed 150
    assert s.trim_maxlen(0, approx=True, limit=50) == 0
    assert s.trim_maxlen(0, approx=True, limit=0) == 150
    assert s.length == 0 and s.first_id == 0 and s.node_count() == 0


def test_trim_minid():
    s = make_248()
    assert s.trim_minid(I(150), approx=True) == 98
    assert s.first_id == I(101)
    assert s.trim_minid(I(150)) == 49
    assert s.first_id == I(150) and s.length == 101
    assert s.trim_minid(I(150)) == 0
    assert s.trim_minid(I(1000)) == 101
    assert s.length == 0 and s.first_id == 0


def test_minid_trim_can_leave_a_zero_count_node():
    """Redis keeps a node whose live entries were all trimmed when its last entry (a
    tombstone) is not below MINID; it is then removed by a later trim."""
    s = Stream()
    for i in range(1, 4):
        s.add([b"f", b"v"], I(i))
    s.delete(I(3))
    assert s.trim_minid(I(3)) == 2
    assert s.length == 0 and s.node_count() == 1
    assert S.node_counts(node_list(s)[0][1]) == (0, 3)
    s.add([b"f", b"v"], I(4))
    assert s.range() == [(I(4), [b"f", b"v"])]
    assert s.trim_maxlen(1) == 0 and s.trim_maxlen(0) == 1


# ------------------------------------------------------------------------------------------
# Nodes in and out (RDB), validation, radix tree size, memory
# ------------------------------------------------------------------------------------------


def test_nodes_roundtrip_through_load_node(s300):
    s300.delete(I(11, 1))
    t = Stream()
    for key, lp in s300.nodes():
        assert S.validate_node(lp, deep=True)
        t.load_node(key, lp)
    for attr in ("length", "last_id", "first_id", "max_deleted_entry_id", "entries_added"):
        setattr(t, attr, getattr(s300, attr))
    assert t.range() == s300.range()
    assert t.range(rev=True) == s300.range(rev=True)
    t.add([b"k", b"more"], I(500))  # appending to a loaded tail node works
    assert t.last_entry() == (I(500), [b"k", b"more"])
    assert node_list(t)[:3] == node_list(s300) and t.node_count() == 4  # s300's tail was full


def brute_force_rax_nodes(keys: list[int]) -> int:
    """Nodes of a compressed radix tree over 16-byte keys, built recursively."""
    bkeys = sorted(k.to_bytes(16, "big") for k in keys)
    if not bkeys:
        return 1

    def rec(ks, depth):
        if len(ks) == 1 and depth == 16:
            return 1  # key leaf
        if depth == 16:
            raise AssertionError("duplicate keys")
        groups = {}
        for k in ks:
            groups.setdefault(k[depth], []).append(k)
        if len(groups) == 1:
            run = 1
            while depth + run < 16 and len({k[depth + run] for k in ks}) == 1:
                run += 1
            return 1 + rec(ks, depth + run)  # compressed node, then whatever follows
        return 1 + sum(rec(g, depth + 1) for g in groups.values())

    return rec(bkeys, 0)


@pytest.mark.parametrize("seed", range(5))
def test_rax_node_count_matches_a_real_radix_tree(seed):
    rng = random.Random(seed)
    s = stream_with(node_max_entries=1)
    ms = 0
    for _ in range(rng.randint(0, 60)):
        ms += rng.choice([1, 2, 255, 256, 65536, 1 << 40])
        s.add([b"f", b"v"], I(ms, rng.choice([0, 1, 300])))
    keys = [k for k, _ in s.nodes()]
    assert s.rax_node_count() == brute_force_rax_nodes(keys)
    assert Stream().rax_node_count() == 1


def test_memory_usage_is_close_to_listpack_bytes():
    s = Stream()
    for i in range(5000):
        s.add([b"name", b"alice", b"value", b"%012d" % i], I(1700000000000 + i // 10, i % 10))
    lp_total = sum(len(lp) for _, lp in s.nodes())
    est = s.memory_usage(0)
    assert lp_total < est < lp_total * 1.3
    assert abs(s.memory_usage(5) - est) < est * 0.1
    g = s.create_group(b"g", 0)
    c, _ = g.get_or_create_consumer(b"c", 1)
    s.read_group(g, c, 100, 1)
    assert s.memory_usage(0) > est


def test_copy_is_deep(s300):
    g = s300.create_group(b"g", 0)
    c, _ = g.get_or_create_consumer(b"c", 1)
    s300.read_group(g, c, 5, 1)
    t = s300.copy()
    assert t.range() == s300.range() and t.length == s300.length
    tg = t.get_group(b"g")
    assert tg is not g and tg.pel.key_list() == g.pel.key_list()
    nack = tg.pel.first()[1]
    assert nack.consumer is tg.consumers[b"c"] and nack.consumer.pel.get(tg.pel.first_key()) is nack
    t.delete(I(10))
    t.add([b"k", b"x"], I(900))
    assert s300.lookup(I(10)) is not None and s300.last_id != t.last_id


# ------------------------------------------------------------------------------------------
# Hypothesis: a node-aware model of Redis's stream layout
# ------------------------------------------------------------------------------------------


class NodeModel:
    def __init__(self, master: int, fields: list[bytes]):
        self.master = master
        self.fields = list(fields)
        self.entries: list[list] = []  # [sid, fields_values, deleted]
        self.count = 0
        self.deleted = 0

    def elements(self):
        els = [self.count, self.deleted, len(self.fields), *self.fields, 0]
        mms, mseq = S.split_id(self.master)
        for sid, fv, dele in self.entries:
            fields = fv[0::2]
            same = fields == self.fields
            ms, seq = S.split_id(sid)
            els += [
                (2 if same else 0) | (1 if dele else 0),
                to_int64(ms - mms),
                to_int64(seq - mseq),
            ]
            if same:
                els += fv[1::2] + [len(fields) + 3]
            else:
                els += [len(fields), *fv, 2 * len(fields) + 4]
        return els

    def lp(self) -> bytes:
        return bytes(L.build(self.elements()))

    def last_sid(self):
        return self.entries[-1][0]


class StreamModel:
    def __init__(self, max_entries, max_bytes):
        self.me = max_entries
        self.mb = max_bytes if 0 < max_bytes <= (1 << 30) else 1 << 30
        self.nodes: list[NodeModel] = []
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted = 0
        self.added = 0

    def live(self):
        return [(sid, fv) for n in self.nodes for sid, fv, d in n.entries if not d]

    def add(self, fv, sid):
        tail = self.nodes[-1] if self.nodes else None
        if tail is not None:
            tot = sum(map(len, fv))
            if len(tail.lp()) + tot >= self.mb or (
                self.me and tail.count + tail.deleted >= self.me
            ):
                tail = None
        if tail is None:
            tail = NodeModel(sid, fv[0::2])
            self.nodes.append(tail)
        tail.entries.append([sid, list(fv), False])
        tail.count += 1
        self.length += 1
        self.added += 1
        self.last_id = sid
        if self.length == 1:
            self.first_id = sid

    def refresh_first(self):
        live = self.live()
        self.first_id = live[0][0] if live else 0

    def delete(self, sid):
        for n in self.nodes:
            for e in n.entries:
                if e[0] == sid and not e[2]:
                    if n.count == 1:
                        self.nodes.remove(n)
                    else:
                        e[2] = True
                        n.count -= 1
                        n.deleted += 1
                    self.length -= 1
                    self.max_deleted = max(self.max_deleted, sid)
                    self.refresh_first()
                    return True
        return False

    def trim(self, by_len, maxlen, minid, approx, limit):
        removed = 0
        while self.nodes:
            if by_len and self.length <= maxlen:
                break
            n = self.nodes[0]
            if limit and removed + n.count > limit:
                break
            whole = (self.length - n.count >= maxlen) if by_len else (n.last_sid() < minid)
            if whole:
                self.nodes.pop(0)
                self.length -= n.count
                removed += n.count
                continue
            if approx:
                break
            k = 0
            for e in n.entries:
                if (self.length <= maxlen) if by_len else (e[0] >= minid):
                    break
                if not e[2]:
                    e[2] = True
                    k += 1
                    self.length -= 1
            n.count -= k
            n.deleted += k
            removed += k
            break
        if self.length == 0:
            self.first_id = 0
        elif removed:
            self.refresh_first()
        return removed


FIELDSETS = [[b"a"], [b"a", b"b"], [b"b", b"a"], [b"1", b"x"], [b"a", b"b", b"c"]]
value_st = st.one_of(
    st.sampled_from(
        [b"", b"0", b"-0", b"7", b"-7", b"300", b"70000", b"007", b"x" * 70, b"9" * 19]
    ),
    st.binary(max_size=12),
    st.integers(-(1 << 40), 1 << 40).map(lambda i: b"%d" % i),
)


class StreamMachine(RuleBasedStateMachine):
    @initialize(
        me=st.sampled_from([0, 1, 2, 3, 5, 100]), mb=st.sampled_from([0, 30, 60, 120, 4096])
    )
    def setup(self, me, mb):
        self.s = stream_with(me, mb)
        self.m = StreamModel(me, mb)
        self.clock = 1000

    def check_add(self, fv, sid):
        if sid is None or sid <= self.m.last_id:
            with pytest.raises(StreamIDError):
                self.s.add(fv, sid if sid is not None else 0)
            return
        assert self.s.add(fv, sid) == sid
        self.m.add(fv, sid)

    @rule(
        fs=st.sampled_from(FIELDSETS), data=st.data(), step=st.sampled_from([-3, 0, 0, 1, 2, 1000])
    )
    def add_auto(self, fs, data, step):
        fv = []
        for f in fs:
            fv += [f, data.draw(value_st)]
        self.clock = max(0, self.clock + step)
        expected = self.s.next_id(self.clock)
        sid = self.s.add(fv, None, now_ms=self.clock)
        assert sid == expected and sid > self.m.last_id
        self.m.add(fv, sid)

    @rule(
        fs=st.sampled_from(FIELDSETS),
        v=value_st,
        dms=st.integers(-2, 3),
        seq=st.sampled_from([0, 1, 5, MASK64]),
    )
    def add_explicit(self, fs, v, dms, seq):
        ms = max(0, (self.m.last_id >> 64) + dms)
        fv = [x for f in fs for x in (f, v)]
        self.check_add(fv, I(ms, seq))

    @rule(v=value_st, dms=st.integers(-1, 2))
    def add_ms_star(self, v, dms):
        ms = max(0, (self.m.last_id >> 64) + dms)
        self.check_add([b"a", v], self.s.auto_seq_id(ms))

    @precondition(lambda self: self.m.length > 0)
    @rule(data=st.data())
    def delete_existing(self, data):
        sid = data.draw(st.sampled_from([sid for sid, _ in self.m.live()]))
        assert self.s.delete(sid) is True
        assert self.m.delete(sid)

    @rule(data=st.data())
    def delete_any(self, data):
        sid = data.draw(st.integers(0, self.m.last_id + 2))
        assert self.s.delete(sid) == self.m.delete(sid)

    @rule(maxlen=st.integers(0, 40), approx=st.booleans(), limit=st.sampled_from([0, 0, 1, 3, 10]))
    def trim_maxlen(self, maxlen, approx, limit):
        limit = limit if approx else 0
        live_before = self.m.live()
        got = self.s.trim_maxlen(maxlen, approx, limit)
        assert got == self.m.trim(True, maxlen, 0, approx, limit)
        # independent properties: a prefix goes; exact trims hit the target
        assert self.m.live() == live_before[got:]
        if not approx:
            assert self.m.length == min(len(live_before), maxlen)
        else:
            assert self.m.length >= min(len(live_before), maxlen)

    @rule(data=st.data(), approx=st.booleans(), limit=st.sampled_from([0, 0, 2, 10]))
    def trim_minid(self, data, approx, limit):
        limit = limit if approx else 0
        minid = data.draw(st.integers(0, self.m.last_id + 1))
        live_before = self.m.live()
        got = self.s.trim_minid(minid, approx, limit)
        assert got == self.m.trim(False, 0, minid, approx, limit)
        assert self.m.live() == live_before[got:]
        assert all(sid < minid for sid, _ in live_before[:got])
        if not approx:
            assert all(sid >= minid for sid, _ in self.m.live())

    @rule(
        data=st.data(),
        count=st.sampled_from([0, 1, 2, 7]),
        rev=st.booleans(),
        repeat=st.integers(1, 3),
    )
    def ranges(self, data, count, rev, repeat):
        lo = data.draw(st.integers(0, self.m.last_id + 1))
        hi = data.draw(st.integers(0, self.m.last_id + 2))
        want = [(sid, fv) for sid, fv in self.m.live() if lo <= sid <= hi]
        if rev:
            want.reverse()
        if count:
            want = want[:count]
        for _ in range(repeat):  # a second read may come from the decoded-node cache
            assert self.s.range(lo, hi, count, rev) == want
        assert list(self.s.iter_range(lo, hi, rev))[: count or None] == want

    @rule(data=st.data())
    def lookups(self, data):
        sid = data.draw(st.integers(0, self.m.last_id + 1))
        live = dict(self.m.live())
        assert self.s.lookup(sid) == live.get(sid)
        assert self.s.exists(sid) == (sid in live)

    @rule()
    def drop_cache(self):
        S.clear_node_cache()

    @invariant()
    def same_state(self):
        s, m = self.s, self.m
        assert s.length == m.length == len(s)
        assert s.last_id == m.last_id
        assert s.first_id == m.first_id
        assert s.max_deleted_entry_id == m.max_deleted
        assert s.entries_added == m.added
        nodes = list(s.nodes())
        assert [k for k, _ in nodes] == [n.master for n in m.nodes]
        for (_, lp), n in zip(nodes, m.nodes, strict=True):
            assert lp == n.lp()
            assert S.validate_node(lp, deep=True)
        live = m.live()
        assert s.first_entry() == (live[0] if live else None)
        assert s.last_entry() == (live[-1] if live else None)
        # remembered between steps: every mutation above must invalidate it
        assert s.last_valid_id() == (live[-1][0] if live else 0)


StreamMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStreamMachine = StreamMachine.TestCase


# ------------------------------------------------------------------------------------------
# Side by side with a real redis-server (skipped locally when none is installed, failed in CI)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_side_by_side_with_redis(real_redis, seed):
    r = real_redis
    rng = random.Random(seed)
    me = rng.choice([1, 2, 5, 100])
    mb = rng.choice([0, 100, 300, 4096])
    r.execute_command("CONFIG", "SET", "stream-node-max-entries", me)
    r.execute_command("CONFIG", "SET", "stream-node-max-bytes", mb)
    s = stream_with(me, mb)
    key = f"side{seed}"
    r.execute_command("DEL", key)
    ms = 1
    values = [
        b"",
        b"0",
        b"-0",
        b"007",
        b"123",
        b"-4097",
        b"70000",
        b"x" * 70,
        b"9223372036854775808",
    ]
    for _ in range(150):
        op = rng.random()
        if op < 0.65:
            ms += rng.choice([0, 0, 1, 300, 10**6])
            fs = rng.choice(FIELDSETS)
            fv = [
                x
                for f in fs
                for x in (
                    f,
                    rng.choice(values)
                    + (b"%d" % rng.randint(0, 99) if rng.random() < 0.5 else b""),
                )
            ]
            if rng.random() < 0.5:
                sid, arg = s.auto_seq_id(ms), b"%d-*" % ms
            else:
                sid = I(ms, rng.choice([0, 1, 3000, MASK64]))
                arg = format_sid(sid)
            try:
                got = r.execute_command("XADD", key, arg, *fv)
            except Exception:
                got = None
            if sid is None or sid <= s.last_id:
                assert got is None
            else:
                s.add(fv, sid)
                assert got == format_sid(sid)
        elif op < 0.8:
            live = s.range()
            if live:
                sid = rng.choice(live)[0] if rng.random() < 0.8 else rng.randint(0, s.last_id + 1)
                assert r.execute_command("XDEL", key, format_sid(sid)) == int(s.delete(sid))
        elif op < 0.92:
            approx = rng.random() < 0.5
            limit = rng.choice([0, 2, 50]) if approx else 0
            tail = ["LIMIT", limit] if approx and limit else []
            if rng.random() < 0.5:
                ml = rng.randint(0, s.length + 1)
                got = r.execute_command("XTRIM", key, "MAXLEN", "~" if approx else "=", ml, *tail)
                mine = s.trim_maxlen(
                    ml, approx, limit if tail else (S.default_trim_limit(me) if approx else 0)
                )
            else:
                live = s.range()
                minid = (
                    rng.choice(live)[0]
                    if live and rng.random() < 0.7
                    else rng.randint(0, s.last_id + 1)
                )
                got = r.execute_command(
                    "XTRIM", key, "MINID", "~" if approx else "=", format_sid(minid), *tail
                )
                mine = s.trim_minid(
                    minid, approx, limit if tail else (S.default_trim_limit(me) if approx else 0)
                )
            assert got == mine
        else:
            lo = rng.randint(0, s.last_id + 1)
            hi = rng.randint(lo, s.last_id + 2)
            c = rng.choice([1, 3, 100])
            got = r.execute_command("XRANGE", key, format_sid(lo), format_sid(hi), "COUNT", c)
            assert [(parse_id(i), list(fv)) for i, fv in got] == s.range(lo, hi, c)
            got = r.execute_command("XREVRANGE", key, format_sid(hi), format_sid(lo), "COUNT", c)
            assert [(parse_id(i), list(fv)) for i, fv in got] == s.range(lo, hi, c, rev=True)
        if not r.execute_command("EXISTS", key):
            continue
        nodes, meta = dump_nodes(r, key)
        assert nodes == list(s.nodes())
        length, lms, lseq, fms, fseq, dms, dseq, added = meta
        assert (length, I(lms, lseq), I(fms, fseq), I(dms, dseq), added) == (
            s.length,
            s.last_id,
            s.first_id,
            s.max_deleted_entry_id,
            s.entries_added,
        )
        info = pairs(r.execute_command("XINFO", "STREAM", key))
        assert info[b"radix-tree-nodes"] == s.rax_node_count()
        assert info[b"radix-tree-keys"] == s.node_count()
