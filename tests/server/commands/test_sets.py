"""Set commands side by side with redis-server (RESP2 and RESP3), encodings and propagation.

An intset-encoded set reads back in ascending order on both servers, so those
replies are compared byte for byte; hashtable order is unspecified and is
compared sorted.
"""

from __future__ import annotations

import pytest
import redis
from hiredis import Reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import RawClient
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


def _decode(reply: bytes):
    r = Reader()
    r.feed(reply)
    return r.gets()


def check_unordered(sbs, *args) -> None:
    """Same reply up to the order of a top-level collection (hashtable sets)."""
    mine, theirs = sbs.both(*args)
    assert mine[:1] == theirs[:1], (args, mine, theirs)
    a, b = _decode(mine), _decode(theirs)
    if isinstance(a, list):
        assert sorted(a) == sorted(b), (args, mine, theirs)
    else:
        assert a == b, (args, mine, theirs)


def test_basics_intset(oracle):
    oracle.run([
        ("SADD", "s", "3", "1", "2", "-5", "1"),
        ("SADD", "s", "2"),
        ("SCARD", "s"),
        ("SCARD", "nokey"),
        ("SMEMBERS", "s"),
        ("SMEMBERS", "nokey"),
        ("OBJECT", "ENCODING", "s"),
        ("SISMEMBER", "s", "3"),
        ("SISMEMBER", "s", "03"),
        ("SISMEMBER", "s", "x"),
        ("SISMEMBER", "nokey", "x"),
        ("SMISMEMBER", "s", "1", "x", "-5", "1"),
        ("SMISMEMBER", "nokey", "1", "2"),
        ("SREM", "s", "1", "x", "1"),
        ("SREM", "nokey", "1"),
        ("SMEMBERS", "s"),
        ("SADD", "s", "9223372036854775807", "-9223372036854775808"),
        ("SMEMBERS", "s"),
        ("OBJECT", "ENCODING", "s"),
        ("SREM", "s", "3", "2", "-5", "9223372036854775807", "-9223372036854775808"),
        ("EXISTS", "s"),
    ])


@pytest.mark.parametrize("member", ["a", "01", "-0", "+1", " 1", "9223372036854775808", "1.0", ""])
def test_non_integers_make_a_hashtable(oracle, member):
    oracle.run([
        ("SADD", "s", "1", "2"),
        ("SADD", "s", member),
        ("OBJECT", "ENCODING", "s"),
        ("SREM", "s", member),
        ("OBJECT", "ENCODING", "s"),  # never converts back
        ("SADD", "t", member, "1"),
        ("OBJECT", "ENCODING", "t"),
        ("SISMEMBER", "t", member),
    ])


def test_intset_threshold(oracle):
    oracle.run([
        ("CONFIG", "SET", "set-max-intset-entries", "4"),
        ("SADD", "s", "1", "2", "3", "4"),
        ("OBJECT", "ENCODING", "s"),
        ("SADD", "s", "5"),
        ("OBJECT", "ENCODING", "s"),
        ("SADD", "u", "1", "2", "3", "4", "5"),
        ("OBJECT", "ENCODING", "u"),
        ("SUNIONSTORE", "d", "s"),
        ("OBJECT", "ENCODING", "d"),
        ("SREM", "s", "5"),
        ("SUNIONSTORE", "d", "s"),
        ("OBJECT", "ENCODING", "d"),
        ("SUNION", "s"),
        ("CONFIG", "SET", "set-max-intset-entries", "512"),
        ("CONFIG", "GET", "set-max-intset-entries"),
    ])


