"""Convergence runs for Active-Active: a seeded generator of concurrent stream and group
operations at three instances, random partitions, one kill -9 and restart; then
everything resumes and the instances must hold the same data, with nothing lost.
``TypesRun`` (``--types``) does the same with every write command of strings, hashes,
sets, sorted sets, geo, lists and HyperLogLogs instead, and ``type_snapshot`` compares those.

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

    expected_errors = EXPECTED_ERRORS
    all_keys = ALL_KEYS

    seed: int
    n_ops: int
    kill: bool = True
    # Kinds of operation left out (each becomes a plain XADD): xdel, xtrim, del, group
    # (XGROUP CREATE/DESTROY), consume (XREADGROUP, XACK), ttl (EXPIRE, PERSIST), rename,
    # multi. Narrowing a divergence down starts here.
    without: frozenset[str] = frozenset()
    rng: random.Random = field(init=False)
    acked: list[tuple[str, str, list[bytes]]] = field(default_factory=list)  # (key, id, fields)
    acked_members: list[str] = field(default_factory=list)  # SADDs acknowledged (TypesRun)
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
        self.log.append((f"r{node.region} {text}", tuple(str(a) for a in args[1:] if str(a) in self.all_keys)))
        try:
            return node.call(*args)
        except ReplyError as e:
            if not (str(e).startswith(self.expected_errors) or self.refusal_explained(node, args, str(e))):
                raise AssertionError(f"region {node.region}: {args!r} -> {e}") from None
            self.errors += 1
            return None

    def refusal_explained(self, node: Node, args: tuple, error: str) -> bool:
        """Whether an error outside ``expected_errors`` is still what Redis would answer
        given the region's data (asked of the node directly: no operation is counted)."""
        return False

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


# -- every other data type ---------------------------------------------------------------------

# Keys by the type their writes mostly give them; a write now and then lands on a key of
# another group (WRONGTYPE, or a type replaced: SET over a hash, a STORE over a set).
T_STRINGS = ["s0", "s1"]
T_COUNTERS = ["n0", "n1", "f0"]
T_HASHES = ["h0", "h1"]
T_SETS = ["set0", "set1"]
T_ZSETS = ["z0", "z1", "geo0"]
T_LISTS = ["l0", "l1"]
T_HLLS = ["hll0", "hll1"]
T_GROUPS = [T_STRINGS, T_COUNTERS, T_HASHES, T_SETS, T_ZSETS, T_LISTS, T_HLLS]
T_ALL = [k for g in T_GROUPS for k in g]
# SADD is the only write to it: every member an SADD acknowledged anywhere must be there.
ACKSET = "ackset"
TYPE_KEYS = set(T_ALL) | {ACKSET}
# Kinds of operation in the types mix and their shares (cumulative bound, kind).
TYPE_KINDS = [(0.06, "ack"), (0.21, "string"), (0.30, "counter"), (0.43, "hash"), (0.55, "set"),
              (0.68, "zset"), (0.72, "geo"), (0.82, "list"), (0.86, "hll"), (0.93, "key"), (0.97, "ttl"),
              (1.01, "multi")]
TYPE_ERRORS = EXPECTED_ERRORS + (
    "WRONGTYPE", "ERR value is not an integer", "ERR hash value is not an integer",
    "ERR value is not a valid float", "ERR hash value is not a float",
    "ERR increment or decrement would overflow", "ERR increment would produce NaN or Infinity",
    "ERR source and destination objects are the same", "ERR index out of range",
)
ZFLAGS = [(), ("NX",), ("XX",), ("GT",), ("LT",), ("CH",), ("XX", "GT"), ("XX", "LT", "CH"), ("GT", "CH")]


HLL_CORRUPT = "INVALIDOBJ Corrupted HLL object detected"
HLL_REGISTERS = 16384
HLL_DENSE_LEN = 16 + HLL_REGISTERS * 6 // 8


