"""Hash commands (Redis 7.0's t_hash.c), replies byte-for-byte in RESP2 and RESP3.

Hashes live in the keyspace as ``storage.hash.HashValue``; an emptied hash is
deleted at once. HINCRBYFLOAT computes in emulated x87 long double (as Redis
does) and is propagated as HSET with the formatted result.
"""

from __future__ import annotations

import random

from rill.protocol.reply import EMPTY_ARRAY, OK, Map, Raw, ReplyError
from rill.storage import hash as _hash
from rill.storage.glob import compile_glob
from rill.storage.hash import HashValue

from .. import notify as events
from ..client import Client, reply_cap
from . import keys as _keys
from .args import NOT_FLOAT, NOT_INT, OVERFLOW, SYNTAX_ERR, WRONGTYPE, string2ll
from .strings import format_long_double_human, parse_long_double, round_long_double
from .table import TABLE, command

NOT_INT_HASH = ReplyError("ERR hash value is not an integer")
NOT_FLOAT_HASH = ReplyError("ERR hash value is not a float")
NAN_OR_INF = ReplyError("ERR value is NaN or Infinity")
WOULD_BE_NAN = ReplyError("ERR increment would produce NaN or Infinity")
OUT_OF_RANGE = ReplyError("ERR value is out of range")
LONG_MAX = 2**63 - 1
COUNT_RANGE = ReplyError(
    f"ERR value is out of range, value must between {-LONG_MAX} and {LONG_MAX}"
)
EMPTY_SCAN = Raw(b"*2\r\n$1\r\n0\r\n*0\r\n")


# -- helpers -------------------------------------------------------------------
def _notify(c: Client, event: bytes, key: bytes, cls: str = "h") -> None:
    notifier = events.notifier
    if notifier is not None:
        notifier(c.db.id, cls, event, key)


def _read(c: Client, key: bytes) -> HashValue | None:
    h = c.db.lookup_read(key)
    if h is None or type(h) is HashValue:
        return h
    raise WRONGTYPE


def _write(c: Client, key: bytes) -> HashValue | None:
    h = c.db.lookup(key)
    if h is None or type(h) is HashValue:
        return h
    raise WRONGTYPE


def _write_or_create(c: Client, key: bytes) -> HashValue:
    """hashTypeLookupWriteOrCreate: the hash at ``key``, created (stored) if missing."""
    db = c.db
    h = db.lookup(key)
    if h is None:
        h = HashValue()
        db.set(key, h)
    elif type(h) is not HashValue:
        raise WRONGTYPE
    return h


def _changed(c: Client, key: bytes, event: bytes, dirty: int) -> None:
    db = c.db
    if db.watched and key in db.watched:
        db.modified(key)
    if events.notifier is not None:
        _notify(c, event, key)
    c.server.dirty += dirty


# -- writes --------------------------------------------------------------------
def _hset(c: Client, argv: list[bytes]) -> int:
    n = len(argv)
    if n & 1:
        raise ReplyError(f"ERR wrong number of arguments for '{argv[0].lower().decode()}' command")
    key = argv[1]
    h = _write_or_create(c, key)
    if h.listpack:
        limit = _hash.max_listpack_value
        for i in range(2, n):
            if len(argv[i]) > limit:
                h.listpack = False
                break
    created = 0
    if n == 4:
        field = argv[2]
        if field in h:
            h[field] = argv[3]
        else:
            created = h.put(field, argv[3])
    else:
        put = h.put
        for i in range(2, n, 2):
            created += put(argv[i], argv[i + 1])
    _changed(c, key, b"hset", (n - 2) >> 1)
    return created


def hset(c: Client, argv: list[bytes]):
    if len(argv) != 4:
        return _hset(c, argv)
    # One field: the hot path of every producer, kept to a few dict operations.
    key, field, value = argv[1], argv[2], argv[3]
    db = c.db
    h = db.lookup(key)
    if h is None:
        h = HashValue()
        db.set(key, h)
    elif type(h) is not HashValue:
        raise WRONGTYPE
    if field in h:
        if h.listpack and (len(field) > _hash.max_listpack_value or len(value) > _hash.max_listpack_value):
            h.listpack = False
        h[field] = value
        created = 0
    else:
        if h.listpack and (len(field) > _hash.max_listpack_value or len(value) > _hash.max_listpack_value):
            h.listpack = False
        created = h.put(field, value)
    if db.watched and key in db.watched:
        db.modified(key)
    if events.notifier is not None:
        _notify(c, b"hset", key)
    c.server.dirty += 1
    return created


command("hset")(hset)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
_COMPILED = type(_probe).__name__ != "function"

if _COMPILED:
    # The dispatcher's C entries for the typed handlers (hashes.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"hset"], hset, _e_hset)  # noqa: F821


@command("hmset")
def hmset(c: Client, argv: list[bytes]):
    _hset(c, argv)
    return OK


@command("hsetnx")
def hsetnx(c: Client, argv: list[bytes]):
    key, field, value = argv[1], argv[2], argv[3]
    h = _write_or_create(c, key)
    if field in h:
        return 0
    h.check_sizes((field, value))
    h.put(field, value)
    _changed(c, key, b"hset", 1)
    return 1


@command("hdel")
def hdel(c: Client, argv: list[bytes]):
    key = argv[1]
    h = _write(c, key)
    if h is None:
        return 0
    deleted = 0
    removed_key = False
    for field in argv[2:]:
        if h.delete_field(field):
            deleted += 1
            if not h:
                c.db.delete(key)
                removed_key = True
                break
    if deleted:
        _changed(c, key, b"hdel", deleted)
        if removed_key:
            _notify(c, b"del", key, "g")
    return deleted


