"""ActiveStream, the Active-Active stream CRDT (storage/stream/active.py): merged reads
against a model, ID modes, the journal and remote ops, groups with their per-sub-stream
cursors and the XACK prefix rule, and seed 004's tables played at storage level."""

from __future__ import annotations

import pytest
from rill.protocol.stream_entries import RESP_ENTRIES, entries_bytes
from rill.storage.footprint import value_size
from rill.storage.stream import ID_MAX, REF_ACKED, REF_DEL, Stream, StreamIDError, format_sid
from rill.storage.stream.active import STRICT_FULL_ID, ActiveStream

from .support import I


def ids(ents) -> list[bytes]:
    return [format_sid(sid) for sid, _fv in ents]


def sync(*streams: ActiveStream) -> None:
    """Every stream's journal applied at every other one (one round, as after a Sync)."""
    ops = [(s, s.drain()) for s in streams]
    for s, mine in ops:
        for other in streams:
            if other is not s:
                for op in mine:
                    other.apply(op)


@pytest.fixture(autouse=True)
def strict_mode():
    saved = ActiveStream.id_mode
    ActiveStream.id_mode = "strict"
    yield
    ActiveStream.id_mode = saved


# -- IDs -----------------------------------------------------------------------------------


def test_generated_ids_carry_the_region():
    a = ActiveStream(1)
    assert a.add([b"f", b"v"], None, 1000) == I(1000, 1)
    assert a.add([b"f", b"v"], None, 1000) == I(1000, 257)
    assert a.add([b"f", b"v"], None, 999) == I(1000, 513)  # clock went back: same ms
    b = ActiveStream(2)
    assert b.add([b"f", b"v"], None, 1000) == I(1000, 2)
    b.apply([b"XADD", b"1", b"1000-257", b"f", b"v"])
    assert b.add([b"f", b"v"], None, 1000) == I(1000, 258)
    assert b.add([b"f", b"v"], None, 1001) == I(1001, 2)


def test_sequence_overflow_moves_to_the_next_ms():
    a = ActiveStream(3)
    a.set_id(I(5, (1 << 64) - 2))
    assert a.next_id(5) == I(6, 3)
    assert a.auto_seq_id(5) is None
    assert a.auto_seq_id(7) == I(7, 3)


@pytest.mark.parametrize("ms", [0, 5, (1 << 64) - 1])
@pytest.mark.parametrize("seq", [0, 2, 3, 4, 258, 259, (1 << 64) - 769, (1 << 64) - 513, (1 << 64) - 512,
                                 (1 << 64) - 511, (1 << 64) - 254, (1 << 64) - 253, (1 << 64) - 2, (1 << 64) - 1])
@pytest.mark.parametrize("now", [-1, 0, 4, 5, 6])
def test_add_makes_the_id_next_id_names_at_every_edge(ms, seq, now):
    """add() works out XADD *'s ID itself (compiled: on the ID's halves as C integers);
    it must be next_id's, on both sides of every overflow, or refuse as add always did."""
    a = ActiveStream(3)
    a.set_id(I(ms, seq))
    a.journal = []  # (set_id's own op)
    want = a.next_id(now)
    if want <= a.last_id:  # the IDs are exhausted
        with pytest.raises(StreamIDError):
            a.add([b"f", b"v"], None, now)
        assert a.length == 0 and a.journal == []
        return
    assert a.add([b"f", b"v"], None, now) == want
    assert a.last_id == want and a.length == 1 and a.first_id == want
    assert a.journal == [[b"XADD", b"3", b"%d-%d" % (want >> 64, want & ((1 << 64) - 1)), b"f", b"v"]]


def test_strict_mode():
    a = ActiveStream(1)
    with pytest.raises(StreamIDError, match="strict XADD ID mode"):
        a.explicit_id(I(100, 1))
    assert str(StreamIDError(STRICT_FULL_ID)) == (
        "Active-Active strict XADD ID mode accepts only '*' or a milliseconds-only ID"
    )
    assert a.explicit_id(I(110), ms_only=True) == I(110, 1)
    a.add([b"f", b"v"], I(110, 1))
    assert a.explicit_id(I(110), ms_only=True) == I(110, 257)


