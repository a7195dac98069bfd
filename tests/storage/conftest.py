"""Fixtures shared by the storage tests."""

from __future__ import annotations

import pytest
from rill.storage.stream import Stream, clear_node_cache


@pytest.fixture
def stream_limits():
    """Tests that set the class-wide node limits get them back afterwards, and start and
    end with an empty decoded-node cache."""
    saved = Stream.node_max_bytes, Stream.node_max_entries
    clear_node_cache()
    yield
    Stream.node_max_bytes, Stream.node_max_entries = saved
    clear_node_cache()


@pytest.fixture(autouse=True)
def storage_gc_default():
    """Storage tests see the storage default (node GC off): an in-process Server made by
    an earlier test sets the class-wide ratio from its CONFIG and nothing puts it back."""
    saved = Stream.gc_ratio
    Stream.gc_ratio = 0.0
    yield
    Stream.gc_ratio = saved
