"""Stream nodes: the node layout byte-for-byte, node limits, value and delta encodings, and
the integrity check run on load."""

from __future__ import annotations

from rill.storage import listpack as L
from rill.storage import stream as S
from rill.storage.stream import (
    MASK64,
    Stream,
)

from tests.storage.stream.support import (
    I,
    node_list,
    stream_with,
)

# ------------------------------------------------------------------------------------------
# Node layout
# ------------------------------------------------------------------------------------------


def test_node_layout_bytes():
    s = Stream()
    s.add([b"f", b"v"], I(1, 1))
    s.add([b"f", b"w"], I(2, 0))  # seq-diff -1: 13-bit DF FF
    s.add([b"a", b"1", b"b", b"hello"], I(2, 5))  # other fields: no SAMEFIELDS
    ((key, lp),) = node_list(s)
    assert key == I(1, 1)
    expected = L.build(
        [3, 0, 1, b"f", 0]
        + [2, 0, 0, b"v", 4]
        + [2, 1, -1, b"w", 4]
        + [0, 1, 4, 2, b"a", 1, b"b", b"hello", 8]
    )
    assert lp == bytes(expected)
    assert bytes.fromhex("02 01 01 01 df ff 02 81 77 02 04 01") in lp
    assert S.validate_node(lp, deep=True)
    assert S.node_counts(lp) == (3, 0)


def test_first_entry_of_new_node_is_samefields():
    s = stream_with(node_max_entries=1)
    s.add([b"a", b"1"], I(1))
    s.add([b"x", b"y", b"z", b"w"], I(2))
    nodes = node_list(s)
    assert [k for k, _ in nodes] == [I(1), I(2)]
    assert L.elements(nodes[1][1]) == [1, 0, 2, b"x", b"z", 0, 2, 0, 0, b"y", b"w", 5]


def test_250_small_entries_make_nodes_of_100_100_50():
    s = Stream()
    for i in range(250):
        s.add([b"item", b"%d" % i], I(1000 + i))
    nodes = node_list(s)
    assert [S.node_counts(lp) for _, lp in nodes] == [(100, 0), (100, 0), (50, 0)]
    assert [k for k, _ in nodes] == [I(1000), I(1100), I(1200)]
    assert s.node_count() == 3
    assert all(S.validate_node(lp, deep=True) for _, lp in nodes)


def test_1000_byte_values_give_four_entries_per_node():
    s = Stream()
    for i in range(10):
        s.add([b"f", b"x" * 1000], I(1, i))
    nodes = node_list(s)
    assert [S.node_counts(lp)[0] for _, lp in nodes] == [4, 4, 2]
    for _, lp in nodes[:2]:
        # closed because lpBytes + 1001 >= 4096; bytes stored exactly (no slack)
        assert len(lp) < 4096 <= len(lp) + 1001
        assert L.total_bytes(lp) == len(lp)


def test_node_limits_zero_mean_unlimited():
    s = stream_with(node_max_entries=0, node_max_bytes=0)
    for i in range(300):
        s.add([b"f", b"v" * 20], I(1, i))
    assert s.node_count() == 1
    s = stream_with(node_max_entries=0, node_max_bytes=200)
    for i in range(30):
        s.add([b"f", b"v" * 20], I(1, i))
    assert s.node_count() > 1
    assert all(len(lp) < 200 for _, lp in node_list(s))


def test_count_crosses_127_in_place():
    s = stream_with(node_max_entries=0, node_max_bytes=0)
    for i in range(300):
        s.add([b"f", b"%d" % i], I(1, i))
    ((_, lp),) = node_list(s)
    assert S.node_counts(lp) == (300, 0)
    assert S.validate_node(lp, deep=True)
    assert s.range(I(1, 128), I(1, 130)) == [(I(1, i), [b"f", b"%d" % i]) for i in (128, 129, 130)]


def test_large_and_integer_values_roundtrip():
    s = Stream()
    vals = [
        b"",
        b"0",
        b"-0",
        b"007",
        b"-1",
        b"9223372036854775807",
        b"9223372036854775808",
        b"x" * 63,
        b"y" * 64,
        b"z" * 5000,
        b"-4096",
        b"123456789012",
    ]
    for i, v in enumerate(vals):
        s.add([b"f", v, b"g", v], I(1, i))
    assert [fv for _, fv in s.range()] == [[b"f", v, b"g", v] for v in vals]
    assert [fv for _, fv in s.range(rev=True)] == [[b"f", v, b"g", v] for v in reversed(vals)]


def test_integer_field_names_and_samefields_compare_as_strings():
    s = Stream()
    s.add([b"1", b"a", b"2", b"b"], I(1))
    s.add([b"1", b"c", b"2", b"d"], I(2))
    ((_, lp),) = node_list(s)
    els = L.elements(lp)
    assert els[:6] == [2, 0, 2, 1, 2, 0]  # field names stored as integers
    assert els[-6] == 2  # second entry still SAMEFIELDS
    assert s.range() == [(I(1), [b"1", b"a", b"2", b"b"]), (I(2), [b"1", b"c", b"2", b"d"])]


def test_id_deltas_wrap_like_uint64():
    s = Stream()
    s.add([b"f", b"v"], I(1, MASK64))
    s.add([b"f", b"w"], I(3, 0))
    s.add([b"f", b"x"], I(MASK64, 7))
    els = L.elements(node_list(s)[0][1])
    assert els[10:13] == [2, 2, 1]  # 0 - UINT64_MAX wraps to 1
    assert els[15:18] == [2, -2, 8]  # ms-diff UINT64_MAX-1 is stored as int64 -2
    assert [sid for sid, _ in s.range()] == [I(1, MASK64), I(3, 0), I(MASK64, 7)]
    assert [sid for sid, _ in s.range(rev=True)] == [I(MASK64, 7), I(3, 0), I(1, MASK64)]


def test_validate_node_rejects_corruption():
    s = Stream()
    s.add([b"a", b"1", b"b", b"2"], I(1))
    s.add([b"a", b"3", b"c", b"4"], I(2))
    ((_, lp),) = node_list(s)
    assert S.validate_node(lp, deep=True)
    els = L.elements(lp)

    def rebuilt(change):
        e = list(els)
        change(e)
        return bytes(L.build(e))

    assert not S.validate_node(rebuilt(lambda e: e.__setitem__(0, 3)), deep=True)  # count
    assert S.validate_node(rebuilt(lambda e: e.__setitem__(0, 3)))  # shallow can't tell
    assert not S.validate_node(rebuilt(lambda e: e.__setitem__(5, 1)), deep=True)  # terminator
    assert not S.validate_node(
        rebuilt(lambda e: e.__setitem__(len(e) - 1, 9)), deep=True
    )  # lp-count
    assert not S.validate_node(rebuilt(lambda e: e.append(1)), deep=True)  # trailing element
    assert not S.validate_node(rebuilt(lambda e: e.__setitem__(6, b"x")), deep=True)  # flags
    assert not S.validate_node(lp[:-1], deep=True)
    assert not S.validate_node(bytes(L.build([])), deep=True)
    assert not S.validate_node(rebuilt(lambda e: e.__setitem__(0, -5)), deep=True)