def test_semi_strict_and_liberal_modes():
    a = ActiveStream(2)
    ActiveStream.id_mode = "semi-strict"
    assert a.explicit_id(I(100, 1)) == I(100, 1)
    assert a.explicit_id(I(100), ms_only=True) == I(100, 2)
    ActiveStream.id_mode = "liberal"
    assert a.explicit_id(I(100, 1)) == I(100, 1)
    assert a.explicit_id(I(100), ms_only=True) == I(100, 0)


def test_plain_stream_explicit_id_is_the_id():
    assert Stream().explicit_id(I(100, 7)) == I(100, 7)
    assert Stream().explicit_id(I(100), True) == I(100)


def test_add_refuses_ids_not_above_the_merged_top():
    a = ActiveStream(1)
    a.apply([b"XADD", b"2", b"200-2", b"f", b"v"])
    with pytest.raises(StreamIDError):
        a.add([b"f", b"v"], I(150, 1))
    assert a.add([b"f", b"v"], I(200, 3)) == I(200, 3)


# -- seed 004: two regions' XADDs, duplicates, XREAD skipping -------------------------------


def test_seed_concurrent_xadd_converges():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"text", b"hello"], None, 1589929244828)
    r2.add([b"text", b"goodbye"], None, 1589929246795)
    assert ids(r1.range()) == [b"1589929244828-1"]
    assert ids(r2.range()) == [b"1589929246795-2"]
    sync(r1, r2)
    want = [b"1589929244828-1", b"1589929246795-2"]
    assert ids(r1.range()) == ids(r2.range()) == want


def test_seed_duplicate_ids_are_all_kept():
    ActiveStream.id_mode = "semi-strict"
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"f1", b"v1"], r1.explicit_id(I(100, 1)))
    r2.add([b"f1", b"v2"], r2.explicit_id(I(100, 1)))
    sync(r1, r2)
    for s in (r1, r2):
        assert s.range() == [(I(100, 1), [b"f1", b"v1"]), (I(100, 1), [b"f1", b"v2"])]
        assert s.range(rev=True) == [(I(100, 1), [b"f1", b"v2"]), (I(100, 1), [b"f1", b"v1"])]
        assert s.length == 2
        assert s.lookup(I(100, 1)) == [b"f1", b"v1"]  # the lowest region's
        plain = s.to_plain()
        assert plain.range() == [(I(100, 1), [b"f1", b"v1"])]
        # XDEL takes every entry with the ID
        c = s.copy()
        assert c.delete(I(100, 1))
        assert c.length == 0 and c.is_gone()


def test_seed_xread_skips_and_full_read_does_not():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    for ms in (110, 120, 130):
        r1.add([b"f1", b"v1"], r1.explicit_id(I(ms), True))
    r2.add([b"f1", b"v1"], r2.explicit_id(I(115), True))
    assert ids(r1.range(I(0) + 1, ID_MAX, 2)) == [b"110-1", b"120-1"]
    sync(r1, r2)
    assert ids(r1.range(I(120, 1) + 1, ID_MAX, 2)) == [b"130-1"]  # 115-2 skipped
    full = [b"110-1", b"115-2", b"120-1", b"130-1"]
    assert ids(r1.range(1)) == ids(r2.range(1)) == full


# -- merged reads --------------------------------------------------------------------------


