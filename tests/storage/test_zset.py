"""SortedSet against a naive model: a dict and a sorted list of (score, member)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage import zset as Z
from rill.storage.zset import SortedSet, d2string, format_score, from_pairs, from_rdb_pairs

members = st.binary(min_size=0, max_size=4)
scores = st.one_of(
    st.integers(-5, 5).map(float),
    st.sampled_from([math.inf, -math.inf, 0.5, -0.0]),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), members, scores),
        st.tuples(st.just("rem"), members, scores),
        st.tuples(st.just("pop"), st.integers(0, 30), st.booleans()),
        st.tuples(st.just("remrange"), st.integers(0, 40), st.integers(0, 40)),
        st.tuples(st.just("popend"), st.booleans(), st.just(0)),
    ),
    max_size=300,
)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    # Tiny blocks so splits, merges and the Fenwick index are exercised by small inputs.
    monkeypatch.setattr(Z, "LOAD", 8)


def _model_order(model: dict) -> list[tuple[float, bytes]]:
    return sorted((s, m) for m, s in model.items())


def _check(z: SortedSet, model: dict) -> None:
    order = _model_order(model)
    assert len(z) == len(model)
    assert z.range(0, len(z)) == order
    assert list(z.items()) == [(m, s) for s, m in order]
    assert list(z.items(reverse=True)) == [(m, s) for s, m in reversed(order)]
    for i, (s, m) in enumerate(order):
        assert z.rank(m) == i
        assert z.rank(m, reverse=True) == len(order) - 1 - i
        assert z.range(i, i + 1) == [(s, m)]
    assert all(len(b) for b in z._lists)
    assert z._maxes == [b[-1] for b in z._lists]


@settings(max_examples=150, deadline=None)
@given(ops)
def test_against_model(script):
    z = SortedSet()
    model: dict[bytes, float] = {}
    for op in script:
        if op[0] == "add":
            _, m, s = op
            z.add(m, s)
            if m not in model or model[m] != s:
                model[m] = s
        elif op[0] == "rem":
            assert z.remove(op[1]) == (op[1] in model)
            model.pop(op[1], None)
        elif op[0] == "pop":
            _, count, from_max = op
            order = _model_order(model)
            want = order[::-1][:count] if from_max else order[:count]
            got = z.pop(count, from_max)
            assert got == [(m, s) for s, m in want]
            for _s, m in want:
                del model[m]
        elif op[0] == "popend":
            order = _model_order(model)
            if order:
                want = order[-1] if op[1] else order[0]
                assert z.pop_end(op[1]) == want
                del model[want[1]]
        else:
            _, a, b = op
            order = _model_order(model)
            lo, hi = min(a, b), max(a, b)
            hi = min(hi, len(order))
            removed = z.remove_rank_range(lo, hi) if hi > lo else 0
            assert removed == max(0, hi - lo)
            for _s, m in order[lo:hi]:
                del model[m]
        _check(z, model)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(members, scores, max_size=60), scores, st.booleans(), st.booleans())
def test_score_bounds(model, bound, exclusive, upper):
    z = from_pairs(model.items())
    order = _model_order(model)
    got = z.score_rank(bound, exclusive, upper)
    if upper:
        want = sum(1 for s, _ in order if (s < bound if exclusive else s <= bound))
    else:
        want = sum(1 for s, _ in order if (s <= bound if exclusive else s < bound))
    assert got == want


@settings(max_examples=100, deadline=None)
@given(st.sets(members, max_size=60), members, st.booleans(), st.booleans())
def test_lex_bounds_same_score(names, bound, exclusive, upper):
    z = from_pairs((m, 0.0) for m in names)
    order = sorted(names)
    got = z.lex_rank(bound, exclusive, upper, 0)
    if upper:
        want = sum(1 for m in order if (m < bound if exclusive else m <= bound))
    else:
        want = sum(1 for m in order if (m <= bound if exclusive else m < bound))
    assert got == want
    assert z.lex_rank(None, True, False, -1) == 0
    assert z.lex_rank(None, True, True, 1) == len(order)


def test_same_score_keeps_old_value():
    z = SortedSet(listpack=False)
    z.add(b"a", -0.0)
    z.add(b"a", 0.0)  # equal scores: Redis leaves the stored one alone
    assert math.copysign(1, z.score(b"a")) < 0
    z.maybe_compact()  # a listpack holds -0 as the integer 0
    assert math.copysign(1, z.score(b"a")) > 0
    y = SortedSet()
    y.add(b"a", -0.0)
    assert math.copysign(1, y.score(b"a")) > 0


def test_encoding_thresholds(monkeypatch):
    monkeypatch.setattr(Z, "max_listpack_entries", 3)
    monkeypatch.setattr(Z, "max_listpack_value", 5)
    z = Z.new_for(1)
    for m in (b"a", b"b", b"c"):
        z.add(m, 1.0)
    assert z.encoding() == b"listpack"
    z.add(b"d", 1.0)
    assert z.encoding() == b"skiplist"
    z.remove(b"d")
    assert z.encoding() == b"skiplist"  # never converts back on its own
    z.maybe_compact()
    assert z.encoding() == b"listpack"
    y = Z.new_for(1)
    y.add(b"toolong", 1.0)
    assert y.encoding() == b"skiplist"
    assert Z.new_for(6).encoding() == b"skiplist"
    assert from_rdb_pairs([(b"a", 1.0)]).encoding() == b"listpack"
    assert from_rdb_pairs([(b"abcdef", 1.0)]).encoding() == b"skiplist"
    monkeypatch.setattr(Z, "max_listpack_entries", 0)
    assert Z.new_for(1).encoding() == b"skiplist"


def test_value_contract():
    z = from_pairs([(b"a", 1.0), (b"b", 2.5), (b"c", -math.inf)])
    assert z.type_name == b"zset"
    assert list(z.rdb_items()) == [(b"b", 2.5), (b"a", 1.0), (b"c", -math.inf)]
    c = z.copy()
    c.add(b"d", 4.0)
    assert len(z) == 3 and len(c) == 4
    assert list(z.digest_parts()) == [b"c", b"-inf", b"a", b"1", b"b", b"2.5"]
    assert z.memory_usage() > 0


def test_scan_is_cursor_stable():
    z = from_pairs((b"m%d" % i, float(i)) for i in range(500))
    seen = set()
    cursor = 0
    while True:
        cursor, found = z.scan(cursor, 20)
        seen.update(found)
        z.add(b"new%d" % len(seen), 1.0)
        if cursor == 0:
            break
    assert {b"m%d" % i for i in range(500)} <= seen


@pytest.mark.parametrize(
    ("value", "g17", "d2s"),
    [
        (1.5, b"1.5", b"1.5"),
        (3.0, b"3", b"3"),
        (0.1, b"0.10000000000000001", b"0.10000000000000001"),
        (math.inf, b"inf", b"inf"),
        (-math.inf, b"-inf", b"-inf"),
        (1e300, b"1.0000000000000001e+300", b"1.0000000000000001e+300"),
        (-0.0, b"-0", b"-0"),
        (1e17, b"1e+17", b"100000000000000000"),
    ],
)
def test_score_formats(value, g17, d2s):
    assert format_score(value) == g17
    assert d2string(value) == d2s


def _full_zscan(z: SortedSet, count: int) -> list[bytes]:
    out: list[bytes] = []
    cursor = 0
    while True:
        cursor, page = z.scan(cursor, count)
        out += page
        if cursor == 0:
            return out


def test_churn_after_a_scan_leaves_no_stale_members():
    """The SSCAN/HSCAN finding of issue 20 (4), for ZSCAN: churn through ZADD, ZREM,
    ZPOPMIN and ZREMRANGEBYRANK after a scan leaves neither stale slots nor repeats."""
    z = from_pairs((b"m%d" % i, float(i)) for i in range(300))
    assert len(_full_zscan(z, 50)) == 300
    cursor, returned = z.scan(0, 1)
    for i in range(20_000):
        z.add(b"k%d" % (i % 3), -1.0)
        z.remove(b"k%d" % ((i + 1) % 3))
        if i % 3 == 0:
            z.add(b"x", -2.0)
            z.pop_end(False)  # takes x, the lowest
        elif i % 3 == 1:
            z.add(b"x", -2.0)
            z.remove_rank_range(0, 1)
        assert len(z._scan) <= 304  # 300 + k0..k2 + x
        if i % 100 == 99:
            cursor, page = z.scan(cursor, 1)
            returned += page
    while cursor:
        cursor, page = z.scan(cursor, 1)
        returned += page
    assert sorted(returned) == sorted(b"m%d" % i for i in range(300))
    assert sorted(_full_zscan(z, 10_000_000)) == sorted(z.dict)
    assert z._scan is None
