"""Model tests for the stream storage paths the command layer's hot paths use.

Random XADD/XDEL/XTRIM sequences against a model are in test_stream.py (StreamMachine);
these check the faster read variants against the general ones they shortcut:

- ``Stream.range_segments`` covers exactly what ``Stream.range`` returns, in both
  directions, with COUNT, through cached and uncached nodes and tombstones;
- node decoding of 13-bit integers (the fast path) gives the same strings as the
  listpack reader.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.listpack import elements, value_bytes
from rill.storage.stream import ID_MAX, Stream, validate_node

pytestmark = pytest.mark.usefixtures("stream_limits")


VALUES = st.sampled_from(
    [b"v", b"1", b"-3", b"200", b"-4096", b"4095", b"4096", b"x" * 70, b"", b"12345678901234567890", b"abc"]
)
LIMITS = st.sampled_from([(4096, 100), (200, 5), (0, 0), (4096, 200), (60, 0)])


def test_add_past_127_entries_and_at_the_last_id():
    # A node's entry count outgrows the 7-bit integer of its master entry in place.
    Stream.node_max_bytes, Stream.node_max_entries = 0, 0
    s = Stream()
    for _i in range(300):
        s.add([b"f", b"v"], None, 5)
    (_, lp), = s.nodes()
    assert validate_node(lp, True) and s.length == 300
    assert [v for _, v in s.range(0, ID_MAX, 2, True)] == [[b"f", b"v"]] * 2
    s.last_id = ID_MAX - 1
    assert s.add([b"f", b"v"], None, 5) == ID_MAX


def flatten(segs, rev: bool) -> list:
    out = []
    for ents, lo, hi, cached in segs:
        part = ents[lo:hi]
        if cached and rev:
            part.reverse()
        out.extend(part)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 500),
    st.lists(st.integers(0, 520), max_size=80),
    st.integers(0, 530),
    st.integers(0, 530),
    st.integers(0, 120),
    st.booleans(),
    st.integers(1, 3),
)
def test_range_segments_cover_exactly_the_range(n, dels, a, b, count, rev, touches):
    Stream.node_max_bytes, Stream.node_max_entries = 4096, 100
    s = Stream()
    for i in range(1, n + 1):
        s.add([b"f", b"%d" % i], i << 64)
    for d in dels:
        s.delete(d << 64)
    start, end = a << 64, (b << 64) | 5
    for _ in range(touches):  # the second touch caches nodes: both paths are covered
        segs = s.range_segments(start, end, count, rev)
        assert flatten(segs, rev) == s.range(start, end, count, rev)
        for ents, lo, hi, cached in segs:
            assert 0 <= lo <= hi <= len(ents) and (cached or (lo, hi) == (0, len(ents)))


def test_cached_segments_keep_their_list_while_the_tail_grows():
    s = Stream()
    for i in range(1, 11):
        s.add([b"f", b"v"], i << 64)
    s.range_segments(0, ID_MAX)
    (ents, lo, hi, cached), = s.range_segments(0, ID_MAX)
    assert cached and (lo, hi) == (0, 10)
    s.add([b"f", b"v"], None, 100)
    (ents2, lo, hi, cached), = s.range_segments(0, ID_MAX)
    assert ents2 is ents and hi == 11 and ents[10][0] == 100 << 64
    s.delete(3 << 64)  # a change in place: the node is decoded afresh into a new list
    s.range_segments(0, ID_MAX)
    (ents3, _lo, hi, _cached), = s.range_segments(0, ID_MAX)
    assert ents3 is not ents and hi == 10


@given(st.lists(st.integers(-5000, 5000), min_size=1, max_size=30))
def test_integer_values_decode_as_the_listpack_reader_does(values):
    s = Stream()
    fv = []
    for i, v in enumerate(values):
        fv += [b"f%d" % i, b"%d" % v]
    s.add(list(fv), 1 << 64)
    s.add(list(fv[:2]), 2 << 64)  # different fields: a non-SAMEFIELDS entry
    for _ in range(2):  # uncached, then through the decoded-node cache
        ((_sid, got), (_sid2, got2)) = s.range()
        assert got == fv and got2 == fv[:2]
    # the generic listpack reader agrees: the first entry's values follow its three
    # header elements, after the master entry (count, deleted, nf, fields..., 0)
    (_, lp), = s.nodes()
    nf = len(values)
    elems = elements(lp)
    assert [value_bytes(x) for x in elems[7 + nf : 7 + 2 * nf]] == fv[1::2]