def test_errors(oracle):
    oracle.run([
        ("SET", "str", "x"),
        ("SADD", "s"),
        ("SADD", "s", "1"),
        ("SREM", "s"),
        ("SMOVE", "s", "d"),
        ("SPOP",),
        ("SPOP", "s", "1", "2"),
        ("SPOP", "s", "-1"),
        ("SPOP", "s", "x"),
        ("SPOP", "nokey", "-1"),
        ("SRANDMEMBER", "s", "1", "2"),
        ("SRANDMEMBER", "s", "x"),
        ("SRANDMEMBER", "s", "-9223372036854775808"),
        ("SRANDMEMBER", "nokey", "x"),
        ("SINTERCARD", "0", "s"),
        ("SINTERCARD", "-1", "s"),
        ("SINTERCARD", "x", "s"),
        ("SINTERCARD", "3", "s", "t"),
        ("SINTERCARD", "1", "s", "LIMIT"),
        ("SINTERCARD", "1", "s", "LIMIT", "-1"),
        ("SINTERCARD", "1", "s", "LIMIT", "x"),
        ("SINTERCARD", "1", "s", "FOO", "1"),
        ("SINTERCARD", "1", "s", "LIMIT", "1", "LIMIT", "2"),
        ("SSCAN", "s", "0", "COUNT", "0"),
        ("SSCAN", "s", "0", "TYPE", "set"),
        ("SSCAN", "s", "x"),
        ("SSCAN", "nokey", "0", "BADOPT"),
    ])
    for cmd in [
        ("SADD", "str", "1"), ("SREM", "str", "1"), ("SCARD", "str"), ("SISMEMBER", "str", "1"),
        ("SMISMEMBER", "str", "1"), ("SMEMBERS", "str"), ("SPOP", "str"), ("SPOP", "str", "2"),
        ("SPOP", "str", "0"), ("SRANDMEMBER", "str"), ("SRANDMEMBER", "str", "0"),
        ("SRANDMEMBER", "str", "-3"), ("SINTER", "s", "str"), ("SINTER", "nokey", "str"),
        ("SINTERCARD", "2", "nokey", "str"), ("SINTERSTORE", "d", "s", "str"), ("SUNION", "s", "str"),
        ("SUNIONSTORE", "d", "str"), ("SDIFF", "s", "str"), ("SDIFF", "nokey", "str"),
        ("SDIFFSTORE", "d", "s", "str"), ("SMOVE", "str", "s", "1"), ("SMOVE", "s", "str", "1"),
        ("SMOVE", "nokey", "str", "1"), ("SSCAN", "str", "0"),
    ]:
        oracle.check(*cmd)


def test_smove(oracle):
    oracle.run([
        ("SADD", "src", "1", "2", "3"),
        ("SADD", "dst", "a"),
        ("SMOVE", "src", "dst", "1"),
        ("SMOVE", "src", "dst", "1"),
        ("SMOVE", "nokey", "dst", "1"),
        ("SMOVE", "src", "src", "2"),
        ("SMOVE", "src", "src", "9"),
        ("SMOVE", "src", "new", "2"),
        ("OBJECT", "ENCODING", "new"),
        ("SMOVE", "src", "new2", "3"),
        ("EXISTS", "src"),
        ("SMEMBERS", "new"),
        ("SMEMBERS", "new2"),
        ("SMOVE", "dst", "strnew", "a"),
        ("OBJECT", "ENCODING", "strnew"),
        ("SADD", "x", "5"),
        ("SADD", "y", "5"),
        ("SMOVE", "x", "y", "5"),
        ("EXISTS", "x"),
        ("SMEMBERS", "y"),
    ])


def test_algebra_intsets(oracle):
    oracle.run([
        ("SADD", "a", "1", "2", "3", "4", "5"),
        ("SADD", "b", "4", "5", "6", "7"),
        ("SADD", "c", "5", "100", "-3"),
        ("SINTER", "a", "b"),
        ("SINTER", "a", "b", "c"),
        ("SINTER", "a", "nokey"),
        ("SINTER", "a"),
        ("SINTER", "a", "a"),
        ("SUNION", "a", "b", "c"),
        ("SUNION", "nokey"),
        ("SUNION", "a", "nokey"),
        ("SDIFF", "a", "b"),
        ("SDIFF", "a", "b", "c"),
        ("SDIFF", "a", "a"),
        ("SDIFF", "a", "nokey"),
        ("SDIFF", "nokey", "a"),
        ("SINTERCARD", "2", "a", "b"),
        ("SINTERCARD", "3", "a", "b", "c"),
        ("SINTERCARD", "2", "a", "nokey"),
        ("SINTERCARD", "1", "a", "LIMIT", "2"),
        ("SINTERCARD", "1", "a", "LIMIT", "0"),
        ("SINTERCARD", "1", "a", "limit", "100"),
        ("SINTERSTORE", "d", "a", "b"),
        ("SMEMBERS", "d"),
        ("OBJECT", "ENCODING", "d"),
        ("SUNIONSTORE", "d", "a", "c"),
        ("SMEMBERS", "d"),
        ("SDIFFSTORE", "d", "a", "b"),
        ("SMEMBERS", "d"),
        ("SINTERSTORE", "d", "a", "nokey"),
        ("EXISTS", "d"),
        ("SUNIONSTORE", "d", "a"),
        ("SDIFFSTORE", "d", "a", "a"),
        ("EXISTS", "d"),
        ("SUNIONSTORE", "d", "nokey"),
        ("SET", "d", "string"),
        ("SINTERSTORE", "d", "a", "b"),  # the destination may hold any type: overwritten
        ("TYPE", "d"),
        ("SET", "d", "string"),
        ("SDIFFSTORE", "d", "a", "a"),  # an empty result deletes it
        ("EXISTS", "d"),
        ("SADD", "d", "1"),
        ("EXPIRE", "d", "100"),
        ("SUNIONSTORE", "d", "a"),
        ("TTL", "d"),
    ])


