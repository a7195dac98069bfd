"""storage.list: ListValue against a plain Python list model, and its node layout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.list import ListValue, _jemalloc_size, lp_entry_size

elements = st.lists(st.sampled_from([b"a", b"b", b"c", b"1", b"xx"]), max_size=40)
indexes = st.integers(min_value=-50, max_value=50)


def model_range(items: list[bytes], start: int, end: int) -> list[bytes]:
    n = len(items)
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = max(start, 0)
    if start > end or start >= n:
        return []
    return items[start : min(end, n - 1) + 1]


@given(elements, indexes, indexes)
def test_range_and_trim_match_redis_index_rules(items, start, end):
    lst = ListValue(items)
    assert lst.range(start, end) == model_range(items, start, end)
    kept = model_range(items, start, end)
    removed = lst.trim(start, end)
    assert list(lst) == kept
    assert removed == len(items) - len(kept)


@given(elements, st.sampled_from([b"a", b"c", b"zz"]), st.integers(min_value=-5, max_value=5))
def test_remove_matches(items, element, count):
    lst = ListValue(items)
    expect = list(items)
    if count >= 0:
        limit = count or len(items)
        removed = 0
        i = 0
        while i < len(expect) and removed < limit:
            if expect[i] == element:
                del expect[i]
                removed += 1
            else:
                i += 1
    else:
        removed = 0
        i = len(expect) - 1
        while i >= 0 and removed < -count:
            if expect[i] == element:
                del expect[i]
                removed += 1
            i -= 1
    assert lst.remove_matches(element, count) == removed
    assert list(lst) == expect


def test_remove_matches_rebuilds_for_many_matches():
    items = [b"x", b"y"] * 500
    lst = ListValue(items)
    assert lst.remove_matches(b"x", 0) == 500
    assert list(lst) == [b"y"] * 500
    lst = ListValue(items)
    assert lst.remove_matches(b"y", -300) == 300
    assert list(lst) == [b"x", b"y"] * 200 + [b"x"] * 300


@given(
    elements,
    st.sampled_from([b"a", b"c", b"zz"]),
    st.integers(min_value=-6, max_value=6).filter(bool),
    st.integers(min_value=0, max_value=4),
    st.integers(min_value=0, max_value=45),
)
def test_positions_model(items, element, rank, count, maxlen):
    lst = ListValue(items)
    n = len(items)
    order = range(n) if rank > 0 else range(n - 1, -1, -1)
    if maxlen:
        order = list(order)[:maxlen]
    matches = [i for i in order if items[i] == element]
    matches = matches[abs(rank) - 1 :]
    if count:
        matches = matches[:count]
    assert lst.positions(element, rank, count, maxlen) == matches


@given(elements, st.integers(min_value=1, max_value=50), st.booleans())
def test_pop_many(items, count, left):
    lst = ListValue(items)
    popped = lst.pop_many(count, left)
    if left:
        assert popped == items[:count]
        assert list(lst) == items[count:]
    else:
        assert popped == list(reversed(items))[:count]
        assert list(lst) == items[: max(len(items) - count, 0)]


@given(elements, indexes)
def test_get_and_set_at(items, index):
    lst = ListValue(items)
    inside = -len(items) <= index < len(items)
    assert lst.get(index) == (items[index] if inside else None)
    assert lst.set_at(index, b"new") == inside
    if inside:
        items = list(items)
        items[index] = b"new"
    assert list(lst) == items


def test_insert_at_pivot_uses_first_match():
    lst = ListValue([b"a", b"b", b"a"])
    assert lst.insert_at_pivot(b"a", b"X", after=True)
    assert lst.insert_at_pivot(b"a", b"Y", after=False)
    assert not lst.insert_at_pivot(b"zz", b"Z", after=False)
    assert list(lst) == [b"Y", b"a", b"X", b"b", b"a"]


def test_value_facts():
    lst = ListValue([b"a", b"b"])
    assert lst.type_name == b"list"
    # Redis 7.0 reports every list as a quicklist (listpack lists came in 7.2).
    assert lst.encoding() == b"quicklist"
    dup = lst.copy()
    dup.append(b"c")
    assert type(dup) is ListValue and list(lst) == [b"a", b"b"]
    assert list(lst.digest_parts()) == [b"a", b"b"]


def test_listpack_entry_sizes():
    # encoding byte(s) + data + back-length, as listpack.c lays them out
    assert lp_entry_size(b"0") == 2  # 7-bit uint
    assert lp_entry_size(b"127") == 2
    assert lp_entry_size(b"128") == 3  # 13-bit int
    assert lp_entry_size(b"-4096") == 3
    assert lp_entry_size(b"32767") == 4  # 16-bit
    assert lp_entry_size(b"8388607") == 5  # 24-bit
    assert lp_entry_size(b"2147483647") == 6  # 32-bit
    assert lp_entry_size(b"9223372036854775807") == 10  # 64-bit
    assert lp_entry_size(b"9223372036854775808") == 21  # too big: a 19+1 byte string... plus backlen
    assert lp_entry_size(b"01") == 4  # not canonical: a string
    assert lp_entry_size(b"x" * 63) == 65
    assert lp_entry_size(b"x" * 64) == 67
    assert lp_entry_size(b"x" * 200) == 204  # backlen needs 2 bytes past 127
    assert lp_entry_size(b"x" * 5000) == 5007


def test_jemalloc_size_classes():
    assert [_jemalloc_size(n) for n in (1, 8, 9, 17, 128, 129, 161, 257, 4097)] == [
        8, 8, 16, 32, 128, 160, 192, 320, 5120,
    ]


def test_nodes_follow_fill_rules():
    # -2: nodes up to 8 kB of listpack
    lst = ListValue([b"x" * 100] * 1000)
    nodes = list(lst.nodes(-2))
    assert sum(len(n) for n in nodes) == 1000
    assert all(7 + sum(lp_entry_size(e) for e in n) <= 8192 for n in nodes)
    assert len(nodes[0]) == 79  # 7 + 79*102 + 8 <= 8192 < 7 + 80*102 + 8
    # a positive fill caps the element count
    assert [len(n) for n in ListValue([b"a"] * 10).nodes(4)] == [4, 4, 2]
    # elements at the packed threshold live alone (PLAIN nodes)
    nodes = list(ListValue([b"a", b"big!", b"b"]).nodes(-2, packed_threshold=4))
    assert nodes == [[b"a"], [b"big!"], [b"b"]]
    assert list(ListValue().nodes()) == []


@settings(max_examples=30)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=300))
def test_memory_usage_grows_with_content(items):
    lst = ListValue(items)
    small = ListValue(items[:1])
    assert lst.memory_usage(samples=0) >= small.memory_usage(samples=0) > 56
    assert lst.memory_usage() > 56


def test_packed_threshold_setting():
    from rill.storage import list as list_mod

    try:
        assert list_mod.set_packed_threshold(4)
        assert list(ListValue([b"a", b"big!", b"b"]).nodes(-2)) == [[b"a"], [b"big!"], [b"b"]]
        assert not list_mod.set_packed_threshold(1 << 32)
        assert list_mod.packed_threshold() == 4
        assert list_mod.set_packed_threshold(0)
        assert list_mod.packed_threshold() == list_mod.PACKED_THRESHOLD
        assert list(ListValue([b"a", b"big!", b"b"]).nodes(-2)) == [[b"a", b"big!", b"b"]]
    finally:
        list_mod.set_packed_threshold(0)


def test_compressed_nodes_spare_depth_at_each_end():
    from rill.storage.list import compressed_nodes
    assert list(compressed_nodes(10, 0)) == []
    assert list(compressed_nodes(2, 1)) == []
    assert list(compressed_nodes(3, 1)) == [1]
    assert list(compressed_nodes(4, 2)) == []
    assert list(compressed_nodes(5, 2)) == [2]
    assert list(compressed_nodes(9, 3)) == [3, 4, 5]


def test_compress_node_rules():
    """Under 48 bytes, or saving fewer than 8 bytes, a node stays raw; the codec is
    handed the node's own length as its room."""
    from rill.storage.list import compress_node
    seen = []

    def lzf(data: bytes, max_len: int) -> bytes | None:
        seen.append(max_len)
        return data[: len(data) - int(data[:1] == b"s") * 9 - int(data[:1] == b"b") * 8]

    assert compress_node(b"s" * 47, lzf) is None and seen == []
    assert compress_node(b"s" * 48, lzf) == b"s" * 39 and seen == [48]
    assert compress_node(b"b" * 60, lzf) is None  # 52 + 8 is not under 60
    assert compress_node(b"x" * 60, lambda d, n: None) is None
