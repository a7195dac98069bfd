"""SORT and SORT_RO side by side with redis-server, over lists, sets and sorted sets."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rill.server.commands.sort import strtod_score

from tests.support import RawClient, encode_command


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


def test_numeric_and_alpha_over_a_list(oracle):
    oracle.run([
        ("RPUSH", "l", "3", "10", "-1", "2.5", "10", "0x10", " 7", "1e2", "inf", "-inf"),
        ("SORT", "l"),
        ("SORT", "l", "DESC"),
        ("SORT", "l", "ALPHA"),
        ("SORT", "l", "ALPHA", "DESC"),
        ("SORT", "l", "asc", "desc", "asc"),
        ("SORT_RO", "l"),
        ("SORT", "nokey"),
        ("SORT_RO", "nokey", "ALPHA"),
        ("RPUSH", "bad", "1", "x", "2"),
        ("SORT", "bad"),
        ("SORT", "bad", "ALPHA"),
        ("SORT", "bad", "STORE", "dst"),
        ("EXISTS", "dst"),
        ("RPUSH", "nan", "nan"),
        ("SORT", "nan"),
    ])


def test_limit_edges(oracle):
    oracle.run([("RPUSH", "l", *[str(i) for i in (5, 3, 9, 1, 7, 2, 8)])])
    for start, count in [(0, 3), (2, 2), (-5, 3), (5, 100), (7, 1), (100, 5), (0, -1), (0, 0),
                         (3, -10), (-1, -1), (6, 1)]:
        oracle.check("SORT", "l", "LIMIT", str(start), str(count))
        oracle.check("SORT", "l", "LIMIT", str(start), str(count), "DESC")
        oracle.check("SORT", "l", "BY", "nosort", "LIMIT", str(start), str(count))
        oracle.check("SORT", "l", "BY", "nosort", "LIMIT", str(start), str(count), "DESC")
    oracle.run([
        ("SORT", "l", "LIMIT", "x", "1"),
        ("SORT", "l", "LIMIT", "1", "x"),
        ("SORT", "l", "LIMIT", "1"),
        ("SORT", "l", "LIMIT"),
        ("SORT", "nokey", "LIMIT", "0", "10"),
    ])


def test_by_and_get_patterns(oracle):
    oracle.run([
        ("RPUSH", "ids", "1", "2", "3", "4"),
        ("MSET", "w_1", "40", "w_2", "10", "w_3", "30", "o_1", "one", "o_2", "two", "o_4", "four"),
        ("SORT", "ids", "BY", "w_*"),
        ("SORT", "ids", "BY", "w_*", "DESC"),
        ("SORT", "ids", "BY", "w_*", "GET", "o_*"),
        ("SORT", "ids", "BY", "w_*", "GET", "#", "GET", "o_*"),
        ("SORT", "ids", "BY", "o_*", "ALPHA"),
        ("SORT", "ids", "BY", "o_*", "ALPHA", "DESC"),
        ("SORT", "ids", "BY", "o_*"),
        ("SORT", "ids", "BY", "nosort", "GET", "o_*"),
        ("SORT", "ids", "BY", "nosort", "DESC"),
        ("SORT", "ids", "GET", "nostar"),
        ("SORT", "ids", "GET", "o_*", "LIMIT", "1", "2"),
        ("SORT", "ids", "BY", "w_*", "GET", "o_*", "STORE", "out"),
        ("LRANGE", "out", "0", "-1"),
        ("SORT", "ids", "GET", "#", "GET", "o_*", "STORE", "out"),
        ("LRANGE", "out", "0", "-1"),
        ("RPUSH", "typed", "x"),
        ("SORT", "ids", "BY", "typed*", "GET", "typed*"),
        ("SORT", "ids", "GET"),
        ("SORT", "ids", "BY"),
        ("SORT", "ids", "STORE"),
        ("SORT", "ids", "FOO"),
    ])


def test_out_of_range_scores_are_errors(r):
    r.rpush("big", "5", "1e400")
    r.rpush("tiny", "1e-400", "1")
    r.rpush("fine", "", "-3", "5")
    for key in ("big", "tiny"):
        with pytest.raises(Exception, match="One or more scores can't be converted into double"):
            r.sort(key)
    assert r.sort("fine") == [b"-3", b"", b"5"]  # our errno never leaks: "" is 0


def test_store_replaces_and_deletes(oracle):
    oracle.run([
        ("RPUSH", "l", "2", "1"),
        ("SET", "dst", "string"),
        ("EXPIRE", "dst", "100"),
        ("SORT", "l", "STORE", "dst"),
        ("TYPE", "dst"),
        ("TTL", "dst"),
        ("LRANGE", "dst", "0", "-1"),
        ("SORT", "nokey", "STORE", "dst"),
        ("EXISTS", "dst"),
        ("SORT", "nokey", "STORE", "dst"),
        ("SORT", "l", "LIMIT", "5", "5", "STORE", "dst"),
        ("EXISTS", "dst"),
        ("SORT_RO", "l", "STORE", "dst"),
        ("SET", "str", "x"),
        ("SORT", "str"),
        ("SORT_RO", "str"),
        ("SORT", "l", "STORE", "l"),
        ("LRANGE", "l", "0", "-1"),
    ])


def test_sort_store_wakes_a_blocked_pop(rill_server):
    waiter = RawClient(rill_server.port)
    writer = RawClient(rill_server.port)
    try:
        writer.call("FLUSHALL")
        writer.call("RPUSH", "src", "3", "1", "2")
        waiter.send_raw(encode_command(["BLPOP", "dst", "5"]))
        time.sleep(0.2)
        assert writer.call("SORT", "src", "STORE", "dst") == b":3\r\n"
        assert waiter.read_reply() == b"*2\r\n$3\r\ndst\r\n$1\r\n1\r\n"
        assert writer.call("LRANGE", "dst", "0", "-1") == b"*2\r\n$1\r\n2\r\n$1\r\n3\r\n"
    finally:
        waiter.close()
        writer.close()


def test_a_set_sorted_by_a_constant_inside_a_script_comes_back_ordered(oracle):
    """Redis sorts a set's output for scripts (as for STORE) so the effects are deterministic."""
    oracle.run([
        ("SADD", "myset", *"a b c d e f g h i l m n o p q r s t u v z aa aaa azz".split()),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "myset"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')", "1", "myset"),
        ("RPUSH", "mylist", "c", "a", "b"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "mylist"),  # a list keeps its order
    ])