def test_algebra_mixed(sbs):
    sbs.run([
        ("SADD", "a", "x", "y", "z", "1", "2"),
        ("SADD", "b", "y", "z", "w", "2"),
        ("SADD", "i", "1", "2", "3"),
    ])
    for args in [("SINTER", "a", "b"), ("SUNION", "a", "b", "i"), ("SDIFF", "a", "b"),
                 ("SDIFF", "a", "i"), ("SMEMBERS", "a"), ("SINTER", "a", "i"), ("SDIFF", "i", "a")]:
        check_unordered(sbs, *args)
    sbs.run([
        ("SINTERSTORE", "d", "a", "b"), ("OBJECT", "ENCODING", "d"), ("SCARD", "d"),
        ("SINTERSTORE", "d", "a", "i"), ("OBJECT", "ENCODING", "d"), ("SMEMBERS", "d"),
        ("SDIFFSTORE", "d", "i", "a"), ("OBJECT", "ENCODING", "d"), ("SMEMBERS", "d"),
        ("SUNIONSTORE", "d", "a", "b"), ("OBJECT", "ENCODING", "d"), ("SCARD", "d"),
        ("SINTERCARD", "2", "a", "b"),
        ("SINTERCARD", "2", "a", "b", "LIMIT", "1"),
    ])


def test_spop(oracle):
    oracle.run([
        ("SPOP", "nokey"),
        ("SPOP", "nokey", "3"),
        ("SPOP", "nokey", "0"),
        ("SADD", "s", "1", "2", "3"),
        ("SPOP", "s", "0"),
        ("SPOP", "s", "3"),  # the whole set, in intset order
        ("EXISTS", "s"),
        ("SADD", "s", "5", "4"),
        ("SPOP", "s", "100"),
        ("SADD", "one", "7"),
        ("SPOP", "one"),
        ("EXISTS", "one"),
    ])


def test_spop_and_srandmember_random_cases(r):
    members = {str(i).encode() for i in range(50)}
    r.sadd("s", *members)
    popped = r.spop("s")
    assert popped in members and r.scard("s") == 49
    got = r.spop("s", 5)  # CASE 2: random picks
    assert len(set(got)) == 5 and not (set(got) & r.smembers("s"))
    got = r.spop("s", 40)  # CASE 3: rebuild from the kept ones
    assert len(set(got)) == 40 and r.scard("s") == 4
    assert r.object("encoding", "s") == b"intset"
    rest = r.smembers("s")
    assert len(rest | set(got) | {popped}) == 50 - 5
    r.sadd("h", *(f"m{i}" for i in range(100)))
    got = r.spop("h", 95)
    assert r.scard("h") == 5 and len(set(got)) == 95
    # SRANDMEMBER
    r.sadd("t", *(f"m{i}" for i in range(30)))
    full = r.smembers("t")
    for count in (1, 5, 12, 29):
        got = r.srandmember("t", count)
        assert len(got) == count and len(set(got)) == count and set(got) <= full
    got = r.srandmember("t", -100)
    assert len(got) == 100 and set(got) <= full
    assert r.srandmember("t") in full
    assert r.srandmember("nokey") is None
    assert sorted(r.srandmember("t", 30)) == sorted(full)


def test_srandmember_deterministic(oracle):
    oracle.run([
        ("SRANDMEMBER", "nokey"),
        ("SRANDMEMBER", "nokey", "3"),
        ("SRANDMEMBER", "nokey", "-3"),
        ("SADD", "s", "3", "1", "2"),
        ("SRANDMEMBER", "s", "0"),
        ("SRANDMEMBER", "s", "3"),
        ("SRANDMEMBER", "s", "10"),
        ("SADD", "one", "only"),
        ("SRANDMEMBER", "one"),
        ("SRANDMEMBER", "one", "1"),
        ("SRANDMEMBER", "one", "-3"),
        ("SRANDMEMBER", "one", "5"),
        ("SPOP", "one", "1"),
    ])


