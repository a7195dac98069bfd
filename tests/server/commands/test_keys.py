"""Keyspace commands side by side with redis-server 7.0, plus what needs rill's insides
(propagation, dirty) or many replies whose order legitimately differs (KEYS, SCAN)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.commands.test_strings import FAR, FAR_MS, FakeList, Local, run

HYPO = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def local() -> Local:
    return Local()


@pytest.fixture
def both(rill_server, oracle_server):
    """redis-py clients on a flushed rill and a flushed redis-server."""
    mine = redis.Redis(port=rill_server.port)
    theirs = redis.Redis(port=oracle_server.port)
    for c in (mine, theirs):
        c.flushall()
    yield mine, theirs
    mine.close()
    theirs.close()


def on_both(both, *cmd):
    mine, theirs = both
    return mine.execute_command(*cmd), theirs.execute_command(*cmd)


def scan_all(client, *opts, count=None) -> list[bytes]:
    out: list[bytes] = []
    cursor = 0
    while True:
        args = ["SCAN", cursor, *opts] + (["COUNT", count] if count else [])
        cursor, keys = client.execute_command(*args)
        out.extend(keys)
        if int(cursor) == 0:
            return out


# -- DEL / UNLINK / EXISTS / TOUCH / TYPE -----------------------------------------------
def test_del_exists_touch_type(sbs):
    run(
        sbs,
        ("MSET", "a", "1", "b", "2", "c", "3"),
        ("RPUSH", "l", "x"),
        ("EXISTS", "a", "b", "missing", "a"),
        ("TOUCH", "a", "missing", "l"),
        ("TYPE", "a"),
        ("TYPE", "l"),
        ("TYPE", "missing"),
        ("DEL", "a", "missing", "a"),
        ("UNLINK", "b", "l"),
        ("EXISTS", "a", "b", "l"),
        ("DEL", "c"),
        ("DEL",),
        ("UNLINK",),
        ("EXISTS",),
        ("TYPE",),
        ("TYPE", "a", "b"),
    )


def test_type_resp3(sbs3):
    run(sbs3, ("SET", "a", "1"), ("TYPE", "a"), ("TYPE", "none"), ("RANDOMKEY",), ("DEL", "a"),
        ("RANDOMKEY",))


# -- RENAME / RENAMENX --------------------------------------------------------------------
def test_rename(sbs):
    run(
        sbs,
        ("SET", "a", "1"),
        ("RENAME", "a", "b"),
        ("EXISTS", "a"),
        ("GET", "b"),
        ("RENAME", "missing", "x"),
        ("RENAME", "missing", "missing"),
        ("RENAME", "b", "b"),
        ("SET", "c", "3", "EX", "100"),
        ("RENAME", "c", "d"),
        ("TTL", "d"),
        ("SET", "e", "5", "EX", "100"),
        ("SET", "f", "6"),
        ("RENAME", "f", "e"),
        ("TTL", "e"),
        ("GET", "e"),
        ("RPUSH", "l", "x", "y"),
        ("RENAME", "l", "e"),
        ("TYPE", "e"),
        ("LRANGE", "e", 0, -1),
        ("RENAME", "e"),
    )


def test_renamenx(sbs):
    run(
        sbs,
        ("MSET", "a", "1", "b", "2"),
        ("RENAMENX", "a", "b"),
        ("RENAMENX", "a", "c"),
        ("MGET", "a", "b", "c"),
        ("RENAMENX", "c", "c"),
        ("RENAMENX", "missing", "missing"),
        ("RENAMENX", "missing", "z"),
        ("SET", "t", "x", "PX", "100000"),
        ("RENAMENX", "t", "u"),
        ("TTL", "u"),
    )


# -- MOVE / COPY -------------------------------------------------------------------------------
def test_move(sbs):
    run(
        sbs,
        ("SET", "a", "1", "EX", "100"),
        ("MOVE", "a", "1"),
        ("EXISTS", "a"),
        ("MOVE", "a", "1"),
        ("SELECT", "1"),
        ("GET", "a"),
        ("TTL", "a"),
        ("SET", "b", "in db1"),
        ("SELECT", "0"),
        ("SET", "b", "in db0"),
        ("MOVE", "b", "1"),
        ("GET", "b"),
        ("SET", "c", "x"),
        ("MOVE", "c", "0"),
        ("MOVE", "c", "16"),
        ("MOVE", "c", "-1"),
        ("MOVE", "c", "x"),
        ("MOVE", "c", "4294967296"),
        ("MOVE", "missing", "0"),
        ("MOVE", "missing", "1"),
        ("MOVE", "c"),
        ("SELECT", "1"),
        ("FLUSHDB",),
        ("SELECT", "0"),
    )


def test_copy(sbs):
    run(
        sbs,
        ("SET", "a", "hello", "EX", "100"),
        ("COPY", "a", "b"),
        ("GET", "b"),
        ("TTL", "b"),
        ("COPY", "a", "b"),
        ("SET", "a", "changed"),
        ("COPY", "a", "b", "REPLACE"),
        ("GET", "b"),
        ("TTL", "b"),
        ("APPEND", "b", "!"),
        ("MGET", "a", "b"),
        ("COPY", "a", "a"),
        ("COPY", "a", "a", "DB", "0"),
        ("COPY", "a", "a", "DB", "1"),
        ("SELECT", "1"),
        ("GET", "a"),
        ("SELECT", "0"),
        ("COPY", "a", "x", "DB", "16"),
        ("COPY", "a", "x", "DB", "-1"),
        ("COPY", "a", "x", "DB", "abc"),
        ("COPY", "a", "x", "DB"),
        ("COPY", "a", "x", "FOO"),
        ("COPY", "a", "x", "REPLACE", "REPLACE", "DB", "1", "DB", "0"),
        ("COPY", "missing", "x"),
        ("RPUSH", "l", "1", "2", "3"),
        ("COPY", "l", "l2"),
        ("RPUSH", "l2", "4"),
        ("LRANGE", "l", 0, -1),
        ("LRANGE", "l2", 0, -1),
        ("COPY", "l", "a", "REPLACE"),
        ("TYPE", "a"),
        ("COPY", "a"),
        ("SELECT", "1"),
        ("FLUSHDB",),
        ("SELECT", "0"),
    )


def test_copy_of_a_small_integer_is_not_shared(sbs):
    """COPY duplicates the object: a copy of a shared integer (0..9999) is an int with
    refcount 1, a copy of INCRBYFLOAT's embstr stays an embstr; both go with their key
    (RENAME, MOVE, SWAPDB) and end when it is written again, deleted or reloaded."""
    def show(key):
        return [("OBJECT", "ENCODING", key), ("OBJECT", "REFCOUNT", key), ("GET", key)]
    run(sbs, ("SET", "a", "5"), ("COPY", "a", "b"), *show("a"), *show("b"),
        ("COPY", "b", "c"), *show("c"), ("COPY", "a", "b", "REPLACE"), *show("b"),
        ("SET", "n", "-1"), ("COPY", "n", "n2"), *show("n2"),
        ("SET", "big", "10000"), ("COPY", "big", "big2"), *show("big2"),
        ("SET", "f", "1"), ("INCRBYFLOAT", "f", "1"), ("COPY", "f", "f2"), *show("f2"),
        ("APPEND", "r", "7"), ("COPY", "r", "r2"), *show("r2"),
        ("COPY", "a", "a1", "DB", 1), ("SELECT", 1), *show("a1"), ("SELECT", 0),
        ("RENAME", "b", "b2"), *show("b2"), ("MOVE", "b2", 2), ("SELECT", 2), *show("b2"),
        ("SWAPDB", 0, 2), *show("b2"), ("SELECT", 0), *show("b2"), ("SWAPDB", 0, 2),
        ("INCR", "c"), *show("c"), ("DECR", "c"), *show("c"),
        ("COPY", "a", "d"), ("DEL", "d"), ("SET", "d", "5"), *show("d"),
        ("COPY", "a", "e"), ("SET", "e", "5"), *show("e"),
        ("COPY", "a", "g"), ("MSET", "g", "5"), *show("g"),
        ("COPY", "a", "h"), ("DEBUG", "RELOAD"), *show("h"), *show("f2"),
        ("FLUSHALL",))


def test_copy_duplicates_mutable_strings(local):
    local("APPEND", "a", "abc")
    local("COPY", "a", "b")
    local("SETRANGE", "b", 0, "X")
    assert local("MGET", "a", "b") == b"*2\r\n$3\r\nabc\r\n$3\r\nXbc\r\n"


def test_copy_calls_copy_on_other_types(local):
    db = local.server.keyspace[0]
    original = FakeList()
    db.set(b"l", original)
    assert local("COPY", "l", "m") == b":1\r\n"
    assert type(db.data[b"m"]) is FakeList and db.data[b"m"] is not original


# -- RANDOMKEY / KEYS ---------------------------------------------------------------------------
def test_randomkey(sbs):
    run(sbs, ("RANDOMKEY",), ("SET", "only", "1"), ("RANDOMKEY",), ("RANDOMKEY", "x"))


def test_randomkey_deletes_expired_keys(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for i in range(20):
            r.set(f"e{i}", "v", px=1)
        r.set("live", "v")
        time.sleep(0.02)
        assert r.randomkey() == b"live"
        r.delete("live")
        assert r.randomkey() is None
        assert r.dbsize() == 0
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


KEYS = ["", "a", "ab", "abc", "b", "ba", "hello", "hallo", "hxllo", "h*llo", "h\\llo", "a]b",
        "a-b", "x\xff", "x\x80y", "A", "[a]", "^a", "key:1", "key:12", "key:123"]


@pytest.mark.parametrize(
    "pattern",
    ["*", "**", "", "a*", "*a", "*b*", "h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo",
     "h\\*llo", "h\\\\llo", "[a]", "\\[a\\]", "[]a]", "[^]", "[a-]", "a[", "[", "x[\x80-\xff]*",
     "x[\x01-\xff]", "x[\xff-\x01]", "key:1?", "key:1[0-9]*", "?", "??", "*?*", "a\\", "[\\]]*"],
)
def test_keys_patterns(both, pattern):
    mine, theirs = both
    for k in KEYS:
        mine.set(k, "v")
        theirs.set(k, "v")
    got, expected = on_both(both, "KEYS", pattern)
    assert sorted(got) == sorted(expected)


@HYPO
@given(
    st.lists(st.binary(max_size=4), max_size=12, unique=True),
    st.lists(st.sampled_from(list(b"ab*?[]^-\\\xff\x00")), max_size=6).map(bytes),
)
def test_keys_random_patterns(both, keys, pattern):
    mine, theirs = both
    for c in (mine, theirs):
        c.flushall()
        if keys:
            c.mset({k: b"v" for k in keys})
    got, expected = on_both(both, "KEYS", pattern)
    assert sorted(got) == sorted(expected)
    got_scan = scan_all(mine, "MATCH", pattern)
    assert sorted(got_scan) == sorted(expected)


def test_keys_skips_expired(sbs):
    sbs.check("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        run(sbs, ("SET", "a", "1", "PX", "1"), ("SET", "b", "1"))
        time.sleep(0.01)
        run(sbs, ("KEYS", "*"), ("DBSIZE",), ("KEYS", "?"), ("DBSIZE",))
    finally:
        sbs.check("DEBUG", "SET-ACTIVE-EXPIRE", "1")


# -- SCAN --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [("0",), ("",), ("+0",), ("-0",), ("18446744073709551615",), ("-1",), ("abc",), (" 0",), ("0 ",),
     ("18446744073709551616",), ("99999999999999999999999",), ("1x",), ("0x10",), ("+",), ("-",),
     ("0", "COUNT", "0"), ("0", "COUNT", "-1"), ("0", "COUNT", "abc"), ("0", "COUNT"),
     ("0", "MATCH"), ("0", "TYPE"), ("0", "FOO", "bar"), ("0", "COUNT", "10", "MATCH", "*", "TYPE", "x"),
     ("abc", "COUNT", "0"), ("0", "COUNT", "9223372036854775808"), ()],
)
def test_scan_arguments_on_empty_db(sbs, args):
    sbs.check("SCAN", *args)


def test_scan_single_call_when_everything_fits(sbs):
    run(sbs, ("SET", "only", "1"), ("SCAN", "0"), ("SCAN", "0", "TYPE", "STRING"),
        ("SCAN", "0", "TYPE", "list"), ("SCAN", "0", "MATCH", "o*"), ("SCAN", "0", "MATCH", "x*"))


def test_scan_full_iterations(both):
    mine, theirs = both
    for c in (mine, theirs):
        c.mset({f"key:{i}": "v" for i in range(1000)})
        c.rpush("alist", "x")
        c.set("", "empty key")
    for opts, count in [((), None), ((), 5), (("MATCH", "key:1??"), None), (("TYPE", "list"), None),
                        (("TYPE", "string", "MATCH", "key:*"), 10), (("MATCH", "*"), 100),
                        (("MATCH", "**"), 1000), (("TYPE", "hash"), 3)]:
        got = scan_all(mine, *opts, count=count)
        expected = scan_all(theirs, *opts, count=count)
        assert sorted(set(got)) == sorted(set(expected)), opts


def test_scan_count_is_roughly_honoured(r):
    r.mset({f"k{i}": "v" for i in range(1000)})
    cursor, keys = r.scan(0, count=20)
    assert cursor != 0 and 10 <= len(keys) <= 40
    calls = 0
    cursor = 0
    while True:
        cursor, keys = r.scan(cursor, count=100)
        calls += 1
        if cursor == 0:
            break
    assert 5 <= calls <= 20


def test_scan_expired_keys_are_filtered_and_deleted(r):
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for i in range(100):
            r.set(f"e{i}", "v", px=1)
        for i in range(100):
            r.set(f"k{i}", "v")
        time.sleep(0.02)
        assert r.dbsize() == 200
        assert sorted(scan_all(r)) == sorted(f"k{i}".encode() for i in range(100))
        assert r.dbsize() == 100
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["add", "del", "scan"]), st.integers(0, 300)), max_size=80),
       st.integers(1, 20))
def test_scan_guarantees_over_the_wire(r, script, count):
    r.flushall()
    r.mset({f"k{i}": "v" for i in range(200)})
    present = {f"k{i}".encode() for i in range(200)}
    ever = set(present)
    returned: list[bytes] = []
    cursor, keys = r.scan(0, count=count)
    returned.extend(keys)
    steps = iter(script)
    while cursor != 0:
        op, n = next(steps, ("scan", 0))
        key = f"k{n}".encode()
        if op == "add":
            r.set(key, "v")
            ever.add(key)
        elif op == "del":
            r.delete(key)
            present.discard(key)
        else:
            cursor, keys = r.scan(cursor, count=count)
            returned.extend(keys)
    assert present <= set(returned)
    assert set(returned) <= ever


def _churn(client, rounds: int, add, remove, between=None) -> None:
    """rounds of add(i % 3); remove((i + 1) % 3), pipelined; ``between()`` after every
    1000 rounds (a page of an open iteration: one idle for a long stretch of writes
    may restart, and return keys twice)."""
    pipe = client.pipeline(transaction=False)
    for i in range(rounds):
        add(pipe, i % 3)
        remove(pipe, (i + 1) % 3)
        if i % 1000 == 999:
            pipe.execute()
            if between is not None:
                between()
    pipe.execute()


def test_churned_keys_are_returned_once(r):
    """Issue 20, finding 4: after 200k rounds of SET k<i%3> v; DEL k<(i+1)%3>,
    SCAN 0 COUNT 10000000 returned 350 keys while DBSIZE was 2."""
    r.mset({f"s{i}": "v" for i in range(100)})
    set_k = lambda pipe, i: pipe.set(f"k{i}", "v")  # noqa: E731
    del_k = lambda pipe, i: pipe.delete(f"k{i}")  # noqa: E731
    _churn(r, 20_000, set_k, del_k)
    cursor, keys = r.scan(0, count=10_000_000)
    assert cursor == 0 and len(keys) == r.dbsize() == 102
    assert sorted(keys) == sorted(r.keys())
    # the same with an iteration open across the churn
    walk = dict(zip(("cursor", "returned"), r.scan(0, count=1), strict=True))

    def page() -> None:
        walk["cursor"], keys = r.scan(walk["cursor"], count=1)
        walk["returned"] += keys

    _churn(r, 20_000, set_k, del_k, page)
    cursor, returned = walk["cursor"], walk["returned"]
    assert cursor != 0
    cursor2, keys = r.scan(0, count=10_000_000)
    assert cursor2 == 0 and len(keys) == r.dbsize() == 102
    assert sorted(keys) == sorted(r.keys())
    while cursor:
        cursor, page = r.scan(cursor, count=7)
        returned += page
    stable = [f"s{i}".encode() for i in range(100)]
    assert set(stable) <= set(returned) and len(returned) == len(set(returned))


_SCAN_FAMILY_SETUP = [
    ("SADD", "ints", "5", "-3", "100", "7", "9223372036854775807", "-9223372036854775808"),
    ("HSET", "h", "f1", "v1", "f2", "v2", "g", ""),
    ("ZADD", "z", "1", "a", "2", "b", "1.5", "c", "-0", "d", "inf", "e", "100000000000000000", "f"),
    ("SADD", "bigs", *[f"m{i}" for i in range(600)]),
    ("HSET", "bigh", *[x for i in range(600) for x in (f"f{i}", "v")]),
    ("ZADD", "bigz", *[x for i in range(200) for x in (str(i), f"m{i}")]),
    ("SET", "str", "x"),
]


def _scan_family_script() -> list[tuple]:
    script: list[tuple] = []
    # a compact encoding is answered whole, in its own order, with cursor 0
    for cmd, key in (("SSCAN", "ints"), ("HSCAN", "h"), ("ZSCAN", "z")):
        script += [(cmd, key, "0"), (cmd, key, "12345"), (cmd, key, "0", "COUNT", "1"),
                   (cmd, key, "0", "MATCH", "*1*"), (cmd, key, "0", "MATCH", "[a-f]", "COUNT", "2"),
                   (cmd, key, "0", "MATCH", "*")]
    # argument errors, on compact and hashtable encodings, a wrong type and a missing key
    for cmd, keys in (("SSCAN", ("ints", "bigs")), ("HSCAN", ("h", "bigh")), ("ZSCAN", ("z", "bigz"))):
        for key in (*keys, "str", "nokey"):
            for args in (("0", "COUNT", "0"), ("0", "COUNT", "-1"), ("0", "COUNT", "x"),
                         ("0", "COUNT", "9223372036854775808"), ("0", "COUNT"), ("0", "MATCH"),
                         ("0", "TYPE", "string"), ("0", "NOVALUES"), ("0", "COUNT", "10", "COUNT", "0"),
                         ("0", "MATCH", "a", "COUNT", "x"), ("x",), ("-1", "COUNT", "0"),
                         ("18446744073709551616",), (" 0",), ("0", "BOGUS", "1")):
                script.append((cmd, key, *args))
    script += [("SCAN", "0", "TYPE"), ("SCAN", "0", "COUNT", "0", "TYPE", "set"),
               ("SCAN", "x", "TYPE", "set"), ("SCAN", "0", "MATCH", "a", "COUNT", "-5")]
    return script


@pytest.mark.parametrize("fixture", ["sbs", "sbs3"])
def test_scan_family_replies_match_redis(request, fixture):
    """What is deterministic in the SCAN family, byte for byte: compact encodings in one
    reply, and every argument error, in RESP2 and RESP3."""
    sbs = request.getfixturevalue(fixture)
    run(sbs, *_SCAN_FAMILY_SETUP)
    for enc in (("ints", b"intset"), ("bigs", b"hashtable"), ("h", b"listpack"), ("bigh", b"hashtable"),
                ("z", b"listpack"), ("bigz", b"skiplist")):
        assert enc[1] in sbs.check("OBJECT", "ENCODING", enc[0])
    run(sbs, *_scan_family_script())


# -- EXPIRE family -------------------------------------------------------------------------------
def test_expire_ttl_persist(sbs):
    run(
        sbs,
        ("SET", "k", "v"),
        ("TTL", "k"),
        ("PTTL", "k"),
        ("EXPIRETIME", "k"),
        ("PEXPIRETIME", "k"),
        ("TTL", "missing"),
        ("PTTL", "missing"),
        ("EXPIRETIME", "missing"),
        ("PEXPIRETIME", "missing"),
        ("EXPIRE", "k", "100"),
        ("TTL", "k"),
        ("PEXPIRE", "k", "200000"),
        ("TTL", "k"),
        ("PEXPIRE", "k", "1600"),
        ("TTL", "k"),
        ("EXPIREAT", "k", FAR),
        ("EXPIRETIME", "k"),
        ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", FAR_MS),
        ("PEXPIRETIME", "k"),
        ("EXPIRETIME", "k"),
        ("PERSIST", "k"),
        ("PERSIST", "k"),
        ("PERSIST", "missing"),
        ("TTL", "k"),
        ("EXPIRE", "missing", "100"),
        ("PEXPIREAT", "missing", FAR_MS),
        ("EXPIRE", "k", "-1"),
        ("EXISTS", "k"),
        ("SET", "k", "v"),
        ("EXPIREAT", "k", "1"),
        ("EXISTS", "k"),
        ("SET", "k", "v"),
        ("PEXPIRE", "k", "0"),
        ("EXISTS", "k"),
        ("SET", "k", "v"),
        ("PEXPIREAT", "k", "9223372036854770000"),
        ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "-9223372036854770000"),
        ("TTL", "k"),
        ("EXPIRE", "k"),
        ("TTL",),
        ("PERSIST",),
    )


@pytest.mark.parametrize(
    "cmd",
    [("EXPIRE", "k", ""), ("EXPIRE", "k", "abc"), ("EXPIRE", "k", "1.5"),
     ("EXPIRE", "k", "9223370399119966"), ("EXPIRE", "k", "9223372036854776"),
     ("EXPIRE", "k", "10000000000000000"), ("EXPIRE", "k", "18446744073709561"),
     ("EXPIRE", "k", "-9223372036854776"), ("EXPIRE", "k", "-9999999999999999"),
     ("EXPIRE", "k", "-9223372036854775"), ("PEXPIRE", "k", "9223372036854770000"),
     ("EXPIREAT", "k", "9223372036854776"), ("EXPIREAT", "k", "9223372036854775"),
     ("EXPIREAT", "k", "-9223372036854776"), ("PEXPIREAT", "k", "9223372036854775808"),
     ("PEXPIRE", "missing", "9223372036854770000"), ("EXPIRE", "missing", "abc")],
)
def test_expire_errors(sbs, cmd):
    sbs.check("SET", "k", "v")
    sbs.check(*cmd)
    sbs.check("TTL", "k")


def test_expire_options(sbs):
    run(
        sbs,
        ("SET", "k", "v", "EX", "100"),
        ("EXPIRE", "k", "200", "NX"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "200", "NX"),
        ("TTL", "k"),
        ("SET", "k", "v", "EX", "100"),
        ("EXPIRE", "k", "200", "XX"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "200", "xx"),
        ("TTL", "k"),
        ("SET", "k", "v", "EX", "100"),
        ("EXPIRE", "k", "200", "GT"),
        ("TTL", "k"),
        ("EXPIRE", "k", "100", "gt"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "200", "GT"),
        ("TTL", "k"),
        ("SET", "k", "v", "EX", "100"),
        ("EXPIRE", "k", "200", "LT"),
        ("EXPIRE", "k", "50", "LT"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "100", "LT"),
        ("TTL", "k"),
        ("SET", "k", "v", "EX", "200"),
        ("EXPIRE", "k", "100", "LT", "XX"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "200", "LT", "XX"),
        ("EXPIRE", "k", "200", "XX", "XX", "GT"),
        ("EXPIRE", "k", "200", "LT", "GT"),
        ("EXPIRE", "k", "200", "NX", "GT"),
        ("EXPIRE", "k", "200", "NX", "LT"),
        ("EXPIRE", "k", "200", "NX", "XX"),
        ("EXPIRE", "k", "200", "AB"),
        ("EXPIRE", "k", "200", "XX", "AB"),
        ("EXPIRE", "k", "abc", "AB"),
        ("EXPIRE", "k", "abc", "NX", "XX"),
        ("EXPIRE", "k", "10000000000000000", "NX", "XX"),
        ("PEXPIREAT", "k", FAR_MS, "NX"),
        ("PEXPIRETIME", "k"),
        ("SET", "k", "v", "EX", "100"),
        ("EXPIRE", "k", "-10", "LT"),
        ("TTL", "k"),
        ("SET", "k", "v"),
        ("EXPIRE", "k", "-10", "LT"),
        ("TTL", "k"),
        ("EXPIRE", "none", "100", "NX"),
        ("EXPIRE", "none", "100", "XX"),
        ("EXPIRE", "none", "100", "GT"),
        ("EXPIRE", "none", "100", "LT"),
    )


def test_ttl_resp3(sbs3):
    run(sbs3, ("SET", "k", "v", "EXAT", FAR), ("TTL", "missing"), ("EXPIRETIME", "k"), ("PERSIST", "k"))


def test_expire_on_other_types(sbs):
    run(sbs, ("RPUSH", "l", "a"), ("EXPIRE", "l", "100"), ("TTL", "l"), ("PERSIST", "l"),
        ("TTL", "l"))


# -- propagation and dirty -------------------------------------------------------------------------
def test_expire_propagates_as_pexpireat(local):
    local("SET", "k", "v")
    before = int(time.time() * 1000)
    (op,) = local.effects("EXPIRE", "k", "100")
    assert op[:2] == [b"PEXPIREAT", b"k"]
    assert before + 100_000 <= int(op[2]) <= int(time.time() * 1000) + 100_000
    (op,) = local.effects("PEXPIRE", "k", "200000", "GT")
    assert op[0] == b"PEXPIREAT" and op[3:] == [b"GT"]
    assert local.effects("EXPIREAT", "k", FAR, "XX") == [[b"PEXPIREAT", b"k", str(FAR * 1000).encode(), b"XX"]]
    assert local.effects("pexpireat", "k", FAR_MS) == [[b"pexpireat", b"k", str(FAR_MS).encode()]]
    assert local.effects("EXPIRE", "k", "100", "NX") == []
    assert local.effects("EXPIRE", "missing", "100") == []
    assert local.effects("PERSIST", "k") == [[b"PERSIST", b"k"]]
    assert local.effects("PERSIST", "k") == []
    assert local.effects("EXPIRE", "k", "-1") == [[b"DEL", b"k"]]
    local("CONFIG", "SET", "lazyfree-lazy-expire", "yes")
    local("SET", "k", "v")
    assert local.effects("PEXPIREAT", "k", "1") == [[b"UNLINK", b"k"]]


def test_key_commands_propagation(local):
    local("MSET", "a", "1", "b", "2", "c", "3")
    assert local.effects("DEL", "a", "missing") == [[b"DEL", b"a", b"missing"]]
    assert local.effects("DEL", "missing") == []
    assert local.effects("RENAME", "b", "x") == [[b"RENAME", b"b", b"x"]]
    assert local.effects("RENAMENX", "x", "c") == []
    assert local.effects("MOVE", "x", "1") == [[b"MOVE", b"x", b"1"]]
    assert local.effects("COPY", "c", "d") == [[b"COPY", b"c", b"d"]]
    assert local.effects("COPY", "c", "d") == []


def test_dirty_counts_for_keys(local):
    server = local.server

    def dirty(*cmd) -> int:
        d = server.dirty
        local(*cmd)
        return server.dirty - d

    local("MSET", "a", "1", "b", "2", "c", "3", "d", "4")
    assert dirty("DEL", "a", "b", "missing") == 2
    assert dirty("UNLINK", "c") == 1
    assert dirty("EXISTS", "d") == 0
    assert dirty("EXPIRE", "d", "100") == 1
    assert dirty("EXPIRE", "d", "100", "NX") == 0
    assert dirty("PERSIST", "d") == 1
    assert dirty("EXPIRE", "d", "-1") == 1
    assert dirty("RENAME", "missing", "x") == 0


def test_lazy_expiry_during_del_is_not_counted(local):
    local("SET", "k", "v", "PX", "1")
    time.sleep(0.01)
    dirty = local.server.dirty
    assert local("DEL", "k") == b":0\r\n"
    assert local.server.dirty == dirty  # only the expiry's own DEL is an effect
    assert [b"DEL", b"k"] in local.propagated
    assert local.server.keyspace.expired_keys == 1
    assert local("EXISTS", "k") == b":0\r\n"


# -- WATCH ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cmd,watched",
    [
        (("DEL", "w"), "w"), (("UNLINK", "w"), "w"), (("RENAME", "w", "z"), "w"),
        (("RENAME", "o", "w"), "w"), (("RENAMENX", "o", "new"), "new"), (("MOVE", "w", "1"), "w"),
        (("COPY", "o", "w", "REPLACE"), "w"), (("EXPIRE", "w", "100"), "w"),
        (("PEXPIRE", "w", "100000"), "w"), (("EXPIREAT", "w", FAR), "w"),
        (("PEXPIREAT", "w", FAR_MS), "w"), (("EXPIRE", "w", "-1"), "w"), (("PERSIST", "t"), "t"),
    ],
)
def test_key_writes_touch_watched_keys(rill_server, cmd, watched):
    a = redis.Redis(port=rill_server.port)
    b = redis.Redis(port=rill_server.port)
    try:
        a.flushall()
        a.mset({"w": "1", "o": "2"})
        a.set("t", "3", ex=1000)
        pipe = a.pipeline()
        pipe.watch(watched)
        b.execute_command(*cmd)
        pipe.multi()
        pipe.get(watched)
        with pytest.raises(redis.WatchError):
            pipe.execute()
    finally:
        a.flushall()
        a.close()
        b.close()


def test_reads_and_failed_writes_leave_watched_keys(rill_server):
    a = redis.Redis(port=rill_server.port)
    b = redis.Redis(port=rill_server.port)
    try:
        a.flushall()
        a.set("w", "1")
        pipe = a.pipeline()
        pipe.watch("w")
        b.exists("w")
        b.ttl("w")
        b.type("w")
        b.expire("w", 100, nx=False, xx=True)
        b.persist("w")
        b.renamenx("x", "w") if b.exists("x") else None
        b.copy("w", "w2")
        pipe.multi()
        pipe.get("w")
        assert pipe.execute() == [b"1"]
    finally:
        a.close()
        b.close()


# -- redis-py ------------------------------------------------------------------------------------------
def test_redis_py_sync(r):
    r.mset({"a": "1", "b": "2"})
    assert r.exists("a", "b", "c") == 2
    assert r.type("a") == b"string"
    assert r.expire("a", 100) is True
    assert r.ttl("a") == 100
    assert r.rename("a", "c") is True
    assert r.ttl("c") == 100
    assert r.persist("c") is True
    assert r.copy("c", "d") is True
    assert sorted(r.keys()) == [b"b", b"c", b"d"]
    assert sorted(r.scan_iter(match="[bc]")) == [b"b", b"c"]
    assert r.delete("b", "c", "d") == 3
    assert r.randomkey() is None


async def test_redis_py_asyncio(rill_server):
    client = redis.asyncio.Redis(port=rill_server.port)
    try:
        await client.flushall()
        await client.mset({f"k{i}": i for i in range(100)})
        keys = [k async for k in client.scan_iter(count=7)]
        assert sorted(keys) == sorted(f"k{i}".encode() for i in range(100))
        assert await client.pexpire("k1", 100_000) is True
        assert 99_000 < await client.pttl("k1") <= 100_000
        assert await client.unlink(*[f"k{i}" for i in range(50)]) == 50
        counts = await asyncio.gather(*(client.exists(f"k{i}") for i in range(100)))
        assert sum(counts) == 50
    finally:
        await client.aclose()


@pytest.mark.parametrize("how", ["COPY", "MOVE"])
def test_copy_and_move_wake_clients_blocked_in_the_target_db(rill_server, how):
    from tests.support import RawClient, encode_command

    waiter = RawClient(rill_server.port)
    writer = RawClient(rill_server.port)
    try:
        writer.call("FLUSHALL")
        waiter.call("SELECT", "1")
        waiter.send_raw(encode_command(["BLPOP", "dst" if how == "COPY" else "src", "5"]))
        time.sleep(0.1)
        writer.call("RPUSH", "src", "x")
        if how == "COPY":
            assert writer.call("COPY", "src", "dst", "DB", "1") == b":1\r\n"
            assert waiter.read_reply() == b"*2\r\n$3\r\ndst\r\n$1\r\nx\r\n"
        else:
            assert writer.call("MOVE", "src", "1") == b":1\r\n"
            assert waiter.read_reply() == b"*2\r\n$3\r\nsrc\r\n$1\r\nx\r\n"
    finally:
        writer.call("FLUSHALL")
        waiter.close()
        writer.close()


EVENT_SCRIPT = [
    ("SET", "a", "1"), ("SET", "a", "2"), ("SET", "b", "1", "EX", "100"), ("SETNX", "b", "x"),
    ("SETNX", "c", "x"), ("SETEX", "d", "100", "x"), ("PSETEX", "d", "100000", "y"),
    ("GETSET", "a", "3"), ("GETDEL", "c"), ("GETEX", "a", "EX", "100"), ("GETEX", "a", "PERSIST"),
    ("GETEX", "a", "PERSIST"), ("GETEX", "d", "PXAT", "1"), ("MSET", "m1", "1", "m2", "2"),
    ("MSETNX", "m1", "1"), ("MSETNX", "m3", "1", "m4", "2"), ("APPEND", "ap", "x"), ("APPEND", "ap", "y"),
    ("SETRANGE", "sr", "2", "x"), ("SETRANGE", "sr", "0", ""), ("INCR", "i"), ("DECRBY", "i", "5"),
    ("INCRBYFLOAT", "f", "1.5"), ("GET", "nope"), ("MGET", "a", "nope"), ("EXISTS", "nope"),
    ("TYPE", "nope"), ("TTL", "nope"), ("STRLEN", "nope"), ("GETRANGE", "nope", "0", "1"),
    ("DEL", "m1", "nope", "m2"), ("UNLINK", "m3"), ("EXPIRE", "m4", "100"), ("PEXPIRE", "m4", "100000", "NX"),
    ("PERSIST", "m4"), ("EXPIRE", "m4", "-1"), ("RENAME", "a", "a2"), ("RENAMENX", "a2", "b"),
    ("RENAMENX", "a2", "a3"), ("MOVE", "a3", "1"), ("COPY", "b", "b2"), ("COPY", "b", "b2", "REPLACE"),
    ("COPY", "b", "x", "DB", "1"), ("TOUCH", "b", "nope"), ("LCS", "b", "nope"),
]


def test_keyspace_events_match_redis(oracle_server, local):
    events: list[tuple[int, bytes, bytes]] = []
    keys_module = __import__("rill.server.notify", fromlist=["notify"])
    keyspace = local.server.keyspace
    keys_module.notifier = lambda db_id, cls, event, key: events.append((db_id, event, key))
    keyspace.on_new = lambda db, key: events.append((db.id, b"new", key))
    keyspace.on_miss = lambda db, key: events.append((db.id, b"keymiss", key))
    oracle = redis.Redis(port=oracle_server.port)
    sub = oracle.pubsub()
    try:
        oracle.flushall()
        oracle.config_set("notify-keyspace-events", "Eg$nm")
        sub.psubscribe("__keyevent@*")
        assert sub.get_message(timeout=5)["type"] == "psubscribe"
        for cmd in EVENT_SCRIPT:
            local(*cmd)
            try:
                oracle.execute_command(*cmd)
            except redis.ResponseError:
                pass
        oracle.execute_command("PING")
        expected = []
        while True:
            msg = sub.get_message(timeout=0.5)
            if msg is None:
                break
            channel = msg["channel"]  # __keyevent@<db>__:<event>
            db = int(channel.split(b"@")[1].split(b"__")[0])
            expected.append((db, channel.split(b"__:", 1)[1], msg["data"]))
        assert events == expected
    finally:
        keys_module.notifier = None
        oracle.config_set("notify-keyspace-events", "")
        sub.close()
        oracle.flushall()
        oracle.close()


def test_lazy_expiry_in_scan_and_randomkey_is_not_wrapped(local):
    """SCAN/RANDOMKEY may expire keys nobody named: Redis propagates those DELs bare."""
    for cmd in (("SCAN", "0", "COUNT", "100"), ("RANDOMKEY",)):
        local("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for k in ("a", "b", "c"):
            local("SET", k, "v", "PX", "1")
        time.sleep(0.01)
        effects = local.effects(*cmd)
        assert effects and all(op[0] == b"DEL" for op in effects), (cmd, effects)
    # A command that names its keys still wraps several effects in one transaction.
    local("SET", "x", "v", "PX", "1")
    local("SET", "y", "v", "PX", "1")
    time.sleep(0.01)
    effects = local.effects("MGET", "x", "y")
    assert effects[0] == [b"MULTI"] and effects[-1] == [b"EXEC"]


def _lazyfreed_after(c: redis.Redis, *commands: tuple) -> int:
    """INFO lazyfreed_objects once ``commands`` ran and Redis's free thread is idle."""
    for cmd in commands:
        c.execute_command(*cmd)
    deadline = time.monotonic() + 5
    while c.info("memory")["lazyfree_pending_objects"] and time.monotonic() < deadline:
        time.sleep(0.01)
    return c.info("memory")["lazyfreed_objects"]


