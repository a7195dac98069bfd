"""python -m tests.fuzz --seeds N --ops N --resp 2|3: the differential fuzzer."""

from __future__ import annotations

import argparse
import sys
import time

from .fuzz import fuzz_seed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--seeds", type=int, default=2, help="how many seeds (first-seed on)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=2000, help="ops per seed")
    ap.add_argument("--resp", default="2,3", help="2, 3 or 2,3")
    ap.add_argument("--snapshot-every", type=int, default=20)
    ap.add_argument("--no-shrink", action="store_true")
    args = ap.parse_args(argv)
    found = 0
    started = time.monotonic()
    for resp in [int(x) for x in args.resp.split(",")]:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            t0 = time.monotonic()
            result = fuzz_seed(seed, args.ops, resp, args.snapshot_every, shrink_it=not args.no_shrink)
            took = time.monotonic() - t0
            if result is None:
                print(f"seed {seed} RESP{resp}: {args.ops} ops, no divergence ({took:.0f}s)", flush=True)
            else:
                found += 1
                print(f"seed {seed} RESP{resp}: DIVERGENCE ({took:.0f}s)\n{result}\n", flush=True)
    total = time.monotonic() - started
    print(f"{found} divergence(s) in {total:.0f}s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
