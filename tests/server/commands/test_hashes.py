"""Hash commands side by side with redis-server (RESP2 and RESP3), encodings and propagation."""

from __future__ import annotations

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import RawClient, decoded_reply
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    """The side-by-side checker, once per protocol version."""
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


def test_set_get_and_friends(oracle):
    oracle.run([
        ("HSET", "h", "f1", "v1", "f2", "v2"),
        ("HSET", "h", "f1", "new", "f3", "v3"),
        ("HMSET", "h", "f4", "v4", "f5", "5"),
        ("HSETNX", "h", "f1", "x"),
        ("HSETNX", "h", "f6", "v6"),
        ("HSETNX", "nokey", "f", "v"),
        ("HGET", "h", "f1"),
        ("HGET", "h", "missing"),
        ("HGET", "nokey", "f"),
        ("HMGET", "h", "f1", "missing", "f5"),
        ("HMGET", "nokey", "a", "b"),
        ("HLEN", "h"),
        ("HLEN", "nokey"),
        ("HSTRLEN", "h", "f1"),
        ("HSTRLEN", "h", "f5"),
        ("HSTRLEN", "h", "missing"),
        ("HSTRLEN", "nokey", "f"),
        ("HEXISTS", "h", "f2"),
        ("HEXISTS", "h", "missing"),
        ("HEXISTS", "nokey", "f"),
        # listpack order is insertion order: comparable exactly
        ("HKEYS", "h"),
        ("HVALS", "h"),
        ("HGETALL", "h"),
        ("HKEYS", "nokey"),
        ("HVALS", "nokey"),
        ("HGETALL", "nokey"),
        ("HDEL", "h", "f1", "f1", "missing", "f2"),
        ("HDEL", "nokey", "f"),
        ("HGETALL", "h"),
        ("HDEL", "h", "f3", "f4", "f5", "f6", "nothere"),
        ("EXISTS", "h"),
        ("TYPE", "nokey"),
    ])


def test_arity_and_wrongtype_errors(oracle):
    oracle.run([
        ("SET", "str", "x"),
        ("HSET", "h", "f"),
        ("HSET", "h", "f", "v", "g"),
        ("HMSET", "h", "f", "v", "g"),
        ("HSET", "h"),
        ("HSETNX", "h", "f"),
        ("HGET", "h"),
        ("HMGET", "h"),
        ("HDEL", "h"),
        ("HRANDFIELD",),
        ("HSCAN", "h"),
        ("EXISTS", "h"),
    ])
    for cmd in [
        ("HSET", "str", "f", "v"), ("HMSET", "str", "f", "v"), ("HSETNX", "str", "f", "v"),
        ("HGET", "str", "f"), ("HMGET", "str", "f"), ("HDEL", "str", "f"), ("HLEN", "str"),
        ("HSTRLEN", "str", "f"), ("HEXISTS", "str", "f"), ("HKEYS", "str"), ("HVALS", "str"),
        ("HGETALL", "str"), ("HINCRBY", "str", "f", "1"), ("HINCRBYFLOAT", "str", "f", "1"),
        ("HRANDFIELD", "str"), ("HRANDFIELD", "str", "0"), ("HRANDFIELD", "str", "3", "WITHVALUES"),
        ("HSCAN", "str", "0"),
    ]:
        oracle.check(*cmd)


def test_hincrby(oracle):
    oracle.run([
        ("HINCRBY", "h", "n", "5"),
        ("HINCRBY", "h", "n", "-12"),
        ("HINCRBY", "h", "n", "x"),
        ("HINCRBY", "h", "n", "1.5"),
        ("HINCRBY", "h", "n", "9223372036854775808"),
        ("HSET", "h", "s", "abc", "big", "9223372036854775807", "neg", "-9223372036854775808",
         "sp", " 1", "lead", "01", "empty", ""),
        ("HINCRBY", "h", "s", "1"),
        ("HINCRBY", "h", "sp", "1"),
        ("HINCRBY", "h", "lead", "1"),
        ("HINCRBY", "h", "empty", "1"),
        ("HINCRBY", "h", "big", "1"),
        ("HINCRBY", "h", "big", "0"),
        ("HINCRBY", "h", "big", "-1"),
        ("HINCRBY", "h", "neg", "-1"),
        ("HINCRBY", "h", "neg", "9223372036854775807"),
        ("HINCRBY", "nokey", "f", "x"),
        ("EXISTS", "nokey"),
        ("HGETALL", "h"),
        ("OBJECT", "ENCODING", "h"),
    ])


