"""storage.hash: encoding decisions against a model of Redis 7.0's conversion rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.storage import hash as h_mod
from rill.storage.hash import HashValue, from_rdb_pairs


@pytest.fixture(autouse=True)
def _limits():
    h_mod.set_limits(4, 8)
    yield
    h_mod.set_limits(512, 64)


def test_listpack_until_too_many_fields_then_never_back():
    h = HashValue()
    for i in range(4):
        assert h.put(b"f%d" % i, b"v") == 1
        assert h.encoding() == b"listpack"
    assert h.put(b"f0", b"again") == 0
    assert h.encoding() == b"listpack"
    h.put(b"f4", b"v")
    assert h.encoding() == b"hashtable"
    for i in range(5):
        del h[b"f%d" % i]
    assert h.encoding() == b"hashtable"


def test_long_arguments_convert_before_insertion():
    h = HashValue()
    h.check_sizes([b"short", b"12345678"])
    assert h.listpack
    h.check_sizes([b"f", b"123456789"])
    assert not h.listpack
    h2 = HashValue()
    h2.put_checked(b"123456789", b"1")
    assert h2.encoding() == b"hashtable"


def test_insertion_order_is_kept():
    h = HashValue()
    for f in (b"c", b"a", b"b"):
        h.put(f, f)
    h.put(b"a", b"new")  # an update keeps its place
    del h[b"c"]
    h.put(b"c", b"back")  # a re-added field goes to the end
    assert list(h.rdb_items()) == [(b"a", b"new"), (b"b", b"b"), (b"c", b"back")]


def test_from_rdb_pairs_chooses_encoding():
    assert from_rdb_pairs([(b"a", b"1")]).encoding() == b"listpack"
    assert from_rdb_pairs([(b"f%d" % i, b"v") for i in range(5)]).encoding() == b"hashtable"
    assert from_rdb_pairs([(b"a", b"x" * 9)]).encoding() == b"hashtable"
    assert from_rdb_pairs([(b"a" * 9, b"x")]).encoding() == b"hashtable"


def test_copy_keeps_encoding_and_is_independent():
    h = from_rdb_pairs([(b"a", b"x" * 9)])
    c = h.copy()
    assert type(c) is HashValue and c.encoding() == b"hashtable" and c == h
    c.put(b"b", b"2")
    assert b"b" not in h


@given(st.dictionaries(st.binary(max_size=10), st.binary(max_size=10), max_size=8))
def test_digest_is_order_independent(d):
    a = from_rdb_pairs(list(d.items()))
    b = from_rdb_pairs(list(reversed(list(d.items()))))
    assert list(a.digest_parts()) == list(b.digest_parts())


def test_memory_usage_grows_with_content():
    small = from_rdb_pairs([(b"a", b"1")])
    big = from_rdb_pairs([(b"f%d" % i, b"v" * 8) for i in range(100)])
    assert 16 < small.memory_usage() < big.memory_usage()
    assert big.memory_usage(samples=0) > 100 * 24


def test_scan_page_is_stable_while_fields_change():
    h = from_rdb_pairs([(b"f%d" % i, b"v") for i in range(100)])
    seen = []
    cursor = 0
    n = 0
    while True:
        cursor, page = h.scan_page(cursor, 7)
        seen += page
        h.put(b"new%d" % n, b"v")
        h.delete_field(b"new%d" % (n - 1))
        n += 1
        if cursor == 0:
            break
    assert {b"f%d" % i for i in range(100)} <= set(seen)


def _full_hscan(h: HashValue, count: int) -> list[bytes]:
    out: list[bytes] = []
    cursor = 0
    while True:
        cursor, page = h.scan_page(cursor, count)
        out += page
        if cursor == 0:
            return out


def test_churn_after_a_scan_leaves_no_stale_fields():
    """Issue 20, finding 4: once a scan had run, 3 fields churned in a hashtable hash
    piled up in the scan log and HSCAN returned them again and again."""
    h = from_rdb_pairs([(b"f%d" % i, b"v") for i in range(600)])
    assert not h.listpack
    assert len(_full_hscan(h, 50)) == 600
    cursor, returned = h.scan_page(0, 2)  # and one iteration open throughout
    for i in range(20_000):
        h.put(b"k%d" % (i % 3), b"v")
        h.delete_field(b"k%d" % ((i + 1) % 3))
        assert len(h.scan_log) <= 603
        if i % 100 == 99:
            cursor, page = h.scan_page(cursor, 2)
            returned += page
    while cursor:
        cursor, page = h.scan_page(cursor, 2)
        returned += page
    assert sorted(returned) == sorted(b"f%d" % i for i in range(600))
    assert sorted(_full_hscan(h, 10_000_000)) == sorted(h)
    assert h.scan_log is None
