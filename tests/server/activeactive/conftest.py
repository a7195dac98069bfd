"""Fixtures for the Active-Active tests: fresh clusters of real rill-servers per test."""

from __future__ import annotations

import pytest

from tests.server.activeactive.cluster import Cluster


@pytest.fixture
def cluster():
    """``cluster(n, *args, **kw)`` starts n Active-Active peers (regions 1..n), all
    stopped when the test ends."""
    started: list[Cluster] = []

    def make(n: int, *args: str, **kw) -> Cluster:
        c = Cluster(n, *args, **kw).start()
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()
