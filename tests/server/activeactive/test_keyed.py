"""Strings, hashes, sets and sorted sets in the Active-Active engine, in-process (keyed.py):
effects carried by hand in chosen orders, full syncs by state merge, and the state's
round trip through the engine's saved form."""

from __future__ import annotations

import pytest
from rill.server.activeactive.keyed import Packed
from rill.server.activeactive.state import dump_state, merge_state

from tests.server.activeactive.test_engine import Region, sync
from tests.server.activeactive.test_types_fuzz import view as fuzz_view

WRITES = [
    ("SET", "s", "a"), ("INCRBY", "n", "5"), ("INCRBYFLOAT", "f", "1.25"),
    ("HSET", "h", "f1", "v1", "f2", "v2"), ("HINCRBY", "h", "c", "3"),
    ("SADD", "set", "a", "b", "c"), ("ZADD", "z", "1", "a", "2", "b"), ("ZINCRBY", "z", "1.5", "a"),
    ("SETEX", "t", "1000", "x"),
]
CONCURRENT_1 = [
    ("SET", "s", "one"), ("INCRBY", "n", "2"), ("HDEL", "h", "f1"), ("SREM", "set", "a"),
    ("ZREM", "z", "a"), ("DEL", "f"), ("HSET", "k", "x", "1"), ("APPEND", "s", "!"),
]
CONCURRENT_2 = [
    ("INCRBY", "n", "10"), ("HSET", "h", "f1", "new"), ("SADD", "set", "a", "d"),
    ("ZINCRBY", "z", "4", "a"), ("INCRBYFLOAT", "f", "0.5"), ("SET", "k", "str"), ("EXPIRE", "h", "500"),
]
KEYS = ["s", "n", "f", "h", "set", "z", "k", "t"]


def view(r: Region) -> dict:
    """What each key reads as, unordered collections sorted."""
    out = {}
    for k in KEYS:
        t = r("TYPE", k)
        if t == b"+string\r\n":
            out[k] = r("GET", k)
        elif t == b"+hash\r\n":
            out[k] = sorted(r("HGETALL", k).split(b"\r\n"))
        elif t == b"+set\r\n":
            out[k] = sorted(r("SMEMBERS", k).split(b"\r\n"))
        elif t == b"+zset\r\n":
            out[k] = r("ZRANGE", k, "0", "-1", "WITHSCORES")
        else:
            out[k] = t
        out[k, "ttl"] = r("PEXPIRETIME", k)
    return out


def test_any_delivery_order_converges():
    a, b, c = Region(1), Region(2), Region(3)
    for w in WRITES:
        a(*w)
    sync(a, b, c)
    for w in CONCURRENT_1:
        a(*w)
    for w in CONCURRENT_2:
        b(*w)
    c("SADD", "set", "z")
    # c hears b first, a hears c before b: different orders, same result.
    b.send(c)
    a.send(c)
    c.send(a)
    b.send(a)
    a.send(b)
    c.send(b)
    assert view(a) == view(b) == view(c)
    assert a("GET", "n") == b"$2\r\n17\r\n"
    assert a("GET", "f") == b"$3\r\n0.5\r\n"  # DEL took 1.25 only: the concurrent +0.5 stays
    assert a("HGET", "h", "f1") == b"$3\r\nnew\r\n"
    assert a("ZSCORE", "z", "a") == b"$1\r\n4\r\n"
    assert a("TYPE", "k") == b"+hash\r\n"  # a hash shows before a string


def test_full_sync_both_ways_equals_every_effect_one_by_one():
    a, b, whole = Region(1), Region(2), Region(3)
    for w in WRITES:
        a(*w)
    sync(a, b, whole)
    for w in CONCURRENT_1:
        a(*w)
    for w in CONCURRENT_2:
        b(*w)
    a.send(whole)
    b.send(whole)
    # a and b never exchange effects: each merges the other's state instead.
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    assert view(a) == view(b) == view(whole)


