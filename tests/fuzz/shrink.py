"""Delta debugging over an op sequence: the shortest sequence still showing the same
divergence (same signature), each candidate re-run from an empty dataset."""

from __future__ import annotations

from collections.abc import Callable

from .generator import Op
from .runner import Divergence, Pair


def reproduces(pair: Pair, ops: list[Op], signature: str) -> Divergence | None:
    """Run ``ops`` from a reset pair; the divergence if it is the one we are after."""
    pair.reset()
    div = pair.run(ops, snapshot_every=0)
    if div is not None and div.signature == signature:
        return div
    return None


def ddmin(ops: list[Op], fails: Callable[[list[Op]], bool], budget: int = 400) -> list[Op]:
    """Zeller's ddmin: remove ever smaller chunks while the failure stays."""
    n = 2
    tries = 0
    while len(ops) >= 2 and tries < budget:
        chunk = max(1, len(ops) // n)
        reduced = False
        for start in range(0, len(ops), chunk):
            candidate = ops[:start] + ops[start + chunk:]
            tries += 1
            if candidate and fails(candidate):
                ops = candidate
                n = max(n - 1, 2)
                reduced = True
                break
            if tries >= budget:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(ops), n * 2)
    return ops


def shrink(pair: Pair, ops: list[Op], div: Divergence) -> list[Op] | None:
    """A short sequence showing ``div``, or None when even the prefix up to it does not
    reproduce (a flaky divergence, reported with its full prefix)."""
    prefix = ops[: div.index + 1]
    if reproduces(pair, prefix, div.signature) is None:
        return None
    # The last op is where it showed, and usually only recent history matters: the
    # shortest reproducing suffix (1, 2, 4, ... ops) first, so ddmin starts small.
    k = 1
    while k < len(prefix):
        if reproduces(pair, prefix[-k:], div.signature) is not None:
            prefix = prefix[-k:]
            break
        k *= 2
    if len(prefix) == 1:
        return prefix
    return ddmin(prefix, lambda cand: reproduces(pair, cand, div.signature) is not None)
