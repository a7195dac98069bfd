"""Runs ops on rill and redis-server at once and compares every reply and the dataset.

Replies are compared byte for byte, except where Redis itself promises no order or a
value is a clock reading; those few commands are compared through ``canon`` (sorted, or
the idle time blanked, or a TTL within a tolerance), and nothing else is."""

from __future__ import annotations

import select
import socket
import time
from dataclasses import dataclass, field

from tests.support import RawClient, ServerProcess, encode_command, start_redis, start_rill

from .exceptions import known_unfixed, newer_blocked_xreadgroup
from .generator import Args, Op
from .resp import Reply, parse

SENTINEL_CMD = encode_command([b"ECHO", b"__fuzz_sentinel__"])
SENTINEL_REPLY = b"$17\r\n__fuzz_sentinel__\r\n"
DATABASES = (0, 1, 2)
# (PEXPIRETIME, not PTTL: the two datasets are read one after the other, and a TTL read
# seconds apart differs by those seconds)
META = "TYPE, OBJECT ENCODING, PEXPIRETIME"

# Settings both servers get, so small collections convert encodings (and streams split
# nodes) within a few commands. Applied to every other seed; the rest run on defaults.
SMALL_ENCODINGS = [
    ("hash-max-listpack-entries", "4"), ("hash-max-listpack-value", "16"),
    ("set-max-intset-entries", "4"), ("zset-max-listpack-entries", "4"),
    ("zset-max-listpack-value", "16"), ("list-max-listpack-size", "4"),
    ("stream-node-max-entries", "4"),
]

SCANS = {b"SCAN", b"SSCAN", b"HSCAN", b"ZSCAN"}
UNORDERED = {b"SMEMBERS", b"SINTER", b"SUNION", b"SDIFF", b"HKEYS", b"HVALS", b"KEYS",
             b"SPOP", b"SRANDMEMBER", b"HGETALL", b"HRANDFIELD", b"ZRANDMEMBER"}
TTL_TOLERANCE = {b"TTL": 2, b"PTTL": 2000, b"EXPIRETIME": 2, b"PEXPIRETIME": 2000}


@dataclass
class Approx:
    """A clock-derived integer: equal to another within ``tol``."""

    value: int
    tol: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Approx) and abs(self.value - other.value) <= self.tol

    def __hash__(self) -> int:
        return 0


def _sortkey(x: object) -> str:
    return repr(x)


def _blank_fields(items: tuple, names: set[bytes]) -> tuple:
    """A flat key/value sequence with the values of ``names`` blanked."""
    out = list(items)
    for i in range(0, len(out) - 1, 2):
        if out[i].value in names:
            out[i + 1] = Reply(":", b"<time>")
    return tuple(out)


def _xinfo_full(reply: Reply) -> Reply:
    """XINFO STREAM FULL with delivery and seen times blanked (PEL entries carry the
    delivery time at a fixed position: group PEL [id, consumer, time, count], consumer
    PEL [id, time, count]), both under "pending")."""
    items = list(reply.value)
    for i in range(0, len(items) - 1, 2):
        if items[i].value == b"groups" and items[i + 1].value:
            groups = []
            for g in items[i + 1].value:
                gi = list(g.value)
                for j in range(0, len(gi) - 1, 2):
                    if gi[j].value == b"pending":
                        gi[j + 1] = Reply(gi[j + 1].kind, tuple(
                            Reply(e.kind, e.value[:2] + (Reply(":", b"<t>"),) + e.value[3:])
                            for e in gi[j + 1].value))
                    if gi[j].value == b"consumers":
                        cons = []
                        for c in gi[j + 1].value:
                            ci = list(_blank_fields(c.value, {b"seen-time", b"active-time"}))
                            for m in range(0, len(ci) - 1, 2):
                                if ci[m].value == b"pending":
                                    ci[m + 1] = Reply(ci[m + 1].kind, tuple(
                                        Reply(e.kind, e.value[:1] + (Reply(":", b"<t>"),)
                                              + e.value[2:]) for e in ci[m + 1].value))
                            cons.append(Reply(c.kind, tuple(ci)))
                        gi[j + 1] = Reply(gi[j + 1].kind, tuple(cons))
                groups.append(Reply(g.kind, tuple(gi)))
            items[i + 1] = Reply(items[i + 1].kind, tuple(groups))
    return Reply(reply.kind, tuple(items))