def test_state_survives_the_engines_saved_form():
    a, b = Region(1), Region(2)
    for w in WRITES:
        a(*w)
    sync(a, b)
    saved = a.engine.export_state()
    again = Region(1)
    for db in a.server.keyspace.dbs:  # the values, as the RDB brings them back
        for key, value in db.data.items():
            again.server.keyspace[db.id].set(key, value)
        for key, at in db.expires.items():
            again.server.keyspace[db.id].set_expire(key, at)
    again.engine.import_state(saved)
    assert {k: repr(v) for k, v in again.engine.keyed.keys.items()} == {
        k: repr(v) for k, v in a.engine.keyed.keys.items()
    }
    # The restored instance's next writes merge as the original's would have.
    again.shipped[2] = again.engine.seq  # b has everything up to the save
    again("HDEL", "h", "f1")
    b("HSET", "h", "f1", "concurrent")
    again.send(b)
    b.send(again)
    assert view(again) == view(b)
    assert b("HGET", "h", "f1") == b"$10\r\nconcurrent\r\n"


def test_counter_totals_agree_where_a_cell_went_and_came_back():
    """Region 2 dropped n's cell (the DEL took it all) before region 3's +3 arrived, region
    3 had applied its own +3 before the DEL: their totals for region 3 must still agree,
    or a later DEL reporting them takes a different amount at each (it left 15 at region 3
    and 5 elsewhere)."""
    a, b, o = Region(1), Region(2), Region(3)
    o("INCRBY", "n", 10)
    sync(a, b, o)
    a("DEL", "n")
    o("INCRBY", "n", 3)
    a.send(b), o.send(b), o.send(a), a.send(o)
    sync(a, b, o)
    b("INCRBY", "n", 1)
    sync(a, b, o)
    assert [r("GET", "n") for r in (a, b, o)] == [b"$1\r\n4\r\n"] * 3
    a("DEL", "n")
    b("INCRBY", "n", 5)
    b.send(o), a.send(o), b.send(a), a.send(b)
    sync(a, b, o)
    assert [r("GET", "n") for r in (a, b, o)] == [b"$1\r\n5\r\n"] * 3


def test_removed_increments_leave_the_assigns_text_alone():
    """A SET concurrent with a DEL, after an INCRBY both saw: where the SET arrived after
    the DEL the cell had gone and came back with the assign alone; where it came first
    the removed increments stayed beside it, and rendered "007" as 7 plus nothing."""
    a, b, c = Region(1), Region(2), Region(3)
    a("INCRBY", "n", 5)
    sync(a, b, c)
    b("DEL", "n")
    c("SET", "n", "007")
    sync(a, b, c)
    assert [r("GET", "n") for r in (a, b, c)] == [b"$3\r\n007\r\n"] * 3


def test_a_refused_command_of_another_type_makes_no_op():
    """HINCRBYFLOAT on a string is refused (WRONGTYPE), but its field was taken for an
    element of the string and its increment shipped: the peers showed the string as 1.25."""
    a, b = Region(1), Region(2)
    a("INCR", "n")
    assert a("HINCRBYFLOAT", "n", "f", "1.25").startswith(b"-WRONGTYPE")
    assert a("ZINCRBY", "n", "2", "m").startswith(b"-WRONGTYPE")
    assert a("SADD", "n", "m").startswith(b"-WRONGTYPE")
    a("HSET", "h", "f", "1")
    assert a("INCRBY", "h", "5").startswith(b"-WRONGTYPE")
    sync(a, b)
    assert [r("GET", "n") for r in (a, b)] == [b"$1\r\n1\r\n"] * 2
    assert [r("HGETALL", "h") for r in (a, b)] == [b"*2\r\n$1\r\nf\r\n$1\r\n1\r\n"] * 2


def pexpiretime(r: Region, key: str) -> bytes:
    return r("PEXPIRETIME", key)


def test_a_store_commands_source_with_a_hidden_kind_is_only_read():
    """set1 is a string with a TTL at region 1 and a set at region 3, concurrently: region 2
    shows the set and hides the string. SINTERSTORE there only read set1, but it was taken for
    a whole-value write over the hidden string: a CDEL that dropped the TTL everywhere but at
    region 2."""
    a, b, c = Region(1), Region(2), Region(3)
    a("PSETEX", "set1", "6755772", "v")
    a.send(b)
    c("SADD", "set1", "m0")
    c.send(b)
    b("SADD", "set0", "m1")
    b("SINTERSTORE", "set0", "set0", "set1")
    sync(a, b, c)
    ttls = [pexpiretime(r, "set1") for r in (a, b, c)]
    assert ttls[0] == ttls[1] == ttls[2] and ttls[0] != b":-1\r\n"
    assert [r("SMEMBERS", "set1") for r in (a, b, c)] == [b"*1\r\n$2\r\nm0\r\n"] * 3