def test_hincrbyfloat(oracle):
    oracle.run([
        ("HINCRBYFLOAT", "h", "f", "10.5"),
        ("HINCRBYFLOAT", "h", "f", "0.1"),
        ("HINCRBYFLOAT", "h", "f", "-0.6"),
        ("HINCRBYFLOAT", "h", "f", "1e3"),
        ("HINCRBYFLOAT", "h", "f", "5.0e3"),
        ("HINCRBYFLOAT", "h", "g", "3"),
        ("HINCRBYFLOAT", "h", "g", "0x10"),
        ("HINCRBYFLOAT", "h", "f", "abc"),
        ("HINCRBYFLOAT", "h", "f", ""),
        ("HINCRBYFLOAT", "h", "f", " 1"),
        ("HINCRBYFLOAT", "h", "f", "inf"),
        ("HINCRBYFLOAT", "h", "f", "-inf"),
        ("HINCRBYFLOAT", "h", "f", "nan"),
        ("HINCRBYFLOAT", "big", "f", "1.7e308"),
        ("HGET", "big", "f"),
        ("OBJECT", "ENCODING", "big"),
        ("HSET", "h", "s", "abc", "i", "inf", "n", "17179869184", "e", "1.5e2"),
        ("HINCRBYFLOAT", "h", "s", "1"),
        ("HINCRBYFLOAT", "h", "i", "1"),
        ("HINCRBYFLOAT", "h", "n", "1.5"),
        ("HINCRBYFLOAT", "h", "e", "1"),
        ("HINCRBYFLOAT", "h", "z", "-0.0"),
        ("HINCRBYFLOAT", "h", "tiny", "1e-20"),
        ("HGETALL", "h"),
    ])