def _lazyfree_scenario(c: redis.Redis) -> list[int]:
    seen = []
    c.config_set("stream-node-max-entries", 5)
    c.execute_command("CONFIG", "RESETSTAT")
    c.sadd("bigset", *[f"m{i}" for i in range(100)])  # a hash table: 100 allocations
    c.sadd("intset", *range(100))  # one allocation
    c.rpush("biglist", *[b"x" * 100] * 8000)  # ~100 quicklist nodes
    c.rpush("smalllist", *range(100))  # one node
    c.zadd("bigz", {f"m{i}": i for i in range(200)})
    c.hset("bighash", mapping={f"f{i}": i for i in range(600)})  # past 512: a hash table
    p = c.pipeline(transaction=False)
    for i in range(1000):
        p.xadd("bigstream", {"f": i})
    p.execute()
    c.xadd("smallstream", {"f": 1})
    c.xgroup_create("smallstream", "g", "$")
    c.xgroup_destroy("smallstream", "g")
    seen.append(_lazyfreed_after(c, ("UNLINK", "bigset", "intset", "nosuchkey")))
    seen.append(_lazyfreed_after(c, ("UNLINK", "biglist", "smalllist")))
    seen.append(_lazyfreed_after(c, ("UNLINK", "bigstream", "smallstream", "bigz")))
    seen.append(_lazyfreed_after(c, ("DEL", "bighash")))  # DEL frees at once by default
    c.hset("bighash", mapping={f"f{i}": i for i in range(600)})  # past 512: a hash table
    c.config_set("lazyfree-lazy-user-del", "yes")
    seen.append(_lazyfreed_after(c, ("DEL", "bighash")))
    c.config_set("lazyfree-lazy-user-del", "no")
    c.mset({"a": 1, "b": 2, "c": 3})
    seen.append(_lazyfreed_after(c, ("FLUSHALL", "ASYNC")))  # every key counts
    c.mset({"a": 1, "b": 2})
    c.config_set("lazyfree-lazy-user-flush", "yes")
    seen.append(_lazyfreed_after(c, ("FLUSHDB",)))
    c.mset({"a": 1})
    seen.append(_lazyfreed_after(c, ("FLUSHALL", "SYNC")))
    c.config_set("lazyfree-lazy-user-flush", "no")
    c.config_set("stream-node-max-entries", 100)
    return seen


def test_lazyfreed_objects_side_by_side(both):
    mine, theirs = both
    seen = _lazyfree_scenario(mine)
    assert seen == _lazyfree_scenario(theirs)
    assert seen == [1, 2, 4, 4, 5, 8, 10, 10]


@pytest.mark.parametrize("elements, fill", [
    ([b"x" * 100] * 8000, -2), ([b"y" * 10] * 300, -2), ([b"z" * 3000] * 70, -1),
    ([b"%d" % i for i in range(5000)], 10), ([b"b" * 2000] * 300, 16), ([b"c"] * 100, 0),
    ([], -2), ([b"a"], -5),
])
def test_quicklist_nodes_estimate_tracks_the_real_layout(elements, fill):
    from rill.server.commands.values import LAZYFREE_THRESHOLD, quicklist_nodes_estimate
    from rill.storage.list import ListValue

    value = ListValue(elements)
    real = sum(1 for _ in value.nodes(fill))
    estimate = quicklist_nodes_estimate(value, fill)
    # close enough that lazy-free decisions fall on the same side of the threshold
    assert (estimate > LAZYFREE_THRESHOLD) == (real > LAZYFREE_THRESHOLD)
    assert real * 0.8 <= estimate <= real * 1.25 + 1
