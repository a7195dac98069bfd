"""Issue 23 workloads: what Active-Active costs for strings, hashes, sets, sorted sets and
lists. As in bench/active_active.py, the "redis" column holds the baseline the issue names,
rill without Active-Active, and the label says so:

- SET, INCR, HSET, SADD, ZADD and LPUSH unpipelined at a region with two peers attached,
  against the same command on rill without Active-Active: each at least 0.8x. The peers
  stand for regions on other hosts and run at the lowest CPU priority, as in
  bench/active_active.py's XADD row (which says why).
- Memory per key (resident memory growth over 100k small keys of 10 elements) of hashes,
  sets and sorted sets with Active-Active metadata, against rill without it: at most 1.5x.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

from .active_active import _plain_rill, regions
from .harness import AT_LEAST, AT_MOST, BenchError, Ctx, Row, Server, Workload, redis_benchmark
from .workloads import N_UNPIPELINED, register

ISSUE = 23

COMMANDS = {
    "SET": ["SET", "key:__rand_int__", "xxx"],
    "INCR": ["INCR", "counter:__rand_int__"],
    "HSET": ["HSET", "hash:__rand_int__", "f", "xxx"],
    "SADD": ["SADD", "set", "member:__rand_int__"],
    "ZADD": ["ZADD", "zset", "__rand_int__", "member:__rand_int__"],
    "LPUSH": ["LPUSH", "list", "xxx"],
}


def _label(name: str) -> str:
    return f"{name}, 2 AA peers (baseline: rill without AA)"


def _commands_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    servers = [_plain_rill()] if server.is_redis else regions(3, remote_peers=True)
    out = {}
    try:
        for name, command in COMMANDS.items():
            out[_label(name)] = redis_benchmark(servers[0].port, requests=ctx.n(N_UNPIPELINED),
                                                clients=ctx.clients, command=command,
                                                extra=["-r", "100000"])
    finally:
        for s in servers:
            s.stop()
    return out


register(Workload("Active-Active writes of every type", "active-active", ISSUE,
                  [Row(_label(n), "rps", AT_LEAST(0.8)) for n in COMMANDS], _commands_measure))

# -- memory per key -----------------------------------------------------------------------------

KEYS = 100_000
ELEMENTS = 10
SHAPES = {
    "hash": lambda k: ["HSET", k, *[x for i in range(ELEMENTS) for x in (f"f{i}", f"v{i}")]],
    "set": lambda k: ["SADD", k, *[f"m{i}" for i in range(ELEMENTS)]],
    "zset": lambda k: ["ZADD", k, *[x for i in range(ELEMENTS) for x in (str(i), f"m{i}")]],
}


def _mem_label(kind: str) -> str:
    return f"AA memory/key, small {kind} (baseline: rill without AA)"


def _mem_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    out = {}
    n = ctx.n(KEYS)
    for kind, make in SHAPES.items():
        servers = [_plain_rill()] if server.is_redis else regions(2)
        try:
            s = servers[0]
            before = s.rss_bytes()
            with s.client() as c:
                errors = c.pipeline(make(f"{kind}:{i}") for i in range(n))
            if errors:
                raise BenchError(f"{kind} fill: {errors} error replies")
            out[_mem_label(kind)] = (s.rss_bytes() - before) / n
        finally:
            for x in servers:
                x.stop()
    return out


register(Workload("Active-Active memory per key", "active-active", ISSUE,
                  [Row(_mem_label(k), "B/key", AT_MOST(1.5)) for k in SHAPES], _mem_measure))