def test_hrandfield_deterministic_shapes(oracle):
    oracle.run([
        ("HRANDFIELD", "nokey"),
        ("HRANDFIELD", "nokey", "5"),
        ("HRANDFIELD", "nokey", "-5", "WITHVALUES"),
        ("HSET", "h", "a", "1", "b", "2", "c", "3"),
        ("HRANDFIELD", "h", "0"),
        ("HRANDFIELD", "h", "0", "WITHVALUES"),
        # count >= size: the whole hash in listpack order
        ("HRANDFIELD", "h", "3"),
        ("HRANDFIELD", "h", "10", "WITHVALUES"),
        ("HRANDFIELD", "h", "1", "x"),
        ("HRANDFIELD", "h", "1", "WITHVALUES", "x"),
        ("HRANDFIELD", "h", "x"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
        ("HRANDFIELD", "h", "4611686018427387903", "x"),
        ("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"),
        ("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"),
        ("HSET", "one", "only", "v"),
        ("HRANDFIELD", "one"),
        ("HRANDFIELD", "one", "-3"),
        ("HRANDFIELD", "one", "-2", "WITHVALUES"),
        ("HRANDFIELD", "one", "1", "WITHVALUES"),
    ])


@pytest.mark.parametrize("encoding_fields", [3, 200])
def test_hrandfield_random_cases(r, encoding_fields):
    fields = {f"f{i}": f"v{i}" for i in range(encoding_fields)}
    r.hset("h", mapping=fields)
    for count in (1, 2, encoding_fields - 1):
        got = r.hrandfield("h", count)
        assert len(got) == count and len(set(got)) == count
        assert all(f.decode() in fields for f in got)
        pairs = r.hrandfield("h", count, withvalues=True)
        assert len(pairs) == 2 * count
        for f, v in zip(pairs[0::2], pairs[1::2], strict=True):
            assert fields[f.decode()] == v.decode()
    got = r.hrandfield("h", -50)
    assert len(got) == 50 and set(got) <= {f.encode() for f in fields}
    pairs = r.hrandfield("h", -7, withvalues=True)
    assert len(pairs) == 14
    # over many draws every field shows up
    seen = set()
    for _ in range(40):
        seen.update(r.hrandfield("h", -50))
    assert len(seen) == min(len(fields), len(seen)) and len(seen) >= min(len(fields), 50)


def test_hrandfield_resp3_pairs(rill_server):
    c = RawClient(rill_server.port)
    try:
        c.call("FLUSHALL")
        c.call("HELLO", "3")
        c.call("HSET", "h", "a", "1")
        assert c.call("HRANDFIELD", "h", "-2", "WITHVALUES") == b"*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
        assert c.call("HRANDFIELD", "h", "1", "WITHVALUES") == b"*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    finally:
        c.close()


def test_encoding_thresholds(oracle):
    oracle.run([
        ("CONFIG", "SET", "hash-max-listpack-entries", "4"),
        ("CONFIG", "SET", "hash-max-listpack-value", "8"),
        ("HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"),
        ("OBJECT", "ENCODING", "h"),
        ("HSET", "h", "d", "44"),
        ("OBJECT", "ENCODING", "h"),
        ("HSET", "h", "e", "5"),
        ("OBJECT", "ENCODING", "h"),
        ("HDEL", "h", "a", "b", "c"),
        ("OBJECT", "ENCODING", "h"),  # never converts back
        ("HSET", "v", "f", "12345678"),
        ("OBJECT", "ENCODING", "v"),
        ("HSET", "v", "g", "123456789"),
        ("OBJECT", "ENCODING", "v"),
        ("HSET", "k", "123456789", "v"),
        ("OBJECT", "ENCODING", "k"),
        ("HSETNX", "n", "f", "123456789"),
        ("OBJECT", "ENCODING", "n"),
        ("HSET", "i", "f", "1"),
        ("HINCRBYFLOAT", "i", "f", "0.00001"),
        ("OBJECT", "ENCODING", "i"),
        ("HINCRBYFLOAT", "i", "f", "0.000001"),
        ("OBJECT", "ENCODING", "i"),
        ("HSET", "j", "f", "1"),
        ("HINCRBY", "j", "longfieldname", "1"),
        ("OBJECT", "ENCODING", "j"),
        ("CONFIG", "SET", "hash-max-ziplist-entries", "512"),
        ("CONFIG", "SET", "hash-max-ziplist-value", "64"),
        ("CONFIG", "GET", "hash-max-listpack-entries"),
        ("CONFIG", "GET", "hash-max-listpack-value"),
    ])


def test_hashtable_reads_compare_sorted(sbs):
    args = []
    for i in range(600):
        args += [f"field:{i}", f"value:{i}"]
    sbs.check("HSET", "big", *args)
    sbs.check("OBJECT", "ENCODING", "big")
    sbs.check("HLEN", "big")
    for cmd in ("HKEYS", "HVALS"):
        mine, theirs = sbs.both(cmd, "big")
        assert sorted(mine.split(b"\r\n")) == sorted(theirs.split(b"\r\n"))
    sbs.check("HGET", "big", "field:599")
    sbs.check("HMGET", "big", "field:0", "nope", "field:300")


def _scan_all(client: RawClient, cmd: str, key: str, *opts: str) -> tuple[list[bytes], int]:
    from hiredis import Reader

    cursor = b"0"
    items: list[bytes] = []
    calls = 0
    while True:
        reader = Reader()
        reader.feed(client.call(cmd, key, cursor, *opts))
        cursor, page = reader.gets()
        items += page
        calls += 1
        if cursor == b"0":
            return items, calls


def test_hscan(oracle):
    oracle.run([
        ("HSCAN", "nokey", "0"),
        ("HSCAN", "nokey", "0", "COUNT", "0"),  # options are not parsed for a missing key
        ("HSCAN", "nokey", "x"),
        ("HSET", "h", "a", "1", "b", "2", "ab", "3"),
        ("HSCAN", "h", "0"),
        ("HSCAN", "h", "123"),  # a listpack answers everything with cursor 0
        ("HSCAN", "h", "0", "MATCH", "a*"),
        ("HSCAN", "h", "0", "MATCH", "*"),
        ("HSCAN", "h", "0", "COUNT", "1"),
        ("HSCAN", "h", "0", "COUNT", "0"),
        ("HSCAN", "h", "0", "COUNT", "-1"),
        ("HSCAN", "h", "0", "COUNT", "x"),
        ("HSCAN", "h", "0", "TYPE", "string"),
        ("HSCAN", "h", "0", "MATCH"),
        ("HSCAN", "h", "-1"),
        ("HSCAN", "h", "x"),
        ("HSCAN", "h", " 1"),
    ])


def test_hscan_hashtable_iterates_everything(sbs):
    fields = [f"k{i}" for i in range(1000)]
    args = [x for f in fields for x in (f, f"v-{f}")]
    sbs.check("HSET", "h", *args)
    items, calls = _scan_all(sbs.rill, "HSCAN", "h", "COUNT", "50")
    assert calls > 5
    got = dict(zip(items[0::2], items[1::2], strict=True))
    assert set(got) == {f.encode() for f in fields}
    assert all(v == b"v-" + k for k, v in got.items())
    items, _ = _scan_all(sbs.rill, "HSCAN", "h", "MATCH", "k1*", "COUNT", "100")
    expected = {f.encode() for f in fields if f.startswith("k1")}
    assert set(items[0::2]) == expected
    theirs, _ = _scan_all(sbs.oracle, "HSCAN", "h", "MATCH", "k1*", "COUNT", "100")
    assert set(theirs[0::2]) == expected


def test_hscan_survives_writes_during_iteration(r):
    r.config_set("hash-max-listpack-entries", "16")
    try:
        r.hset("h", mapping={f"keep{i}": i for i in range(300)})
        cursor = 0
        seen = set()
        n = 0
        while True:
            cursor, page = r.hscan("h", cursor, count=20)
            seen.update(page)
            # churn: fields come and go while the iteration runs
            r.hset("h", f"new{n}", n)
            r.hdel("h", f"new{n - 1}")
            n += 1
            if cursor == 0:
                break
        assert {f"keep{i}".encode() for i in range(300)} <= seen
    finally:
        r.config_set("hash-max-listpack-entries", "512")


def test_keyspace_hits_and_misses(r):
    r.config_resetstat()
    r.hset("h", "f", "v")
    r.hget("h", "f")
    r.hget("nokey", "f")
    r.hmget("nokey", "a")
    r.hgetall("h")
    info = r.info("stats")
    assert (info["keyspace_hits"], info["keyspace_misses"]) == (2, 2)


def test_propagation(inproc):
    server, client, effects = inproc
    _run(server, client, "HSET", "h", "f", "1.5")
    _run(server, client, "HINCRBYFLOAT", "h", "f", "0.1")
    _run(server, client, "HINCRBYFLOAT", "h", "f", "x")
    _run(server, client, "HINCRBY", "h", "n", "3")
    _run(server, client, "HSETNX", "h", "n", "3")  # no change: not propagated
    _run(server, client, "HDEL", "h", "zz")
    _run(server, client, "HDEL", "h", "n")
    assert [argv for _, argv in effects] == [
        [b"HSET", b"h", b"f", b"1.5"],
        [b"HSET", b"h", b"f", b"1.6"],
        [b"HINCRBY", b"h", b"n", b"3"],
        [b"HDEL", b"h", b"n"],
    ]


def test_keyspace_events(r):
    p = r.pubsub()
    r.config_set("notify-keyspace-events", "KEA")
    try:
        p.psubscribe("__keyspace@0__:*")
        p.get_message(timeout=1)
        r.hset("h", "a", "1")
        r.hsetnx("h", "a", "1")  # nothing
        r.hincrby("h", "n", 1)
        r.hincrbyfloat("h", "n", 1.5)
        r.hdel("h", "zz")  # nothing
        r.hdel("h", "a", "n")
        events = []
        while True:
            m = p.get_message(timeout=0.5)
            if m is None:
                break
            events.append(m["data"])
        assert events == [b"hset", b"hincrby", b"hincrbyfloat", b"hdel", b"del"]
    finally:
        r.config_set("notify-keyspace-events", "")
        p.close()


def test_watch_sees_hash_writes(r):
    r.hset("h", "a", "1")
    for write in (lambda: r.hset("h", "a", "2"), lambda: r.hincrby("h", "n", 1), lambda: r.hdel("h", "a")):
        with r.pipeline() as pipe:
            pipe.watch("h")
            write()
            pipe.multi()
            pipe.hget("h", "a")
            with pytest.raises(redis.WatchError):
                pipe.execute()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(
    st.sampled_from(["HSET", "HDEL", "HINCRBY", "HSETNX"]),
    st.sampled_from(["a", "b", "c", "1", "10", "x" * 70]),
    st.sampled_from(["0", "1", "-5", "abc", "9223372036854775807", "y" * 70]),
), max_size=25))
def test_random_ops_match_redis(sbs, ops):
    sbs.check("DEL", "h")
    for cmd, field, value in ops:
        if cmd == "HDEL":
            sbs.check(cmd, "h", field)
        else:
            sbs.check(cmd, "h", field, value)
    enc = sbs.check("OBJECT", "ENCODING", "h")
    if enc != b"$9\r\nhashtable\r\n":
        sbs.check("HGETALL", "h")  # listpack (or no key): insertion order on both
    else:
        mine, theirs = sbs.both("HGETALL", "h")
        assert sorted(mine.split(b"\r\n")) == sorted(theirs.split(b"\r\n"))


