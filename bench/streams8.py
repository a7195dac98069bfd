"""Issue 8 workload: memory after deleting most of a stream (rill's node GC against
redis-server, which keeps every tombstone). XADD speed is issue 3's "XADD" row.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

import random

from .harness import AT_MOST, BenchError, Ctx, Row, Server, Workload
from .workloads import register

GC_KEY, GC_ENTRIES, GC_DELETE = "bench:gc", 1_000_000, 0.9
GC_LABEL = "stream MEMORY USAGE after XDEL of 90% at random"
GC_RSS_LABEL = "memory after XDEL of 90% (used_memory / RSS delta)"


def _gc_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    """Fill 1M entries with explicit IDs 1..N, delete 90% of them in a fixed random
    order (the same on both servers), then read the stream's MEMORY USAGE (all nodes
    sampled) and the process-level growth (Redis: used_memory; rill: RSS)."""
    n = ctx.n(GC_ENTRIES)
    victims = random.Random(8).sample(range(1, n + 1), int(n * GC_DELETE))
    is_redis = server.is_redis
    with server.client() as c:
        c.call("DEL", GC_KEY)
        before = int(c.info("memory")["used_memory"]) if is_redis else server.rss_bytes()
        errors = c.pipeline(["XADD", GC_KEY, f"{i}-0", "f1", i % 1000, "f2", i % 100] for i in range(1, n + 1))
        errors += c.pipeline(
            ["XDEL", GC_KEY, *(f"{i}-0" for i in victims[j : j + 100])] for j in range(0, len(victims), 100)
        )
        if errors:
            raise BenchError(f"{errors} error replies while filling/deleting {GC_KEY}")
        left = c.call("XLEN", GC_KEY)
        if left != n - len(victims):
            raise BenchError(f"XLEN after deleting is {left!r}, expected {n - len(victims)}")
        usage = c.call("MEMORY", "USAGE", GC_KEY, "SAMPLES", "0")
        after = int(c.info("memory")["used_memory"]) if is_redis else server.rss_bytes()
    return {GC_LABEL: float(usage), GC_RSS_LABEL: float(after - before)}


register(Workload(
    "stream memory after 90% XDEL", "streams", 8,
    [Row(GC_LABEL, "bytes", AT_MOST(0.3)), Row(GC_RSS_LABEL, "bytes", None)],
    _gc_measure,
    probe=[["XADD", "bench:probe:gc", "1-0", "f", "v"], ["XDEL", "bench:probe:gc", "1-0"],
           ["MEMORY", "USAGE", "bench:probe:gc"]],
    fresh=True,
))