def test_set_keepttl_over_a_key_of_another_kind_keeps_its_ttl_everywhere():
    """The CDEL of the replaced hash takes its TTL where it lands; the TTL the key kept
    here goes with the new value."""
    a, b = Region(1), Region(2)
    a("HSET", "k", "f", "1")
    a("EXPIRE", "k", "1000")
    sync(a, b)
    a("SET", "k", "v", "KEEPTTL")
    sync(a, b)
    assert pexpiretime(a, "k") == pexpiretime(b, "k") != b":-1\r\n"
    assert [r("GET", "k") for r in (a, b)] == [b"$1\r\nv\r\n"] * 2


def test_the_first_effect_after_a_full_sync_says_what_it_saw():
    """Region 3 merges region 2's state (with region 1's z), then deletes z: its CDEL must
    carry a clock that covers region 1's effect, or region 1 and 2 keep z. The engine
    cached the encoded clock and the merge did not reset it."""
    a, b, c = Region(1), Region(2), Region(3)
    a("ZADD", "z", "1", "m")
    a.send(b)
    c("SET", "other", "x")
    merge_state(c.server, dump_state(b.server))
    assert c("ZRANGESTORE", "z", "missing", "0", "-1") == b":0\r\n"
    sync(a, b, c)
    assert [r("EXISTS", "z") for r in (a, b, c)] == [b":0\r\n"] * 3


def test_a_float_increments_reply_is_the_value_it_stored():
    """A float counter stores its exact sum rounded once; the reply was the command's own
    step-by-step sum, which drifts from it (76.48019999999999999 replied, 76.4802 stored)."""
    a = Region(1)
    steps = ["0.1", "1.7", "-0.35", "3.3333", "1e-3", "0.2"]
    for i in range(150):
        d = steps[i % len(steps)]
        assert a("INCRBYFLOAT", "f", d) == a("GET", "f")
        assert a("HINCRBYFLOAT", "h", "x", d) == a("HGET", "h", "x")
        assert a("ZINCRBY", "z", d, "m") == a("ZSCORE", "z", "m")


def test_an_infinite_score_increment_is_an_assign():
    """ZINCRBY / ZADD INCR by inf has no exact delta: the write assigns the score it left
    (it raised OverflowError out of the command)."""
    a, b = Region(1), Region(2)
    a("ZADD", "z", "1", "m")
    assert a("ZINCRBY", "z", "inf", "m") == b"$3\r\ninf\r\n"
    assert a("ZADD", "z", "INCR", "-inf", "n") == b"$4\r\n-inf\r\n"
    sync(a, b)
    assert b("ZRANGE", "z", "0", "-1", "WITHSCORES") == a("ZRANGE", "z", "0", "-1", "WITHSCORES")
    assert b("ZSCORE", "z", "m") == b"$3\r\ninf\r\n"


KIND_WRITES = {
    "string": ("SET", "k", "s"), "hash": ("HSET", "k", "f", "v"), "set": ("SADD", "k", "m"),
    "zset": ("ZADD", "k", "1", "m"), "list": ("LPUSH", "k", "x"), "hll": ("PFADD", "k", "a"),
    "stream": ("XADD", "k", "*", "f", "v"),
}


@pytest.mark.parametrize("mine", list(KIND_WRITES))
@pytest.mark.parametrize("theirs", list(KIND_WRITES))
def test_a_full_sync_leaving_two_kinds_shows_the_one_effects_would(mine, theirs):
    """Two instances write one key as two kinds concurrently, then merge each other's
    state: both show what an instance that got both effects one by one shows (a stream,
    then an HLL, then a list, then hash, zset, set, string). A list arriving by full sync
    stayed hidden under a string, and a stream under a list."""
    if mine == theirs:
        return
    a, b = Region(1, enable_debug_command="yes"), Region(2, enable_debug_command="yes")
    whole = Region(3, enable_debug_command="yes")
    a(*KIND_WRITES[mine])
    b(*KIND_WRITES[theirs])
    a.send(whole)
    b.send(whole)
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    views = [fuzz_view(r) for r in (a, b, whole)]
    for v in views:
        v.pop("digest")
    assert views[0] == views[1] == views[2]


PACKED_WRITES = [
    ("HSET", "h", "f1", "v1", "f2", "v2", "f3", "v3"), ("SADD", "set", "a", "b", "c"),
    ("ZADD", "z", "1", "a", "2", "b"), ("SET", "s", "a"),
]