def interleaved() -> tuple[ActiveStream, list[tuple[int, int, list[bytes]]]]:
    """A stream with three regions' entries interleaved (and a duplicate), and its model."""
    s = ActiveStream(1)
    model: list[tuple[int, int, list[bytes]]] = []
    for k in range(60):
        r = 1 + k % 3
        sid = I(1000 + k // 3, r)
        fv = [b"k", b"%d" % k] if k % 4 else [b"other", b"x", b"y", b"%d" % k]
        if r == 1:
            s.add(fv, sid)
        else:
            s.apply([b"XADD", b"%d" % r, format_sid(sid), *fv])
        model.append((sid, r, fv))
    s.apply([b"XADD", b"3", b"1000-1", b"dup", b"3"])  # below region 3's last: a rebuild
    model.append((I(1000, 1), 3, [b"dup", b"3"]))
    model.sort(key=lambda e: (e[0], e[1]))
    return s, model


@pytest.mark.parametrize("count", [0, 1, 7, 100])
def test_merged_range_matches_the_model(count):
    s, model = interleaved()
    flat = [(sid, fv) for sid, _r, fv in model]
    assert s.length == len(flat)
    for start, end in [(0, ID_MAX), (I(1003), I(1020, 2)), (I(1010, 2), I(1010, 2)), (I(2000), ID_MAX)]:
        want = [e for e in flat if start <= e[0] <= end]
        got = s.range(start, end, count)
        assert got == (want[:count] if count else want)
        got = s.range(start, end, count, rev=True)
        back = want[::-1]
        assert got == (back[:count] if count else back)
        assert list(s.iter_range(start, end)) == want
        assert list(s.iter_range(start, end, rev=True)) == back
        sids: list[int] = []
        segs = s.range_segments(start, end, count, enc=RESP_ENTRIES, sids=sids)
        body = b"".join(b"".join(seg[0]) for seg in segs)
        expect = want[:count] if count else want
        assert sids == [e[0] for e in expect]
        assert entries_bytes(expect)[len(b"*%d" % len(expect)):] == body if expect else not body
    assert s.first_id == flat[0][0] and s.last_id == flat[-1][0]
    assert s.edge_id(True) == flat[0][0] and s.edge_id(False) == flat[-1][0]
    assert s.last_valid_id() == flat[-1][0]
    assert s.exists(I(1000, 1)) and not s.exists(I(1000, 4))


def test_single_writer_reads_delegate_to_the_sub_stream():
    s = ActiveStream(1)
    for k in range(250):
        s.add([b"f", b"%d" % k], I(k + 1, 1))
    sub = s.subs[1]
    s.range()  # the nodes are now in the decoded-node cache
    segs = s.range_segments(0, ID_MAX, 0, False, RESP_ENTRIES)
    # straight from the sub-stream: the cache's own lists (the merged path never is)
    assert [seg[3] for seg in segs] == [True, True, True]
    assert [e for seg in segs for e in seg[0][seg[1]:seg[2]]] == sub.range()
    assert s.range(I(10), I(20)) == sub.range(I(10), I(20))
    assert s.node_count() == sub.node_count() == 3


def test_digest_and_memory_cover_the_merged_view():
    s, model = interleaved()
    p = s.to_plain()
    assert p.length == s.length - 1  # the duplicate keeps its lowest region only
    want = []
    for sid, _r, fv in model:
        want += [b"%d.%d" % (sid >> 64, sid & ((1 << 64) - 1)), *fv]
    assert list(s.digest_parts()) == want
    assert s.memory_usage() > sum(sub.memory_usage() for _r, sub in s.sub_streams())
    assert value_size(s) > sum(value_size(sub) for _r, sub in s.sub_streams())


# -- journal and remote ops ----------------------------------------------------------------


def test_journal_records_local_ops_and_drain_clears_it():
    s = ActiveStream(2)
    s.add([b"a", b"1"], I(10, 2))
    s.add([b"a", b"2"], I(11, 2))
    s.add([b"a", b"3"], I(12, 2))
    assert s.delete(I(11, 2))
    assert not s.delete(I(99, 2))
    s.create_group(b"g", I(10, 2), 1)
    s.destroy_group(b"g")
    s.set_id(I(50), 9, I(11, 2))
    assert s.drain() == [
        [b"XADD", b"2", b"10-2", b"a", b"1"],
        [b"XADD", b"2", b"11-2", b"a", b"2"],
        [b"XADD", b"2", b"12-2", b"a", b"3"],
        [b"XDEL", b"2", b"11-2"],
        [b"GCREATE", b"g", b"10-2", b"1"],
        [b"GDESTROY", b"g"],
        [b"SETID", b"50-0", b"9", b"11-2"],
    ]
    assert s.drain() == []


def test_apply_is_not_journaled_and_xdel_is_observed_remove():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"f", b"v"], I(1, 1))
    sync(r1, r2)
    r1.delete(I(1, 1))
    r2.add([b"f", b"w"], I(2, 2))  # concurrent with the delete
    sync(r1, r2)
    assert r1.range() == r2.range() == [(I(2, 2), [b"f", b"w"])]
    assert r1.drain() == r2.drain() == []


