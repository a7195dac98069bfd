"""Convergence runs for Active-Active: a seeded generator of concurrent stream and group
operations at three instances, random partitions, one kill -9 and restart; then
everything resumes and the instances must hold the same data, with nothing lost.

What a run checks at the end (``check_converged``):
- every instance holds the same keys; per key the same XRANGE, the same group names
  (XINFO GROUPS) and the same absolute expiry (PEXPIRETIME); the same DEBUG DIGEST
  (which hashes entries and expiries, not the per-region group state);
- every entry an XADD acknowledged on an append-only key (``log*``: only XADD touches
  them), at any instance, the killed one included (appendfsync always), is there.

``python -m tests.server.activeactive.convergence --seeds N --ops N`` runs them
(``make fuzz`` does); ``run(seed, n_ops)`` is one run, for tests.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

from tests.server.activeactive.cluster import Cluster, Node, ReplyError, ids

KEYS = ["s0", "s1", "s2"]
LOGS = ["log0", "log1"]
ALL_KEYS = set(KEYS + LOGS)
# Kinds of operation and their shares: (cumulative bound, kind).
KINDS = [(0.25, "log"), (0.45, "xadd"), (0.52, "xdel"), (0.56, "xtrim"), (0.59, "del"),
         (0.70, "group"), (0.88, "consume"), (0.93, "ttl"), (0.95, "rename"), (1.01, "multi")]
GROUPS = ["g0", "g1"]
# Errors a random operation may meet on a valid cluster; any other error fails the run.
EXPECTED_ERRORS = ("NOGROUP", "BUSYGROUP", "ERR no such key",
                   "ERR The XGROUP subcommand requires the key to exist")


@dataclass
class Run:
    """One seeded run's schedule and what it observed."""

    seed: int
    n_ops: int
    kill: bool = True
    # Kinds of operation left out (each becomes a plain XADD): xdel, xtrim, del, group
    # (XGROUP CREATE/DESTROY), consume (XREADGROUP, XACK), ttl (EXPIRE, PERSIST), rename,
    # multi. Narrowing a divergence down starts here.
    without: frozenset[str] = frozenset()
    rng: random.Random = field(init=False)
    acked: list[tuple[str, str, list[bytes]]] = field(default_factory=list)  # (key, id, fields)
    ops: int = 0
    errors: int = 0
    deliveries: int = 0
    # What happened, in order: (text, the keys it names; None for what concerns every key).
    log: list[tuple[str, tuple[str, ...] | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    # -- one operation ---------------------------------------------------------------

    def call(self, node: Node, *args):
        self.ops += 1
        text = " ".join(a.decode() if isinstance(a, bytes) else str(a) for a in args)
        self.log.append((f"r{node.region} {text}", tuple(str(a) for a in args[1:] if str(a) in ALL_KEYS)))
        try:
            return node.call(*args)
        except ReplyError as e:
            if not str(e).startswith(EXPECTED_ERRORS):
                raise AssertionError(f"region {node.region}: {args!r} -> {e}") from None
            self.errors += 1
            return None

    def some_ids(self, node: Node, key: str, n: int) -> list[str]:
        got = self.call(node, "XRANGE", key, "-", "+", "COUNT", 20)
        have = ids(got)
        return self.rng.sample(have, min(n, len(have)))

    def step(self, node: Node) -> None:
        rng = self.rng
        key = rng.choice(KEYS)
        group = rng.choice(GROUPS)
        what = rng.random()
        kind = next(k for bound, k in KINDS if what < bound)
        if kind in self.without:
            kind = "xadd"
        if kind == "log":
            log = rng.choice(LOGS)
            fields = [b"n", b"%d" % self.ops, b"r", b"%d" % node.region]
            got = self.call(node, "XADD", log, "*", *fields)
            self.acked.append((log, got.decode(), fields))
        elif kind == "xadd":
            self.call(node, "XADD", key, "*", "n", self.ops)
        elif kind == "xdel":
            victims = self.some_ids(node, key, rng.randint(1, 2))
            if victims:
                self.call(node, "XDEL", key, *victims)
        elif kind == "xtrim":
            self.call(node, "XTRIM", key, "MAXLEN", rng.randint(0, 5))
        elif kind == "del":
            self.call(node, "DEL", key)
        elif kind == "group":
            if rng.random() < 0.65:
                start = rng.choice(["0", "$"])
                self.call(node, "XGROUP", "CREATE", key, group, start,
                          *(["MKSTREAM"] if rng.random() < 0.5 else []))
            else:
                self.call(node, "XGROUP", "DESTROY", key, group)
        elif kind == "consume" and rng.random() < 0.55:
            self.call(node, "XREADGROUP", "GROUP", group, f"c{node.region}", "COUNT", rng.randint(1, 4),
                      "STREAMS", key, ">")
        elif kind == "consume":
            pending = self.call(node, "XPENDING", key, group, "-", "+", 10)
            if pending:
                # In order mostly (so prefixes grow), sometimes with a gap.
                chosen = pending[: rng.randint(1, len(pending))]
                if len(chosen) > 2 and rng.random() < 0.3:
                    chosen.pop(rng.randrange(len(chosen)))
                self.call(node, "XACK", key, group, *[p[0] for p in chosen])
        elif kind == "ttl":
            if rng.random() < 0.6:
                self.call(node, "EXPIRE", key, rng.randint(1000, 100000))
            else:
                self.call(node, "PERSIST", key)
        elif kind == "rename":
            other = rng.choice([k for k in KEYS if k != key])
            if self.call(node, "EXISTS", key):
                self.call(node, "RENAME", key, other)
        else:
            self.call(node, "MULTI")
            self.call(node, "XADD", key, "*", "tx", self.ops)
            self.call(node, "XADD", rng.choice(KEYS), "*", "tx", self.ops)
            self.call(node, "EXEC")

    def note(self, text: str) -> None:
        self.log.append((text, None))

    def story(self, key: str | None = None) -> str:
        """The log (of what concerns ``key``, when given) for a failure message."""
        return "\n".join(text for text, keys in self.log if key is None or keys is None or key in keys)

    # -- the schedule ------------------------------------------------------------------

    def play(self, c: Cluster) -> None:
        """n_ops operations at random live instances while every link is paused; between
        them, random deliveries (everything one instance has, to one peer), now and then
        a full sync, and one kill -9 and restart. Deliveries are complete and happen only
        while nothing else moves, so a run's state depends on its seed, not on timing."""
        rng = self.rng
        killed: int | None = None
        kill_at = rng.randrange(self.n_ops // 4, self.n_ops // 2) if self.kill else -1
        restart_at = kill_at + rng.randrange(self.n_ops // 8, self.n_ops // 4) if self.kill else -1
        c.pause_all()
        for i in range(self.n_ops):
            if i == kill_at:
                killed = rng.randrange(c.n)
                self.note(f"kill -9 r{killed + 1}")
                c.kill(killed)
            if i == restart_at and killed is not None:
                self.note(f"restart r{killed + 1}")
                c.restart(killed)
                c[killed].call("ACTIVEACTIVE", "PAUSE")
                killed = None
            live = [node for node in c if node.index != killed]
            roll = rng.random()
            if roll < 0.15:
                self.deliver_one(c, live)
            elif roll < 0.17 and killed is None:
                self.note("sync")
                c.sync()
                c.pause_all()
            self.step(rng.choice(live))
        if killed is not None:
            self.note(f"restart r{killed + 1}")
            c.restart(killed)

    def deliver_one(self, c: Cluster, live: list[Node]) -> None:
        """Instance a sends everything it holds to b, chosen among the pairs where b has
        applied all a has from the others (so every effect a sends applies at once)."""
        clocks = {node.index: vector_clock(node) for node in live}
        ready = [(a, b) for a in live for b in live if a is not b
                 and all(clocks[b.index].get(k, 0) >= n for k, n in clocks[a.index].items()
                         if k not in (a.region, b.region))]
        if not ready:
            return
        a, b = self.rng.choice(ready)
        self.note(f"deliver r{a.region} -> r{b.region}")
        self.deliveries += 1
        c.deliver(a.index, b.index)


def vector_clock(node: Node) -> dict[int, int]:
    """INFO active_active_vc ("1:17,2:4") as region -> effects applied."""
    text = node.info()["active_active_vc"]
    return {int(r): int(n) for r, n in (part.split(":") for part in text.split(",") if part)}


def describe(state) -> str:
    if state is None:
        return "no such key"
    entries, groups, expiry = state
    shown = " ".join(f"{e[0].decode()}({b','.join(e[1]).decode()})" for e in entries)
    return f"entries [{shown}] groups {[g.decode() for g in groups]} pexpiretime {expiry}"


def snapshot(node: Node) -> dict:
    """What must be equal everywhere."""
    keys = sorted(k.decode() for k in node.call("KEYS", "*"))
    out: dict = {"keys": keys, "digest": node.call("DEBUG", "DIGEST")}
    for key in keys:
        out[key] = (node.call("XRANGE", key, "-", "+"),
                    sorted(g[1] for g in node.call("XINFO", "GROUPS", key)),
                    node.call("PEXPIRETIME", key))
    return out


class Diverged(AssertionError):
    """Two instances differ on one key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def check_converged(c: Cluster, acked: list[tuple[str, str, list[bytes]]]) -> None:
    """Resume everything, wait, and compare (see the module doc)."""
    c.sync()
    first = snapshot(c[0])
    for node in c.nodes[1:]:
        other = snapshot(node)
        for key in sorted(set(first["keys"]) | set(other["keys"])):
            if other.get(key) != first.get(key):
                raise Diverged(key, f"key {key}: region 1 has {describe(first.get(key))}\n"
                                    f"region {node.region} has {describe(other.get(key))}")
        assert other["digest"] == first["digest"], f"DEBUG DIGEST differs at {node}"
    for key in LOGS:
        present = {(e[0].decode(), tuple(e[1])) for e in c[0].call("XRANGE", key, "-", "+") or []}
        lost = [(k, i) for k, i, f in acked if k == key and (i, tuple(f)) not in present]
        assert not lost, f"acknowledged entries lost: {lost[:10]}"


def run(seed: int, n_ops: int, kill: bool = True, without: frozenset[str] = frozenset()) -> Run:
    """A whole run on a fresh cluster; raises AssertionError on divergence or loss."""
    r = Run(seed, n_ops, kill, without)
    with Cluster(3, appendonly=True) as c:
        try:
            r.play(c)
            check_converged(c, r.acked)
        except Diverged as e:
            raise AssertionError(f"seed {seed}, {n_ops} ops: {e}\nwhat concerns {e.key}:\n"
                                 f"{r.story(e.key)}") from None
        except AssertionError as e:
            raise AssertionError(f"seed {seed}, {n_ops} ops: {e}\nthe run:\n{r.story()}") from None
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.server.activeactive.convergence",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=3000, help="operations per seed")
    ap.add_argument("--no-kill", action="store_true", help="no kill -9/restart")
    ap.add_argument("--without", default="", help="kinds of operation to leave out, e.g. ttl,rename")
    args = ap.parse_args(argv)
    without = frozenset(k for k in args.without.split(",") if k)
    failed = 0
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t0 = time.monotonic()
        try:
            r = run(seed, args.ops, kill=not args.no_kill, without=without)
        except AssertionError as e:
            failed += 1
            print(f"seed {seed}: DIVERGENCE ({time.monotonic() - t0:.0f}s)\n{e}\n", flush=True)
        else:
            print(f"seed {seed}: {r.ops} ops ({r.errors} refused as expected), converged, "
                  f"{len(r.acked)} acknowledged log entries kept ({time.monotonic() - t0:.0f}s)",
                  flush=True)
    print(f"Active-Active: {failed} divergence(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