@command("hincrby")
def hincrby(c: Client, argv: list[bytes]):
    incr = string2ll(argv[3])
    if incr is None:
        raise NOT_INT
    key, field = argv[1], argv[2]
    h = _write_or_create(c, key)
    current = h.get(field)
    if current is None:
        value = 0
    else:
        value = string2ll(current)
        if value is None:
            raise NOT_INT_HASH
    new = value + incr
    if new > LONG_MAX or new < -LONG_MAX - 1:
        raise OVERFLOW
    h.put_checked(field, b"%d" % new)
    _changed(c, key, b"hincrby", 1)
    return new


@command("hincrbyfloat")
def hincrbyfloat(c: Client, argv: list[bytes]):
    incr = parse_long_double(argv[3])
    if incr is None:
        raise NOT_FLOAT
    if type(incr) is float:
        raise NAN_OR_INF
    key, field = argv[1], argv[2]
    h = _write_or_create(c, key)
    current = h.get(field)
    if current is None:
        value = 0
    else:
        value = parse_long_double(current)
        if value is None:
            raise NOT_FLOAT_HASH
        if type(value) is float:
            raise WOULD_BE_NAN
    result = round_long_double(value + incr)
    if type(result) is float:
        raise WOULD_BE_NAN
    new = format_long_double_human(result)  # type: ignore[arg-type]
    h.put_checked(field, new)
    _changed(c, key, b"hincrbyfloat", 1)
    c.server.rewrite_propagation([b"HSET", key, field, new])
    return new


# -- reads ---------------------------------------------------------------------
@command("hget")
def hget(c: Client, argv: list[bytes]):
    db = c.db
    h = db.lookup_read(argv[1])
    if h is None:
        return None
    if type(h) is not HashValue:
        raise WRONGTYPE
    return h.get(argv[2])


@command("hmget")
def hmget(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in argv[2:]]


@command("hlen")
def hlen(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    return 0 if h is None else len(h)


@command("hstrlen")
def hstrlen(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


@command("hexists")
def hexists(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    return 0 if h is None else int(argv[2] in h)


@command("hkeys")
def hkeys(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    return EMPTY_ARRAY if h is None else list(h)


@command("hvals")
def hvals(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    return EMPTY_ARRAY if h is None else list(h.values())


@command("hgetall")
def hgetall(c: Client, argv: list[bytes]):
    h = _read(c, argv[1])
    return Map() if h is None else Map(h)


# -- HRANDFIELD ------------------------------------------------------------------
def _pairs_reply(c: Client, fields: list[bytes], h: HashValue, withvalues: bool) -> list:
    """Fields (and values): flat in RESP2, [field, value] pairs in RESP3."""
    if not withvalues:
        return fields
    if c.resp3:
        return [[f, h[f]] for f in fields]
    out: list[bytes] = []
    for f in fields:
        out.append(f)
        out.append(h[f])
    return out


@command("hrandfield")
def hrandfield(c: Client, argv: list[bytes]):
    n = len(argv)
    if n < 3:
        h = _read(c, argv[1])
        if h is None:
            return None
        return random.choice(tuple(h))
    count = string2ll(argv[2])
    if count is None:
        raise NOT_INT
    if count < -LONG_MAX:
        raise COUNT_RANGE
    withvalues = False
    if n > 4 or (n == 4 and argv[3].lower() != b"withvalues"):
        raise SYNTAX_ERR
    if n == 4:
        withvalues = True
        if count < -(LONG_MAX // 2) or count > LONG_MAX // 2:  # C division truncates
            raise OUT_OF_RANGE
    h = _read(c, argv[1])
    if h is None or count == 0:
        return EMPTY_ARRAY
    if count < 0 or count == 1:
        fields = tuple(h)
        # a field (and value): at least one (two) 6-byte bulk strings each
        picks = random.choices(fields, k=reply_cap(c, -count, 12 if withvalues else 6) if count < 0 else 1)
        return _pairs_reply(c, picks, h, withvalues)
    if count >= len(h):
        return _pairs_reply(c, list(h), h, withvalues)
    if h.listpack:
        # Redis samples a listpack in order (lpRandomPairsUnique)
        chosen = set(random.sample(range(len(h)), count))
        fields = [f for i, f in enumerate(h) if i in chosen]
    else:
        fields = random.sample(tuple(h), count)
    return _pairs_reply(c, fields, h, withvalues)


# -- HSCAN -----------------------------------------------------------------------
def parse_scan_options(argv: list[bytes], start: int) -> tuple[int, bytes | None]:
    """COUNT and MATCH of HSCAN/SSCAN/ZSCAN (TYPE is only for SCAN: a syntax error)."""
    count = 10
    pattern = None
    i = start
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        if opt == b"count" and i + 1 < n:
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v < 1:
                raise SYNTAX_ERR
            count = v
        elif opt == b"match" and i + 1 < n:
            pattern = None if argv[i + 1] == b"*" else argv[i + 1]
        else:
            raise SYNTAX_ERR
        i += 2
    return count, pattern


@command("hscan")
def hscan(c: Client, argv: list[bytes]):
    cursor = _keys.parse_cursor(argv[2])
    h = _read(c, argv[1])
    if h is None:
        return EMPTY_SCAN
    count, pattern = parse_scan_options(argv, 3)
    if h.listpack:
        fields = list(h)
        cursor = 0
    else:
        cursor, fields = h.scan_page(cursor, count)
    if pattern is not None:
        match = compile_glob(pattern)
        fields = [f for f in fields if match(f)]
    out: list[bytes] = []
    for f in fields:
        out.append(f)
        out.append(h[f])
    return [b"%d" % cursor, out]