def test_sscan(oracle):
    oracle.run([
        ("SSCAN", "nokey", "0"),
        ("SADD", "s", "10", "2", "-1", "33"),
        ("SSCAN", "s", "0"),
        ("SSCAN", "s", "77"),
        ("SSCAN", "s", "0", "MATCH", "*3*"),
        ("SSCAN", "s", "0", "MATCH", "-*", "COUNT", "1"),
        ("SADD", "small", "a"),
        ("SSCAN", "small", "0"),
    ])


def _scan_all(client: RawClient, key: str, *opts: str) -> tuple[list[bytes], int]:
    cursor = b"0"
    items: list[bytes] = []
    calls = 0
    while True:
        cursor, page = _decode(client.call("SSCAN", key, cursor, *opts))
        items += page
        calls += 1
        if cursor == b"0":
            return items, calls


def test_sscan_hashtable(sbs):
    members = [f"m{i}" for i in range(700)]
    sbs.check("SADD", "s", *members)
    items, calls = _scan_all(sbs.rill, "s", "COUNT", "30")
    assert calls > 10 and set(items) == {m.encode() for m in members}
    items, _ = _scan_all(sbs.rill, "s", "MATCH", "m1?", "COUNT", "1000")
    theirs, _ = _scan_all(sbs.oracle, "s", "MATCH", "m1?", "COUNT", "1000")
    assert sorted(items) == sorted(theirs) == sorted(f"m1{i}".encode() for i in range(10))


def test_sscan_survives_removals(r):
    # Redis issue #4906: members present all along are returned even while others go
    r.sadd("s", *range(1000))
    r.sadd("s", "x")
    keep = {str(i).encode() for i in range(0, 1000, 2)}
    cursor, seen = 0, set()
    victims = iter(range(1, 1000, 2))
    while True:
        cursor, page = r.sscan("s", cursor, count=25)
        seen.update(page)
        r.srem("s", *(next(victims, 1) for _ in range(5)))
        if cursor == 0:
            break
    assert keep <= seen


