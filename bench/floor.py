"""``python -m bench.floor``: rill's CPU floor per pipelined command, against the budget a target allows.

A pipelined benchmark keeps rill's one core busy, so its rate is bounded by the
CPU one request costs. This measures that cost with everything but the network
taken away: the exact bytes redis-benchmark sends with ``-P 16`` are fed to the
request parser and run through the dispatcher on an in-process server, replies
encoded, in a loop (no sockets, no event loop, no system calls; best of several
repeats). It then runs redis-benchmark against redis-server for the same
command and prints the time per request that the issue's ratio leaves rill:
``1 / (target * redis_rps)``. When the floor alone is over that budget, no
tuning of the I/O path can reach the target. For scale it also runs the same
load against a rill-server process and reads the CPU time the process spent
per request (/proc), which is the floor plus the socket and event-loop work.

The floor is measured in both modes of the hot core (docs/hot-core.md), each in a
child process: ``pure`` (RILL_PURE=1) and ``compiled`` (when a build is present); the
servers run in the default mode, which the table's header names.

Options: ``--no-servers`` prints the in-process floor only; ``--requests N`` for redis-benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit
from dataclasses import dataclass

from .harness import BenchError, Server, redis_argv, redis_benchmark, rill_argv
from .workloads import PIPELINE, XADD_CMD


@dataclass(frozen=True)
class Case:
    label: str
    test: str | None  # redis-benchmark -t name, or None for a custom command
    argv: list[str]  # what redis-benchmark sends (keys stay literal without -r)
    target: float


# redis-benchmark's own commands for these tests (data size 3: the value "xxx").
_MSET = ["MSET"] + ["key:__rand_int__", "xxx"] * 10
CASES = [
    Case(f"PING_MBULK -P{PIPELINE}", "ping_mbulk", ["PING"], 0.6),
    Case(f"SET -P{PIPELINE}", "set", ["SET", "key:__rand_int__", "xxx"], 0.6),
    Case(f"GET -P{PIPELINE}", "get", ["GET", "key:__rand_int__"], 0.6),
    Case(f"INCR -P{PIPELINE}", "incr", ["INCR", "counter:__rand_int__"], 0.6),
    Case(f"MSET -P{PIPELINE}", "mset", _MSET, 0.6),
    Case(f"XADD -P{PIPELINE}", None, XADD_CMD, 0.6),
]


def _resp(argv: list[str]) -> bytes:
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        b = a.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


def floor_us(argv: list[str], repeat: int = 7, rounds: int = 400) -> float:
    """Microseconds of CPU per command: parse + dispatch + reply, ``PIPELINE`` per read."""
    from rill.protocol.parser import RequestParser
    from rill.server.commands import load_all
    from rill.server.config import Config
    from rill.server.server import Server as RillServer

    load_all()
    server = RillServer(Config())
    client = server.new_client()
    parser = RequestParser(512 * 1024 * 1024)
    chunk = _resp(argv) * PIPELINE
    out = client.out

    def one_read() -> None:
        server.execute_all(client, parser.feed(chunk))
        b"".join(out)
        out.clear()

    one_read()  # creates the key, so GET measures a hit as redis-benchmark's does after SET
    best = min(timeit.repeat(one_read, number=rounds, repeat=repeat))
    return best / (rounds * PIPELINE) * 1e6


def floors_by_mode() -> dict[str, dict[str, float]]:
    """{mode: {case label: floor}} for pure and (when built) compiled, one child each."""
    out: dict[str, dict[str, float]] = {}
    for pure in ("1", "0"):
        env = dict(os.environ, RILL_PURE=pure)
        run = subprocess.run([sys.executable, "-m", "bench.floor", "--this-mode"], env=env,
                             capture_output=True, text=True, check=True)
        mode, floors = json.loads(run.stdout)
        out.setdefault(mode, floors)
    return out


def _this_mode() -> int:
    from rill.server.process import hot_core

    print(json.dumps([hot_core()[0], {case.label: floor_us(case.argv) for case in CASES}]))
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served_us(server: Server, case: Case, requests: int) -> tuple[float, float]:
    """(rate, CPU microseconds per request) of ``server`` under redis-benchmark's load."""
    with server.client() as c:
        c.call("FLUSHALL")
    before = _cpu_seconds(server.pid)
    rps = redis_benchmark(server.port, requests=requests, pipeline=PIPELINE, test=case.test,
                          command=None if case.test else case.argv)
    return rps, (_cpu_seconds(server.pid) - before) / requests * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-servers", action="store_true", help="print rill's in-process floor only")
    ap.add_argument("--requests", type=int, default=500_000)
    ap.add_argument("--this-mode", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.this_mode:
        return _this_mode()

    servers: list[Server] = []
    if not args.no_servers:
        try:
            servers = [Server("redis-server", redis_argv, is_redis=True).start(), Server("rill", rill_argv).start()]
        except BenchError as e:
            print(f"bench.floor: {e} (use --no-servers)", file=sys.stderr)
            for s in servers:
                s.stop()
            return 2
    from rill.server.process import hot_core

    floors = floors_by_mode()
    modes = list(floors)
    default = hot_core()[0]
    print(f"{'workload':<16}" + "".join(f" {m + ' floor':>15}" for m in modes)
          + (f" {'rill CPU/req':>13} {'redis-server':>14} {'budget':>9}  floor/budget ({default})"
             if servers else ""))
    try:
        for case in CASES:
            row = f"{case.label:<16}" + "".join(f" {floors[m][case.label]:12.2f} us" for m in modes)
            if not servers:
                print(row)
                continue
            floor = floors.get(default, floors[modes[-1]])[case.label]
            redis, rill = servers
            redis_rps, _ = served_us(redis, case, args.requests)
            _, rill_cpu = served_us(rill, case, args.requests)
            budget = 1e6 / (case.target * redis_rps)
            print(f"{row} {rill_cpu:10.2f} us {redis_rps:>10,.0f} rps {budget:6.2f} us"
                  f"  {floor / budget:5.2f}  (at {case.target}x)")
    finally:
        for s in servers:
            s.stop()
    print("\nfloor: in-process parse + dispatch + reply, no I/O.  rill CPU/req: what the rill-server process "
          "spent per request under the same load.\nbudget: the CPU time per request that the target ratio "
          "leaves rill. A floor/budget over 1 cannot reach the target,\nwhatever the socket and event-loop "
          "work costs on top of the floor.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
