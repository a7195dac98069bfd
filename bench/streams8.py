"""Issue 8 workload: memory reused after deleting most of a stream (rill's node GC against
redis-server, which keeps every tombstone; the row's form is issue 26's). XADD speed is
issue 3's "XADD" row.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

import random

from .harness import AT_MOST, BenchError, Ctx, Row, Server, Workload
from .workloads import register

GC_KEY, GC_ENTRIES, GC_DELETE = "bench:gc", 200_000, 0.9
GC_LABEL = "stream RSS growth: 200k XADD, XDEL 90% at random, 180k XADD"


def _gc_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    """The honest measure of node GC is memory that gets reused: fill 200k entries with
    explicit IDs, delete 90% in a fixed random order (the same on both servers), then add
    180k new entries, and read the growth of the process's resident size over the whole
    workload on both servers (a MEMORY USAGE figure would judge rill by its own estimate;
    Redis keeps every tombstone, rill rewrites nodes and pymalloc reuses what they freed)."""
    n = ctx.n(GC_ENTRIES)
    victims = random.Random(8).sample(range(1, n + 1), int(n * GC_DELETE))
    with server.client() as c:
        c.call("DEL", GC_KEY)
        # One small round of the same commands first, so that what a fresh process
        # builds on first use (rill imports and sets up its stream command paths then)
        # is not counted as the stream's memory on either server.
        c.pipeline(["XADD", GC_KEY, f"{i}-0", "f1", i, "f2", i] for i in range(1, 201))
        c.pipeline([["XDEL", GC_KEY, *(f"{i}-0" for i in range(1, 181))]])
        c.call("DEL", GC_KEY)
        before = server.rss_bytes()
        errors = c.pipeline(["XADD", GC_KEY, f"{i}-0", "f1", i % 1000, "f2", i % 100] for i in range(1, n + 1))
        errors += c.pipeline(
            ["XDEL", GC_KEY, *(f"{i}-0" for i in victims[j : j + 100])] for j in range(0, len(victims), 100)
        )
        errors += c.pipeline(["XADD", GC_KEY, f"{i}-0", "f1", i % 1000, "f2", i % 100]
                             for i in range(n + 1, n + len(victims) + 1))
        if errors:
            raise BenchError(f"{errors} error replies while filling/deleting/refilling {GC_KEY}")
        left = c.call("XLEN", GC_KEY)
        if left != n:
            raise BenchError(f"XLEN after the refill is {left!r}, expected {n}")
        after = server.rss_bytes()
    return {GC_LABEL: float(after - before)}


register(Workload(
    "stream memory reuse after 90% XDEL", "streams", 8,
    [Row(GC_LABEL, "bytes", AT_MOST(0.6))],
    _gc_measure,
    probe=[["XADD", "bench:probe:gc", "1-0", "f", "v"], ["XDEL", "bench:probe:gc", "1-0"]],
    fresh=True,
))
