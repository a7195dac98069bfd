"""``python -m bench``: run the registered workloads against redis-server and rill, print the table.

Options: ``--quick`` (or BENCH_QUICK=1) for a tenth of the requests; ``--only TEXT`` (or
BENCH_ONLY=a,b) to run the workloads whose name or group contains TEXT; ``--list``;
``--json FILE`` to keep the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

from .harness import (
    BenchError,
    Ctx,
    Outcome,
    Server,
    redis_argv,
    redis_benchmark_binary,
    render_table,
    rill_argv,
    run_workload,
)
from .workloads import N_HEAVY, N_PIPELINED, N_UNPIPELINED, PIPELINE, WORKLOADS, Workload


def _selected(only: list[str]) -> list[Workload]:
    if not only:
        return list(WORKLOADS)
    wanted = [o.lower() for o in only]
    return [w for w in WORKLOADS if any(o in w.name.lower() or o == w.group for o in wanted)]


def _raise_fd_limit() -> None:
    """The wake-up workload holds 1000+ connections; children inherit the raised limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK", "") not in ("", "0"))
    ap.add_argument("--only", action="append", default=[o for o in os.environ.get("BENCH_ONLY", "").split(",") if o])
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", "1")),
                    help="measure each workload N times, interleaved, keeping the best (BENCH_REPEAT)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--self-check", action="store_true",
                    help="measure a second redis-server in rill's place (shows the noise; exercises every workload)")
    args = ap.parse_args(argv)

    workloads = _selected(args.only)
    if args.list:
        for w in WORKLOADS:
            print(f"{w.group:8} issue {w.issue}  {w.name}")
        return 0
    if not workloads:
        print(f"no workload matches {args.only}", file=sys.stderr)
        return 2
    try:
        redis_benchmark_binary()
        _raise_fd_limit()
        redis = Server("redis-server", redis_argv, is_redis=True).start()
        if args.self_check:
            rill = Server("redis-server#2", redis_argv, is_redis=True).start()
        else:
            rill = Server("rill", rill_argv).start()
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2

    ctx = Ctx(quick=args.quick, repeat=max(1, args.repeat))
    print(f"redis-server {redis.version} (port {redis.port}) vs {rill.label} (port {rill.port}, "
          f"reports {rill.version or '?'}); {os.cpu_count()} CPUs; redis-benchmark -c {ctx.clients}, "
          f"-n {ctx.n(N_UNPIPELINED)} unpipelined / {ctx.n(N_PIPELINED)} with -P {PIPELINE} / "
          f"{ctx.n(N_HEAVY)} for 100-element replies{' (BENCH_QUICK)' if ctx.quick else ''}")
    outcomes: list[Outcome] = []
    started = time.monotonic()
    try:
        for w in workloads:
            t0 = time.monotonic()
            print(f"  {w.name} ...", end="", flush=True, file=sys.stderr)
            try:
                got = run_workload(ctx, w, redis, rill)
            except (BenchError, OSError) as e:  # a server that cannot even be (re)started
                got = [Outcome(row, w.group, note=f"harness: {e}") for row in w.rows]
            outcomes.extend(got)
            print(f" {time.monotonic() - t0:.1f}s", file=sys.stderr)
    except KeyboardInterrupt:
        print("\ninterrupted; partial results:", file=sys.stderr)
    finally:
        redis.stop()
        rill.stop()
    print()
    print(render_table(outcomes))
    print(f"\n{len(outcomes)} rows in {time.monotonic() - started:.0f}s; ratio = rill / redis-server "
          "(for memory and latency lower is better). Timings are for reading, never pass/fail.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([o.as_dict() for o in outcomes], f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