def test_setid_refuses_lower_and_merges_by_max():
    s = ActiveStream(1)
    s.add([b"f", b"v"], I(10, 1))
    with pytest.raises(StreamIDError, match="smaller than the target stream top item"):
        s.set_id(I(9))
    s.set_id(I(20), 5, I(3))
    s.apply([b"SETID", b"15-0", b"7", b"4-0"])
    assert (s.last_id, s.entries_added, s.max_deleted_entry_id) == (I(20), 7, I(4))
    s.apply([b"SETID", b"25-0", b"2", b"1-0"])
    assert (s.last_id, s.entries_added, s.max_deleted_entry_id) == (I(25), 7, I(4))


def test_plain_set_id_keeps_redis_semantics():
    p = Stream()
    p.add([b"f", b"v"], I(10))
    p.set_id(I(5))  # the caller checked; a plain stream takes it as given
    assert p.last_id == I(5)
    p.set_id(I(30), 9, I(2))
    assert (p.last_id, p.entries_added, p.max_deleted_entry_id) == (I(30), 9, I(2))


def test_del_op_trims_to_what_the_deleter_saw_and_drops_groups():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"text", b"hello"], I(100, 1))
    r1.create_group(b"group1", 0)
    sync(r1, r2)
    seen = r1.observed()
    assert seen == [b"1", b"100-1"]
    r2.add([b"text", b"goodbye"], I(200, 2))
    r2.create_group(b"group2", 0)
    r2.drain()
    # r1 deleted the key: the engine ships DEL with what r1 saw
    r2.apply([b"DEL", *seen])
    assert ids(r2.range()) == [b"200-2"] and r2.groups() == []


def test_rename_insert_below_the_last_id_rebuilds_the_sub_stream():
    s = ActiveStream(1)
    s.apply([b"XADD", b"2", b"10-2", b"f", b"a"])
    s.apply([b"XADD", b"2", b"30-2", b"f", b"c"])
    s.apply([b"XADD", b"2", b"20-2", b"f", b"b"])
    s.apply([b"XADD", b"2", b"20-2", b"f", b"b"])  # already there: nothing
    assert ids(s.range()) == [b"10-2", b"20-2", b"30-2"]
    assert s.length == 3 and s.subs[2].last_id == I(30, 2)


def test_apply_rejects_unknown_ops():
    with pytest.raises(ValueError):
        ActiveStream(1).apply([b"NOPE"])
    with pytest.raises(ValueError):
        ActiveStream(1).apply([b"XADD", b"1", b"5", b"f", b"v"])


def test_is_gone():
    s = ActiveStream(1)
    assert s.is_gone()
    s.create_group(b"g", 0)
    assert not s.is_gone()
    s.destroy_group(b"g")
    s.add([b"f", b"v"], I(1, 1))
    assert not s.is_gone()
    s.delete(I(1, 1))
    assert s.is_gone()


def test_copy_is_deep():
    s, _model = interleaved()
    s.create_group(b"g", 0)
    c = s.copy()
    assert c.range() == s.range() and [g.name for g in c.groups()] == [b"g"]
    c.delete(I(1000, 1))
    c.apply([b"XADD", b"2", b"5000-2", b"f", b"v"])
    assert s.exists(I(1000, 1)) and not s.exists(I(5000, 2))
    assert c.drain() == [[b"XDEL", b"1", b"1000-1", b"3", b"1000-1"]]


# -- trimming ------------------------------------------------------------------------------


def test_trim_maxlen_exact_over_several_sub_streams():
    s, model = interleaved()
    s.drain()
    n = s.length
    assert s.trim_maxlen(10) == n - 10
    assert s.range() == [(sid, fv) for sid, _r, fv in model[-10:]]
    ops = s.drain()
    assert len(ops) == 1 and ops[0][0] == b"XTRIM"
    # the bounds reproduce the trim on a copy that never trimmed
    t, _m = interleaved()
    t.apply(ops[0])
    assert t.range() == s.range() and t.length == 10


def test_trim_minid_clamps_bounds_to_what_was_seen():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"f", b"v"], I(10, 1))
    r2.add([b"f", b"v"], I(12, 2))
    sync(r1, r2)
    r2.add([b"f", b"late"], I(50, 2))  # concurrent with r1's trim
    assert r1.trim_minid(I(100)) == 2
    assert r1.drain() == [[b"XTRIM", b"1", b"10-1", b"2", b"12-2"]]
    r1.apply(r2.journal[0])
    r2.apply([b"XTRIM", b"1", b"10-1", b"2", b"12-2"])
    r2.drain()
    assert r1.range() == r2.range() == [(I(50, 2), [b"f", b"late"])]