def test_a_key_one_effect_wrote_keeps_one_stamp_until_another_touches_it():
    """A key written whole by one effect is one Packed tuple (the memory rows of the
    issue), printed as the full form; the next write to it, a peer's op, a removal or
    another kind taking it over gives each element its cell, and every path still merges
    as the full form does (the same writes then run from the full form: same views)."""
    a, b = Region(1), Region(2)
    for w in PACKED_WRITES:
        a(*w)
    state = a.engine.keyed.keys
    assert all(type(state[(0, k.encode())]) is Packed for k in ("h", "set", "z", "s"))
    assert repr(state[(0, b"set")]) == repr(Packed(state[(0, b"set")]).kinds())
    sync(a, b)
    # Concurrent: a's second writes over its packed keys, b's writes arriving at them.
    a("HSET", "h", "f1", "again")
    a("SREM", "set", "b")
    a("SET", "z", "now a string")  # another kind takes the sorted set over
    b("HDEL", "h", "f2")
    b("SADD", "set", "b", "d")
    b("ZADD", "z", "5", "c")
    b("LPUSH", "s", "x")
    assert type(state[(0, b"h")]) is not Packed
    sync(a, b)
    assert view(a) == view(b)
    assert a("SMEMBERS", "set").count(b"\r\nb\r\n") == 1  # b's concurrent SADD re-added b
    assert a("TYPE", "z") == b"+zset\r\n"  # a sorted set shows before a string
    assert a("ZRANGE", "z", "0", "-1") == b"*1\r\n$1\r\nc\r\n"  # the SET saw a and b


def test_packed_keys_through_the_saved_form_and_full_sync():
    """A packed key is saved as the full form (the aa-state keeps its format) and loads
    packed again; a full sync between instances holding packed keys gives what applying
    every effect gives."""
    a, b, whole = (Region(i, enable_debug_command="yes") for i in (1, 2, 3))
    for w in PACKED_WRITES:
        a(*w)
    b("HSET", "h", "f1", "concurrent")  # h is two effects' at whole: not packed there
    b("SADD", "other", "x", "y")
    saved = a.engine.export_state()
    again = Region(1)
    for key, value in a.server.keyspace[0].data.items():
        again.server.keyspace[0].set(key, value)
    again.engine.import_state(saved)
    assert {k: repr(v) for k, v in again.engine.keyed.keys.items()} == {
        k: repr(v) for k, v in a.engine.keyed.keys.items()}
    assert all(type(v) is Packed for v in again.engine.keyed.keys.values())
    a.send(whole)
    b.send(whole)
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    assert view(a) == view(b) == view(whole)
    assert fuzz_view(a) == fuzz_view(b) == fuzz_view(whole)
    assert type(a.engine.keyed.keys[(0, b"set")]) is Packed  # unchanged by the merge


def test_a_re_assert_that_changes_no_value_is_an_effect_of_its_own():
    """Full-sync random seed 292, shrunk: SADD of a member that is there changes no value
    (Redis counts no change) but re-asserts the member. Its op went into the state under a
    dot no effect carried and was never sent (or rode with the next write's effect): the
    instance kept the member while one that applied every effect had it removed by a
    concurrent SPOP."""
    a, b, whole = Region(1), Region(2), Region(3)
    a("SADD", "s", "m5", "m1")
    a.send(b)
    a("SPOP", "s", "3")
    assert b("SADD", "s", "m1", "m1") == b":0\r\n"
    assert b("HSET", "h", "f", "v") == b":1\r\n"
    assert b("HSET", "h", "f", "v") == b":0\r\n"
    seqs = [r[3] for r in b.records()]
    assert seqs == [b"1", b"2", b"3"]  # one effect each, sealed as it ran
    a.send(whole)
    b.send(whole)
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    assert view(a) == view(b) == view(whole)
    assert whole("SMEMBERS", "s") == b"*1\r\n$2\r\nm1\r\n"  # the re-assert beat the SPOP


