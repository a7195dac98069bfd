"""Fixtures for the Active-Active tests: fresh clusters of real rill-servers per test, or
clusters shared by one module's tests that each leave them as they found them."""

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


class ClusterPool:
    """Running clusters, by (n, start arguments), that a module's tests take in turn:
    starting the instances was most of such a test's time. A cluster comes back clean or
    not at all: after a test, every link is resumed and synced, a FLUSHALL at region 1
    (observed-remove, so it removes everything once all saw everything) is synced, each
    instance's script cache is flushed, and the cluster is kept only if every instance is
    alive, holds no key and no function, shows every peer up with nothing lagging, and has
    the configuration it started with; anything else stops it, and the next test gets a
    new one. For modules whose tests change nothing else (no DEBUG switches, no CLIENT
    PAUSE, no kills), which the files that use it were read for."""

    def __init__(self) -> None:
        self.idle: dict[tuple, list[tuple[Cluster, list[list]]]] = {}

    def take(self, n: int, args: tuple[str, ...]) -> tuple[Cluster, list[list]]:
        free = self.idle.get((n, args))
        if free:
            return free.pop()
        c = Cluster(n, *args).start()
        try:
            return c, [node.call("CONFIG", "GET", "*") for node in c]
        except BaseException:
            c.stop()
            raise

    def give_back(self, n: int, args: tuple[str, ...], c: Cluster, config: list[list]) -> None:
        try:
            clean = self._reset(c, config)
        except Exception:
            clean = False
        if clean:
            self.idle.setdefault((n, args), []).append((c, config))
        else:
            c.stop()

    @staticmethod
    def _reset(c: Cluster, config: list[list]) -> bool:
        if any(node.proc.proc.poll() is not None for node in c):
            return False
        for node in c:
            node.drop_client()  # whatever the test left it doing (blocked, subscribed)
            assert node.call("SCRIPT", "FLUSH") == b"OK"  # the script cache is each instance's own
        c.sync()
        assert c[0].call("FLUSHALL") == b"OK"
        c.sync()
        for node, started_with in zip(c, config, strict=True):
            if node.call("DBSIZE") != 0 or b"db" in node.call("INFO", "keyspace"):
                return False
            if node.call("FUNCTION", "LIST") != []:
                return False
            if any(p["link"] != b"up" or p["lag-effects"] != 0 for p in node.status()):
                return False
            if node.call("CONFIG", "GET", "*") != started_with:
                return False
        return True

    def close(self) -> None:
        for free in self.idle.values():
            for c, _ in free:
                c.stop()
        self.idle.clear()


@pytest.fixture(scope="module")
def cluster_pool():
    pool = ClusterPool()
    yield pool
    pool.close()


@pytest.fixture
def pooled_cluster(cluster_pool):
    """As ``cluster``, for a module whose tests leave nothing behind but keys: each call
    gets a cluster of its own for the test, clean (see ClusterPool), started only when no
    earlier test left one of the same kind."""
    taken: list[tuple] = []

    def make(n: int, *args: str) -> Cluster:
        c, config = cluster_pool.take(n, args)
        taken.append((n, args, c, config))
        return c

    yield make
    for n, args, c, config in taken:
        cluster_pool.give_back(n, args, c, config)