def test_trim_single_sub_stream_approx_trims_whole_nodes():
    s = ActiveStream(1)
    for k in range(250):
        s.add([b"f", b"%d" % k], I(k + 1, 1))
    s.drain()
    assert s.trim_maxlen(120, approx=True) == 100
    assert s.length == 150
    assert s.drain() == [[b"XTRIM", b"1", b"101-0"]]  # below the first entry left
    assert s.trim_minid(I(200), approx=False) == 99
    assert s.first_id == I(200, 1)


def test_trim_with_limit_and_delref_and_acked():
    s, _model = interleaved()
    s.create_group(b"g", 0)
    g = s.get_group(b"g")
    c, _ = g.get_or_create_consumer(b"c", 0)
    got = s.read_group(g, c, 4)
    assert ids(got) == [b"1000-1", b"1000-1", b"1000-2", b"1000-3"]
    assert len(g.pel) == 3  # the two regions' 1000-1 are one pending ID
    assert s.trim_maxlen(0, approx=True, limit=3, policy=REF_DEL) == 3
    assert len(g.pel) == 1 and g.pel.first_key() == got[3][0]
    n = s.length
    # ACKED: the pending entry and the undelivered ones stay
    assert s.trim_maxlen(0, policy=REF_ACKED) == 0
    s.read_group(g, c, 0, noack=True)
    assert s.trim_maxlen(0, policy=REF_ACKED) == n - 1
    assert s.length == 1 and s.exists(got[3][0])


# -- consumer groups -----------------------------------------------------------------------


def reader(s: ActiveStream, group: bytes = b"g", name: bytes = b"alice"):
    g = s.get_group(group)
    c, _ = g.get_or_create_consumer(name, 0)
    return g, c


def test_seed_xreadgroup_never_skips_a_late_entry():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    for ms in (110, 120, 130):
        r1.add([b"f1", b"v1"], r1.explicit_id(I(ms), True))
    r1.create_group(b"g", 0)
    g, c = reader(r1)
    r2.add([b"f1", b"v1"], r2.explicit_id(I(115), True))
    assert ids(r1.read_group(g, c, 2)) == [b"110-1", b"120-1"]
    sync(r1, r2)
    assert r1.undelivered(g)
    assert ids(r1.read_group(g, c, 10)) == [b"115-2", b"130-1"]
    assert not r1.undelivered(g) and r1.read_group(g, c) == []
    assert g.last_id == I(130, 1) and g.entries_read == 4 and r1.group_lag(g) == 0
    r2.apply([b"XADD", b"2", b"125-2", b"f", b"late"])  # later still, below last_id
    r1.apply([b"XADD", b"2", b"125-2", b"f", b"late"])
    assert ids(r1.read_group(g, c)) == [b"125-2"]
    assert list(g.pel.keys()) == [I(110, 1), I(115, 2), I(120, 1), I(125, 2), I(130, 1)]


def test_group_created_at_the_top_still_gets_concurrent_entries():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.add([b"f", b"v"], I(100, 1))
    r1.create_group(b"g", r1.last_id)  # XGROUP CREATE ... $
    r2.add([b"f", b"v"], I(90, 2))  # written concurrently, below r1's top
    sync(r1, r2)
    g, c = reader(r1)
    assert ids(r1.read_group(g, c)) == [b"90-2"]
    # a group created at an explicit ID starts every sub-stream there
    r1.create_group(b"h", I(95))
    h, hc = reader(r1, b"h")
    assert ids(r1.read_group(h, hc)) == [b"100-1"]


def test_xgroup_setid_resets_the_cursors():
    s, model = interleaved()
    s.create_group(b"g", 0)
    g, c = reader(s)
    assert len(s.read_group(g, c)) == len(model)
    g.last_id = I(1010)  # XGROUP SETID, as the handler does it
    g.entries_read = -1
    got = s.read_group(g, c)
    assert got == [(sid, fv) for sid, _r, fv in model if sid > I(1010)]


def test_record_group_read_moves_the_cursors():
    s, _model = interleaved()
    s.create_group(b"g", 0)
    g, c = reader(s)
    s.record_group_read(g, c, [I(1000, 1), I(1000, 2)], 0)
    assert ids(s.read_group(g, c, 2)) == [b"1000-3", b"1001-1"]