def well_formed_hll(value: bytes) -> bool:
    """A HyperLogLog string as Redis's format defines it: the "HYLL" header, then either
    the dense registers (exactly 12288 bytes) or sparse opcodes covering exactly 16384
    registers (ZERO 00xxxxxx: 1-64, XZERO 01xxxxxx xxxxxxxx: 1-16384, VAL 1vvvvvxx: 1-4).
    An APPEND, SETRANGE or SETBIT on an HLL breaks this, as on one Redis."""
    if len(value) < 16 or value[:4] != b"HYLL":
        return False
    if value[4] == 0:
        return len(value) == HLL_DENSE_LEN
    if value[4] != 1:
        return False
    covered, i = 0, 16
    while i < len(value) and covered <= HLL_REGISTERS:
        op = value[i]
        if op & 0x80:
            covered, i = covered + (op & 3) + 1, i + 1
        elif op & 0x40:
            if i + 1 >= len(value):
                return False
            covered, i = covered + ((op & 0x3F) << 8 | value[i + 1]) + 1, i + 2
        else:
            covered, i = covered + (op & 0x3F) + 1, i + 1
    return covered == HLL_REGISTERS and i == len(value)


class TypesRun(Run):
    """A run of string, hash, set, sorted-set and geo writes (and the key commands on
    them) instead of stream operations: every write command of those types appears,
    with their flags, now and then on a key of another type, and in MULTI/EXEC."""

    expected_errors = TYPE_ERRORS
    all_keys = TYPE_KEYS

    def refusal_explained(self, node: Node, args: tuple, error: str) -> bool:
        """A PF* command meets a corrupt HLL only where a string write broke one of its keys."""
        if error != HLL_CORRUPT or not str(args[0]).upper().startswith("PF"):
            return False
        for key in args[1:]:
            try:
                value = node.call("GET", key)
            except ReplyError:  # not a string
                continue
            if isinstance(value, bytes) and value[:4] == b"HYLL" and not well_formed_hll(value):
                return True
        return False

    def key(self, group: list[str]) -> str:
        """Mostly a key of ``group``; one time in ten any key."""
        rng = self.rng
        return rng.choice(T_ALL if rng.random() < 0.1 else group)

    def value(self) -> str:
        rng = self.rng
        return rng.choice(["a", "b", "xyz", "12", "-3", "1.5", ""]) if rng.random() < 0.3 else f"v{self.ops}"

    def member(self) -> str:
        return f"m{self.rng.randrange(8)}"

    def score(self) -> str:
        rng = self.rng
        return rng.choice([str(rng.randint(-5, 20)), f"{rng.uniform(-10, 10):.3f}", "0.1"])

    def command(self) -> tuple:
        """One random write (the arguments of a call)."""
        rng = self.rng
        what = rng.random()
        kind = next(k for bound, k in TYPE_KINDS if what < bound)
        if kind in self.without:
            kind = "string"
        return getattr(self, "cmd_" + kind)()

    def cmd_ack(self) -> tuple:
        return ("SADD", ACKSET, f"a{self.ops}")

    def cmd_string(self) -> tuple:
        rng = self.rng
        k = self.key(T_STRINGS)
        v = self.value()
        pick = rng.randrange(16)
        if pick == 0:
            opts = rng.choice([(), ("NX",), ("XX",), ("GET",), ("KEEPTTL",), ("EX", rng.randint(1000, 9999)),
                               ("PX", rng.randint(10**6, 10**7)), ("XX", "GET", "KEEPTTL")])
            return ("SET", k, v, *opts)
        if pick == 1:
            return ("SETNX", k, v)
        if pick == 2:
            return rng.choice([("SETEX", k, rng.randint(1000, 9999), v), ("PSETEX", k, rng.randint(10**6, 10**7), v)])
        if pick == 3:
            return ("GETSET", k, v)
        if pick == 4:
            return ("APPEND", k, v)
        if pick == 5:
            return ("SETRANGE", k, rng.randint(0, 6), v or "z")
        if pick == 6:
            return ("SETBIT", k, rng.randint(0, 40), rng.randint(0, 1))
        if pick == 7:
            sub = rng.choice([("SET", "u8", f"#{rng.randint(0, 3)}", rng.randint(0, 255)),
                              ("INCRBY", "i5", rng.randint(0, 20), rng.randint(-9, 9)),
                              ("OVERFLOW", "SAT", "INCRBY", "u4", "#1", rng.randint(-20, 20))])
            return ("BITFIELD", k, *sub)
        if pick == 8:
            op = rng.choice(["AND", "OR", "XOR", "NOT"])
            srcs = [rng.choice(T_STRINGS)] if op == "NOT" else rng.sample(T_STRINGS + T_COUNTERS, 2)
            return ("BITOP", op, k, *srcs)
        if pick == 9:
            return ("GETDEL", k)
        if pick == 10:
            return ("GETEX", k, *rng.choice([(), ("PERSIST",), ("EX", rng.randint(1000, 9999)),
                                             ("PXAT", int(time.time() * 1000) + rng.randint(10**6, 10**7))]))
        if pick == 11:
            keys = rng.sample(T_STRINGS + T_COUNTERS, 2)
            return (rng.choice(["MSET", "MSETNX"]), keys[0], self.value(), keys[1], self.value())
        return self.cmd_counter() if pick < 14 else ("SET", k, v)

    def cmd_counter(self) -> tuple:
        rng = self.rng
        k = self.key(T_COUNTERS)
        pick = rng.randrange(7)
        if pick == 0:
            return ("INCR", k)
        if pick == 1:
            return ("DECR", k)
        if pick == 2:
            return ("INCRBY", k, rng.randint(-50, 50))
        if pick == 3:
            return ("DECRBY", k, rng.randint(-50, 50))
        if pick == 4:
            return ("INCRBYFLOAT", k, rng.choice(["0.5", "-1.25", "3", "1e2", "0.1"]))
        if pick == 5:
            return ("SET", k, rng.randint(-100, 100))
        return ("GETSET", k, rng.randint(0, 9))

    def cmd_hash(self) -> tuple:
        rng = self.rng
        k = self.key(T_HASHES)
        f = f"f{rng.randrange(6)}"
        pick = rng.randrange(9)
        if pick < 3:
            extra = [] if rng.random() < 0.5 else [f"f{rng.randrange(6)}", self.value()]
            return (rng.choice(["HSET", "HMSET"]), k, f, self.value(), *extra)
        if pick < 5:
            return ("HDEL", k, f, *([f"f{rng.randrange(6)}"] if rng.random() < 0.3 else []))
        if pick == 5:
            return ("HINCRBY", k, f, rng.randint(-9, 9))
        if pick == 6:
            return ("HINCRBYFLOAT", k, f, rng.choice(["0.5", "-2", "1.25"]))
        if pick == 7:
            return ("HSETNX", k, f, self.value())
        return ("HSET", k, f, rng.randint(0, 9))

    def cmd_set(self) -> tuple:
        rng = self.rng
        k = self.key(T_SETS)
        pick = rng.randrange(8)
        if pick < 3:
            return ("SADD", k, self.member(), *([self.member()] if rng.random() < 0.4 else []))
        if pick < 5:
            return ("SREM", k, self.member(), *([self.member()] if rng.random() < 0.3 else []))
        if pick == 5:
            return ("SPOP", k, *([rng.randint(1, 3)] if rng.random() < 0.5 else []))
        if pick == 6:
            a, b = rng.sample(T_SETS, 2)
            return ("SMOVE", a, b, self.member())
        return (rng.choice(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), k, *rng.sample(T_SETS, 2))

    def cmd_zset(self) -> tuple:
        rng = self.rng
        k = self.key(T_ZSETS[:2])
        pick = rng.randrange(12)
        if pick < 3:
            flags = rng.choice(ZFLAGS)
            pairs = [self.score(), self.member()]
            if rng.random() < 0.4:
                pairs += [self.score(), self.member()]
            return ("ZADD", k, *flags, *pairs)
        if pick == 3:
            flags = rng.choice([f for f in ZFLAGS if "CH" not in f])
            return ("ZADD", k, *flags, "INCR", self.score(), self.member())
        if pick == 4:
            return ("ZINCRBY", k, self.score(), self.member())
        if pick == 5:
            return ("ZREM", k, self.member(), *([self.member()] if rng.random() < 0.3 else []))
        if pick == 6:
            return (rng.choice(["ZPOPMIN", "ZPOPMAX"]), k, *([rng.randint(1, 2)] if rng.random() < 0.5 else []))
        if pick == 7:
            lo = rng.randint(-5, 10)
            return ("ZREMRANGEBYSCORE", k, lo, lo + rng.randint(0, 5))
        if pick == 8:
            return ("ZREMRANGEBYRANK", k, 0, rng.randint(0, 1))
        if pick == 9:
            return ("ZREMRANGEBYLEX", k, "[m2", "(m5")
        if pick == 10:
            op = rng.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])
            extra = ("AGGREGATE", rng.choice(["SUM", "MIN", "MAX"])) if op != "ZDIFFSTORE" and rng.random() < 0.5 else ()
            return (op, k, 2, *rng.sample(T_ZSETS, 2), *extra)
        src = rng.choice(T_ZSETS)
        return ("ZRANGESTORE", k, src, 0, rng.randint(0, 4))

    def cmd_geo(self) -> tuple:
        rng = self.rng
        if rng.random() < 0.7:
            return ("GEOADD", "geo0", *rng.choice([(), ("NX",), ("XX",), ("CH",)]),
                    f"{rng.uniform(-10, 10):.4f}", f"{rng.uniform(40, 50):.4f}", self.member())
        return ("GEOSEARCHSTORE", rng.choice(T_ZSETS), "geo0", "FROMLONLAT", "0", "45", "BYRADIUS",
                rng.choice([500, 1000, 3000]), "km", "ASC", *(["STOREDIST"] if rng.random() < 0.5 else []))

    def cmd_list(self) -> tuple:
        rng = self.rng
        k = self.key(T_LISTS)
        v = self.value() or "e"
        pick = rng.randrange(12)
        if pick < 3:
            return (rng.choice(["LPUSH", "RPUSH"]), k, v, *([self.value() or "f"] if rng.random() < 0.4 else []))
        if pick == 3:
            return (rng.choice(["LPUSHX", "RPUSHX"]), k, v)
        if pick == 4:
            return ("LINSERT", k, rng.choice(["BEFORE", "AFTER"]), rng.choice(["a", "b", "xyz", v]), v)
        if pick == 5:
            return ("LSET", k, rng.randint(-2, 2), v)
        if pick == 6:
            return (rng.choice(["LPOP", "RPOP"]), k, *([rng.randint(1, 3)] if rng.random() < 0.4 else []))
        if pick == 7:
            return ("LREM", k, rng.randint(-2, 2), rng.choice(["a", "b", "xyz", "12"]))
        if pick == 8:
            return ("LTRIM", k, rng.randint(0, 2), rng.randint(-3, 5))
        if pick == 9:
            a, b = rng.choice(T_LISTS), rng.choice(T_LISTS)
            return ("LMOVE", a, b, rng.choice(["LEFT", "RIGHT"]), rng.choice(["LEFT", "RIGHT"]))
        if pick == 10:
            return ("RPOPLPUSH", rng.choice(T_LISTS), rng.choice(T_LISTS))
        return ("LMPOP", 2, *T_LISTS, rng.choice(["LEFT", "RIGHT"]), "COUNT", rng.randint(1, 2))

    def cmd_hll(self) -> tuple:
        rng = self.rng
        k = self.key(T_HLLS)
        if rng.random() < 0.8:
            return ("PFADD", k, *[f"e{rng.randrange(40)}" for _ in range(rng.randint(1, 4))])
        return ("PFMERGE", k, *rng.sample(T_HLLS, 2))

    def cmd_key(self) -> tuple:
        rng = self.rng
        k = rng.choice(T_ALL)
        pick = rng.randrange(5)
        if pick == 0:
            return ("DEL", k)
        if pick == 1:
            return ("UNLINK", k, rng.choice(T_ALL))
        other = rng.choice([x for x in T_ALL if x != k])
        return ("RENAME" if pick < 4 else "RENAMENX", k, other)

    def cmd_ttl(self) -> tuple:
        rng = self.rng
        k = rng.choice(T_ALL)
        pick = rng.randrange(5)
        if pick == 0:
            return ("PERSIST", k)
        if pick == 1:
            return ("PEXPIRE", k, rng.randint(10**6, 10**8))
        if pick == 2:
            return ("EXPIREAT", k, int(time.time()) + rng.randint(1000, 100000))
        return ("EXPIRE", k, rng.randint(1000, 100000), *rng.choice([(), (), ("NX",), ("XX",), ("GT",), ("LT",)]))

    def cmd_multi(self) -> tuple:
        return ("MULTI",)

    def step(self, node: Node) -> None:
        cmd = self.command()
        if cmd[0] == "MULTI":
            self.call(node, "MULTI")
            for _ in range(self.rng.randint(1, 3)):
                inner = self.command()
                while inner[0] == "MULTI":
                    inner = self.command()
                self.call(node, *inner)
            self.call(node, "EXEC")
            return
        if cmd[0] in ("RENAME", "RENAMENX") and not self.call(node, "EXISTS", cmd[1]):
            return
        got = self.call(node, *cmd)
        if cmd[1] == ACKSET and got is not None:
            self.acked_members.append(cmd[2])


