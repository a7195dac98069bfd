"""Convergence of strings, hashes, sets, sorted sets and geo in-process: the convergence
generator's writes (convergence.TypesRun) at three in-process instances, with records
carried between random pairs at random moments (a peer applies what it can and holds the
rest until its causes come), then everything delivered everywhere. The instances must
read the same: keys, types, values, absolute expiries, DEBUG DIGEST.

Much faster than the real-process runs (test_convergence.py), so it covers more
schedules; on a divergence it shrinks the script to the few steps that still diverge.
"""

from __future__ import annotations

import random

import hiredis
import pytest

from tests.server.activeactive.convergence import TypesRun
from tests.server.activeactive.test_engine import Region

Step = tuple  # ("send", a, b) | ("cmd", region, argv) | ("multi", region, [argv, ...])


def decode(raw: bytes):
    reader = hiredis.Reader()
    reader.feed(raw)
    return reader.gets()


def view(r: Region) -> dict:
    """type_snapshot's content for an in-process instance."""
    def call(*args):
        return decode(r(*args))

    out = {"digest": call("DEBUG", "DIGEST")}
    for key in sorted(call("KEYS", "*")):
        t = call("TYPE", key)
        if t == b"string":
            v = call("GET", key)
        elif t == b"hash":
            flat = call("HGETALL", key)
            v = sorted(zip(flat[::2], flat[1::2], strict=True))
        elif t == b"set":
            v = sorted(call("SMEMBERS", key))
        elif t == b"zset":
            v = call("ZRANGE", key, 0, -1, "WITHSCORES")
        elif t == b"list":
            v = call("LRANGE", key, 0, -1)
        else:
            v = t
        out[key] = (t, v, call("PEXPIRETIME", key))
    return out


def script(seed: int, n: int) -> list[Step]:
    """n writes at random instances (MULTI/EXEC of 1-3 now and then), a delivery from one
    instance to another before a quarter of them."""
    gen = TypesRun(seed, n)
    rng = random.Random(seed * 7 + 1)
    out: list[Step] = []
    for _ in range(n):
        if rng.random() < 0.25:
            out.append(("send", *rng.sample(range(3), 2)))
        gen.ops += 1
        cmd = gen.command()
        region = rng.randrange(3)
        if cmd[0] == "MULTI":
            inner = []
            while len(inner) < rng.randint(1, 3):
                c = gen.command()
                if c[0] != "MULTI":
                    inner.append(c)
            out.append(("multi", region, inner))
        else:
            out.append(("cmd", region, cmd))
    return out


def play(steps: list[Step]) -> list[dict]:
    regions = [Region(i, enable_debug_command="yes") for i in (1, 2, 3)]
    for step in steps:
        if step[0] == "send":
            regions[step[1]].send(regions[step[2]])
        elif step[0] == "cmd":
            regions[step[1]](*step[2])
        else:
            r = regions[step[1]]
            r("MULTI")
            for c in step[2]:
                r(*c)
            r("EXEC")
    for _ in range(2):
        for a in regions:
            for b in regions:
                if a is not b:
                    a.send(b)
    return [view(r) for r in regions]


def diverges(steps: list[Step]) -> bool:
    views = play(steps)
    return not views[0] == views[1] == views[2]


def shrink(steps: list[Step]) -> list[Step]:
    """Drop chunks of steps while what is left still diverges (a failure's story)."""
    chunk = len(steps) // 2
    while chunk >= 1:
        i = 0
        while i < len(steps):
            candidate = steps[:i] + steps[i + chunk:]
            if candidate and diverges(candidate):
                steps = candidate
            else:
                i += chunk
        chunk //= 2
    return steps


@pytest.mark.parametrize("seed", range(1, 13))
def test_random_writes_and_deliveries_converge(seed):
    steps = script(seed, 300)
    views = play(steps)
    if views[0] == views[1] == views[2]:
        return
    small = shrink(steps)
    story = "\n".join(repr(s) for s in small)
    raise AssertionError(f"seed {seed} diverges; {len(small)} steps that still do:\n{story}\n"
                         + "\n".join(repr(v) for v in play(small)))