def test_read_group_noack_accept_and_history():
    s, model = interleaved()
    s.create_group(b"g", 0)
    g, c = reader(s)
    seen = []
    got = s.read_group(g, c, 0, accept=lambda sid, fv: len(seen) < 5 and not seen.append(sid))
    assert len(got) == 5
    assert ids(s.read_group(g, c, 3, noack=True)) == ids(
        [(sid, fv) for sid, _r, fv in model[5:8]]
    )
    assert len(g.pel) == 4  # five read, the duplicate 1000-1 once; NOACK adds none
    hist = s.read_group_history(c, 0)
    assert [sid for sid, _fv in hist] == sorted(set(seen))


def test_seed_xack_replicates_only_the_contiguous_prefix():
    """Seed 004's t1-t11: ack 110 -> 110; ack 130 -> nothing; ack 120 -> 130."""
    ActiveStream.id_mode = "liberal"
    r1, r2 = ActiveStream(1), ActiveStream(2)
    for ms in (110, 120, 130):
        r1.add([b"f1", b"v1"], r1.explicit_id(I(ms, 0)))
    r1.create_group(b"group1", 0)
    sync(r1, r2)
    g, c = reader(r1, b"group1", b"Alice")
    assert ids(r1.read_group(g, c)) == [b"110-0", b"120-0", b"130-0"]
    assert r1.drain() == []  # delivered, nothing acknowledged yet
    g.ack_many([I(110)])
    assert r1.drain() == [[b"XACK", b"group1", b"1", b"110-0"]]
    g.ack_many([I(130)])
    assert r1.drain() == []
    g.ack_many([I(120)])
    assert r1.drain() == [[b"XACK", b"group1", b"1", b"130-0"]]
    assert r1.drain() == []


def test_remote_xack_moves_cursors_and_drops_pending():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    for ms in (110, 120, 130):
        r1.add([b"f", b"v"], I(ms, 1))
    r1.create_group(b"g", 0)
    sync(r1, r2)
    # region 2 has delivered 110 and 120 to Bob, unacknowledged
    g2, bob = reader(r2, b"g", b"Bob")
    assert ids(r2.read_group(g2, bob, 2)) == [b"110-1", b"120-1"]
    r2.drain()
    # region 1 reads and acknowledges everything: its prefix reaches 130-1
    g1, alice = reader(r1)
    r1.read_group(g1, alice)
    g1.ack_many([I(110, 1), I(120, 1), I(130, 1)])
    ops = r1.drain()
    assert ops == [[b"XACK", b"g", b"1", b"130-1"]]
    r2.apply(ops[0])
    assert len(g2.pel) == 0 and g2.last_id == I(130, 1)
    assert r2.read_group(g2, bob) == []  # redirected traffic does not re-read
    assert r2.drain() == []  # learnt, not announced again
    r2.apply([b"XACK", b"nope", b"1", b"130-1"])  # an unknown group: nothing


def test_xack_prefix_per_sub_stream():
    s = ActiveStream(1)
    s.add([b"f", b"v"], I(10, 1))
    s.apply([b"XADD", b"2", b"20-2", b"f", b"v"])
    s.add([b"f", b"v"], I(30, 1))
    s.create_group(b"g", 0)
    g, c = reader(s)
    s.read_group(g, c)
    s.drain()
    g.ack_many([I(10, 1), I(30, 1)])
    assert s.drain() == [[b"XACK", b"g", b"1", b"10-1"]]  # 20-2 still pending
    g.ack_many([I(20, 2)])
    assert s.drain() == [[b"XACK", b"g", b"1", b"30-1", b"2", b"20-2"]]


def test_seed_concurrent_group_creation():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.create_group(b"group1", 0)
    r2.create_group(b"group2", 0)
    assert [g.name for g in r1.groups()] == [b"group1"]
    sync(r1, r2)
    assert [g.name for g in r1.groups()] == [g.name for g in r2.groups()] == [b"group1", b"group2"]