def test_sets_and_sorted_sets(oracle):
    oracle.run([
        ("SADD", "s", "5", "1", "3", "10"),
        ("SORT", "s"),
        ("SORT", "s", "DESC", "LIMIT", "1", "2"),
        ("SORT", "s", "ALPHA"),
        ("SORT", "s", "BY", "nosort", "STORE", "dst"),  # forced ALPHA: deterministic
        ("LRANGE", "dst", "0", "-1"),
        ("SADD", "words", "pear", "apple", "fig", "kiwi"),
        ("SORT", "words", "ALPHA"),
        ("SORT", "words"),
        ("SORT", "words", "BY", "nosort", "STORE", "dst"),
        ("LRANGE", "dst", "0", "-1"),
        ("ZADD", "z", "3", "c", "1", "a", "2", "b", "2", "bb"),
        ("SORT", "z", "ALPHA"),
        ("SORT", "z", "BY", "nosort"),
        ("SORT", "z", "BY", "nosort", "DESC"),
        ("SORT", "z", "BY", "nosort", "LIMIT", "1", "2"),
        ("SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"),
        ("SORT", "z"),
        ("HSET", "h", "f", "v"),
        ("SORT", "h"),
    ])


def test_hash_field_patterns(oracle):
    oracle.run([
        ("RPUSH", "ids", "1", "2", "3"),
        ("HSET", "obj_1", "w", "3", "name", "c"),
        ("HSET", "obj_2", "w", "1", "name", "a"),
        ("HSET", "obj_3", "w", "2"),
        ("SET", "obj_x", "plain"),
        ("SORT", "ids", "BY", "obj_*->w"),
        ("SORT", "ids", "BY", "obj_*->w", "GET", "obj_*->name", "GET", "#"),
        ("SORT", "ids", "BY", "obj_*->name", "ALPHA"),
        ("SORT", "ids", "GET", "obj_*->"),
        ("SORT", "ids", "GET", "obj_*->missing"),
        ("SORT", "ids", "BY", "obj_*->w", "GET", "obj_*->name", "STORE", "out"),
        ("LRANGE", "out", "0", "-1"),
    ])