@pytest.mark.parametrize("removal", [("DEL", "n"), ("HDEL", "h", "c")])
def test_a_removal_after_some_increments_holds_through_a_full_sync(removal):
    """b applied the first of a's three increments, then removed the counter: the removal
    took that one, and the two it never saw stay. b's cell went with it, so only a record
    kept aside says what it took; without it a full sync brought back all three (both
    sides read 3, where applying every effect reads 2). The record also passes on: c,
    which never applied b's removal, learns it from a's merged state."""
    a, b, c, whole = Region(1), Region(2), Region(3), Region(4)
    incr = ("INCR", "n") if removal[0] == "DEL" else ("HINCRBY", "h", "c", "1")
    read = ("GET", "n") if removal[0] == "DEL" else ("HGET", "h", "c")
    a(*incr)
    sync(a, b, c, whole)
    a(*incr)
    a(*incr)
    a.send(c)
    a.send(whole)
    b(*removal)
    b.send(whole)
    saved = b.engine.export_state()
    pa, pb = dump_state(a.server), dump_state(b.server)
    merge_state(a.server, pb)
    merge_state(b.server, pa)
    merge_state(c.server, dump_state(a.server))
    assert whole(*read) == b"$1\r\n2\r\n"
    assert [r(*read) for r in (a, b, c)] == [b"$1\r\n2\r\n"] * 3
    # The record survives the saved form: b restarted from it still passes the removal on.
    again = Region(2)
    again.engine.import_state(saved)
    other_a, d = Region(1), Region(3)
    for _ in range(3):
        other_a(*incr)
    merge_state(d.server, dump_state(other_a.server))
    merge_state(d.server, dump_state(again.server))
    assert d(*read) == b"$1\r\n2\r\n"


def test_removal_records_go_once_every_instance_saw_the_removal():
    a, b = Region(1), Region(2)
    a("INCR", "n")
    sync(a, b)
    a("INCR", "n")
    b("DEL", "n")
    assert b.engine.tombstone_count() == 1  # the record of what the DEL took
    assert b.engine.keyed.collect_removals({1: {1: 2, 2: 0}}, {1}, b.engine.vc) == 0  # a has not seen it
    assert b.engine.keyed.collect_removals({1: {1: 2, 2: 1}}, {1}, b.engine.vc) == 1
    assert b.engine.tombstone_count() == 0


def test_a_key_a_peers_effect_created_keeps_one_stamp_there_too():
    a, b = Region(1, enable_debug_command="yes"), Region(2, enable_debug_command="yes")
    a("HSET", "h", "f", "1", "g", "2")
    a("SADD", "s", "x", "y")
    a("ZADD", "z", "1", "m")
    a("SET", "k", "v")
    a("HINCRBY", "c", "f", "1")  # an increment is no assign: it stays a cell
    sync(a, b)
    for key in (b"h", b"s", b"z", b"k"):
        assert type(b.engine.keyed.keys[(0, key)]) is Packed
        assert repr(b.engine.keyed.keys[(0, key)]) == repr(a.engine.keyed.keys[(0, key)])
    assert type(b.engine.keyed.keys[(0, b"c")]) is dict
    # Later writes at either side still merge as before.
    b("HSET", "h", "f", "b")
    a("HDEL", "h", "g")
    sync(a, b)
    assert fuzz_view(a) == fuzz_view(b)


def test_a_one_element_key_written_over_keeps_one_stamp_at_writer_and_peer():
    """A write over the one element a packed key holds (a SET over a string, an HSET of
    a one-field hash's field, a ZADD or SADD of its one member) leaves it one Packed tuple
    at the writer and at the peer applying it: the assign saw the one before it. A
    concurrent write (one that had not) still leaves both assigns to merge."""
    a, b = Region(1, enable_debug_command="yes"), Region(2, enable_debug_command="yes")
    for r, value in ((a, "1"), (a, "2"), (b, "3")):
        r("SET", "s", value)
        r("HSET", "h", "f", value)
        r("ZADD", "z", value, "m")
        r("SADD", "set", "m")
        sync(a, b)
        for x in (a, b):
            for key in (b"s", b"h", b"z", b"set"):
                assert type(x.engine.keyed.keys[(0, key)]) is Packed
        assert fuzz_view(a) == fuzz_view(b)
    assert b("GET", "s") == a("GET", "s") == b"$1\r\n3\r\n"
    assert a("ZSCORE", "z", "m") == b"$1\r\n3\r\n"
    a("SET", "s", "a")
    b("SET", "s", "b")
    a("HSET", "h", "f", "a")
    b("HSET", "h", "f", "b")
    sync(a, b)
    assert type(a.engine.keyed.keys[(0, b"s")]) is not Packed  # both assigns, concurrent
    assert fuzz_view(a) == fuzz_view(b)
    assert a("GET", "s") == b("GET", "s")