def test_seed_del_wins_over_a_concurrent_group():
    r1, r2 = ActiveStream(1), ActiveStream(2)
    r1.create_group(b"group1", 0)
    sync(r1, r2)
    seen = r1.observed()  # r1: DEL x (the key goes; the engine ships this)
    r2.create_group(b"group2", 0)
    ops2 = r2.drain()
    r2.apply([b"DEL", *seen])
    assert r2.is_gone()
    # at r1 the key is gone; group2's creation arrives and the engine's tombstone
    # (a delete it did not see) refuses it: the key stays gone
    assert ops2 == [[b"GCREATE", b"group2", b"0-0", b"-1"]]


def test_seed_destroy_wins_over_a_concurrent_create():
    r1, r2, r3 = ActiveStream(1), ActiveStream(2), ActiveStream(3)
    r1.create_group(b"group1", 0)
    ops1 = r1.drain()
    r2.apply(ops1[0])  # r3 has not seen it
    r1.destroy_group(b"group1")
    r3.create_group(b"group1", 0)
    d, cr = r1.drain(), r3.drain()
    for op in cr:  # r2 sees the create, then the destroy
        r2.apply(op)
    for op in d:
        r2.apply(op)
        r3.apply(op)
    assert r1.is_gone() and r2.is_gone() and r3.is_gone()


def test_group_clock_and_rename_drop():
    s = ActiveStream(1)
    s.create_group(b"g", 0)
    s.set_group_clock(b"g", {1: 3, 2: 1})
    assert s.group_vc == {b"g": {1: 3, 2: 1}}
    s.add([b"f", b"v"], I(1, 1))
    s.drain()
    s.drop_groups()
    assert s.groups() == [] and s.group_vc == {} and s.drain() == []
    assert not s.is_gone()


def test_to_plain_copies_groups():
    s, _model = interleaved()
    s.create_group(b"g", 0)
    g, c = reader(s)
    s.read_group(g, c, 3)
    p = s.to_plain()
    assert type(p) is Stream
    assert p.last_id == s.last_id and p.entries_added == s.entries_added
    pg = p.get_group(b"g")
    assert pg is not g and list(pg.pel.keys()) == list(g.pel.keys())


def test_trim_minid_with_limit_over_several_sub_streams():
    s, model = interleaved()
    s.drain()
    assert s.trim_minid(I(1010), approx=True, limit=4) == 4
    assert s.range() == [(sid, fv) for sid, _r, fv in model[4:]]
    assert s.trim_minid(I(1010), approx=True, limit=0) == 27  # 31 below 1010 (a duplicate), 4 gone
    assert s.first_id == I(1010, 1)


def test_a_tail_read_in_one_sub_stream_goes_straight_to_it():
    s, _model = interleaved()
    for k in range(5):
        s.add([b"f", b"%d" % k], I(3000 + k, 1))
    tail = s.range(I(2999))
    assert ids(tail) == [b"3000-1", b"3001-1", b"3002-1", b"3003-1", b"3004-1"]
    segs = s.range_segments(I(2999), ID_MAX, 0, False, RESP_ENTRIES)
    assert segs and all(seg[3] for seg in segs)  # the decoded-node cache's lists


def test_to_plain_of_a_single_writer_keeps_its_nodes():
    s = ActiveStream(2)
    for k in range(150):
        s.add([b"f", b"%d" % k], I(k + 1, 2))
    s.delete(I(5, 2))
    s.apply([b"XADD", b"1", b"0-1", b"f", b"x"])
    s.apply([b"XDEL", b"1", b"0-1"])  # region 1's sub-stream exists, empty
    s.set_id(I(900), 500)
    p = s.to_plain()
    assert list(p.nodes()) == list(s.subs[2].nodes())
    assert (p.length, p.first_id, p.last_id, p.entries_added) == (149, I(1, 2), I(900), 500)
    assert p.max_deleted_entry_id == I(5, 2)
    assert p.range() == s.range()


def test_drain_with_everything_pending_reads_no_entries(monkeypatch):
    """The prefix check stops at the first pending ID without reading the sub-stream (a
    reverse read below its first entry would walk all of it)."""
    s = ActiveStream(1)
    for k in range(300):
        s.add([b"f", b"v"], I(k + 1, 1))
    s.create_group(b"g", 0)
    g, c = reader(s)
    s.drain()
    reads = []
    real = Stream.range
    monkeypatch.setattr(Stream, "range", lambda self, *a, **k: reads.append(a) or real(self, *a, **k))
    s.read_group(g, c, 10)
    reads.clear()
    assert s.drain() == []
    assert reads == []
