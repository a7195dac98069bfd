"""Consumer groups: lag as Redis 7 computes it, PEL bookkeeping (also under random traffic),
and side-by-side runs of group commands against a real redis-server."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from rill.storage import stream as S
from rill.storage.stream import (
    ID_MAX,
    Stream,
    format_sid,
)

from tests.storage.stream.support import (
    I,
    pairs,
    parse_id,
    stream_with,
)

# ------------------------------------------------------------------------------------------
# Consumer groups: Redis's own lag scenarios (tests/unit/type/stream-cgroups.tcl)
# ------------------------------------------------------------------------------------------


def five(s: Stream) -> Stream:
    for i, v in enumerate([b"a", b"b", b"c", b"d", b"e"], 1):
        s.add([b"data", v], I(i))
    return s


def test_lag_empty_stream():
    s = Stream()
    g = s.create_group(b"g1", 0)
    assert g.entries_read == -1 and s.group_lag(g) == 0
    s.add([b"data", b"a"], I(1))
    s.delete(I(1))
    assert s.max_deleted_entry_id == I(1) and s.entries_added == 1
    assert g.entries_read == -1 and s.group_lag(g) == 0


def test_lag_sanity():
    s = five(Stream())
    g = s.create_group(b"g1", 0)
    assert g.entries_read == -1 and s.group_lag(g) == 5
    c11, _ = g.get_or_create_consumer(b"c11", 1)
    assert [sid for sid, _ in s.read_group(g, c11, 1, 1)] == [I(1)]
    assert g.entries_read == 1 and s.group_lag(g) == 4
    c12, _ = g.get_or_create_consumer(b"c12", 1)
    assert len(s.read_group(g, c12, 10, 1)) == 4
    assert g.entries_read == 5 and s.group_lag(g) == 0
    s.add([b"data", b"f"], I(6))
    assert g.entries_read == 5 and s.group_lag(g) == 1


def test_lag_with_xdels():
    s = five(Stream())
    s.delete(I(3))
    g1 = s.create_group(b"g1", 0)
    g2 = s.create_group(b"g2", 0)
    assert g1.entries_read == -1 and s.group_lag(g1) is None
    c, _ = g1.get_or_create_consumer(b"c11", 1)
    for _ in range(3):
        s.read_group(g1, c, 1, 1)
        assert g1.entries_read == -1 and s.group_lag(g1) is None
    s.read_group(g1, c, 1, 1)
    assert g1.entries_read == 5 and s.group_lag(g1) == 0
    s.add([b"data", b"f"], I(6))
    assert g1.entries_read == 5 and s.group_lag(g1) == 1
    s.trim_minid(I(3))
    assert g1.entries_read == 5 and s.group_lag(g1) == 1
    assert g2.entries_read == -1 and s.group_lag(g2) == 3
    s.trim_minid(I(5))
    assert g1.entries_read == 5 and s.group_lag(g1) == 1
    assert g2.entries_read == -1 and s.group_lag(g2) == 2
    assert [g.name for g in s.groups()] == [b"g1", b"g2"] and s.group_count() == 2


def test_estimate_distance_rules():
    s = five(Stream())
    assert s.estimate_distance(I(5)) == 5  # the last ID
    assert s.estimate_distance(I(9)) == -1  # the future
    assert s.estimate_distance(I(1)) == 1  # the first entry, no tombstones
    assert s.estimate_distance(I(0, 5)) == 0  # before the first entry
    assert s.estimate_distance(I(3)) == -1  # somewhere in the middle
    s.delete(I(2))
    assert s.estimate_distance(I(1)) == -1  # a tombstone after the first entry
    assert s.range_has_tombstones(I(1)) and not s.range_has_tombstones(I(3))
    s.delete(I(1))
    s.trim_minid(I(3))
    assert s.first_id == I(3) and s.estimate_distance(I(3)) == 3  # latest tombstone is behind
    s.delete(I(3))
    s.delete(I(4))
    s.delete(I(5))
    assert s.length == 0 and s.estimate_distance(I(2)) == 5
    assert Stream().estimate_distance(I(7)) == 0


# ------------------------------------------------------------------------------------------
# Consumer groups: PEL bookkeeping
# ------------------------------------------------------------------------------------------


def check_pel(g: S.ConsumerGroup) -> None:
    total = 0
    for c in g.consumers.values():
        keys = c.pel.key_list()
        assert keys == sorted(keys)
        total += len(keys)
        for sid, nack in c.pel.items():
            assert g.pel.get(sid) is nack and nack.consumer is c
    assert total == len(g.pel)
    keys = g.pel.key_list()
    assert keys == sorted(keys)
    for _sid, nack in g.pel.items():
        assert nack.consumer is not None and g.consumers[nack.consumer.name] is nack.consumer


def _pel_state(g: S.ConsumerGroup) -> tuple:
    return (
        [(sid, n.delivery_time, n.delivery_count, n.consumer and n.consumer.name) for sid, n in g.pel.items()],
        {name: (c.pel.key_list(), c.active_time) for name, c in sorted(g.consumers.items())},
        list(g.nacked or ()),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["deliver", "ack", "release", "orphan"]),
                          st.sampled_from([b"a", b"b", b"c"]),
                          st.lists(st.integers(1, 40), max_size=8)), max_size=30))
def test_batch_deliver_and_ack_match_one_by_one(ops):
    """deliver_new/ack_many (XREADGROUP >, XACK) against deliver/ack per ID, through the
    paths a consumer loop never takes: IDs already pending (after SETID backwards),
    several owners in one XACK, owner-less NACKs (RDB), released (XNACKed) entries."""
    batch, single = S.ConsumerGroup(b"g", 0), S.ConsumerGroup(b"g", 0)
    for now, (op, name, ids) in enumerate(ops):
        sids = [I(i) for i in ids]
        if op == "deliver":
            sids = sorted(set(sids))
            batch.deliver_new(sids, batch.get_or_create_consumer(name, now)[0], now)
            c = single.get_or_create_consumer(name, now)[0]
            for sid in sids:
                single.deliver(sid, c, now)
        elif op == "ack":
            assert batch.ack_many(sids) == sum(single.ack(sid) for sid in sids)
        elif op == "release":
            for g in (batch, single):
                for sid in sids:
                    g.release(sid, 3)
        else:
            for g in (batch, single):
                for sid in sids:
                    g.load_nack(sid, now, 1)
        assert _pel_state(batch) == _pel_state(single)
        for c in batch.consumers.values():  # each consumer's PEL holds the group's NACKs
            assert all(batch.pel.get(sid) is n and n.consumer is c for sid, n in c.pel.items())


def test_deliver_ack_claim():
    s = Stream()
    for i in range(1, 11):
        s.add([b"n", b"%d" % i], I(i))
    g = s.create_group(b"g", 0)
    alice, created = g.get_or_create_consumer(b"alice", 100)
    assert created and alice.seen_time == 100 and alice.active_time == -1
    bob, created = g.get_or_create_consumer(b"bob", 100)
    got = s.read_group(g, alice, 3, 1000)
    assert [sid for sid, _ in got] == [I(1), I(2), I(3)]
    assert alice.active_time == 1000
    s.read_group(g, bob, 2, 1001)
    assert g.last_id == I(5) and g.entries_read == 5
    check_pel(g)
    assert g.pending_summary() == (5, I(1), I(5), [(b"alice", 3), (b"bob", 2)])
    assert g.ack(I(2)) and not g.ack(I(2)) and not g.ack(I(9))
    check_pel(g)
    assert [sid for sid, _ in g.pending_range(0, ID_MAX, 10)] == [I(1), I(3), I(4), I(5)]
    assert [sid for sid, _ in g.pending_range(0, ID_MAX, 10, consumer=bob)] == [I(4), I(5)]
    assert [sid for sid, _ in g.pending_range(I(3), I(4), 10)] == [I(3), I(4)]
    assert [sid for sid, _ in g.pending_range(0, ID_MAX, 2)] == [I(1), I(3)]
    assert g.pending_range(0, ID_MAX, 0) == []
    assert [sid for sid, _ in g.pending_range(0, ID_MAX, 10, min_idle=500, now_ms=1500)] == [
        I(1),
        I(3),
    ]
    # XCLAIM: bob takes 1 and 3 (idle 500 at t=1500); 5 (idle 499) is not idle enough
    r = s.claim(g, b"bob", [I(1), I(3), I(5)], now_ms=1500, min_idle=500)
    assert r.claimed == [I(1), I(3)] and r.consumer is bob and not r.consumer_created
    n1 = g.pel.get(I(1))
    assert n1.consumer is bob and n1.delivery_count == 2 and n1.delivery_time == 1500
    assert bob.seen_time == 1500 and bob.active_time == 1500
    check_pel(g)
    # JUSTID does not count a delivery; RETRYCOUNT sets it; TIME sets the delivery time
    r = s.claim(g, b"carol", [I(1)], now_ms=1600, justid=True, delivery_time=1550)
    assert r.consumer_created and g.pel.get(I(1)).delivery_count == 2
    assert g.pel.get(I(1)).delivery_time == 1550
    s.claim(g, b"carol", [I(1)], now_ms=1600, retrycount=9, delivery_time=99999)
    assert g.pel.get(I(1)).delivery_count == 9 and g.pel.get(I(1)).delivery_time == 1600
    # FORCE creates a NACK for an entry that exists but was never delivered
    r = s.claim(g, b"carol", [I(8), I(99)], now_ms=1700, force=True)
    assert r.claimed == [I(8)] and g.pel.get(I(8)).delivery_count == 2
    check_pel(g)
    # an entry that was deleted loses its NACK on claim
    s.delete(I(4))
    r = s.claim(g, b"carol", [I(4)], now_ms=1800)
    assert r.claimed == [] and [(sid, ok) for sid, _n, ok in r.events] == [(I(4), False)]
    assert g.pel.get(I(4)) is None
    check_pel(g)
    # LASTID moves the group forward and asks for propagation unless a claim happened
    r = s.claim(g, b"carol", [], now_ms=1800, lastid=I(7))
    assert g.last_id == I(7) and r.propagate_last_id
    r = s.claim(g, b"carol", [I(5)], now_ms=1800, lastid=I(9))
    assert g.last_id == I(9) and not r.propagate_last_id
    # a consumer's own history
    carol = g.consumers[b"carol"]
    assert [sid for sid, _ in s.read_group_history(carol, 0)] == [I(1), I(5), I(8)]
    before = g.pel.get(I(5)).delivery_count
    s.read_group_history(carol, I(5), 1, now_ms=2000)
    assert g.pel.get(I(5)).delivery_count == before + 1 and g.pel.get(I(5)).delivery_time == 2000
    # deleting a consumer drops its pending entries
    assert g.delete_consumer(b"carol") == 3 and g.delete_consumer(b"carol") is None
    check_pel(g)
    assert g.create_consumer(b"bob", 1) is None and g.create_consumer(b"dave", 1).name == b"dave"
    assert [c.name for c in g.consumers_sorted()] == [b"alice", b"bob", b"dave"]


def test_redelivery_to_another_consumer_resets_count():
    s = five(Stream())
    g = s.create_group(b"g", 0)
    a, _ = g.get_or_create_consumer(b"a", 1)
    b, _ = g.get_or_create_consumer(b"b", 1)
    s.read_group(g, a, 2, 10)
    s.claim(g, b"a", [I(1)], now_ms=11)
    assert g.pel.get(I(1)).delivery_count == 2
    g.last_id = 0  # XGROUP SETID 0
    g.entries_read = -1
    s.read_group(g, b, 1, 20)
    n = g.pel.get(I(1))
    assert n.consumer is b and n.delivery_count == 1 and n.delivery_time == 20
    assert I(1) not in a.pel and I(1) in b.pel
    check_pel(g)


def test_noack_advances_without_pel():
    s = five(Stream())
    g = s.create_group(b"g", 0)
    c, _ = g.get_or_create_consumer(b"c", 1)
    assert len(s.read_group(g, c, 0, 1, noack=True)) == 5
    assert g.last_id == I(5) and g.entries_read == 5 and len(g.pel) == 0
    assert s.read_group(g, c, 0, 1) == []


def test_autoclaim():
    s = Stream()
    for i in range(1, 21):
        s.add([b"n", b"%d" % i], I(i))
    g = s.create_group(b"g", 0)
    a, _ = g.get_or_create_consumer(b"a", 0)
    s.read_group(g, a, 20, 100)
    for sid in (I(3), I(4), I(10)):
        s.delete(sid)
    r = s.autoclaim(g, b"b", min_idle=0, start=0, count=5, now_ms=200)
    assert r.claimed == [I(1), I(2), I(5)] and r.deleted == [I(3), I(4)]
    assert r.next_id == I(6) and r.consumer_created
    assert g.pel.get(I(1)).delivery_count == 2 and g.pel.get(I(1)).consumer.name == b"b"
    check_pel(g)
    r = s.autoclaim(g, b"b", min_idle=0, start=I(6), count=100, now_ms=300, justid=True)
    assert r.claimed == [I(i) for i in range(6, 21) if i != 10] and r.deleted == [I(10)]
    assert r.next_id == 0 and g.pel.get(I(6)).delivery_count == 1  # JUSTID: no new delivery
    # min-idle: nothing is idle enough, attempts run out after count*10 PEL entries
    r = s.autoclaim(g, b"c", min_idle=1000, start=0, count=1, now_ms=400)
    # (PEL: 1 2 5 6 7 8 9 11 12 13 | 14 ...)
    assert r.claimed == [] and r.next_id == I(14) and r.consumer is None and not r.consumer_created
    check_pel(g)


def test_rdb_style_reload_of_groups():
    s = Stream()
    for i in range(1, 30):
        s.add([b"f", b"%d" % i], I(i))
    g = s.create_group(b"g", I(3), 3)
    a, _ = g.get_or_create_consumer(b"a", 50)
    b, _ = g.get_or_create_consumer(b"b", 60)
    g.get_or_create_consumer(b"idle", 70)
    s.read_group(g, a, 4, 100)
    s.read_group(g, b, 3, 200)
    s.claim(g, b"b", [I(5)], now_ms=300)
    s.delete(I(2))
    # what an RDB writer stores ...
    nodes = list(s.nodes())
    meta = (s.length, s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added)
    groups = []
    for grp in s.groups():
        pel = [(sid, n.delivery_time, n.delivery_count) for sid, n in grp.pel.items()]
        cons = [
            (c.name, c.seen_time, c.active_time, c.pel.key_list()) for c in grp.consumers_sorted()
        ]
        groups.append((grp.name, grp.last_id, grp.entries_read, pel, cons))
    # ... and what a loader rebuilds, in Redis's order
    t = Stream()
    for key, lp in nodes:
        t.load_node(key, lp)
    t.length, t.last_id, t.first_id, t.max_deleted_entry_id, t.entries_added = meta
    for name, last_id, entries_read, pel, cons in groups:
        tg = t.create_group(name, last_id, entries_read)
        for sid, dt, dc in pel:
            assert tg.load_nack(sid, dt, dc)
        assert not tg.load_nack(pel[0][0], 0, 0)  # duplicate
        for cname, seen, active, ids in cons:
            c = tg.load_consumer(cname, seen, active)
            for sid in ids:
                assert tg.load_owner(c, sid)
        assert tg.load_consumer(b"a", 0, 0) is None
        assert not tg.load_owner(tg.consumers[b"a"], I(99))
        assert tg.unowned_nacks() == []
        check_pel(tg)
    tg, g = t.get_group(b"g"), s.get_group(b"g")
    assert [
        (sid, n.delivery_time, n.delivery_count, n.consumer.name) for sid, n in tg.pel.items()
    ] == [(sid, n.delivery_time, n.delivery_count, n.consumer.name) for sid, n in g.pel.items()]
    assert [(c.name, c.seen_time, c.active_time) for c in tg.consumers_sorted()] == [
        (b"a", 50, 100),
        (b"b", 300, 300),
        (b"idle", 70, -1),
    ]
    assert t.range() == s.range() and t.group_lag(tg) == s.group_lag(g)


# ------------------------------------------------------------------------------------------
# Hypothesis: PEL bookkeeping under random group traffic
# ------------------------------------------------------------------------------------------


class GroupMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.s = stream_with(3, 4096)
        self.now = 1000
        for i in range(1, 9):
            self.s.add([b"f", b"%d" % i], I(i))
        self.g = self.s.create_group(b"g", 0)
        self.names = [b"c1", b"c2", b"c3"]

    def consumer(self, name):
        return self.g.get_or_create_consumer(name, self.now)[0]

    @rule(name=st.sampled_from([b"c1", b"c2", b"c3"]), count=st.integers(0, 3), noack=st.booleans())
    def read(self, name, count, noack):
        self.now += 1
        before = self.g.last_id
        got = self.s.read_group(self.g, self.consumer(name), count, self.now, noack)
        ids = [sid for sid, _ in got]
        assert ids == [sid for sid, _ in self.s.range(before + 1, ID_MAX, count)]
        if ids:
            assert self.g.last_id == ids[-1]
        for sid in ids:
            if not noack:
                n = self.g.pel.get(sid)
                assert (
                    n.consumer.name == name
                    and n.delivery_count == 1
                    and n.delivery_time == self.now
                )

    @rule(data=st.data())
    def ack(self, data):
        keys = self.g.pel.key_list()
        sid = (
            data.draw(st.sampled_from(keys))
            if keys and data.draw(st.booleans())
            else data.draw(st.integers(0, I(10)))
        )
        was = sid in self.g.pel
        assert self.g.ack(sid) == was
        assert sid not in self.g.pel

    @rule(
        name=st.sampled_from([b"c1", b"c2", b"c3", b"c4"]),
        data=st.data(),
        force=st.booleans(),
        justid=st.booleans(),
    )
    def claim(self, name, data, force, justid):
        self.now += 1
        ids = data.draw(st.lists(st.integers(1, 10).map(I), max_size=3))
        before = {sid: (n.consumer, n.delivery_count) for sid, n in self.g.pel.items()}
        r = self.s.claim(self.g, name, ids, now_ms=self.now, force=force, justid=justid)
        for sid in r.claimed:
            n = self.g.pel.get(sid)
            assert n.consumer.name == name and self.s.exists(sid)
            if sid in before and sid not in r.claimed[: r.claimed.index(sid)]:
                assert n.delivery_count >= before[sid][1]
        for sid in ids:
            if sid not in r.claimed and sid in before and not self.s.exists(sid):
                assert sid not in self.g.pel

    @rule(name=st.sampled_from([b"c1", b"c4"]), start=st.integers(0, 9), count=st.integers(1, 4))
    def autoclaim(self, name, start, count):
        self.now += 1
        r = self.s.autoclaim(self.g, name, 0, I(start), count, self.now)
        assert len(r.claimed) + len(r.deleted) <= count
        assert all(sid >= I(start) for sid in r.claimed + r.deleted)
        for sid in r.claimed:
            assert self.g.pel.get(sid).consumer.name == name
        if r.next_id:
            assert r.next_id in self.g.pel

    @rule(data=st.data())
    def delete_entry(self, data):
        self.s.delete(I(data.draw(st.integers(1, 10))))

    @rule(name=st.sampled_from([b"c1", b"c2", b"c3", b"c4"]))
    def delconsumer(self, name):
        c = self.g.consumers.get(name)
        n = len(c.pel) if c else None
        assert self.g.delete_consumer(name) == n

    @rule(lid=st.integers(0, 9))
    def setid(self, lid):
        self.g.last_id = I(lid)
        self.g.entries_read = -1

    @invariant()
    def pel_consistent(self):
        check_pel(self.g)
        lag = self.s.group_lag(self.g)
        assert lag is None or lag >= 0 or self.g.entries_read > self.s.entries_added


GroupMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestGroupMachine = GroupMachine.TestCase


@pytest.mark.parametrize("seed", range(4))
def test_groups_side_by_side_with_redis(real_redis, seed):
    r = real_redis
    rng = random.Random(1000 + seed)
    r.execute_command("CONFIG", "SET", "stream-node-max-entries", 5)
    r.execute_command("CONFIG", "SET", "stream-node-max-bytes", 0)
    s = stream_with(5, 0)
    key = f"grp{seed}"
    r.execute_command("DEL", key)
    r.execute_command("XADD", key, "1-1", "f", "v")
    s.add([b"f", b"v"], I(1, 1))
    ms = 1
    now = 10**13  # far in the future: every NACK is idle enough
    for i in range(150):
        op = rng.random()
        name = rng.choice([b"ga", b"gb"])
        g = s.get_group(name)
        cname = rng.choice([b"c1", b"c2", b"c3"])
        if op < 0.25:
            ms += rng.choice([0, 1, 3])
            sid = s.auto_seq_id(ms)
            r.execute_command("XADD", key, format_sid(sid), "f", str(i))
            s.add([b"f", b"%d" % i], sid)
        elif g is None or op < 0.3:
            lid = rng.choice([0, s.last_id, rng.randint(0, s.last_id)])
            er = rng.choice([None, rng.randint(0, 10)])
            extra = ["ENTRIESREAD", er] if er is not None else []
            if g is None:
                r.execute_command("XGROUP", "CREATE", key, name, format_sid(lid), *extra)
                s.create_group(name, lid, -1 if er is None else er)
            else:
                r.execute_command("XGROUP", "SETID", key, name, format_sid(lid), *extra)
                g.last_id, g.entries_read = lid, (-1 if er is None else er)
        elif op < 0.5:
            cnt = rng.choice([0, 1, 2, 5])
            noack = rng.random() < 0.2
            args = (["COUNT", cnt] if cnt else []) + (["NOACK"] if noack else [])
            got = r.execute_command("XREADGROUP", "GROUP", name, cname, *args, "STREAMS", key, ">")
            if not (s.length and s.last_valid_id() > g.last_id):  # Redis would block
                assert got is None
                continue
            c, _ = g.get_or_create_consumer(cname, 0)
            mine = s.read_group(g, c, cnt, 0, noack)
            assert [(parse_id(e[0]), list(e[1])) for e in got[0][1]] == mine
        elif op < 0.6 and len(g.pel):
            ids = [rng.choice(g.pel.key_list()), rng.randint(0, s.last_id)]
            assert r.execute_command("XACK", key, name, *map(format_sid, ids)) == sum(
                g.ack(x) for x in ids
            )
        elif op < 0.7:
            ids = [rng.choice(g.pel.key_list())] if len(g.pel) else []
            ids.append(rng.randint(0, s.last_id))
            force, justid = rng.random() < 0.3, rng.random() < 0.5
            args = ["FORCE"] * force + ["JUSTID"] * justid
            got = r.execute_command("XCLAIM", key, name, cname, 0, *map(format_sid, ids), *args)
            res = s.claim(g, cname, ids, now_ms=now, force=force, justid=justid)
            assert [parse_id(x if justid else x[0]) for x in got] == res.claimed
        elif op < 0.78:
            start = rng.choice([0, rng.randint(0, s.last_id)])
            cnt = rng.choice([1, 2, 10])
            got = r.execute_command(
                "XAUTOCLAIM", key, name, cname, 0, format_sid(start), "COUNT", cnt, "JUSTID"
            )
            res = s.autoclaim(g, cname, 0, start, cnt, now_ms=now, justid=True)
            assert (
                parse_id(got[0]),
                [parse_id(x) for x in got[1]],
                [parse_id(x) for x in got[2]],
            ) == (res.next_id, res.claimed, res.deleted)
        elif op < 0.86 and s.length:
            sid = rng.choice(s.range())[0]
            assert r.execute_command("XDEL", key, format_sid(sid)) == int(s.delete(sid))
        elif op < 0.9:
            ml = rng.randint(0, s.length)
            assert r.execute_command("XTRIM", key, "MAXLEN", ml) == s.trim_maxlen(ml)
        elif op < 0.93:
            got = r.execute_command("XGROUP", "DELCONSUMER", key, name, cname)
            assert got == (g.delete_consumer(cname) or 0)
        else:
            got = r.execute_command("XPENDING", key, name, "-", "+", 5)
            assert [(parse_id(x[0]), x[1], x[3]) for x in got] == [
                (sid, n.consumer.name, n.delivery_count) for sid, n in g.pending_range(0, ID_MAX, 5)
            ]
        info = pairs(r.execute_command("XINFO", "STREAM", key, "FULL"))
        assert (
            info[b"length"] == s.length and parse_id(info[b"recorded-first-entry-id"]) == s.first_id
        )
        assert parse_id(info[b"max-deleted-entry-id"]) == s.max_deleted_entry_id
        groups = [pairs(x) for x in info[b"groups"]]
        assert [x[b"name"] for x in groups] == [x.name for x in s.groups()]
        for x, mg in zip(groups, s.groups(), strict=True):
            er = x[b"entries-read"]
            assert (parse_id(x[b"last-delivered-id"]), -1 if er is None else er, x[b"lag"]) == (
                mg.last_id,
                mg.entries_read,
                s.group_lag(mg),
            )
            assert x[b"pel-count"] == len(mg.pel)
            assert [pairs(c)[b"name"] for c in x[b"consumers"]] == [
                c.name for c in mg.consumers_sorted()
            ]
            assert [pairs(c)[b"pel-count"] for c in x[b"consumers"]] == [
                len(c.pel) for c in mg.consumers_sorted()
            ]