def type_snapshot(node: Node) -> dict:
    """What must be equal everywhere, for every type: per key its type, its value (members
    and fields sorted: small hashes and sets keep insertion order, which may differ between
    regions), its absolute expiry; and the DEBUG DIGEST, which is order-independent."""
    keys = sorted(k.decode() for k in node.call("KEYS", "*"))
    out: dict = {"keys": keys, "digest": node.call("DEBUG", "DIGEST")}
    for key in keys:
        t = node.call("TYPE", key)
        if t == b"string":
            v = node.call("GET", key)
        elif t == b"hash":
            flat = node.call("HGETALL", key)
            v = sorted(zip(flat[::2], flat[1::2], strict=True))
        elif t == b"set":
            v = sorted(node.call("SMEMBERS", key))
        elif t == b"zset":
            v = node.call("ZRANGE", key, 0, -1, "WITHSCORES")
        elif t == b"list":
            v = node.call("LRANGE", key, 0, -1)
        else:
            v = node.call("XRANGE", key, "-", "+")
        out[key] = (t, v, node.call("PEXPIRETIME", key))
    return out


def vector_clock(node: Node) -> dict[int, int]:
    """INFO active_active_vc ("1:17,2:4") as region -> effects applied."""
    text = node.info()["active_active_vc"]
    return {int(r): int(n) for r, n in (part.split(":") for part in text.split(",") if part)}