def test_propagation(inproc):
    server, client, effects = inproc
    _run(server, client, "SADD", "s", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
    _run(server, client, "SADD", "s", "1")  # nothing added: not propagated
    reply = _run(server, client, "SPOP", "s")
    popped = _decode(reply)
    effects_after_spop = [argv for _, argv in effects]
    assert effects_after_spop[-1] == [b"SREM", b"s", popped]
    del effects[:]
    got = _decode(_run(server, client, "SPOP", "s", "2"))  # CASE 2
    ops = [argv for _, argv in effects]
    assert ops[0] == [b"MULTI"] and ops[-1] == [b"EXEC"]
    assert sorted(ops[1:-1]) == sorted([b"SREM", b"s", m] for m in got)
    del effects[:]
    got = _decode(_run(server, client, "SPOP", "s", "6"))  # CASE 3
    ops = [argv for _, argv in effects]
    assert sorted(ops[1:-1]) == sorted([b"SREM", b"s", m] for m in got) and len(got) == 6
    del effects[:]
    _run(server, client, "SPOP", "s", "5")  # the rest: DEL
    assert [argv for _, argv in effects] == [[b"DEL", b"s"]]
    del effects[:]
    _run(server, client, "SADD", "a", "1")
    _run(server, client, "SMOVE", "a", "b", "1")
    _run(server, client, "SMOVE", "a", "b", "1")  # no-op
    _run(server, client, "SRANDMEMBER", "b")
    _run(server, client, "SINTERSTORE", "c", "b")
    _run(server, client, "SDIFFSTORE", "c", "nokey")
    _run(server, client, "SINTERSTORE", "c", "nokey")  # nothing to delete any more
    assert [argv for _, argv in effects] == [
        [b"SADD", b"a", b"1"],
        [b"SMOVE", b"a", b"b", b"1"],
        [b"SINTERSTORE", b"c", b"b"],
        [b"SDIFFSTORE", b"c", b"nokey"],
    ]


def test_keyspace_events(r):
    p = r.pubsub()
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p.psubscribe("__keyspace@0__:*")
        p.get_message(timeout=1)
        r.sadd("s", 1, 2, 3)
        r.sadd("s", 1)  # nothing
        r.srem("s", 1)
        r.smove("s", "t", 2)
        r.spop("s")
        r.sadd("u", 1, 2)
        r.sinterstore("d", "u")
        r.sunionstore("d", "u")
        r.sdiffstore("d", "u", "u")
        r.spop("u", 2)
        events = []
        while True:
            m = p.get_message(timeout=0.5)
            if m is None:
                break
            events.append((m["channel"].split(b":", 1)[1], m["data"]))
        assert events == [
            (b"s", b"sadd"), (b"s", b"srem"), (b"s", b"srem"), (b"t", b"sadd"), (b"s", b"spop"),
            (b"s", b"del"), (b"u", b"sadd"), (b"d", b"sinterstore"), (b"d", b"sunionstore"),
            (b"d", b"del"), (b"u", b"spop"), (b"u", b"del"),
        ]
    finally:
        r.config_set("notify-keyspace-events", "")
        p.close()


def test_watch_sees_set_writes(r):
    r.sadd("s", "a", "b", "c")
    for write in (lambda: r.sadd("s", "z"), lambda: r.srem("s", "a"), lambda: r.spop("s"),
                  lambda: r.smove("s", "t", "b")):
        with r.pipeline() as pipe:
            pipe.watch("s")
            write()
            pipe.multi()
            pipe.scard("s")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        r.sadd("s", "a", "b", "c")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(
    st.sampled_from(["SADD", "SREM", "SMOVE", "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
    st.sampled_from(["a", "b"]),
    st.lists(st.sampled_from(["1", "2", "-7", "300000", "x", "y", "01"]), min_size=1, max_size=4),
), max_size=25))
def test_random_ops_match_redis(sbs, ops):
    sbs.check("DEL", "a", "b")
    for cmd, key, members in ops:
        other = "b" if key == "a" else "a"
        if cmd in ("SADD", "SREM"):
            sbs.check(cmd, key, *members)
        elif cmd == "SMOVE":
            sbs.check(cmd, key, other, members[0])
        else:
            sbs.check(cmd, key, key, other)
    for key in ("a", "b"):
        enc = sbs.check("OBJECT", "ENCODING", key)
        if enc == b"$9\r\nhashtable\r\n":
            check_unordered(sbs, "SMEMBERS", key)
        else:
            sbs.check("SMEMBERS", key)


def test_copy_rename_type_and_encoding(oracle):
    oracle.run([
        ("SADD", "i", "3", "1", "2"),
        ("SADD", "h", "a", "b"),
        ("HSET", "hs", "f", "v", "g", "w"),
        ("COPY", "i", "i2"),
        ("COPY", "h", "h2"),
        ("COPY", "hs", "hs2"),
        ("OBJECT", "ENCODING", "i2"),
        ("OBJECT", "ENCODING", "h2"),
        ("OBJECT", "ENCODING", "hs2"),
        ("SMEMBERS", "i2"),
        ("HGETALL", "hs2"),
        ("SADD", "i2", "4"),
        ("SCARD", "i"),  # the copy is independent
        ("RENAME", "i2", "i3"),
        ("SMEMBERS", "i3"),
        ("TYPE", "i3"),
        ("TYPE", "h2"),
        ("TYPE", "hs2"),
    ])


def test_sscan_after_churn_returns_each_member_once(r):
    """Issue 20, finding 4: once an SSCAN had run on a hashtable set, members churned
    by SADD/SREM piled up in its scan log and were returned again and again."""
    r.sadd("s", *[f"m{i}" for i in range(600)])
    assert len(list(r.sscan_iter("s", count=50))) == 600
    cursor, returned = r.sscan("s", 0, count=1)  # and one iteration left open
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.sadd("s", f"k{i % 3}")
        pipe.srem("s", f"k{(i + 1) % 3}")
        if i % 1000 == 999:
            pipe.execute()
            cursor, page = r.sscan("s", cursor, count=1)  # the open iteration goes on
            returned += page
    pipe.execute()
    assert cursor != 0
    cursor2, members = r.sscan("s", 0, count=10_000_000)
    assert cursor2 == 0 and len(members) == r.scard("s") == 602
    assert set(members) == r.smembers("s")
    while cursor:
        cursor, page = r.sscan("s", cursor, count=7)
        returned += page
    assert len(returned) == len(set(returned)) and {f"m{i}".encode() for i in range(600)} <= set(returned)
