"""Redis's inclusive index-range rule, against a model that enumerates the indexes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rill.storage.ranges import index_span


@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(0, 30))
def test_index_span_matches_enumeration(start, end, n):
    s = start + n if start < 0 else start
    e = end + n if end < 0 else end
    picked = [i for i in range(n) if max(s, 0) <= i <= e]
    assert index_span(start, end, n) == ((picked[0], picked[-1]) if picked else None)


def test_examples():
    assert index_span(0, -1, 5) == (0, 4)
    assert index_span(-100, 100, 5) == (0, 4)
    assert index_span(3, 1, 5) is None
    assert index_span(5, 10, 5) is None
    assert index_span(0, -6, 5) is None
    assert index_span(0, 0, 0) is None