def describe(state) -> str:
    if state is None:
        return "no such key"
    if len(state) == 3 and isinstance(state[0], bytes):  # type_snapshot's (type, value, expiry)
        return f"{state[0].decode()} {state[1]!r} pexpiretime {state[2]}"
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


def check_converged(c: Cluster, acked: list[tuple[str, str, list[bytes]]], snap=snapshot,
                    acked_members: list[str] = ()) -> None:
    """Resume everything, wait, and compare (see the module doc); ``snap`` takes what must
    be equal (``type_snapshot`` for a TypesRun, whose acknowledged SADDs must all be there)."""
    c.sync()
    first = snap(c[0])
    for node in c.nodes[1:]:
        other = snap(node)
        for key in sorted(set(first["keys"]) | set(other["keys"])):
            if other.get(key) != first.get(key):
                raise Diverged(key, f"key {key}: region 1 has {describe(first.get(key))}\n"
                                    f"region {node.region} has {describe(other.get(key))}")
        assert other["digest"] == first["digest"], f"DEBUG DIGEST differs at {node}"
    for key in LOGS:
        present = {(e[0].decode(), tuple(e[1])) for e in c[0].call("XRANGE", key, "-", "+") or []}
        lost = [(k, i) for k, i, f in acked if k == key and (i, tuple(f)) not in present]
        assert not lost, f"acknowledged entries lost: {lost[:10]}"
    if acked_members:
        present = {m.decode() for m in c[0].call("SMEMBERS", ACKSET)}
        lost_members = [m for m in acked_members if m not in present]
        assert not lost_members, f"acknowledged SADDs lost: {lost_members[:10]}"


