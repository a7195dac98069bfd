"""The engine's fast path for common one-key writes (engine.py ``_run_fast``) against its
generic path: two instances of the same region run the same random commands, one with the
fast path and one with every write taking the generic snapshot/collect path, while a peer's
effects (which leave keys holding hidden kinds, lists, HLLs, streams) arrive at both at the
same moments. After every command both must have replied the same, made the same records,
and hold the same keyspace and merge state."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rill.server.commands import streams

from tests.server.activeactive.test_engine import Region
from tests.server.activeactive.test_types_fuzz import view

KEYS = [b"a", b"b", b"c"]
FIELDS = [b"f", b"g"]
VALUES = [b"1", b"x", b"2.5", b"007", b"-3"]

key = st.sampled_from(KEYS)
field = st.sampled_from(FIELDS)
value = st.sampled_from(VALUES)
score = st.sampled_from([b"1", b"2", b"-1.5", b"inf"])
num = st.sampled_from([b"1", b"-2", b"0", b"x"])

FAST = st.one_of(
    st.tuples(st.just(b"SET"), key, value).map(list),
    st.tuples(st.just(b"SET"), key, value, st.sampled_from(
        [b"NX", b"XX", b"GET", b"KEEPTTL", b"EX"])).map(lambda t: [*t, b"100"] if t[3] == b"EX" else list(t)),
    st.tuples(st.sampled_from([b"INCR", b"DECR"]), key).map(list),
    st.tuples(st.sampled_from([b"INCRBY", b"DECRBY", b"INCRBYFLOAT"]), key, num).map(list),
    st.tuples(st.just(b"HSET"), key, field, value, st.booleans(), field, value).map(
        lambda t: list(t[:4]) + (list(t[5:]) if t[4] else [])),
    st.tuples(st.just(b"SADD"), key, st.lists(value, min_size=1, max_size=3)).map(lambda t: [t[0], t[1], *t[2]]),
    st.tuples(st.just(b"ZADD"), key, st.lists(st.sampled_from([b"NX", b"XX", b"GT", b"CH", b"INCR"]), max_size=2),
              score, value).map(lambda t: [t[0], t[1], *t[2], t[3], t[4]]),
    st.tuples(st.sampled_from([b"LPUSH", b"RPUSH"]), key, st.lists(value, min_size=1, max_size=3)).map(
        lambda t: [t[0], t[1], *t[2]]),
    st.tuples(st.just(b"DEL"), key).map(list),
    st.tuples(st.just(b"DEL"), key, key).map(list),
)
OTHER = st.one_of(
    st.tuples(st.just(b"HDEL"), key, field).map(list),
    st.tuples(st.just(b"HINCRBY"), key, field, num).map(list),
    st.tuples(st.just(b"SREM"), key, value).map(list),
    st.tuples(st.just(b"ZREM"), key, value).map(list),
    st.tuples(st.sampled_from([b"LPOP", b"RPOP"]), key).map(list),
    st.tuples(st.just(b"EXPIRE"), key, st.sampled_from([b"100", b"200"])).map(list),
    st.tuples(st.just(b"PERSIST"), key).map(list),
    st.tuples(st.just(b"PFADD"), key, value).map(list),
    st.tuples(st.just(b"XADD"), key, st.just(b"*"), field, value).map(list),
    st.tuples(st.just(b"APPEND"), key, value).map(list),
)
STEP = st.one_of(
    st.tuples(st.just("local"), FAST), st.tuples(st.just("local"), FAST), st.tuples(st.just("local"), OTHER),
    st.tuples(st.just("peer"), st.one_of(FAST, OTHER)), st.tuples(st.just("deliver"), st.just(None)),
)


def state(r: Region) -> tuple:
    engine = r.engine
    return (
        view(r),
        {k: repr(v) for k, v in engine.keyed.keys.items()},
        {k: repr(v) for k, v in engine.lists.keys.items()},
        dict(engine.hlls.values),
        {k: list(v) for k, v in engine.ttl.items()},
        engine.seq,
    )


def _generic_only(r: Region) -> None:
    engine = r.engine
    engine.fast_writes = False  # run() takes the generic path for every write


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=40))
# A string's state left in full form holding one Reg (an assign over a peer's), then an
# INCR: the counter's fast op must leave it to collect_known (a Reg has no increments).
@example([("local", [b"SET", b"a", b"5"]), ("peer", [b"SET", b"a", b"1"]), ("deliver", None),
          ("local", [b"SET", b"a", b"5"]), ("local", [b"INCR", b"a"])])
def test_fast_path_makes_what_the_generic_path_makes(steps):
    # One clock for both instances: an op's timestamp is part of what is compared. XADD's
    # ``*`` reads the stream commands' own clock (in C when compiled), so that one too.
    with mock.patch("time.time", return_value=1_700_000_000.0), \
            mock.patch.object(streams, "clock", lambda: 1_700_000_000_000):
        fast, generic = Region(1, enable_debug_command="yes"), Region(1, enable_debug_command="yes")
        peer = Region(2)
        _generic_only(generic)
        delivered = 0
        for where, argv in steps:
            if where == "local":
                assert fast(*argv) == generic(*argv), argv
                assert fast.records() == generic.records(), argv
            elif where == "peer":
                peer(*argv)
            else:
                for rec in peer.records(delivered):
                    assert fast(*rec) == generic(*rec)
                delivered = peer.engine.seq
            assert state(fast) == state(generic), argv


def _no_pfadd_shortcut(r: Region) -> None:
    r.engine.hlls._pfadd_dense = lambda *args: None


elements = st.lists(st.integers(0, 3000).map(b"e%d".__mod__), min_size=1, max_size=40)
HLL_STEP = st.one_of(
    st.tuples(st.just("local"), st.tuples(st.just(b"PFADD"), key, elements).map(lambda t: [t[0], t[1], *t[2]])),
    st.tuples(st.just("local"), st.tuples(st.just(b"PFADD"), key, st.lists(st.integers(0, 10**6).map(
        b"big%d".__mod__), min_size=200, max_size=600)).map(lambda t: [t[0], t[1], *t[2]])),
    st.tuples(st.just("local"), st.sampled_from([
        [b"PFMERGE", b"a", b"b"], [b"PFDEBUG", b"TODENSE", b"a"], [b"DEL", b"b"], [b"SET", b"c", b"x"]])),
    st.tuples(st.just("peer"), st.tuples(st.just(b"PFADD"), key, elements).map(lambda t: [t[0], t[1], *t[2]])),
    st.tuples(st.just("deliver"), st.just(None)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(HLL_STEP, min_size=1, max_size=25), st.sampled_from(["200", "3000"]))
def test_pfadd_to_a_dense_hll_makes_what_the_register_diff_makes(steps, sparse_max):
    """hll.py's _pfadd_dense (the registers a PFADD raised, from its elements) against
    collect()'s decode-and-compare, with HLLs turning dense by size and by PFDEBUG."""
    with mock.patch("time.time", return_value=1_700_000_000.0):
        conf = {"enable_debug_command": "yes", "hll_sparse_max_bytes": sparse_max}
        fast, generic, peer = Region(1, **conf), Region(1, **conf), Region(2, **conf)
        _no_pfadd_shortcut(generic)
        delivered = 0
        for where, argv in steps:
            if where == "local":
                assert fast(*argv) == generic(*argv), argv
                assert fast.records() == generic.records(), argv
            elif where == "peer":
                peer(*argv)
            else:
                for rec in peer.records(delivered):
                    assert fast(*rec) == generic(*rec)
                delivered = peer.engine.seq
            assert state(fast) == state(generic), argv
            for k in KEYS:
                assert fast("GET", k) == generic("GET", k)
