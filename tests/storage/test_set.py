"""storage.set: intset/hashtable decisions against Redis 7.0's rules, member order, scan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.storage import set as s_mod
from rill.storage.set import SetValue, from_members, from_rdb_members, is_int


@pytest.fixture(autouse=True)
def _limits():
    s_mod.set_limits(4)
    yield
    s_mod.set_limits(512)


@pytest.mark.parametrize("s,ok", [
    (b"0", True), (b"-1", True), (b"9223372036854775807", True), (b"-9223372036854775808", True),
    (b"9223372036854775808", False), (b"-9223372036854775809", False), (b"01", False), (b"-0", False),
    (b"+1", False), (b" 1", False), (b"1 ", False), (b"", False), (b"-", False), (b"1.0", False),
    (b"12345678901234567890123", False), (b"\xd9\xa1", False),
])
def test_is_int_is_string2ll(s, ok):
    assert is_int(s) is ok


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_every_int64_is_an_int(n):
    assert is_int(b"%d" % n)


def test_intset_converts_on_size_or_non_integer_and_never_back():
    s = SetValue()
    for m in (b"3", b"1", b"2", b"-4"):
        assert s.add_member(m) == 1
    assert s.add_member(b"1") == 0
    assert s.encoding() == b"intset"
    assert s.ordered() == [b"-4", b"1", b"2", b"3"]
    s.add_member(b"5")
    assert s.encoding() == b"hashtable"
    s.discard(b"5")
    assert s.encoding() == b"hashtable"
    t = SetValue([b"1"])
    t.add_member(b"x")
    assert t.encoding() == b"hashtable"


def test_set_limits_caps_at_2_30():
    s_mod.set_limits(2**40)
    assert s_mod.max_intset_entries == 1 << 30


def test_from_members_and_rdb():
    assert from_members([b"2", b"1"]).encoding() == b"intset"
    assert from_members([b"a"]).encoding() == b"hashtable"
    assert from_members([b"%d" % i for i in range(5)]).encoding() == b"hashtable"
    assert from_rdb_members([b"10", b"-1"]).rdb_items() == [b"-1", b"10"]


def test_copy_keeps_encoding():
    s = from_members([b"a", b"1"])
    c = s.copy()
    assert c == s and c.encoding() == b"hashtable" and type(c) is SetValue
    c.add_member(b"z")
    assert b"z" not in s


def test_memory_usage_reflects_intset_width():
    small = from_members([b"1", b"2"])
    wide = from_members([b"1", b"9223372036854775807"])
    assert small.memory_usage() < wide.memory_usage()
    ht = from_members([b"a" * 20, b"b"])
    assert ht.memory_usage() > wide.memory_usage()


@given(st.sets(st.binary(max_size=6), max_size=10))
def test_digest_is_order_independent(members):
    a = from_members(list(members))
    b = from_members(list(reversed(list(members))))
    assert list(a.digest_parts()) == list(b.digest_parts())


def test_scan_page_covers_everything_present_throughout():
    s = from_members([b"m%d" % i for i in range(200)])
    cursor, seen = 0, set()
    gone = iter(range(0, 200, 3))
    while True:
        cursor, page = s.scan_page(cursor, 9)
        seen.update(page)
        victim = b"m%d" % next(gone, 1)
        if victim in s:
            s.discard_member(victim)
        s.add_member(b"extra%d" % len(seen))
        if cursor == 0:
            break
    assert {b"m%d" % i for i in range(200) if i % 3} <= seen


def _full_sscan(s: SetValue, count: int) -> list[bytes]:
    out: list[bytes] = []
    cursor = 0
    while True:
        cursor, page = s.scan_page(cursor, count)
        out += page
        if cursor == 0:
            return out


def test_churn_after_a_scan_leaves_no_stale_members():
    """Issue 20, finding 4: once a scan had run, 3 members churned in a hashtable set
    piled up in the scan log and SSCAN returned them again and again."""
    s = from_members([b"m%d" % i for i in range(600)])
    assert not s.intset
    assert len(_full_sscan(s, 50)) == 600
    cursor, returned = s.scan_page(0, 2)  # and one iteration open throughout
    for i in range(20_000):
        s.add_member(b"k%d" % (i % 3))
        s.discard_member(b"k%d" % ((i + 1) % 3))
        assert len(s.scan_log) <= 603
        if i % 100 == 99:
            cursor, page = s.scan_page(cursor, 2)
            returned += page
    while cursor:
        cursor, page = s.scan_page(cursor, 2)
        returned += page
    assert sorted(returned) == sorted(b"m%d" % i for i in range(600))
    assert sorted(_full_sscan(s, 10_000_000)) == sorted(s)
    assert s.scan_log is None
