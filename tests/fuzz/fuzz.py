"""One seed's run: generate, compare, and on a divergence shrink and transcribe it."""

from __future__ import annotations

from .generator import Generator
from .runner import Pair
from .shrink import shrink
from .transcript import report


def fuzz_seed(seed: int, n_ops: int, resp: int, snapshot_every: int = 20,
              shrink_it: bool = True) -> str | None:
    """None when rill and redis-server agree on the whole run; else the reproduction."""
    ops = Generator(seed).ops(n_ops)
    pair = Pair(resp=resp, small_encodings=seed % 2 == 1).start()
    try:
        div = pair.run(ops, snapshot_every=snapshot_every)
        if div is None:
            return None
        header = f"seed {seed}, RESP{resp}, op {div.index}: {div.what}"
        if not shrink_it:
            return f"# {header}\n{div.describe()}"
        return report(pair, ops, div, shrink(pair, ops, div), header)
    finally:
        pair.stop()