def run(seed: int, n_ops: int, kill: bool = True, without: frozenset[str] = frozenset(),
        types: bool = False) -> Run:
    """A whole run on a fresh cluster; raises AssertionError on divergence or loss.
    ``types``: the strings/hashes/sets/sorted sets mix (TypesRun) instead of streams."""
    r = (TypesRun if types else Run)(seed, n_ops, kill, without)
    with Cluster(3, appendonly=True) as c:
        try:
            r.play(c)
            check_converged(c, r.acked, type_snapshot if types else snapshot, r.acked_members)
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
    ap.add_argument("--types", action="store_true",
                    help="strings, hashes, sets, sorted sets and geo instead of streams")
    args = ap.parse_args(argv)
    without = frozenset(k for k in args.without.split(",") if k)
    failed = 0
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t0 = time.monotonic()
        try:
            r = run(seed, args.ops, kill=not args.no_kill, without=without, types=args.types)
        except AssertionError as e:
            failed += 1
            print(f"seed {seed}: DIVERGENCE ({time.monotonic() - t0:.0f}s)\n{e}\n", flush=True)
        else:
            print(f"seed {seed}: {r.ops} ops ({r.errors} refused as expected), converged, "
                  f"{len(r.acked) + len(r.acked_members)} acknowledged writes kept ({time.monotonic() - t0:.0f}s)",
                  flush=True)
    print(f"Active-Active: {failed} divergence(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
