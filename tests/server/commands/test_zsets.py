"""Sorted-set commands side by side with redis-server 7.0.15 (RESP2 and RESP3)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import decoded_reply, inproc_keyevents, keyevents
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    """The side-by-side checker, once per protocol version."""
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


def _fill(oracle, key="z", pairs=(("1", "a"), ("2", "b"), ("3", "c"), ("1.5", "d"), ("-inf", "e"), ("+inf", "f"))):
    oracle.check("ZADD", key, *(x for p in pairs for x in p))


def test_zadd_options_and_replies(oracle):
    oracle.run([
        ("ZADD", "z", "1", "a", "2", "b"),
        ("ZADD", "z", "1", "a", "3", "b", "4", "c"),
        ("ZADD", "z", "CH", "1", "a", "5", "b", "6", "d"),
        ("ZADD", "z", "NX", "10", "a", "7", "e"),
        ("ZADD", "z", "XX", "10", "a", "7", "new"),
        ("ZADD", "z", "XX", "CH", "11", "a", "7", "new2"),
        ("ZADD", "z", "GT", "CH", "1", "a", "20", "b"),
        ("ZADD", "z", "LT", "CH", "1", "a", "30", "b"),
        ("ZADD", "z", "GT", "XX", "CH", "100", "a", "0", "b", "5", "zz"),
        ("ZADD", "z", "INCR", "2.5", "a"),
        ("ZADD", "z", "INCR", "NX", "1", "a"),
        ("ZADD", "z", "INCR", "XX", "1", "missing"),
        ("ZADD", "z", "INCR", "GT", "-1", "a"),
        ("ZADD", "z", "INCR", "LT", "-1", "a"),
        ("ZADD", "z", "ch", "nx", "1", "lower"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZADD", "nokey", "XX", "1", "a"),
        ("ZADD", "nokey", "XX", "INCR", "1", "a"),
        ("EXISTS", "nokey"),
        ("ZINCRBY", "z", "1.5", "a"),
        ("ZINCRBY", "z", "-inf", "new3"),
        ("ZINCRBY", "z", "+inf", "new3"),
        ("ZINCRBY", "z", "1", "x1"),
        ("ZSCORE", "z", "new3"),
        ("ZCARD", "z"),
        ("ZCARD", "nokey"),
    ])


def test_zadd_errors(oracle):
    _fill(oracle)
    oracle.run([
        ("ZADD", "z", "1"),
        ("ZADD", "z", "1", "a", "2"),
        ("ZADD", "z", "NX"),
        ("ZADD", "z", "NX", "XX", "1", "a"),
        ("ZADD", "z", "GT", "LT", "1", "a"),
        ("ZADD", "z", "NX", "GT", "1", "a"),
        ("ZADD", "z", "NX", "LT", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"),
        ("ZADD", "z", "x", "a"),
        ("ZADD", "z", "nan", "a"),
        ("ZADD", "z", "1e400", "a"),
        ("ZADD", "z", "1e-400", "a"),
        ("ZADD", "z", " 1", "a"),
        ("ZADD", "z", "1 ", "a"),
        ("ZADD", "z", "", "a"),
        ("ZADD", "z", "1", "a", "y", "b"),
        ("ZADD", "z", "0x10", "hex", "1e3", "exp", ".5", "dot", "-0", "negzero"),
        ("ZINCRBY", "z", "x", "a"),
        ("ZINCRBY", "z", "-inf", "f"),
        ("ZADD", "z", "INCR", "-inf", "f"),
        ("ZSCORE", "z", "f"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("SET", "s", "x"),
        ("ZADD", "s", "1", "a"),
        ("ZINCRBY", "s", "1", "a"),
        ("ZADD", "s", "x", "a"),
        ("ZADD",),
        ("ZADD", "z"),
    ])


def test_reads(oracle):
    _fill(oracle)
    oracle.run([
        ("ZSCORE", "z", "d"), ("ZSCORE", "z", "nope"), ("ZSCORE", "nokey", "a"),
        ("ZMSCORE", "z", "a", "nope", "f", "e"), ("ZMSCORE", "nokey", "a", "b"),
        ("ZRANK", "z", "a"), ("ZRANK", "z", "nope"), ("ZRANK", "nokey", "a"),
        ("ZREVRANK", "z", "a"), ("ZREVRANK", "z", "f"), ("ZREVRANK", "nokey", "a"),
        ("ZCOUNT", "z", "-inf", "+inf"), ("ZCOUNT", "z", "1", "2"), ("ZCOUNT", "z", "(1", "(2"),
        ("ZCOUNT", "z", "(1", "1"), ("ZCOUNT", "z", "2", "1"), ("ZCOUNT", "z", "(-inf", "(inf"),
        ("ZCOUNT", "z", "", "("), ("ZCOUNT", "z", " 1", "3"), ("ZCOUNT", "z", "1e400", "inf"),
        ("ZCOUNT", "z", "x", "1"), ("ZCOUNT", "z", "1", "(x"), ("ZCOUNT", "z", "nan", "1"),
        ("ZCOUNT", "z", "1 ", "2"), ("ZCOUNT", "nokey", "0", "1"), ("ZCOUNT", "nokey", "x", "1"),
        ("SET", "s", "x"),
        ("ZSCORE", "s", "a"), ("ZMSCORE", "s", "a"), ("ZRANK", "s", "a"), ("ZCARD", "s"),
        ("ZCOUNT", "s", "0", "1"), ("ZLEXCOUNT", "s", "-", "+"),
    ])


def test_lex(oracle):
    oracle.run([
        ("ZADD", "l", *(x for m in "abcdefg" for x in ("0", m))),
        ("ZRANGEBYLEX", "l", "-", "+"),
        ("ZRANGEBYLEX", "l", "[b", "(e"),
        ("ZRANGEBYLEX", "l", "(b", "[e"),
        ("ZRANGEBYLEX", "l", "[e", "[b"),
        ("ZRANGEBYLEX", "l", "(c", "(c"),
        ("ZRANGEBYLEX", "l", "[c", "[c"),
        ("ZRANGEBYLEX", "l", "+", "-"),
        ("ZRANGEBYLEX", "l", "-", "[c", "LIMIT", "1", "5"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "2", "-1"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "-1", "2"),
        ("ZRANGEBYLEX", "l", "[", "+"),
        ("ZREVRANGEBYLEX", "l", "+", "-"),
        ("ZREVRANGEBYLEX", "l", "(f", "[b", "LIMIT", "1", "2"),
        ("ZREVRANGEBYLEX", "l", "[b", "(f"),
        ("ZLEXCOUNT", "l", "-", "+"), ("ZLEXCOUNT", "l", "[b", "(d"), ("ZLEXCOUNT", "l", "(a", "[a"),
        ("ZLEXCOUNT", "nokey", "-", "+"),
        ("ZRANGEBYLEX", "l", "a", "+"), ("ZRANGEBYLEX", "l", "-", "b"), ("ZRANGEBYLEX", "l", "--", "+"),
        ("ZRANGEBYLEX", "l", "-", "++"), ("ZLEXCOUNT", "l", "", "+"), ("ZRANGEBYLEX", "nokey", "x", "+"),
        ("ZRANGEBYLEX", "l", "-", "+", "WITHSCORES"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "x", "1"),
        ("ZRANGEBYLEX", "l", "-", "+", "BYLEX"),
        ("ZRANGE", "l", "[c", "-", "BYLEX", "REV"),
        ("ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "1", "1"),
        ("ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES"),
    ])


def test_ranges(oracle):
    _fill(oracle)
    oracle.run([
        ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGE", "z", "1", "2", "withscores"), ("ZRANGE", "z", "-2", "-1"), ("ZRANGE", "z", "-100", "100"),
        ("ZRANGE", "z", "3", "1"), ("ZRANGE", "z", "10", "20"), ("ZRANGE", "z", "0", "-1", "REV", "WITHSCORES"),
        ("ZRANGE", "z", "1", "3", "REV"), ("ZREVRANGE", "z", "0", "1", "WITHSCORES"), ("ZREVRANGE", "z", "-3", "-1"),
        ("ZRANGE", "z", "(1", "3", "BYSCORE"), ("ZRANGE", "z", "3", "(1", "BYSCORE", "REV", "WITHSCORES"),
        ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "3", "WITHSCORES"),
        ("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "2", "10"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"), ("ZRANGEBYSCORE", "z", "1", "2"),
        ("ZRANGEBYSCORE", "z", "(1", "(3", "LIMIT", "0", "1"), ("ZRANGEBYSCORE", "z", "2", "1"),
        ("ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "0", "-1"), ("ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "-1", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "100", "2"), ("ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "0", "0"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES"), ("ZREVRANGEBYSCORE", "z", "3", "(1", "LIMIT", "1", "1"),
        ("ZREVRANGEBYSCORE", "z", "1", "3"),
        ("ZRANGE", "nokey", "0", "-1"), ("ZRANGEBYSCORE", "nokey", "0", "1"),
        # errors and option parsing
        ("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"), ("ZRANGE", "z", "a", "b"), ("ZRANGE", "z", "0", "1", "BOGUS"),
        ("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"), ("ZRANGE", "z", "0", "1", "REV", "REV"),
        ("ZRANGE", "z", "x", "1", "BYSCORE"), ("ZRANGE", "z", "0", "1", "LIMIT", "0"),
        ("ZRANGEBYSCORE", "z", "0", "1", "BYSCORE"), ("ZRANGEBYSCORE", "z", "0", "1", "REV"),
        ("ZREVRANGE", "z", "0", "1", "REV"), ("ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1"),
        ("ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "a", "1"), ("ZRANGEBYSCORE", "z", "a", "1"),
        ("ZRANGE", "z", "0"),
        ("SET", "s", "x"), ("ZRANGE", "s", "0", "-1"), ("ZRANGE", "s", "0", "x"),
    ])


def test_range_replies_spell_every_score_as_redis(oracle):
    # Compiled, range replies write integral scores under 2**53 as digits in C and take the
    # %.17g path for the rest: both sides of that line, -0, and a set big enough to leave
    # listpack (the skiplist's replies take the same writer), against Redis byte for byte.
    scores = ["1", "-1", "0", "-0", "0.5", "-2.25", "7", "10", "99", "100", "1e15", "9007199254740991",
              "-9007199254740991", "9007199254740992", "9007199254740993", "1e16", "1e17", "1e300", "5e-324",
              "3e-5", "123456789", "-123456789.5", "inf", "-inf"]
    _fill(oracle, "z", [(sc, f"m{i}") for i, sc in enumerate(scores)])
    _fill(oracle, "big", [(sc, f"m{i}:{j}") for j in range(8) for i, sc in enumerate(scores)])
    oracle.run([
        ("ZRANGE", key, *opts) for key in ("z", "big")
        for opts in (("0", "-1"), ("0", "-1", "WITHSCORES"), ("0", "-1", "REV", "WITHSCORES"),
                     ("-inf", "+inf", "BYSCORE", "WITHSCORES"), ("3", "9", "WITHSCORES"))
    ] + [("OBJECT", "ENCODING", "z"), ("OBJECT", "ENCODING", "big"),
         ("ZRANGEBYSCORE", "big", "-inf", "+inf", "WITHSCORES", "LIMIT", "5", "100")])


def test_zrangestore(oracle):
    _fill(oracle)
    oracle.run([
        ("ZRANGESTORE", "dst", "z", "0", "-1"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "dst"),
        ("ZRANGESTORE", "dst", "z", "(1", "3", "BYSCORE", "REV", "LIMIT", "0", "2"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "dst", "z", "[a", "[c", "BYLEX"),
        ("ZRANGESTORE", "dst", "z", "5", "10"), ("EXISTS", "dst"),
        ("SET", "dst", "x"), ("EXPIRE", "dst", "100"),
        ("ZRANGESTORE", "dst", "z", "0", "0"), ("TTL", "dst"), ("TYPE", "dst"),
        ("ZRANGESTORE", "dst", "nokey", "0", "-1"), ("EXISTS", "dst"),
        ("ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "dst", "z", "0", "-1", "LIMIT", "0", "1"),
        ("SET", "s", "x"), ("ZRANGESTORE", "dst", "s", "0", "-1"),
    ])


def test_removals(oracle):
    oracle.run([
        ("ZADD", "z", *(x for i in range(10) for x in (str(i), f"m{i}"))),
        ("ZREM", "z", "m1", "nope", "m2", "m1"), ("ZREM", "nokey", "a"),
        ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZREMRANGEBYRANK", "z", "-2", "-1"),
        ("ZREMRANGEBYRANK", "z", "5", "1"), ("ZREMRANGEBYRANK", "z", "100", "200"),
        ("ZREMRANGEBYSCORE", "z", "(3", "5"), ("ZREMRANGEBYSCORE", "z", "10", "20"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZREMRANGEBYRANK", "z", "x", "1"), ("ZREMRANGEBYSCORE", "z", "x", "1"), ("ZREMRANGEBYLEX", "z", "x", "+"),
        ("ZREMRANGEBYRANK", "nokey", "0", "1"), ("ZREMRANGEBYSCORE", "nokey", "x", "1"),
        ("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"),
        ("ZREMRANGEBYLEX", "l", "(a", "[c"), ("ZREMRANGEBYLEX", "l", "-", "+"), ("EXISTS", "l"),
        ("ZREMRANGEBYSCORE", "z", "-inf", "+inf"), ("EXISTS", "z"),
        ("ZADD", "z", "1", "a"), ("ZREM", "z", "a"), ("EXISTS", "z"),
        ("SET", "s", "x"), ("ZREM", "s", "a"), ("ZREMRANGEBYRANK", "s", "0", "1"),
    ])


def test_pops(oracle):
    _fill(oracle)
    oracle.run([
        ("ZPOPMIN", "z"), ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "2"), ("ZPOPMAX", "z", "0"),
        ("ZPOPMIN", "z", "100"), ("EXISTS", "z"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "3"),
        ("ZPOPMIN", "z", "-1"), ("ZPOPMIN", "z", "x"), ("ZPOPMIN", "z", "1", "2"),
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"), ("ZADD", "b", "5", "q"),
        ("ZMPOP", "2", "nokey", "a", "MIN"), ("ZMPOP", "2", "a", "b", "MAX", "COUNT", "10"),
        ("ZMPOP", "1", "nokey", "MIN"), ("ZMPOP", "1", "b", "min", "count", "1"),
        ("ZMPOP", "0", "a", "MIN"), ("ZMPOP", "-1", "a", "MIN"), ("ZMPOP", "x", "a", "MIN"),
        ("ZMPOP", "3", "a", "MIN"), ("ZMPOP", "1", "a", "MIDDLE"), ("ZMPOP", "1", "a", "MIN", "COUNT"),
        ("ZMPOP", "1", "a", "MIN", "COUNT", "0"), ("ZMPOP", "1", "a", "MIN", "COUNT", "-1"),
        ("ZMPOP", "1", "a", "MIN", "COUNT", "1", "COUNT", "2"), ("ZMPOP", "1", "a", "MIN", "BOGUS"),
        ("SET", "s", "x"), ("ZPOPMIN", "s"), ("ZMPOP", "2", "nokey", "s", "MIN"),
        ("ZADD", "c", "1", "x"), ("ZMPOP", "2", "c", "s", "MAX"),
        ("BZPOPMIN", "s", "0"), ("BZMPOP", "0", "1", "s", "MIN"),
        ("ZADD", "d", "1", "x", "2", "y"),
        ("BZPOPMIN", "nokey", "d", "0"), ("BZPOPMAX", "d", "0"), ("ZADD", "d", "1", "x"),
        ("BZMPOP", "0", "1", "d", "MIN"), ("ZADD", "d", "1", "x", "2", "y", "3", "w"), ("BZMPOP", "0", "1", "d", "MAX", "COUNT", "2"),
        ("BZPOPMIN", "d", "-1"), ("BZPOPMIN", "d", "x"), ("BZMPOP", "x", "1", "d", "MIN"),
        ("BZMPOP", "0", "0", "d", "MIN"), ("BZMPOP", "-1", "1", "d", "MIN"),
    ])


def test_single_pops_of_every_score_form(oracle):
    """ZPOPMIN/ZPOPMAX key, one pop each: compiled, an integral score's reply is written in C
    (zsets.pxd's _c_pair_reply) and any other takes the formatter; both as Redis."""
    oracle.run([
        ("ZADD", "z", "-9007199254740993", "a", "-9007199254740992", "b", "-9007199254740991", "c",
         "-12", "d", "-1.5", "e", "-0", "f", "0", "g", "0.1", "h", "7", "i", "1e15", "j",
         "9007199254740991", "k", "9007199254740992", "l", "1e300", "m", "+inf", "n", "-inf", "o"),
        ("ZADD", "z", "3", "a" * 300),
        *[("ZPOPMIN", "z") for _ in range(9)], *[("ZPOPMAX", "z") for _ in range(8)], ("EXISTS", "z"),
        ("ZADD", "y", "5", ""), ("ZPOPMAX", "y"), ("ZPOPMIN", "nokey"),
    ])


def test_set_operations(oracle):
    oracle.run([
        ("ZADD", "a", "1", "x", "2", "y", "3", "z", "-inf", "n"),
        ("ZADD", "b", "10", "y", "20", "z", "30", "w", "+inf", "n"),
        ("SADD", "s", "x", "w", "v"),
        ("ZUNION", "2", "a", "b", "WITHSCORES"),
        ("ZUNION", "3", "a", "b", "s", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "2", "0.5", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "AGGREGATE", "max", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "0", "inf", "WITHSCORES"),
        ("ZUNION", "2", "a", "nokey", "WITHSCORES"),
        ("ZINTER", "2", "a", "b", "WITHSCORES"),
        ("ZINTER", "2", "a", "s", "WITHSCORES"),
        ("ZINTER", "2", "a", "a", "WEIGHTS", "1", "-1", "WITHSCORES"),
        ("ZINTER", "2", "a", "nokey"),
        ("ZDIFF", "2", "a", "b", "WITHSCORES"), ("ZDIFF", "2", "a", "a"), ("ZDIFF", "1", "a"),
        ("ZDIFF", "2", "s", "a", "WITHSCORES"), ("ZDIFF", "2", "nokey", "a"),
        ("ZINTERCARD", "2", "a", "b"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "1"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "0"), ("ZINTERCARD", "2", "a", "s"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "-1"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "x"),
        ("ZINTERCARD", "0", "a"), ("ZINTERCARD", "3", "a", "b"), ("ZINTERCARD", "2", "a", "b", "WITHSCORES"),
        ("ZUNIONSTORE", "dst", "2", "a", "b"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("OBJECT", "ENCODING", "dst"),
        ("ZINTERSTORE", "dst", "2", "a", "b", "WEIGHTS", "1", "2", "AGGREGATE", "SUM"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", "dst", "2", "a", "b"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "dst", "2", "a", "nokey"), ("EXISTS", "dst"),
        ("ZUNIONSTORE", "dst", "1", "s"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        # errors
        ("ZUNION", "0", "a"), ("ZUNIONSTORE", "dst", "0", "a"), ("ZINTER", "-1", "a"), ("ZDIFF", "x", "a"),
        ("ZUNION", "3", "a", "b"), ("ZUNION", "2", "a", "b", "WEIGHTS", "1"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"), ("ZUNION", "2", "a", "b", "AGGREGATE", "AVG"),
        ("ZUNION", "2", "a", "b", "AGGREGATE"), ("ZUNIONSTORE", "dst", "2", "a", "b", "WITHSCORES"),
        ("ZDIFF", "2", "a", "b", "WEIGHTS", "1", "2"), ("ZDIFF", "2", "a", "b", "AGGREGATE", "MIN"),
        ("SET", "str", "x"), ("ZUNION", "2", "a", "str"), ("ZINTERSTORE", "dst", "2", "str", "a"),
        ("ZUNION", "2", "a", "b", "BOGUS"),
    ])


def test_scan_and_randmember(oracle):
    _fill(oracle)
    oracle.run([
        ("ZSCAN", "z", "0"), ("ZSCAN", "z", "0", "MATCH", "[a-c]"), ("ZSCAN", "z", "0", "COUNT", "1"),
        ("ZSCAN", "nokey", "0"), ("ZSCAN", "z", "x"), ("ZSCAN", "z", "0", "COUNT", "0"),
        ("ZSCAN", "z", "0", "COUNT", "x"), ("ZSCAN", "z", "0", "BOGUS", "1"), ("ZSCAN", "z", "0", "MATCH"),
        ("ZADD", "n", "-0", "negzero", "100000000000000000", "big", "0.1", "tenth"), ("ZSCAN", "n", "0"),
        ("ZRANDMEMBER", "nokey"), ("ZRANDMEMBER", "nokey", "3"), ("ZRANDMEMBER", "nokey", "3", "WITHSCORES"),
        ("ZRANDMEMBER", "z", "0"), ("ZRANDMEMBER", "z", "6", "WITHSCORES"), ("ZRANDMEMBER", "z", "100"),
        ("ZRANDMEMBER", "z", "x"), ("ZRANDMEMBER", "z", "1", "BOGUS"), ("ZRANDMEMBER", "z", "1", "WITHSCORES", "x"),
        ("ZRANDMEMBER", "z", "-9223372036854775808"), ("ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"),
        ("ZRANDMEMBER", "z", "-4611686018427387904", "WITHSCORES"),
        ("SET", "s", "x"), ("ZRANDMEMBER", "s"), ("ZSCAN", "s", "0"),
    ])


def test_encodings_follow_the_thresholds(oracle):
    oracle.run([
        ("CONFIG", "SET", "zset-max-listpack-entries", "4"),
        ("CONFIG", "SET", "zset-max-ziplist-value", "8"),
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("OBJECT", "ENCODING", "z"),
        ("ZADD", "z", "5", "e"), ("OBJECT", "ENCODING", "z"),
        ("ZREM", "z", "e", "d"), ("OBJECT", "ENCODING", "z"),
        ("ZADD", "y", "1", "short"), ("ZADD", "y", "1", "much-longer-member"), ("OBJECT", "ENCODING", "y"),
        ("ZADD", "x", "1", "much-longer-member"), ("OBJECT", "ENCODING", "x"),
        ("ZUNIONSTORE", "u", "1", "z"), ("OBJECT", "ENCODING", "u"),
        ("ZRANGESTORE", "r", "z", "0", "-1"), ("OBJECT", "ENCODING", "r"),
        ("ZADD", "big", *(x for i in range(6) for x in (str(i), f"m{i}"))),
        ("ZRANGESTORE", "r", "big", "0", "-1"), ("OBJECT", "ENCODING", "r"),
        ("ZRANGESTORE", "r", "big", "0", "2"), ("OBJECT", "ENCODING", "r"),
        ("CONFIG", "SET", "zset-max-listpack-entries", "0"),
        ("ZADD", "w", "1", "a"), ("OBJECT", "ENCODING", "w"),
        ("CONFIG", "SET", "zset-max-listpack-entries", "128"),
        ("CONFIG", "SET", "zset-max-listpack-value", "64"),
        ("TYPE", "w"),
    ])


def test_zrank_withscore_follows_redis_7_2(r):
    r.zadd("z", {"a": 1.5, "b": 2})
    assert r.execute_command("ZRANK", "z", "b", "WITHSCORE") == [1, 2.0]
    assert r.execute_command("ZREVRANK", "z", "a", "WITHSCORE") == [1, 1.5]
    assert r.execute_command("ZRANK", "z", "nope", "WITHSCORE") is None
    assert r.execute_command("ZRANK", "nokey", "a", "WITHSCORE") is None
    with pytest.raises(Exception, match="syntax error"):
        r.execute_command("ZRANK", "z", "a", "BOGUS")
    with pytest.raises(Exception, match="wrong number of arguments"):
        r.execute_command("ZRANK", "z", "a", "WITHSCORE", "x")


def test_zrank_withscore_resp3_shapes(raw):
    raw.call("HELLO", "3")
    raw.call("ZADD", "z", "1.5", "a")
    assert raw.call("ZRANK", "z", "a", "WITHSCORE") == b"*2\r\n:0\r\n,1.5\r\n"
    assert raw.call("ZRANK", "z", "b", "WITHSCORE") == b"_\r\n"
    assert raw.call("ZRANK", "z", "b") == b"_\r\n"


def test_randmember_shapes(r):
    r.zadd("z", {f"m{i}": i for i in range(200)})
    members = {f"m{i}".encode() for i in range(200)}
    assert r.zrandmember("z") in members
    got = r.zrandmember("z", 50)
    assert len(got) == 50 and len(set(got)) == 50 and set(got) <= members
    got = r.zrandmember("z", 150)
    assert len(set(got)) == 150
    got = r.zrandmember("z", -300)
    assert len(got) == 300 and set(got) <= members
    got = r.zrandmember("z", 5, withscores=True)
    assert len(got) == 10 and all(float(s) == int(m[1:]) for m, s in zip(got[::2], got[1::2], strict=True))


def test_skiplist_scan_returns_everything(r):
    r.zadd("z", {f"m{i}": i for i in range(1000)})
    assert r.object("encoding", "z") == b"skiplist"
    seen = {}
    cursor = 0
    while True:
        cursor, page = r.zscan("z", cursor, count=50)
        seen.update(page)
        if cursor == 0:
            break
    assert seen == {f"m{i}".encode(): float(i) for i in range(1000)}
    assert dict(r.zscan("z", 0, match="m99*", count=5000)[1]) == {
        b"m99": 99.0, **{f"m99{i}".encode(): float(f"99{i}") for i in range(10)}
    }


def test_large_sets_match_redis(sbs):
    pairs = [x for i in range(3000) for x in (str((i * 7919) % 1000 / 4), f"m{i}")]
    sbs.check("ZADD", "z", *pairs)
    sbs.run([
        ("OBJECT", "ENCODING", "z"),
        ("ZRANGE", "z", "1000", "1020", "WITHSCORES"), ("ZREVRANGE", "z", "5", "9"),
        ("ZRANK", "z", "m1234"), ("ZREVRANK", "z", "m77"),
        ("ZCOUNT", "z", "(100", "200"), ("ZRANGEBYSCORE", "z", "50", "50.5", "LIMIT", "2", "3"),
        ("ZREMRANGEBYRANK", "z", "100", "1099"), ("ZCARD", "z"), ("ZRANGE", "z", "90", "110"),
        ("ZREMRANGEBYSCORE", "z", "(10", "20"), ("ZPOPMIN", "z", "50"), ("ZPOPMAX", "z", "3"),
        ("ZRANGE", "z", "-5", "-1", "WITHSCORES"), ("ZRANK", "z", "m2999"),
    ])


_members = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"])
_scores = st.sampled_from([b"0", b"1", b"-1", b"2.5", b"-inf", b"+inf", b"(1", b"(2.5", b"10"])
_cmds = st.one_of(
    st.tuples(st.just(b"ZADD"), st.just(b"k"), _scores.filter(lambda s: not s.startswith(b"(")), _members),
    st.tuples(st.just(b"ZINCRBY"), st.just(b"k"), st.sampled_from([b"1", b"-2", b"0.5"]), _members),
    st.tuples(st.just(b"ZREM"), st.just(b"k"), _members),
    st.tuples(st.just(b"ZRANGEBYSCORE"), st.just(b"k"), _scores, _scores, st.just(b"WITHSCORES")),
    st.tuples(st.just(b"ZREVRANGEBYSCORE"), st.just(b"k"), _scores, _scores),
    st.tuples(st.just(b"ZCOUNT"), st.just(b"k"), _scores, _scores),
    st.tuples(st.just(b"ZRANGE"), st.just(b"k"), st.sampled_from([b"0", b"1", b"-2"]), st.sampled_from([b"-1", b"2", b"0"]), st.just(b"WITHSCORES")),
    st.tuples(st.just(b"ZRANK"), st.just(b"k"), _members),
    st.tuples(st.just(b"ZPOPMIN"), st.just(b"k"), st.sampled_from([b"1", b"3"])),
    st.tuples(st.just(b"ZREMRANGEBYSCORE"), st.just(b"k"), _scores, _scores),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_cmds, min_size=1, max_size=25))
def test_random_scripts_match_redis(sbs, script):
    sbs.both("DEL", "k")
    for cmd in script:
        sbs.check(*cmd)


# -- keyspace events ---------------------------------------------------------------------
NOTIFY_SCRIPT = [
    ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("ZADD", "z", "1", "a"), ("ZINCRBY", "z", "1", "a"),
    ("ZADD", "z", "INCR", "1", "a"), ("ZREM", "z", "nope"), ("ZREM", "z", "a"),
    ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZREMRANGEBYSCORE", "z", "100", "200"),
    ("ZADD", "l", "0", "x", "0", "y"), ("ZREMRANGEBYLEX", "l", "-", "+"),
    ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "5"), ("ZPOPMIN", "z"),
    ("ZADD", "a", "1", "x"), ("ZUNIONSTORE", "u", "1", "a"), ("ZINTERSTORE", "u", "2", "a", "nokey"),
    ("ZDIFFSTORE", "d", "1", "a"), ("ZRANGESTORE", "r", "a", "0", "-1"), ("ZRANGESTORE", "r", "a", "5", "6"),
    ("ZMPOP", "1", "a", "MIN"), ("ZADD", "b", "1", "x"), ("BZPOPMAX", "b", "0"),
]


def _events(port: int, script) -> list[tuple[bytes, bytes]]:
    return keyevents(port, [*script, ("DEL", "nokey-marker")], "Ezg")


def test_keyspace_events_match_redis(rill_server, oracle_server):
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and _events(rill_server.port, NOTIFY_SCRIPT) == theirs


def test_keyspace_events_inproc(oracle_server, inproc, monkeypatch):
    server, c, _ = inproc
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and inproc_keyevents(server, c, NOTIFY_SCRIPT, monkeypatch) == theirs


# -- propagation ------------------------------------------------------------------------
def test_propagation_of_pops(inproc):
    server, c, effects = inproc
    _run(server, c, "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    _run(server, c, "ZPOPMIN", "z")
    _run(server, c, "ZPOPMAX", "z", "1")
    _run(server, c, "BZPOPMIN", "nokey", "z", "0")
    _run(server, c, "BZPOPMAX", "z", "0")
    _run(server, c, "ZADD", "z", "1", "a", "2", "b", "3", "c")
    _run(server, c, "ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "2")
    _run(server, c, "BZMPOP", "0", "1", "z", "MIN", "COUNT", "10")
    _run(server, c, "ZPOPMIN", "nokey")  # nothing happened: nothing propagated
    _run(server, c, "ZMPOP", "1", "nokey", "MIN")
    _run(server, c, "ZADD", "z", "1", "a")
    _run(server, c, "ZADD", "z", "1", "a")  # no change
    _run(server, c, "ZRANGESTORE", "dst", "nokey", "0", "-1")  # nothing to delete
    assert [argv for _, argv in effects] == [
        [b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c", b"4", b"d", b"5", b"e"],
        [b"ZPOPMIN", b"z"],
        [b"ZPOPMAX", b"z", b"1"],
        [b"ZPOPMIN", b"z"],
        [b"ZPOPMAX", b"z"],
        [b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c"],
        [b"ZPOPMAX", b"z", b"2"],
        [b"ZPOPMIN", b"z", b"1"],
        [b"ZADD", b"z", b"1", b"a"],
    ]


def test_propagation_of_served_waiters(inproc):
    server, producer, effects = inproc
    w = [server.new_client() for _ in range(3)]
    assert _run(server, w[0], "BZPOPMIN", "z", "0") == b""
    assert _run(server, w[1], "BZMPOP", "0", "1", "z", "MAX", "COUNT", "5") == b""
    assert _run(server, w[2], "BZPOPMAX", "z", "y", "0") == b""
    _run(server, producer, "ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert b"".join(w[0].out) == b"*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert b"".join(w[1].out) == (
        b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    )
    assert w[2].out == []
    _run(server, producer, "ZADD", "y", "7", "q")
    assert b"".join(w[2].out) == b"*3\r\n$1\r\ny\r\n$1\r\nq\r\n$1\r\n7\r\n"
    assert server.blocking.blocked_clients == 0
    assert [argv for _, argv in effects] == [
        [b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c"],
        [b"ZPOPMIN", b"z"],
        [b"ZPOPMAX", b"z", b"2"],
        [b"ZADD", b"y", b"7", b"q"],
        [b"ZPOPMAX", b"y"],
    ]


def test_setop_store_propagates_as_is(inproc):
    server, c, effects = inproc
    _run(server, c, "ZADD", "a", "1", "x")
    _run(server, c, "ZUNIONSTORE", "u", "1", "a")
    _run(server, c, "ZINTERSTORE", "u", "2", "a", "nokey")
    _run(server, c, "ZINTERSTORE", "u", "2", "a", "nokey")  # nothing to delete: no effect
    assert [argv[0] for _, argv in effects] == [b"ZADD", b"ZUNIONSTORE", b"ZINTERSTORE"]


def test_zscan_after_churn_returns_each_member_once(r):
    """The SSCAN/HSCAN finding of issue 20 (4), for ZSCAN over a skiplist."""
    r.zadd("z", {f"m{i}": i for i in range(300)})
    assert len(list(r.zscan_iter("z", count=50))) == 300
    cursor, returned = r.zscan("z", 0, count=1)  # and one iteration left open
    pipe = r.pipeline(transaction=False)
    for i in range(20_000):
        pipe.zadd("z", {f"k{i % 3}": -1})
        pipe.zrem("z", f"k{(i + 1) % 3}")
        if i % 1000 == 999:
            pipe.execute()
            cursor, page = r.zscan("z", cursor, count=1)  # the open iteration goes on
            returned += page
    pipe.execute()
    assert cursor != 0
    raw = decoded_reply(r.connection_pool.connection_kwargs["port"], "ZSCAN", "z", "0", "COUNT", "10000000")
    assert raw[0] == b"0" and len(raw[1]) == 2 * r.zcard("z") == 2 * 302
    assert set(raw[1][0::2]) == set(r.zrange("z", 0, -1))
    members = [m for m, _ in returned]
    while cursor:
        cursor, page = r.zscan("z", cursor, count=7)
        members += [m for m, _ in page]
    assert len(members) == len(set(members)) and {f"m{i}".encode() for i in range(300)} <= set(members)


def test_negative_zero_from_a_negative_weight(oracle):
    """Found by the fuzzer: ZUNION/ZINTER reply from the computed skiplist, so 0 times a
    negative weight is -0 there; a stored result goes back to a listpack, where it is 0."""
    oracle.run([
        ("ZADD", "z1", "0.1", "a", "1", "3", "0", "c"),
        ("ZUNION", "2", "z1", "z2", "WEIGHTS", "-1", "1", "WITHSCORES"),
        ("ZINTER", "1", "z1", "WEIGHTS", "-2", "WITHSCORES"),
        ("ZDIFF", "1", "z1", "WITHSCORES"),
        ("ZUNIONSTORE", "dst", "1", "z1", "WEIGHTS", "-1"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
    ])
