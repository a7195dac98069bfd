"""Random command sequences whose every reply is deterministic on both servers.

Keys come from pools named after their type (``x1`` is meant to be a stream, ``l1`` a
list...), so the generator knows what a key should hold without tracking state, and a
small share of commands picks a key of another pool on purpose (WRONGTYPE). Commands
that can move a value to another name (RENAME, COPY, *STORE) stay inside one pool, so a
list never turns up under a set's name and the orderless cases stay where they are known.

What would depend on time or on Redis's seeded hash order is kept out by construction:
- stream IDs are explicit (``ms-seq`` or ``ms-*``); ``*`` is only sent right after an
  explicit ID far in the future, so the server must derive the next ID from the last one;
- TTLs are far-future (hours) or already past, and XCLAIM/XAUTOCLAIM/XPENDING idle
  thresholds are 0 or an hour, with delivery times set an age or none before;
- SPOP/SRANDMEMBER/HRANDFIELD/ZRANDMEMBER only with a count larger than any collection
  here, so they return everything (compared as sets by the runner); no RANDOMKEY;
- orderless replies (SMEMBERS, HGETALL, KEYS, ...) are compared as sorted by the runner.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .exceptions import NO_EXTRA_ARGUMENT

Args = tuple[bytes, ...]


@dataclass(frozen=True)
class Op:
    """One step of a sequence.

    kind "cmd": ``payload`` is one command (multibulk) on the main connection.
    kind "seq": ``payload`` is ((conn, command), ...) run in order, conn 1 the main
      connection and 2 the second one (a transaction, or WATCH with a write between).
    kind "raw": ``payload`` is bytes sent as they are on the main connection (inline or
      malformed input), followed by a PING; everything up to its PONG, or until the server
      closes the connection, is compared.
    kind "block": ``payload`` is (blocking command on conn 2, waking command on conn 1 or
      None). The waker is sent once conn 2 is blocked (or already served); a waiter
      still blocked after it is ended with CLIENT UNBLOCK.
    """

    kind: str
    payload: object


def b(*parts: object) -> Args:
    return tuple(p if isinstance(p, bytes) else str(p).encode() for p in parts)


POOLS = {
    "string": ["s1", "s2", "s3"],
    "bits": ["b1", "b2"],
    "hll": ["h1", "h2"],
    "list": ["l1", "l2", "l3"],
    "hash": ["hs1", "hs2"],
    "set": ["st1", "st2", "st3"],
    "zset": ["z1", "z2", "z3"],
    "stream": ["x1", "x2", "x3"],
    # Sorted sets whose members all score 0: the only ones lex ranges are asked of. On
    # mixed scores a lex range is unspecified, and on a skiplist it depends on the random
    # node levels; so nothing ever gives these another score (no cross-pool writes).
    "zlex": ["zl1", "zl2"],
    # A stream whose IDs are far in the future, where XADD '*' is deterministic.
    "xfar": ["xf"],
}
ALL_KEYS = [k for pool in POOLS.values() for k in pool]
CROSS_KEYS = [k for name, pool in POOLS.items() if name != "zlex" for k in pool]

WORDS = ["a", "b", "c", "d", "foo", "bar", "e f", "", "x" * 70]
NUMBERS = ["0", "1", "2", "-1", "7", "10", "42", "-100", "9223372036854775807", "1.5",
           "-2.25", "1e3", "inf", "-inf", "+inf", "nan", "abc", " 1", "0x10", "3.0"]
RANDOM_WITHOUT_COUNT = {b"SPOP", b"SRANDMEMBER", b"HRANDFIELD", b"ZRANDMEMBER"}
FAR_MS = 9_999_999_999_000  # year 2286: XADD * after this derives from the last ID


class Generator:
    """Draws ops from a seeded random source; the same seed gives the same ops."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        # A stream clock: explicit IDs cluster just above it and it moves on, so most XADDs
        # succeed and ranges, XSETID and XCLAIM name IDs that exist.
        self.ms = 1
        self.families = [
            (30, self.stream), (10, self.group), (7, self.string), (4, self.bits),
            (3, self.hll), (7, self.list), (6, self.hash), (6, self.set), (8, self.zset),
            (6, self.keys_cmd), (3, self.blocking), (3, self.transaction), (2, self.select),
            (2, self.arity), (2, self.raw), (1, self.sort),
        ]
        self.total = sum(w for w, _ in self.families)

    def ops(self, n: int) -> list[Op]:
        return [self.op() for _ in range(n)]

    def op(self) -> Op:
        pick = self.r.uniform(0, self.total)
        for weight, family in self.families:
            pick -= weight
            if pick <= 0:
                result = family()
                return result if isinstance(result, Op) else Op("cmd", result)
        return Op("cmd", self.string())

    # -- helpers -------------------------------------------------------------------------

    def key(self, pool: str, cross: float = 0.04) -> str:
        """A key of ``pool``, or now and then one of any other type (WRONGTYPE cases)."""
        if self.r.random() < cross:
            if pool == "zlex":  # never a mixed-score sorted set for a lex range
                return self.r.choice([k for k in CROSS_KEYS if k[0] != "z"] + ["missing"])
            return self.r.choice(CROSS_KEYS + ["missing"])
        return self.r.choice(POOLS[pool])

    def keys(self, pool: str, lo: int = 1, hi: int = 3) -> list[str]:
        return [self.key(pool) for _ in range(self.r.randint(lo, hi))]

    def word(self) -> str:
        return self.r.choice(WORDS)

    def num(self) -> str:
        return self.r.choice(NUMBERS)

    def int_(self, lo: int = -5, hi: int = 10) -> str:
        if self.r.random() < 0.05:
            return self.r.choice(["x", "1.5", "", "99999999999999999999"])
        return str(self.r.randint(lo, hi))

    def member(self) -> str:
        return self.r.choice(["a", "b", "c", "d", "e", "1", "2", "3", "10", "-5", "x" * 70])

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    # -- streams -------------------------------------------------------------------------

    def sid(self, explicit_only: bool = False) -> str:
        """A stream ID argument: mostly explicit and small, sometimes odd."""
        roll = self.r.random()
        lo = max(0, self.ms - 25)
        if roll < 0.75 or explicit_only:
            return f"{self.r.randint(lo, self.ms + 1)}-{self.r.randint(0, 3)}"
        if roll < 0.85:
            return str(self.r.randint(lo, self.ms + 1))
        return self.r.choice(["0-0", "0", "18446744073709551615-18446744073709551615",
                              "abc", "-1", "5-x", "1-", f"{FAR_MS}-0"])

    def range_bound(self, low: bool) -> str:
        roll = self.r.random()
        if roll < 0.3:
            return "-" if low else "+"
        if roll < 0.4:
            return "+" if low else "-"
        if roll < 0.55:
            return "(" + self.sid(explicit_only=True)
        return self.sid()

    def trim_args(self) -> list[str]:
        """MAXLEN/MINID [=|~] threshold [LIMIT n]."""
        strategy = self.r.choice(["MAXLEN", "MINID", "maxlen"])
        out = [strategy]
        if self.chance(0.3):
            out.append("=")
        elif self.chance(0.05):
            out.append("~")
        if strategy.upper() == "MAXLEN":
            out.append(self.r.choice(["0", "1", "2", "3", "5", "10", "-1", "x"]))
        else:
            out.append(self.sid())
        if self.chance(0.1):
            out += ["LIMIT", self.int_(0, 10)]
        return out

    def fields(self) -> list[str]:
        out = []
        for _ in range(self.r.choice([1, 1, 1, 2, 3])):
            out += [self.r.choice(["f", "g", "h", "f", "name", "x" * 70]), self.word()]
        if self.chance(0.02):
            out.pop()  # odd number of field/value arguments
        return out

    def stream_key(self) -> str:
        return "xf" if self.chance(0.1) else self.key("stream")

    def stream(self) -> Args | Op:
        r = self.r
        k = self.stream_key()
        roll = r.random()
        if roll < 0.35:
            args = ["XADD", k]
            if self.chance(0.1):
                args.append("NOMKSTREAM")
            if self.chance(0.2):
                args += self.trim_args()
            self.ms += r.choice([1, 1, 2])
            if self.chance(0.15):
                args.append(f"{self.ms}-*")
            elif self.chance(0.8):
                args.append(f"{self.ms}-{r.randint(0, 3)}")
            else:
                args.append(self.sid())
            return b(*args, *self.fields())
        if roll < 0.37:
            # '*' derives from a last ID in the future, so both servers agree on it. Only
            # on xf: the other streams stay at the clock's IDs.
            return Op("seq", ((1, b("XADD", "xf", f"{FAR_MS + r.randint(0, 5)}-*", "f", "v")),
                              (1, b("XADD", "xf", "*", *self.fields()))))
        if roll < 0.50:
            cmd = r.choice(["XRANGE", "XREVRANGE"])
            lo, hi = self.range_bound(True), self.range_bound(False)
            if cmd == "XREVRANGE":
                lo, hi = hi, lo
            args = [cmd, k, lo, hi]
            if self.chance(0.4):
                args += ["COUNT", self.int_(-1, 5)]
            return b(*args)
        if roll < 0.55:
            return b("XLEN", k)
        if roll < 0.62:
            return b("XDEL", k, *[self.sid() for _ in range(r.randint(1, 3))])
        if roll < 0.68:
            return b("XTRIM", k, *self.trim_args())
        if roll < 0.73:
            args = ["XREAD"]
            if self.chance(0.5):
                args += ["COUNT", self.int_(0, 5)]
            ks = self.keys("stream", 1, 2)
            ids = [r.choice(["0", "0-0", "$", self.sid()]) for _ in ks]
            if self.chance(0.03):
                ids.pop()  # unbalanced STREAMS
            return b(*args, "STREAMS", *ks, *ids)
        if roll < 0.78:
            args = ["XSETID", k, self.sid()]
            if self.chance(0.4):
                args += ["ENTRIESADDED", self.int_(0, 50), "MAXDELETEDID", self.sid()]
            return b(*args)
        if roll < 0.90:
            sub = r.random()
            if sub < 0.5:
                args = ["XINFO", "STREAM", k]
                if self.chance(0.4):
                    args.append("FULL")
                    if self.chance(0.5):
                        args += ["COUNT", self.int_(0, 5)]
                return b(*args)
            if sub < 0.8:
                return b("XINFO", "GROUPS", k)
            return b("XINFO", "CONSUMERS", k, self.group_name())
        if roll < 0.95:
            return b("OBJECT", "ENCODING", k)
        return b("EXISTS", k)

    def group_name(self) -> str:
        return self.r.choice(["g1", "g1", "g1", "g2", "g2", "nogroup"])

    def consumer(self) -> str:
        return self.r.choice(["c1", "c2", "c3"])

    def group(self) -> Args:
        r = self.r
        k = self.stream_key()
        g = self.group_name()
        roll = r.random()
        if roll < 0.2:
            args = ["XGROUP", "CREATE", k, g, r.choice(["$", "0", "0-0", self.sid()])]
            if self.chance(0.5):
                args.append("MKSTREAM")
            if self.chance(0.2):
                args += ["ENTRIESREAD", self.int_(-2, 20)]
            return b(*args)
        if roll < 0.24:
            args = ["XGROUP", "SETID", k, g, r.choice(["$", "0", self.sid()])]
            if self.chance(0.3):
                args += ["ENTRIESREAD", self.int_(-2, 20)]
            return b(*args)
        if roll < 0.25:
            return b("XGROUP", "DESTROY", k, g)
        if roll < 0.27:
            return b("XGROUP", r.choice(["CREATECONSUMER", "DELCONSUMER"]), k, g, self.consumer())
        if roll < 0.50:
            args = ["XREADGROUP", "GROUP", g, self.consumer()]
            if self.chance(0.5):
                args += ["COUNT", self.int_(0, 4)]
            if self.chance(0.15):
                args.append("NOACK")
            ks = self.keys("stream", 1, 2)
            ids = [r.choice([">", ">", ">", "0", self.sid()]) for _ in ks]
            return b(*args, "STREAMS", *ks, *ids)
        if roll < 0.62:
            return b("XACK", k, g, *[self.sid() for _ in range(r.randint(1, 3))])
        if roll < 0.75:
            if self.chance(0.3):
                return b("XPENDING", k, g)
            args = ["XPENDING", k, g]
            if self.chance(0.3):
                args += ["IDLE", r.choice(["0", "3600000"])]
            args += [self.range_bound(True), self.range_bound(False), self.int_(-1, 10)]
            if self.chance(0.4):
                args.append(self.consumer())
            return b(*args)
        if roll < 0.88:
            args = ["XCLAIM", k, g, self.consumer(), r.choice(["0", "3600000"]),
                    *[self.sid() for _ in range(r.randint(1, 3))]]
            for opt in r.sample(["IDLE", "TIME", "RETRYCOUNT", "FORCE", "JUSTID", "LASTID"],
                                r.randint(0, 2)):
                if opt == "IDLE":
                    args += ["IDLE", r.choice(["0", "7200000"])]
                elif opt == "TIME":
                    args += ["TIME", r.choice(["1000", "1"])]
                elif opt == "RETRYCOUNT":
                    args += ["RETRYCOUNT", self.int_(0, 5)]
                elif opt == "LASTID":
                    args += ["LASTID", self.sid()]
                else:
                    args.append(opt)
            return b(*args)
        if roll < 0.97:
            args = ["XAUTOCLAIM", k, g, self.consumer(), r.choice(["0", "3600000"]),
                    r.choice(["0", "0-0", "-", self.sid()])]
            if self.chance(0.5):
                args += ["COUNT", self.int_(0, 5)]
            if self.chance(0.3):
                args.append("JUSTID")
            return b(*args)
        return b("XINFO", "CONSUMERS", k, g)

    # -- strings, bits, HyperLogLog ------------------------------------------------------

    def ttl_opts(self) -> list[str]:
        """SET/GETEX expiry options that keep every TTL far from now (or past)."""
        r = self.r
        return r.choice([
            [], [], [], ["EX", "100000"], ["PX", "100000000"], ["EXAT", "4000000000"],
            ["PXAT", "4000000000000"], ["KEEPTTL"], ["EX", "0"], ["EX", "-5"], ["EX", "x"],
        ])  # (no EXAT/PXAT in the past: SET keeps such a key until active expiry reclaims it,
        # so DBSIZE would depend on when the expire cycle ran)

    def string(self) -> Args:
        r = self.r
        # (rarely another type's key: SET and friends overwrite whatever is there, and a
        # stream turned string stays one until something deletes it)
        k = self.key("string", 0.01)
        roll = r.random()
        if roll < 0.2:
            args = ["SET", k, r.choice([self.word(), self.num()])]
            if self.chance(0.3):
                args.append(r.choice(["NX", "XX"]))
            if self.chance(0.2):
                args.append("GET")
            args += self.ttl_opts()
            return b(*args)
        if roll < 0.3:
            return b("GET", k)
        if roll < 0.4:
            return b(r.choice(["INCR", "DECR"]), k)
        if roll < 0.47:
            return b(r.choice(["INCRBY", "DECRBY"]), k, self.int_(-100, 100))
        if roll < 0.53:
            return b("INCRBYFLOAT", k, self.num())
        if roll < 0.58:
            return b("APPEND", k, self.word())
        if roll < 0.62:
            return b("STRLEN", k)
        if roll < 0.67:
            return b("SETRANGE", k, self.int_(-1, 20), self.word())
        if roll < 0.72:
            return b(r.choice(["GETRANGE", "SUBSTR"]), k, self.int_(-10, 10), self.int_(-10, 10))
        if roll < 0.77:
            ks = [self.key("string", 0.01) for _ in range(r.randint(1, 3))]
            return b(r.choice(["MSET", "MSETNX"]),
                     *[x for kk in ks for x in (kk, self.word())])
        if roll < 0.8:
            return b("MGET", *self.keys("string", 1, 4))
        if roll < 0.84:
            return b(r.choice(["GETDEL", "GETSET"]), k, *([self.word()] if self.chance(0.5) else []))
        if roll < 0.88:
            return b("GETEX", k, *r.choice([[], ["PERSIST"], ["EX", "100000"], ["PXAT", "1"],
                                           ["EX", "0"]]))
        if roll < 0.91:
            return b(r.choice(["SETNX", "SETEX", "PSETEX"]), k,
                     *([r.choice(["100000", "0", "-1", "x"])] if self.chance(0.5) else []), self.word())
        if roll < 0.95:
            args = ["LCS", self.key("string"), self.key("string")]
            args += r.choice([[], ["LEN"], ["IDX"], ["IDX", "MINMATCHLEN", "1"],
                              ["IDX", "WITHMATCHLEN"]])
            return b(*args)
        return b("OBJECT", "ENCODING", k)

    def bits(self) -> Args:
        r = self.r
        k = self.key("bits")
        roll = r.random()
        if roll < 0.25:
            return b("SETBIT", k, self.int_(0, 100), r.choice(["0", "1", "1", "2"]))
        if roll < 0.4:
            return b("GETBIT", k, self.int_(0, 100))
        if roll < 0.55:
            args = ["BITCOUNT", k]
            if self.chance(0.6):
                args += [self.int_(-5, 12), self.int_(-5, 12)]
                if self.chance(0.5):
                    args.append(r.choice(["BYTE", "BIT", "bit"]))
            return b(*args)
        if roll < 0.67:
            args = ["BITPOS", k, r.choice(["0", "1"])]
            if self.chance(0.6):
                args.append(self.int_(-5, 12))
                if self.chance(0.6):
                    args.append(self.int_(-5, 12))
                    if self.chance(0.5):
                        args.append(r.choice(["BYTE", "BIT"]))
            return b(*args)
        if roll < 0.77:
            op = r.choice(["AND", "OR", "XOR", "NOT"])
            srcs = self.keys("bits", 1, 1 if op == "NOT" else 3)
            return b("BITOP", op, self.key("bits"), *srcs)
        if roll < 0.95:
            args = [r.choice(["BITFIELD", "BITFIELD", "BITFIELD_RO"]), k]
            for _ in range(r.randint(1, 3)):
                typ = r.choice(["u8", "i8", "u4", "i16", "u1", "i64", "u63", "u64", "x3"])
                off = r.choice(["0", "3", "#1", "17", "-1"])
                sub = r.choice(["GET", "SET", "INCRBY", "OVERFLOW"])
                if sub == "GET":
                    args += ["GET", typ, off]
                elif sub == "OVERFLOW":
                    args += ["OVERFLOW", r.choice(["WRAP", "FAIL", "BAD", "SAT"])]
                else:
                    args += [sub, typ, off, r.choice(["1", "-1", "100", "300", "-129", "x"])]
            return b(*args)
        return b("GET", k)

    def hll(self) -> Args:
        r = self.r
        k = self.key("hll")
        roll = r.random()
        if roll < 0.5:
            n = r.choice([1, 2, 3, 50])
            return b("PFADD", k, *[f"e{r.randint(0, 400)}" for _ in range(n)])
        if roll < 0.8:
            return b("PFCOUNT", *self.keys("hll", 1, 2))
        if roll < 0.95:
            return b("PFMERGE", self.key("hll"), *self.keys("hll", 0, 2))
        return b("GET", k)

    # -- lists, hashes, sets, sorted sets -----------------------------------------------

    def list(self) -> Args:
        r = self.r
        k = self.key("list")
        roll = r.random()
        if roll < 0.22:
            return b(r.choice(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), k,
                     *[self.member() for _ in range(r.randint(1, 4))])
        if roll < 0.32:
            return b(r.choice(["LPOP", "RPOP"]), k, *([self.int_(-1, 4)] if self.chance(0.4) else []))
        if roll < 0.45:
            return b("LRANGE", k, self.int_(-6, 6), self.int_(-6, 6))
        if roll < 0.5:
            return b("LINDEX", k, self.int_(-6, 6))
        if roll < 0.55:
            return b("LINSERT", k, r.choice(["BEFORE", "AFTER", "middle"]), self.member(), self.member())
        if roll < 0.6:
            return b("LLEN", k)
        if roll < 0.65:
            return b("LREM", k, self.int_(-2, 2), self.member())
        if roll < 0.7:
            return b("LSET", k, self.int_(-4, 4), self.member())
        if roll < 0.75:
            return b("LTRIM", k, self.int_(-6, 6), self.int_(-6, 6))
        if roll < 0.8:
            args = ["LPOS", k, self.member()]
            for opt in r.sample(["RANK", "COUNT", "MAXLEN"], r.randint(0, 2)):
                args += [opt, self.int_(-2, 3)]
            return b(*args)
        if roll < 0.87:
            return b("LMOVE", k, self.key("list"), r.choice(["LEFT", "RIGHT"]), r.choice(["LEFT", "RIGHT"]))
        if roll < 0.9:
            return b("RPOPLPUSH", k, self.key("list"))
        if roll < 0.95:
            ks = self.keys("list", 1, 2)
            args = ["LMPOP", str(len(ks)), *ks, r.choice(["LEFT", "RIGHT"])]
            if self.chance(0.5):
                args += ["COUNT", self.int_(0, 3)]
            return b(*args)
        return b("OBJECT", "ENCODING", k)

    def hash(self) -> Args:
        r = self.r
        k = self.key("hash")
        roll = r.random()
        field = lambda: r.choice(["f1", "f2", "f3", "f4", "f5", "n", "x" * 70])  # noqa: E731
        if roll < 0.25:
            n = r.choice([1, 1, 2, 3])
            return b(r.choice(["HSET", "HSET", "HMSET"]), k,
                     *[x for _ in range(n) for x in (field(), r.choice([self.word(), self.num()]))])
        if roll < 0.3:
            return b("HSETNX", k, field(), self.word())
        if roll < 0.4:
            return b("HGET", k, field())
        if roll < 0.45:
            return b("HMGET", k, field(), field())
        if roll < 0.52:
            return b("HDEL", k, field(), *([field()] if self.chance(0.3) else []))
        if roll < 0.56:
            if self.chance(0.2):
                return self.scan("HSCAN", k)
            return b(r.choice(["HLEN", "HKEYS", "HVALS", "HGETALL"]), k)
        if roll < 0.6:
            return b(r.choice(["HSTRLEN", "HEXISTS"]), k, field())
        if roll < 0.7:
            return b("HINCRBY", k, field(), self.num())
        if roll < 0.78:
            return b("HINCRBYFLOAT", k, field(), self.num())
        if roll < 0.85:
            return b("HRANDFIELD", k, *r.choice([["100"], ["100", "WITHVALUES"]]))
        if roll < 0.92:
            return b("HGETALL", k)
        return b("OBJECT", "ENCODING", k)

    def set(self) -> Args:
        r = self.r
        k = self.key("set")
        roll = r.random()
        if roll < 0.25:
            return b("SADD", k, *[self.member() for _ in range(r.randint(1, 4))])
        if roll < 0.33:
            return b("SREM", k, *[self.member() for _ in range(r.randint(1, 2))])
        if roll < 0.38:
            if self.chance(0.3):
                return self.scan("SSCAN", k)
            return b("SCARD", k)
        if roll < 0.43:
            return b(r.choice(["SISMEMBER", "SMISMEMBER"]), k, self.member())
        if roll < 0.5:
            return b("SMEMBERS", k)
        if roll < 0.6:
            return b(r.choice(["SINTER", "SUNION", "SDIFF"]), *self.keys("set", 1, 3))
        if roll < 0.7:
            return b(r.choice(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), self.key("set"),
                     *self.keys("set", 1, 3))
        if roll < 0.75:
            ks = self.keys("set", 1, 3)
            args = ["SINTERCARD", str(len(ks)), *ks]
            if self.chance(0.4):
                args += ["LIMIT", self.int_(0, 3)]
            return b(*args)
        if roll < 0.82:
            return b("SMOVE", k, self.key("set"), self.member())
        if roll < 0.87:
            return b("SPOP", k, "1000")
        if roll < 0.92:
            return b("SRANDMEMBER", k, "1000")
        return b("OBJECT", "ENCODING", k)

    def score(self) -> str:
        return self.r.choice(["0", "1", "1", "2", "2.5", "-1", "1e3", "inf", "-inf", "3",
                              "0.1", "nan", "x", "(1"])

    def zbound(self) -> str:
        return self.r.choice(["-inf", "+inf", "0", "1", "(1", "2.5", "(2.5", "3", "x"])

    def lexbound(self) -> str:
        return self.r.choice(["-", "+", "[a", "(a", "[c", "(d", "[1", "a", "[x"])

    def zlex(self) -> Args:
        """Lex ranges, on sorted sets whose every score is 0."""
        r = self.r
        k = self.key("zlex")
        roll = r.random()
        if roll < 0.3:
            args = ["ZADD", k, *(["NX"] if self.chance(0.1) else []), *(["CH"] if self.chance(0.1) else [])]
            for _ in range(r.randint(1, 3)):
                args += ["0", self.member()]
            return b(*args)
        if roll < 0.38:
            return b("ZREM", k, self.member())
        if roll < 0.6:
            cmd = r.choice(["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT"])
            lo, hi = self.lexbound(), self.lexbound()
            if cmd == "ZREVRANGEBYLEX":
                lo, hi = hi, lo
            args = [cmd, k, lo, hi]
            if cmd != "ZLEXCOUNT" and self.chance(0.3):
                args += ["LIMIT", self.int_(-1, 2), self.int_(-1, 3)]
            return b(*args)
        if roll < 0.75:
            args = ["ZRANGE", k, self.lexbound(), self.lexbound(), "BYLEX"]
            if self.chance(0.3):
                args.append("REV")
            if self.chance(0.3):
                args += ["LIMIT", self.int_(-1, 2), self.int_(-1, 3)]
            return b(*args)
        if roll < 0.83:
            return b("ZREMRANGEBYLEX", k, self.lexbound(), self.lexbound())
        if roll < 0.9:
            return b("ZRANGESTORE", r.choice(POOLS["zlex"]), k, self.lexbound(), self.lexbound(), "BYLEX",
                     *(["REV"] if self.chance(0.3) else []))
        if roll < 0.95:
            return r.choice([b("ZRANGE", k, "0", "-1", "WITHSCORES"), b("ZCARD", k), b("ZPOPMIN", k)])
        return b("OBJECT", "ENCODING", k)

    def scan(self, name: str, key: str | None = None) -> Args:
        """A whole iteration in one call (a COUNT past any collection here), since cursors
        are each server's own; the runner compares what comes back as a set. Now and then
        an argument error instead."""
        r = self.r
        # Only cursor 0 or an invalid one: where any other cursor lands in a hash table
        # depends on the table's hash seed, random per redis-server process.
        args = [name, *([key] if key else []), r.choice(["0"] * 12 + ["x", " 0", "1.5"])]
        args += ["COUNT", r.choice(["100000"] * 10 + ["0", "x"])]
        if self.chance(0.3):
            args += ["MATCH", r.choice(["*", "s*", "x?", "[lz]1", "*1*", "m*", "f?"])]
        if name == "SCAN" and self.chance(0.2):
            args += ["TYPE", r.choice(["string", "list", "set", "zset", "hash", "stream", "nosuch"])]
        return b(*args)

    def zset(self) -> Args:
        r = self.r
        if self.chance(0.25):
            return self.zlex()
        k = self.key("zset")
        if self.chance(0.02):
            return self.scan("ZSCAN", k)
        roll = r.random()
        if roll < 0.22:
            args = ["ZADD", k]
            for opt in ["NX", "XX", "GT", "LT", "CH"]:
                if self.chance(0.08):
                    args.append(opt)
            incr = self.chance(0.08)
            if incr:
                args.append("INCR")
            for _ in range(1 if incr else r.randint(1, 3)):
                args += [self.score(), self.member()]
            return b(*args)
        if roll < 0.27:
            return b("ZINCRBY", k, self.score(), self.member())
        if roll < 0.32:
            return b(r.choice(["ZSCORE", "ZRANK", "ZREVRANK"]), k, self.member())
        if roll < 0.35:
            return b("ZMSCORE", k, self.member(), self.member())
        if roll < 0.5:
            mode = r.choice(["", "BYSCORE"])
            if mode == "BYSCORE":
                lo, hi = self.zbound(), self.zbound()
            else:
                lo, hi = self.int_(-4, 4), self.int_(-4, 4)
            args = ["ZRANGE", k, lo, hi]
            if mode:
                args.append(mode)
            if self.chance(0.3):
                args.append("REV")
            if self.chance(0.2):
                args += ["LIMIT", self.int_(-1, 2), self.int_(-1, 3)]
            if self.chance(0.4):
                args.append("WITHSCORES")
            return b(*args)
        if roll < 0.56:
            cmd = r.choice(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZCOUNT"])
            lex = "LEX" in cmd
            args = [cmd, k, *(self.lexbound() if lex else self.zbound() for _ in range(2))]
            if "RANGE" in cmd and not lex and self.chance(0.4):
                args.append("WITHSCORES")
            if "RANGE" in cmd and self.chance(0.2):
                args += ["LIMIT", self.int_(-1, 2), self.int_(-1, 3)]
            return b(*args)
        if roll < 0.62:
            return b("ZREM", k, self.member(), *([self.member()] if self.chance(0.3) else []))
        if roll < 0.66:
            cmd = r.choice(["ZREMRANGEBYRANK", "ZREMRANGEBYSCORE"])
            if cmd == "ZREMRANGEBYRANK":
                return b(cmd, k, self.int_(-3, 3), self.int_(-3, 3))
            if cmd == "ZREMRANGEBYSCORE":
                return b(cmd, k, self.zbound(), self.zbound())
            return b(cmd, k, self.lexbound(), self.lexbound())
        if roll < 0.71:
            return b(r.choice(["ZPOPMIN", "ZPOPMAX"]), k, *([self.int_(-1, 3)] if self.chance(0.5) else []))
        if roll < 0.74:
            ks = self.keys("zset", 1, 2)
            args = ["ZMPOP", str(len(ks)), *ks, r.choice(["MIN", "MAX"])]
            if self.chance(0.5):
                args += ["COUNT", self.int_(0, 3)]
            return b(*args)
        if roll < 0.84:
            cmd = r.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])
            ks = self.keys("zset", 1, 3)
            args = [cmd] + ([self.key("zset")] if cmd.endswith("STORE") else []) + [str(len(ks)), *ks]
            if cmd != "ZDIFF" and cmd != "ZDIFFSTORE":
                if self.chance(0.3):
                    args += ["WEIGHTS", *[r.choice(["1", "2", "-1", "0.5", "inf"]) for _ in ks]]
                if self.chance(0.3):
                    args += ["AGGREGATE", r.choice(["SUM", "MIN", "MAX"])]
            if not cmd.endswith("STORE") and self.chance(0.5):
                args.append("WITHSCORES")
            return b(*args)
        if roll < 0.87:
            ks = self.keys("zset", 1, 2)
            return b("ZINTERCARD", str(len(ks)), *ks, *(["LIMIT", "1"] if self.chance(0.3) else []))
        if roll < 0.9:
            return b("ZRANGESTORE", self.key("zset"), k, self.int_(-3, 3), self.int_(-3, 3))
        if roll < 0.93:
            return b("ZRANDMEMBER", k, "1000", *(["WITHSCORES"] if self.chance(0.5) else []))
        if roll < 0.96:
            return b("ZCARD", k)
        return b("OBJECT", "ENCODING", k)

    # -- keys, expiry, SORT --------------------------------------------------------------

    def any_key(self) -> str:
        return self.r.choice(ALL_KEYS + ["missing"])

    def same_pool_pair(self) -> tuple[str, str]:
        pool = self.r.choice(list(POOLS))
        return self.r.choice(POOLS[pool]), self.r.choice(POOLS[pool])

    def keys_cmd(self) -> Args:
        r = self.r
        k = self.any_key()
        roll = r.random()
        if roll < 0.1:
            return b(r.choice(["DEL", "UNLINK"]), k, *([self.any_key()] if self.chance(0.3) else []))
        if roll < 0.16:
            return b(r.choice(["EXISTS", "TOUCH"]), k, self.any_key())
        if roll < 0.22:
            return b("TYPE", k)
        if roll < 0.3:
            src, dst = self.same_pool_pair()
            return b(r.choice(["RENAME", "RENAMENX"]), src, dst)
        if roll < 0.36:
            src, dst = self.same_pool_pair()
            args = ["COPY", src, dst]
            if self.chance(0.3):
                args += ["DB", r.choice(["0", "1", "2", "20"])]
            if self.chance(0.4):
                args.append("REPLACE")
            return b(*args)
        if roll < 0.4:
            return b("MOVE", k, r.choice(["0", "1", "2", "x"]))
        if roll < 0.55:
            cmd = r.choice(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
            if cmd == "EXPIRE":
                t = r.choice(["100000", "200000", "0", "-1", "x"])
            elif cmd == "PEXPIRE":
                t = r.choice(["100000000", "200000000", "0", "-1"])
            elif cmd == "EXPIREAT":
                t = r.choice(["4000000000", "4100000000", "1", "0"])
            else:
                t = r.choice(["4000000000000", "4100000000000", "1"])
            args = [cmd, k, t]
            if self.chance(0.3):
                args.append(r.choice(["NX", "XX", "GT", "LT", "nx", "bogus"]))
            return b(*args)
        if roll < 0.6:
            return b("PERSIST", k)
        if roll < 0.7:
            return b(r.choice(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k)
        if roll < 0.75:
            return b("OBJECT", "ENCODING", k)
        if roll < 0.78:
            if self.chance(0.3):
                return self.scan("SCAN")
            return b("KEYS", r.choice(["*", "s*", "x?", "[lz]1", "*1*"]))
        if roll < 0.8:
            return b("DBSIZE")
        if roll < 0.82:
            return b("EXISTS", "missing", k, k)
        if roll < 0.9:
            return b("OBJECT", r.choice(["FREQ", "REFCOUNT", "encoding"]), k)
        return b("TYPE", k)

    def sort(self) -> Args:
        r = self.r
        pool = r.choice(["list", "set", "zset"])
        # Never a set under another pool's name: its unsorted order is Redis's hash order.
        k = r.choice(POOLS[pool] + ["s1", "hs1", "x1", "missing"])
        args = [r.choice(["SORT", "SORT", "SORT_RO"]), k]
        if self.chance(0.3):
            by = r.choice(["s*", "hs*->f1", "nosort", "s1"])
            if "*" not in by and pool == "set":
                by = "s*"  # BY without '*' leaves a set unsorted: Redis's seeded hash order
            args += ["BY", by]
        if self.chance(0.3):
            args += ["LIMIT", self.int_(-1, 3), self.int_(-1, 5)]
        for _ in range(r.choice([0, 0, 1, 2])):
            args += ["GET", r.choice(["#", "s*", "hs*->f1", "hs*->n"])]
        if self.chance(0.3):
            args.append(r.choice(["ASC", "DESC"]))
        if self.chance(0.4) and not (pool in ("set", "zset") and "BY" in args):
            # (ALPHA BY leaves elements whose BY keys compare equal in input order, which
            # for a set, and for a sorted set SORT reads from its dict, is Redis's hash order)
            args.append("ALPHA")
        if args[0] == "SORT" and self.chance(0.2):
            args += ["STORE", self.key("list")]
        return b(*args)

    # -- connections, transactions, blocking, protocol -----------------------------------

    def select(self) -> Args:
        r = self.r
        roll = r.random()
        if roll < 0.6:
            return b("SELECT", r.choice(["0", "0", "1", "2", "16", "x"]))
        if roll < 0.75:
            return b("SWAPDB", r.choice(["0", "1"]), r.choice(["1", "2", "x"]))
        if roll < 0.85:
            return b("DBSIZE")
        if roll < 0.93:
            return b("FLUSHDB", *(["ASYNC"] if self.chance(0.3) else []))
        return b("PING", *(["hi"] if self.chance(0.5) else []))

    def data_command(self) -> Args:
        """A data command of any family (for transactions and arity mutations)."""
        for _ in range(20):
            pick = self.r.choice([self.stream, self.group, self.string, self.list, self.hash,
                                  self.set, self.zset, self.keys_cmd, self.bits])
            out = pick()
            if isinstance(out, tuple) and out and isinstance(out[0], bytes):
                return out
        return b("PING")

    def transaction(self) -> Op:
        r = self.r
        steps: list[tuple[int, Args]] = []
        if self.chance(0.4):
            watched = [self.any_key() for _ in range(r.randint(1, 2))]
            steps.append((1, b("WATCH", *watched)))
            if self.chance(0.5):
                steps.append((r.choice([1, 2]), self.data_command()))
        steps.append((1, b("MULTI")))
        for _ in range(r.randint(0, 4)):
            cmd = self.data_command()
            if self.chance(0.08):
                cmd = cmd[:1]  # arity error while queuing: EXECABORT
            steps.append((1, cmd))
        if self.chance(0.05):
            steps.append((1, b("MULTI")))
        if self.chance(0.05):
            steps.append((1, b("WATCH", "s1")))
        steps.append((1, b(r.choice(["EXEC", "EXEC", "EXEC", "DISCARD"]))))
        if self.chance(0.05):
            steps.append((1, b("EXEC")))
        return Op("seq", tuple(steps))

    def blocking(self) -> Op | Args:
        r = self.r
        roll = r.random()
        short = r.choice(["0.01", "0.02"])
        if roll < 0.5:
            ks = self.keys("stream", 1, 2)
            if self.chance(0.5):
                g = self.group_name()
                blocker = b("XREADGROUP", "GROUP", g, self.consumer(), "COUNT", "2", "BLOCK", "0",
                            "STREAMS", *ks, *[">" for _ in ks])
                if self.chance(0.2):
                    blocker = blocker[:-len(ks)] + tuple(b"0" for _ in ks)
            else:
                blocker = b("XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", *ks,
                            *[r.choice(["$", "$", "0", self.sid(True)]) for _ in ks])
            self.ms += 1
            waker = r.choice([
                b("XADD", ks[0], self.sid(True), "f", "v"),
                b("XADD", ks[-1], f"{self.ms}-*", "f", "v"),
                b("XADD", ks[0], f"{self.ms}-1", "f", "v"),
                b("DEL", ks[0]),
                b("XGROUP", "DESTROY", ks[0], "g1"),
                None,
            ] if self.chance(0.95) else [b("SET", ks[0], "x")])
            if waker is None:
                blocker = tuple(short.encode() if a == b"0" and i == blocker.index(b"BLOCK") + 1
                                else a for i, a in enumerate(blocker))
            return Op("block", (blocker, waker))
        if roll < 0.8:
            ks = self.keys("list", 1, 2)
            blocker = r.choice([
                b("BLPOP", *ks, "0"), b("BRPOP", *ks, "0"),
                b("BLMOVE", ks[0], self.key("list"), r.choice(["LEFT", "RIGHT"]),
                  r.choice(["LEFT", "RIGHT"]), "0"),
                b("BLMPOP", "0", len(ks), *ks, r.choice(["LEFT", "RIGHT"]), "COUNT", "2"),
                b("BRPOPLPUSH", ks[0], self.key("list"), "0"),
            ])
            waker = r.choice([b("RPUSH", ks[-1], self.member(), self.member()),
                              b("LPUSH", ks[0], self.member()), b("DEL", ks[0]), None])
        else:
            ks = self.keys("zset", 1, 2)
            blocker = r.choice([b("BZPOPMIN", *ks, "0"), b("BZPOPMAX", *ks, "0"),
                                b("BZMPOP", "0", len(ks), *ks, "MIN", "COUNT", "2")])
            waker = r.choice([b("ZADD", ks[-1], self.score(), self.member()), b("DEL", ks[0]), None])
        if waker is None:
            timeout_at = 1 if blocker[0] in (b"BLMPOP", b"BZMPOP") else len(blocker) - 1
            blocker = blocker[:timeout_at] + (short.encode(),) + blocker[timeout_at + 1:]
        return Op("block", (blocker, waker))

    def arity(self) -> Args:
        """A command with an argument too few or too many, or unknown."""
        r = self.r
        cmd = self.data_command()
        roll = r.random()
        if roll < 0.4:
            if cmd[0] in RANDOM_WITHOUT_COUNT:
                return cmd[:1]  # with the count gone they would pick at random
            return cmd[:r.randint(1, max(1, len(cmd) - 1))]
        if roll < 0.7 and cmd[0].upper() not in NO_EXTRA_ARGUMENT:
            return cmd + (b"extra",)
        if roll < 0.8:
            return b("NOSUCHCMD", "a")
        return (cmd[0].lower(),) + cmd[1:]

    def raw(self) -> Op:
        r = self.r
        roll = r.random()
        if roll < 0.45:
            # inline commands, with the bytes Redis's splitter treats as space
            sep = r.choice([" ", "  ", "\t", "\x0b", "\x0c", " \t "])
            words = [r.choice(["SET", "set", "GET", "PING", "ECHO", "RPUSH", "XADD", "EXISTS"]),
                     r.choice(["s1", "l1", "x1", '"s 1"', "'s2'", '"a\\x41b"', '"\\n"', "s1\"x"]),
                     r.choice(["", "v", '"v w"', "1-1 f v", "'it''s'", '"unterminated'])]
            line = sep.join(w for w in words if w) + r.choice(["\r\n", "\n", " \r\n"])
            if self.chance(0.1):
                line = r.choice(["\r\n", "   \r\n", "\n\n", '"\r\n', "\x00\r\n", "PING\x00\r\n"])
            return Op("raw", line.encode("latin-1"))
        # malformed multibulk; each either completes or is a protocol error
        return Op("raw", r.choice([
            b"*2\r\n$3\r\nGET\r\n$x\r\n",
            b"*1\r\n$-1\r\n",
            b"*x\r\n",
            b"*3000000000\r\n",
            b"*1\r\n$600000000\r\n",
            b"*2\r\n:3\r\nGET\r\n",
            b"*1\r\n$4\r\nPINGxx\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"*1\r\n$4\r\nPING\r\n*1\r\nPING\r\n",
            b"*2\r\n$3\r\nGET\r\n$2\r\ns1\r\n",
            b"$3\r\nGET\r\n",
            b"*1\r\n$-5\r\n",
            b"*1\r\n$ 4\r\nPING\r\n",
            b"*1\r\n$4 \r\nPING\r\n",
            b"*+1\r\n$4\r\nPING\r\n",
            b"*01\r\n$04\r\nPING\r\n",
        ]))