NUMERIC_ISH = st.one_of(
    st.integers(-1000, 1000).map(str),
    st.floats(allow_nan=False, allow_infinity=True, width=32).map(repr),
    # Nothing out of double range: Redis 7.0 never clears errno before strtod,
    # so after one ERANGE every later SORT on that server fails too (until some
    # other call changes errno). Those cases are checked on rill alone below.
    st.sampled_from(["", " 3", "0x1f", "1e5", "-0", "007", "+2", "x"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(NUMERIC_ISH, min_size=1, max_size=12),
       start=st.integers(-3, 14), count=st.integers(-2, 14), desc=st.booleans(), alpha=st.booleans())
def test_random_lists_match_redis(sbs, values, start, count, desc, alpha):
    sbs.check("DEL", "l")
    sbs.check("RPUSH", "l", *values)
    args = ["SORT", "l", "LIMIT", str(start), str(count)]
    if desc:
        args.append("DESC")
    if alpha:
        args.append("ALPHA")
    sbs.check(*args)


@pytest.mark.parametrize(("text", "expected"), [
    (b"", 0.0), (b"  12", 12.0), (b"12 ", None), (b"0x10", 16.0), (b"1e400", None),
    (b"1e-400", None), (b"-inf", float("-inf")), (b"nan", None), (b"0.0", 0.0), (b"1e-310", None),
    (b"1_0", None), (b".5", 0.5), (b"5.", 5.0), (b"e5", None),
    (b"\0\0d", 0.0), (b"12\0x", 12.0), (b"x\0", None),  # strtod stops at a NUL
])
def test_strtod_score(text, expected):
    assert strtod_score(text) == expected


def test_command_getkeys_finds_the_last_store(sbs):
    sbs.run([
        ("COMMAND", "GETKEYS", "SORT", "a", "STORE", "b", "BY", "c_*", "GET", "d_*", "STORE", "e", "LIMIT", "1", "2"),
        ("COMMAND", "GETKEYS", "SORT", "a", "GET", "store", "LIMIT", "store", "x"),
        ("COMMAND", "GETKEYSANDFLAGS", "SORT", "a", "STORE", "b"),
        ("COMMAND", "GETKEYS", "SORT_RO", "a", "BY", "x"),
        ("COMMAND", "INFO", "SORT", "SORT_RO"),
    ])


def test_sort_converts_a_listpack_sorted_set_to_a_skiplist(oracle):
    """Found by the fuzzer: SORT and SORT_RO turn a small sorted set into a skiplist for good."""
    oracle.run([
        ("ZADD", "z", "1", "a", "2", "b"),
        ("OBJECT", "ENCODING", "z"),
        ("SORT_RO", "z", "ALPHA", "LIMIT", "-1", "-1"),
        ("OBJECT", "ENCODING", "z"),
        ("ZADD", "z2", "1", "a"),
        ("SORT", "z2", "BY", "nosort"),
        ("OBJECT", "ENCODING", "z2"),
        ("ZADD", "z3", "-0", "a"),
        ("SORT", "z3", "BY", "nosort"),
        ("ZSCORE", "z3", "a"),
    ])



def test_by_weights_are_read_up_to_a_nul(oracle):
    """Found by the fuzzer: a BY key holding NUL bytes (SETRANGE padding) is a C string to
    strtod, so "\\0...d" weighs 0 instead of failing the conversion."""
    oracle.run([
        ("SETRANGE", "w_1", "8", "d"),
        ("SET", "w_2", "5\x00junk"),
        ("SET", "w_3", "x\x00"),
        ("SADD", "s", "2", "1"),
        ("SORT", "s", "BY", "w_*"),
        ("RPUSH", "l", "3", "2", "1"),
        ("SORT", "l", "BY", "w_*"),
    ])


def test_limit_alpha_by_ties_follow_redis_partial_quicksort(oracle):
    """Found by the fuzzer: with LIMIT, Redis sorts with its partial quicksort, which leaves
    elements whose BY values tie (here: all missing) in its own order, not list order."""
    oracle.run([
        ("RPUSH", "l", "a", "2", "e", "c", "10", "b", "b"),
        ("SORT", "l", "BY", "w_*", "LIMIT", "0", "2", "ALPHA"),
        ("SORT", "l", "BY", "w_*", "LIMIT", "1", "3", "ALPHA", "DESC"),
        ("SORT", "l", "BY", "w_*", "LIMIT", "0", "2", "ALPHA", "STORE", "out"),
        ("LRANGE", "out", "0", "-1"),
    ])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.sampled_from(["a", "b", "c", "1", "2", "x", "y"]), min_size=1, max_size=60),
       weights=st.dictionaries(st.sampled_from(["a", "b", "c", "1", "x"]), st.sampled_from(["p", "q"])),
       start=st.integers(0, 60), count=st.integers(-1, 20), desc=st.booleans())
def test_partial_sort_of_ties_matches_redis(sbs, values, weights, start, count, desc):
    sbs.check("FLUSHALL")
    sbs.check("RPUSH", "l", *values)
    for k, w in weights.items():
        sbs.check("SET", f"w_{k}", w)
    args = ["SORT", "l", "BY", "w_*", "LIMIT", str(start), str(count), "ALPHA"]
    if desc:
        args.append("DESC")
    sbs.check(*args)