def canon(args: Args, data: bytes) -> object:
    """What of a reply must be equal on both servers: its bytes, or for the commands
    whose replies legitimately vary, a normalised value."""
    name = args[0].upper() if args else b""
    sub = args[1].upper() if len(args) > 1 else b""
    if name in UNORDERED or name in TTL_TOLERANCE or name in SCANS or name in (b"XPENDING", b"XINFO", b"EXEC"):
        try:
            reply = parse(data)
        except (ValueError, IndexError):
            return data
    else:
        return data
    if reply.kind in "+-!" or reply.value is None:
        return data
    if name in TTL_TOLERANCE:
        if reply.kind != ":":
            return data
        value = int(reply.value)
        return data if value < 0 else (reply.kind, Approx(value, TTL_TOLERANCE[name]))
    if name in SCANS:
        # [cursor, elements]: a whole iteration, whose order is each server's own
        if reply.kind != "*" or len(reply.value) != 2:
            return data
        cursor, items = reply.value
        if name in (b"HSCAN", b"ZSCAN"):
            pairs = [(items.value[i], items.value[i + 1]) for i in range(0, len(items.value) - 1, 2)]
            return (cursor, sorted(pairs, key=_sortkey))
        return (cursor, sorted(items.value, key=_sortkey))
    if name in UNORDERED:
        if reply.kind not in "*~%":
            return data
        items = reply.value
        pairs = reply.kind == "%" or (
            (b"WITHVALUES" in map(bytes.upper, args) or b"WITHSCORES" in map(bytes.upper, args)
             or name == b"HGETALL") and not (items and items[0].kind == "*"))
        if pairs:
            grouped = [(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
            return (reply.kind, "pairs", sorted(grouped, key=_sortkey))
        return (reply.kind, sorted(items, key=_sortkey))
    if name == b"XPENDING" and len(args) > 3 and reply.kind == "*":
        # extended form: [id, consumer, idle ms, deliveries] per entry; idle is a clock reading
        return (reply.kind, [Reply(e.kind, e.value[:2] + (Reply(":", b"<idle>"),) + e.value[3:])
                             for e in reply.value])
    if name == b"XINFO" and reply.kind in "*%":
        if sub == b"STREAM":
            r = reply
            if len(args) > 3:
                r = _xinfo_full(r)
            return r
        if sub == b"CONSUMERS":
            return (reply.kind, [Reply(c.kind, _blank_fields(c.value, {b"idle", b"inactive"}))
                                 for c in reply.value])
        return data
    return data


def _hash_ordered_sort(args: Args) -> bool:
    """A SORT whose order, on a set, Redis leaves to the set's hash order (seeded at random
    per process): BY without '*' (no sorting at all), or ALPHA with BY (elements whose BY
    values compare equal keep their input order). The generator keeps these forms off the
    set pool, but a key of another pool can have become a set."""
    if not args or args[0].upper() not in (b"SORT", b"SORT_RO") or len(args) < 2:
        return False
    upper = [a.upper() for a in args[2:]]
    if b"BY" not in upper:
        return False
    at = 2 + upper.index(b"BY") + 1
    by = args[at] if at < len(args) else b""
    return b"ALPHA" in upper or b"*" not in by


def _ordered_sort(args: Args) -> Args:
    """The same SORT made deterministic on a set: BY a weight pattern, no ALPHA (equal
    numeric weights are ordered by the elements themselves)."""
    out = list(args[:2])
    rest = list(args[2:])
    j = 0
    while j < len(rest):
        word = rest[j].upper()
        if word == b"BY" and j + 1 < len(rest):
            out += [rest[j], rest[j + 1] if b"*" in rest[j + 1] else b"s*"]
            j += 2
            continue
        if word != b"ALPHA":
            out.append(rest[j])
        j += 1
    return tuple(out)


def canon_exec(queued: list[Args], data: bytes) -> object:
    """EXEC's reply, each element canonical for the command that produced it."""
    try:
        reply = parse(data)
    except (ValueError, IndexError):
        return data
    if reply.kind != "*" or reply.value is None or len(reply.value) != len(queued):
        return data
    from .resp import _parse  # noqa: PLC0415
    out = []
    pos = data.index(b"\r\n") + 2
    for args in queued:
        _, end = _parse(data, pos)
        out.append(canon(args, data[pos:end]))
        pos = end
    return ("exec", out)


def _exec_elements(data: bytes, n: int) -> list[bytes] | None:
    from .resp import _parse  # noqa: PLC0415
    if not data.startswith(b"*%d\r\n" % n):
        return None
    out, pos = [], data.index(b"\r\n") + 2
    for _ in range(n):
        _, end = _parse(data, pos)
        out.append(data[pos:end])
        pos = end
    return out


def _exec_known(queued: list[Args], mine: bytes, theirs: bytes) -> bool:
    """EXEC replies that differ only in elements KNOWN_UNFIXED accepts."""
    a, b_ = _exec_elements(mine, len(queued)), _exec_elements(theirs, len(queued))
    if a is None or b_ is None:
        return False
    return all(canon(q, x) == canon(q, y) or known_unfixed(q, x, y)
               for q, x, y in zip(queued, a, b_, strict=True))


@dataclass
class Divergence:
    """The first difference: where it happened and what each server said."""

    index: int  # op index in the sequence
    what: str  # the command (or "dataset db:key") that differed
    rill: bytes
    redis: bytes
    signature: str  # stays the same while shrinking keeps the same bug

    def describe(self) -> str:
        return f"op {self.index}: {self.what}\n  rill : {self.rill!r}\n  redis: {self.redis!r}"


class ServerDied(Exception):
    pass


class Side:
    """One server and the connections the fuzzer keeps to it."""

    def __init__(self, name: str, server: ServerProcess, resp: int) -> None:
        self.name = name
        self.server = server
        self.resp = resp
        self.db = 0
        self.connect()

    def _conn(self) -> RawClient:
        c = RawClient(self.server.port)
        if self.resp == 3:
            c.call("HELLO", "3")
        return c

    def connect(self) -> None:
        self.main = self._conn()
        self.second = self._conn()
        self.second_db = 0
        self.admin = RawClient(self.server.port)  # RESP2: dataset reads, INFO, UNBLOCK
        self.second_id = int(self.second.call("CLIENT", "ID")[1:-2])
        self.db = 0

    def reconnect_main(self) -> None:
        try:
            self.main.close()
        except OSError:
            pass
        self.main = self._conn()
        if self.db:
            self.main.call("SELECT", self.db)

    def close(self) -> None:
        for c in (self.main, self.second, self.admin):
            try:
                c.close()
            except OSError:
                pass

    def reset(self) -> None:
        """Forget everything a sequence did: new connections on an empty dataset."""
        self.close()
        self.connect()
        self.admin.call("FLUSHALL")

    def alive(self) -> bool:
        return self.server.proc is not None and self.server.proc.poll() is None


def _readable(sock: socket.socket, timeout: float) -> bool:
    r, _, _ = select.select([sock], [], [], timeout)
    return bool(r)


def _read_raw(c: RawClient, timeout: float = 2.0) -> tuple[bytes, bool]:
    """Everything up to the sentinel's reply; (bytes, closed by the server). A server
    still waiting for the rest of a line (Redis does, after a NUL in an inline command)
    gives ``<timeout>``; the caller then drops the connection."""
    deadline = time.monotonic() + timeout
    data = c.buf
    c.buf = b""
    while not data.endswith(SENTINEL_REPLY):
        left = deadline - time.monotonic()
        if left <= 0:
            return data + b"<timeout>", True
        if not _readable(c.sock, left):
            continue
        try:
            chunk = c.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data[: -len(SENTINEL_REPLY)], False


def _blocked(side: Side) -> int:
    info = side.admin.call("INFO", "clients").decode(errors="replace")
    for line in info.split("\r\n"):
        if line.startswith("blocked_clients:"):
            return int(line.split(":")[1])
    return 0


@dataclass
class Pair:
    """rill and redis-server side by side."""

    resp: int = 2
    small_encodings: bool = False
    sides: list[Side] = field(default_factory=list)
    # when a list: every step's (what was sent, rill's reply, redis's reply), for transcripts
    log: list | None = None

    def start(self) -> Pair:
        rill = start_rill()
        redis = start_redis()
        self.sides = [Side("rill", rill, self.resp), Side("redis", redis, self.resp)]
        self.configure()
        return self

    def configure(self) -> None:
        for side in self.sides:
            for name, value in (SMALL_ENCODINGS if self.small_encodings else []):
                reply = side.admin.call("CONFIG", "SET", name, value)
                assert reply == b"+OK\r\n", (side.name, name, reply)

    def stop(self) -> None:
        for side in self.sides:
            side.close()
            side.server.stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def reset(self) -> None:
        if not all(s.alive() for s in self.sides):
            self.restart()
            return
        for side in self.sides:
            side.reset()

    # -- running ----------------------------------------------------------------------

    def run(self, ops: list[Op], snapshot_every: int = 20, start: int = 0) -> Divergence | None:
        """Run ``ops``; the first divergence, or None. The dataset is compared every
        ``snapshot_every`` ops and after the last."""
        for i, op in enumerate(ops, start):
            try:
                div = self.run_op(i, op)
                if div is None and snapshot_every and (i + 1) % snapshot_every == 0:
                    div = self.compare_dataset(i)
            except (OSError, ConnectionError, ServerDied) as exc:
                return self._death(i, op, exc)
            if div is not None:
                return div
        try:
            return self.compare_dataset(start + len(ops) - 1)
        except (OSError, ConnectionError) as exc:
            return self._death(start + len(ops) - 1, None, exc)

    def _death(self, i: int, op: Op | None, exc: BaseException) -> Divergence:
        dead = [s.name for s in self.sides if not s.alive()]
        what = f"{op!r} raised {exc!r}; dead: {dead or 'none'}"
        log = b"".join(s.server.log()[-2000:].encode() for s in self.sides if not s.alive())
        return Divergence(i, what, log, b"", f"death:{dead}")

    def run_op(self, i: int, op: Op) -> Divergence | None:
        if op.kind == "cmd":
            return self.run_steps(i, ((1, op.payload),))
        if op.kind == "seq":
            return self.run_steps(i, op.payload)
        if op.kind == "raw":
            return self.run_raw(i, op.payload)
        if op.kind == "block":
            return self.run_block(i, *op.payload)
        raise ValueError(op.kind)

    def run_steps(self, i: int, steps) -> Divergence | None:
        in_multi = False
        queued: list[Args] = []
        for conn, args in steps:
            if conn == 1 and not in_multi and _hash_ordered_sort(args) \
                    and self.sides[1].main.call("TYPE", args[1]) == b"+set\r\n":
                args = _ordered_sort(args)
            for side in self.sides:
                c = side.main if conn == 1 else side.second
                c.send_raw(encode_command(args))
            replies = [(side.main if conn == 1 else side.second).read_reply() for side in self.sides]
            name = args[0].upper()
            if conn == 1 and name == b"MULTI" and replies[1] == b"+OK\r\n":
                in_multi, queued = True, []
            elif conn == 1 and in_multi and name in (b"EXEC", b"DISCARD"):
                in_multi = False
            elif conn == 1 and in_multi and replies[1] == b"+QUEUED\r\n":
                queued.append(args)
            if self.log is not None:
                self.log.append((("conn2: " if conn == 2 else "") + _show(args), replies[0], replies[1]))
            if name == b"EXEC" and conn == 1:
                a, b_ = canon_exec(queued, replies[0]), canon_exec(queued, replies[1])
            else:
                a, b_ = canon(args, replies[0]), canon(args, replies[1])
            if a != b_ and name == b"EXEC" and conn == 1 and _exec_known(queued, *replies):
                a = b_
            if a != b_ and not known_unfixed(args, replies[0], replies[1]):
                return Divergence(i, _show(args), replies[0], replies[1], f"reply:{name.decode()}")
            if name == b"SELECT" and replies[1] == b"+OK\r\n" and conn == 1 and not in_multi:
                for side in self.sides:
                    side.db = int(args[1])
        return None

    def run_raw(self, i: int, data: bytes) -> Divergence | None:
        for side in self.sides:
            try:
                side.main.send_raw(data + SENTINEL_CMD)
            except OSError:
                pass
        # redis-server first: when it answered, rill gets a generous wait (a loaded machine
        # is no divergence); when it is still waiting for the line's end too, a short one.
        theirs = _read_raw(self.sides[1].main)
        mine = _read_raw(self.sides[0].main, 2.0 if theirs[0].endswith(b"<timeout>") else 15.0)
        results = [mine, theirs]
        if self.log is not None:
            self.log.append((f"(raw bytes) {data!r}",
                             *(r + (b" <connection closed>" if closed else b"") for r, closed in results)))
        # a timeout counts as closed (we drop the connection), so it compares as such
        for side, (_, closed) in zip(self.sides, results, strict=True):
            if closed:
                side.reconnect_main()
        if results[0] != results[1]:
            (a, ca), (b_, cb) = results
            return Divergence(i, f"raw {data!r}", a + (b" <closed>" if ca else b""),
                              b_ + (b" <closed>" if cb else b""), "raw")
        for side in self.sides:  # the server stays healthy
            if side.main.call("PING") not in (b"+PONG\r\n",):
                raise ServerDied(side.name)
        return None

    def run_block(self, i: int, blocker: Args, waker: Args | None) -> Divergence | None:
        for side in self.sides:
            if side.second_db != side.db:
                assert side.second.call("SELECT", side.db) == b"+OK\r\n"
                side.second_db = side.db
            side.second.send_raw(encode_command(blocker))
        for side in self.sides:  # wait until blocked, or already answered
            deadline = time.monotonic() + 10
            while not side.second.buf and not _readable(side.second.sock, 0) and not _blocked(side):
                if time.monotonic() > deadline:
                    raise ServerDied(f"{side.name}: blocker neither blocked nor answered")
                time.sleep(0.002)
        if waker is not None:
            div = self.run_steps(i, ((1, waker),))
            if div is not None:
                return div
        replies = []
        short_timeout = waker is None
        for side in self.sides:
            if not short_timeout and not side.second.buf and not _readable(side.second.sock, 0) \
                    and _blocked(side):
                side.admin.call("CLIENT", "UNBLOCK", side.second_id)
            side.second.sock.settimeout(10)
            replies.append(side.second.read_reply())
        if self.log is not None:
            self.log.append(("conn2 (blocked, reply now): " + _show(blocker), *replies))
        a, b_ = canon(blocker, replies[0]), canon(blocker, replies[1])
        if a != b_ and not newer_blocked_xreadgroup(blocker, *replies):
            return Divergence(i, _show(blocker) + " (blocked; woken by "
                              + (_show(waker) if waker else "its timeout") + ")",
                              replies[0], replies[1], f"block:{blocker[0].decode()}")
        return None

    # -- the dataset ------------------------------------------------------------------

    def dataset(self, side: Side) -> dict:
        """Everything a key holds, as comparable values, for every database in use."""
        c = side.admin
        out: dict = {}
        for db in DATABASES:
            c.call("SELECT", db)
            keys = sorted(parse(c.call("KEYS", "*")).value, key=lambda r: r.value)
            names = [k.value for k in keys]
            cmds: list[Args] = []
            for k in names:
                cmds += [(b"TYPE", k), (b"OBJECT", b"ENCODING", k), (b"PEXPIRETIME", k)]
            replies = _pipeline(c, cmds)
            types = {}
            reads: list[Args] = []
            owners: list[bytes] = []
            for n, k in enumerate(names):
                t = replies[3 * n][1:-2]
                types[k] = t
                out[(db, k, META)] = (t, replies[3 * n + 1], canon((b"PEXPIRETIME", k), replies[3 * n + 2]))
                for args in _reads(k, t):
                    reads.append(args)
                    owners.append(k)
            for k, args, rep in zip(owners, reads, _pipeline(c, reads), strict=True):
                out[(db, k, _show(args))] = canon(args, rep)
            groups: list[Args] = []
            for k in names:
                if types[k] == b"stream":
                    info = parse(c.call("XINFO", "GROUPS", k))
                    for g in info.value or ():
                        gname = g.value[1].value
                        groups += [(b"XPENDING", k, gname, b"-", b"+", b"100000"),
                                   (b"XINFO", b"CONSUMERS", k, gname)]
            for args, rep in zip(groups, _pipeline(c, groups), strict=True):
                out[(db, args[1] if args[0] == b"XPENDING" else args[2], _show(args))] = canon(args, rep)
        c.call("SELECT", 0)
        return out

    def compare_dataset(self, i: int) -> Divergence | None:
        mine, theirs = (self.dataset(s) for s in self.sides)
        if mine == theirs:
            return None
        for key in sorted(set(mine) | set(theirs), key=repr):
            a, b_ = mine.get(key), theirs.get(key)
            if a != b_:
                db, k, what = key
                return Divergence(i, f"dataset db{db} {k!r} {what}", repr(mine.get(key)).encode(),
                                  repr(theirs.get(key)).encode(), f"dataset:{what.split()[0]}")
        return None


def _reads(k: bytes, t: bytes) -> list[Args]:
    if t == b"string":
        return [(b"GET", k)]
    if t == b"list":
        return [(b"LRANGE", k, b"0", b"-1")]
    if t == b"hash":
        return [(b"HGETALL", k)]
    if t == b"set":
        return [(b"SMEMBERS", k)]
    if t == b"zset":
        return [(b"ZRANGE", k, b"0", b"-1", b"WITHSCORES")]
    if t == b"stream":
        return [(b"XRANGE", k, b"-", b"+"), (b"XINFO", b"STREAM", k), (b"XINFO", b"GROUPS", k),
                (b"XINFO", b"STREAM", k, b"FULL")]
    return []


def _pipeline(c: RawClient, cmds: list[Args]) -> list[bytes]:
    if not cmds:
        return []
    c.send_raw(b"".join(encode_command(a) for a in cmds))
    return [c.read_reply() for _ in cmds]


def _show(args: Args) -> str:
    from .resp import quote_arg
    return " ".join(quote_arg(a) for a in args)