def test_hscan_after_churn_returns_each_field_once(r):
    """Issue 20, finding 4: once an HSCAN had run on a hashtable hash, fields churned
    by HSET/HDEL piled up in its scan log and were returned again and again."""
    r.hset("h", mapping={f"f{i}": "v" for i in range(600)})
    assert len(dict(r.hscan_iter("h", count=50))) == 600
    cursor, returned = r.hscan("h", 0, count=1)  # and one iteration left open
    returned = dict(returned)
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.hset("h", f"k{i % 3}", "v")
        pipe.hdel("h", f"k{(i + 1) % 3}")
        if i % 1000 == 999:
            pipe.execute()
            cursor, page = r.hscan("h", cursor, count=1)  # the open iteration goes on
            returned.update(page)
    pipe.execute()
    assert cursor != 0
    raw = decoded_reply(r.connection_pool.connection_kwargs["port"], "HSCAN", "h", "0", "COUNT", "10000000")
    assert raw[0] == b"0" and len(raw[1]) == 2 * r.hlen("h") == 2 * 602
    assert set(raw[1][0::2]) == set(r.hkeys("h"))
    fields = list(returned)
    while cursor:
        cursor, page = r.hscan("h", cursor, count=7)
        fields += page
    assert {f"f{i}".encode() for i in range(600)} <= set(fields)
