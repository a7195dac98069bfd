"""String commands: SET and its variants, GET and its variants, counters, ranges, LCS.

Values are ``bytes`` when written whole (OBJECT ENCODING int/embstr/raw follows
from the content, as Redis's tryObjectEncoding decides) and ``bytearray`` once
APPEND or SETRANGE mutated them (always "raw" in Redis). Semantics follow
Redis 7.0's t_string.c, including what is propagated: SET with a relative TTL
becomes ``SET key value PXAT <abs ms>``, GETEX becomes PEXPIREAT/PERSIST/DEL,
INCRBYFLOAT becomes ``SET key value KEEPTTL``.

The handlers for GET, SET, INCR and MSET are on the benchmark's hot path: the
plain forms are handled first, with no option parsing and no allocation beyond
the reply.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rill.protocol.reply import OK, Map, ReplyError
from rill.storage.keyspace import Database, now_ms

from .. import notify as events
from ..client import Client
from .args import (
    INT64_MAX,
    INT64_MIN,
    NOT_FLOAT,
    NOT_INT,
    OVERFLOW,
    SYNTAX_ERR,
    WRONGTYPE,
    string2ll,
)
from .keys import already_expired, delete_expired_now
from .table import TABLE, command
from .values import string_encoding

TOO_BIG = ReplyError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")


def _check_length(c: Client, size: int, append: int) -> None:
    """checkStringLength: the result may not exceed proto-max-bulk-len (master/AOF exempt)."""
    if c.id >= 0 and size + append > c.server.proto_max_bulk_len:
        raise TOO_BIG


def _expire_if_needed(db: Database, key: bytes) -> None:
    """What setKey's lookupKeyWrite does first: an expired key is deleted (and propagated)."""
    if db.expires and key in db.expires:
        db.lookup(key)


# notify's namespace, where its ``notifier`` lives (as evict.py's): compiled, a typed dict
# (strings.pxd), so that SET, MSET and INCR read ``notifier`` with one dict lookup rather
# than a module global and then a module attribute lookup (the same object: a module's
# attributes are its dict's entries, where CONFIG SET notify-keyspace-events or a test sets
# it). In-process callgrind, INCR -P16, execute_all + feed: 3511 -> 3404 Ir a command.
_NOTIFY_NS = vars(events)


def _notify(db: Database, cls: str, event: bytes, key: bytes) -> None:
    notifier = _NOTIFY_NS["notifier"]
    if notifier is not None:
        notifier(db.id, cls, event, key)


def wrote(c: Client, key: bytes, event: bytes, cls: str = "$", changes: int = 1) -> None:
    """The aftermath of a write to ``key``: WATCH, the keyspace event, the dirty count."""
    db = c.db
    db.modified(key)
    _notify(db, cls, event, key)
    c.server.dirty += changes


# -- GET family ---------------------------------------------------------------------
# GET, SET, INCR and MSET are typed by strings.pxd for the compiled build (the database as
# keyspace.pxd's extension type, its fields C reads); a .pxd cannot type a decorated def,
# so these handlers are registered by a call after their definition rather than by @command.
def get(c: Client, argv: list[bytes]):
    db = c.db
    key = argv[1]
    # db.lookup inlined: GET is the hottest read; a TTL or an LFU policy takes the full path.
    # Compiled, the dict is read in C (strings.pxd's _c_data_get; _COMPILED guards the name).
    value = _c_data_get(db.data, key) if _COMPILED else db.data.get(key)  # noqa: F821
    if value is not None:
        if db.expires or db.lfu:
            value = db.lookup(key)
        else:
            db.access[key] = db.clock
    ks = db.keyspace
    if value is None:
        ks.misses += 1
        if ks.on_miss is not None:
            ks.on_miss(db, key)
        return None
    ks.hits += 1
    t = type(value)
    if t is bytes or t is bytearray:
        return value
    raise WRONGTYPE


command("get")(get)


def _get_string(db: Database, key: bytes):
    """getGenericCommand's lookup: the string value, None if missing, WRONGTYPE otherwise."""
    value = db.lookup_read(key)
    if value is None:
        return None
    t = type(value)
    if t is bytes or t is bytearray:
        return value
    raise WRONGTYPE


@command("getdel")
def getdel(c: Client, argv: list[bytes]):
    db = c.db
    key = argv[1]
    value = _get_string(db, key)
    if value is not None:
        db.delete(key)
        server = c.server
        lazy = server.config.bool("lazyfree-lazy-user-del")
        server.rewrite_propagation([b"UNLINK" if lazy else b"DEL", key])
        db.modified(key)
        _notify(db, "g", b"del", key)
        server.dirty += 1
    return value


@command("getset")
def getset(c: Client, argv: list[bytes]):
    db = c.db
    key, value = argv[1], argv[2]
    old = _get_string(db, key)
    db.set(key, value)
    db.modified(key)
    _notify(db, "$", b"set", key)
    server = c.server
    server.dirty += 1
    server.rewrite_propagation([b"SET", key, value])
    return old


@command("mget")
def mget(c: Client, argv: list[bytes]):
    lookup = c.db.lookup_read
    out = []
    for key in argv[1:]:
        value = lookup(key)
        t = type(value)
        out.append(value if t is bytes or t is bytearray else None)
    return out


@command("strlen")
def strlen(c: Client, argv: list[bytes]):
    value = _get_string(c.db, argv[1])
    return 0 if value is None else len(value)


@command("getrange")
def getrange(c: Client, argv: list[bytes]):
    start = string2ll(argv[2])
    end = string2ll(argv[3])
    if start is None or end is None:
        raise NOT_INT
    value = _get_string(c.db, argv[1])
    if value is None:
        return b""
    n = len(value)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if end < 0:
        end = 0
    if end >= n:
        end = n - 1
    if start > end or n == 0:
        return b""
    return bytes(value[start : end + 1])


@command("substr")
def substr(c: Client, argv: list[bytes]):
    return getrange(c, argv)


# -- SET family -----------------------------------------------------------------------
# Flags of parseExtendedStringArgumentsOrReply
F_NX = 1
F_XX = 2
F_EX = 4
F_PX = 8
F_KEEPTTL = 16
F_GET = 32
F_EXAT = 64
F_PXAT = 128
F_PERSIST = 256
_ANY_EXPIRE = F_EX | F_PX | F_EXAT | F_PXAT

# option -> (flag, flags it conflicts with, takes a value, allowed for SET, allowed for GETEX)
_STRING_OPTS = {
    b"nx": (F_NX, F_XX, False, True, False),
    b"xx": (F_XX, F_NX, False, True, False),
    b"get": (F_GET, 0, False, True, False),
    b"keepttl": (F_KEEPTTL, F_PERSIST | _ANY_EXPIRE, False, True, False),
    b"persist": (F_PERSIST, _ANY_EXPIRE | F_KEEPTTL, False, False, True),
    b"ex": (F_EX, F_KEEPTTL | F_PERSIST | F_EXAT | F_PX | F_PXAT, True, True, True),
    b"px": (F_PX, F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PXAT, True, True, True),
    b"exat": (F_EXAT, F_KEEPTTL | F_PERSIST | F_EX | F_PX | F_PXAT, True, True, True),
    b"pxat": (F_PXAT, F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PX, True, True, True),
}


def _parse_string_options(argv: list[bytes], start: int, for_set: bool) -> tuple[int, bytes | None]:
    """Redis's parseExtendedStringArgumentsOrReply: (flags, the expire argument or None)."""
    flags = 0
    expire = None
    j = start
    n = len(argv)
    while j < n:
        spec = _STRING_OPTS.get(argv[j].lower())
        if spec is None:
            raise SYNTAX_ERR
        flag, conflicts, takes_value, on_set, on_get = spec
        if flags & conflicts or not (on_set if for_set else on_get):
            raise SYNTAX_ERR
        if takes_value:
            if j == n - 1:
                raise SYNTAX_ERR
            j += 1
            expire = argv[j]
        flags |= flag
        j += 1
    return flags, expire


def _expire_ms(c: Client, expire: bytes, flags: int) -> int:
    """getExpireMillisecondsOrReply: the absolute expiry time in ms, or an error."""
    ms = string2ll(expire)
    if ms is None:
        raise NOT_INT
    seconds = not flags & (F_PX | F_PXAT)
    if ms <= 0 or (seconds and ms > INT64_MAX // 1000):
        raise ReplyError(f"ERR invalid expire time in '{c.cur_cmd.fullname}' command")
    if seconds:
        ms *= 1000
    if flags & (F_PX | F_EX):
        ms += now_ms()
        if ms > INT64_MAX:  # C's signed overflow wraps negative
            raise ReplyError(f"ERR invalid expire time in '{c.cur_cmd.fullname}' command")
    return ms


def _set_generic(c: Client, argv: list[bytes], flags: int, key: bytes, value: bytes,
                 expire: bytes | None, ok_reply=OK, abort_reply=None):
    """setGenericCommand: SET, SETNX, SETEX, PSETEX."""
    ms = 0
    if expire is not None:
        ms = _expire_ms(c, expire, flags)
    db = c.db
    reply = ok_reply
    if flags & F_GET:
        reply = _get_string(db, key)
    found = db.lookup(key) is not None
    if (flags & F_NX and found) or (flags & F_XX and not found):
        return reply if flags & F_GET else abort_reply
    db.set(key, value, bool(flags & F_KEEPTTL))
    db.modified(key)
    _notify(db, "$", b"set", key)
    server = c.server
    server.dirty += 1
    if expire is not None:
        db.set_expire(key, ms)
        server.rewrite_propagation([b"SET", key, value, b"PXAT", b"%d" % ms])
        _notify(db, "g", b"expire", key)
    elif flags & F_GET:
        # Propagate without GET (any case, possibly repeated).
        server.rewrite_propagation([a for j, a in enumerate(argv) if j < 3 or a.lower() != b"get"])
    return reply


def _set_key_flags(argv: list[bytes]) -> tuple[bytes, ...]:
    """SET's key spec is variable_flags: the flags of one call."""
    # SET overwrites its key, unless GET makes it read the old value first.
    if any(a.lower() == b"get" for a in argv[3:]):
        return (b"RW", b"access", b"update")
    return (b"OW", b"update")


def set_(c: Client, argv: list[bytes]):
    if len(argv) == 3:
        # Plain SET: no options to parse, nothing to propagate differently.
        db = c.db
        key = argv[1]
        data = db.data
        if key in data and not (db.expires and key in db.expires):
            data[key] = argv[2]  # overwrite in place: no TTL to drop, no new key to index
            if db.lfu:
                db.touch(key)
            else:
                db.access[key] = db.clock
            if db.unshared:
                db.unshared.pop(key, None)
        else:
            _expire_if_needed(db, key)
            db.set(key, argv[2])
        if db.watched:
            db.modified(key)
        notifier = _NOTIFY_NS["notifier"]
        if notifier is not None:
            notifier(db.id, "$", b"set", key)
        c.server.dirty += 1
        return OK
    flags, expire = _parse_string_options(argv, 3, True)
    return _set_generic(c, argv, flags, argv[1], argv[2], expire)


command("set", key_flags=_set_key_flags)(set_)


@command("setnx")
def setnx(c: Client, argv: list[bytes]):
    return _set_generic(c, argv, F_NX, argv[1], argv[2], None, 1, 0)


@command("setex")
def setex(c: Client, argv: list[bytes]):
    return _set_generic(c, argv, F_EX, argv[1], argv[3], argv[2])


@command("psetex")
def psetex(c: Client, argv: list[bytes]):
    return _set_generic(c, argv, F_PX, argv[1], argv[3], argv[2])


@command("getex")
def getex(c: Client, argv: list[bytes]):
    flags, expire = _parse_string_options(argv, 2, False)
    db = c.db
    key = argv[1]
    value = _get_string(db, key)
    if value is None:
        return None
    ms = _expire_ms(c, expire, flags) if expire is not None else 0
    server = c.server
    if flags & (F_EXAT | F_PXAT) and already_expired(c, ms):
        delete_expired_now(c, key)
    elif expire is not None:
        db.set_expire(key, ms)
        server.rewrite_propagation([b"PEXPIREAT", key, b"%d" % ms])
        db.modified(key)
        _notify(db, "g", b"expire", key)
        server.dirty += 1
    elif flags & F_PERSIST:
        if db.persist(key):
            db.modified(key)
            server.rewrite_propagation([b"PERSIST", key])
            _notify(db, "g", b"persist", key)
            server.dirty += 1
    return value


def mset(c: Client, argv: list[bytes]):
    n = len(argv)
    if not n & 1:
        raise ReplyError("ERR wrong number of arguments for 'mset' command")
    db = c.db
    data = db.data
    expires = db.expires
    watched = db.watched
    notifier = _NOTIFY_NS["notifier"]
    for j in range(1, n, 2):
        key = argv[j]
        if key in data and not (expires and key in expires):
            data[key] = argv[j + 1]
            # db.touch(key), its LRU case written out (as SET's): compiled, the stamp is one
            # C dict store where touch was a method call per key.
            if db.lfu:
                db.touch(key)
            else:
                db.access[key] = db.clock
            if db.unshared:
                db.unshared.pop(key, None)
        else:
            _expire_if_needed(db, key)
            db.set(key, argv[j + 1])
        if watched:
            db.modified(key)
        if notifier is not None:
            notifier(db.id, "$", b"set", key)
    c.server.dirty += n >> 1
    return OK


command("mset")(mset)


@command("msetnx")
def msetnx(c: Client, argv: list[bytes]):
    n = len(argv)
    if not n & 1:
        raise ReplyError("ERR wrong number of arguments for 'msetnx' command")
    db = c.db
    for j in range(1, n, 2):
        if db.lookup(argv[j]) is not None:
            return 0
    for j in range(1, n, 2):
        key = argv[j]
        db.set(key, argv[j + 1])
        db.modified(key)
        _notify(db, "$", b"set", key)
    c.server.dirty += n >> 1
    return 1


# -- in-place modifications -------------------------------------------------------------
@command("append")
def append(c: Client, argv: list[bytes]):
    db = c.db
    key, tail = argv[1], argv[2]
    value = db.lookup(key)
    if value is None:
        db.set(key, tail)
        total = len(tail)
    else:
        t = type(value)
        if t is bytes:
            _check_length(c, len(value), len(tail))
            value = bytearray(value)
            value += tail
            db.data[key] = value  # dbUnshareStringValue: same key, TTL kept
            if db.unshared:
                db.unshared.pop(key, None)
        elif t is bytearray:
            _check_length(c, len(value), len(tail))
            value += tail
        else:
            raise WRONGTYPE
        total = len(value)
    wrote(c, key, b"append")
    return total


@command("setrange")
def setrange(c: Client, argv: list[bytes]):
    offset = string2ll(argv[2])
    if offset is None:
        raise NOT_INT
    if offset < 0:
        raise ReplyError("ERR offset is out of range")
    db = c.db
    key, chunk = argv[1], argv[3]
    value = db.lookup(key)
    if value is None:
        if not chunk:
            return 0
        _check_length(c, offset, len(chunk))
        value = bytearray(offset + len(chunk))
        db.set(key, value)
    else:
        t = type(value)
        if t is not bytes and t is not bytearray:
            raise WRONGTYPE
        if not chunk:
            return len(value)
        _check_length(c, offset, len(chunk))
        if t is bytes:
            value = bytearray(value)
            db.data[key] = value
            if db.unshared:
                db.unshared.pop(key, None)
        if len(value) < offset:
            value.extend(bytes(offset - len(value)))
    value[offset : offset + len(chunk)] = chunk
    wrote(c, key, b"setrange")
    return len(value)


# -- counters ---------------------------------------------------------------------------
# Canonical integer strings INCR wrote, mapped to their value: parsing bytes is
# the costliest step of a counter update, and the mapping depends only on content.
_INTS: dict[bytes, int] = {}


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"
# Compiled, a counter's new value is written by strings.pxd's ``_c_counter_bytes``, its
# digits into a C buffer (bytes' ``%d`` makes a str first). The name exists only in the
# compiled module; ``_COMPILED`` guards it.


def _incr(c: Client, key: bytes, incr: int) -> int:
    db = c.db
    data = db.data
    value = data.get(key)
    if value is not None:
        if db.expires and key in db.expires:
            value = db.lookup(key)
        else:
            db.touch(key)
    if value is None:
        result = incr
        db.set(key, b"%d" % result)
    else:
        current = _INTS.get(value) if type(value) is bytes else None
        if current is not None:
            pass  # a counter this module wrote: no parsing
        elif type(value) is bytes and value.isdigit() and len(value) < 19 and (value[0] != 48 or len(value) == 1):
            current = int(value)  # a small non-negative canonical integer
        else:
            t = type(value)
            if t is bytes:
                current = string2ll(value)
            elif t is bytearray:
                current = string2ll(bytes(value))
            else:
                raise WRONGTYPE
            if current is None:
                raise NOT_INT
        result = current + incr
        if result > INT64_MAX or result < INT64_MIN:
            raise OVERFLOW
        new = _c_counter_bytes(result) if _COMPILED else b"%d" % result  # noqa: F821 (see _COMPILED)
        data[key] = new  # dbOverwrite: TTL kept
        if db.unshared:  # a new integer object, shared or not by its value alone
            db.unshared.pop(key, None)
        if len(_INTS) >= 4096:
            _INTS.clear()
        _INTS[new] = result
    if db.watched:
        db.modified(key)
    notifier = _NOTIFY_NS["notifier"]
    if notifier is not None:
        notifier(db.id, "$", b"incrby", key)
    c.server.dirty += 1
    return result


def incr(c: Client, argv: list[bytes]):
    # Fast path: a canonical integer string with no TTL to check.
    db = c.db
    key = argv[1]
    data = db.data
    if _COMPILED:
        value = _c_data_get(data, key)  # noqa: F821 (see get)
        # strings.pxd reads the digits in C: cheaper than the cache below, which grows
        # by a new string at every increment and is emptied every 4096.
        result = _c_incremented(value, 1) if type(value) is bytes else None  # noqa: F821
        if result is None or (db.expires and key in db.expires):
            return _incr(c, key, 1)
        # Bumped in place when nothing but the dict and ``value`` refers to it (strings.pxd):
        # no new object, no dealloc of the old one, no dict store.
        if not _c_bump_in_place(value, result, 2):  # noqa: F821
            data[key] = _c_counter_bytes(result)  # noqa: F821
    else:
        # Interpreted, parsing is the costliest step: the value of a string INCR wrote
        # is looked up instead.
        value = data.get(key)
        current = _INTS.get(value) if type(value) is bytes else None
        if current is None or current == INT64_MAX or (db.expires and key in db.expires):
            return _incr(c, key, 1)
        result = current + 1
        data[key] = new = b"%d" % result
        if len(_INTS) >= 4096:
            _INTS.clear()
        _INTS[new] = result
    if db.unshared:
        db.unshared.pop(key, None)
    if db.lfu:
        db.touch(key)
    elif _COMPILED:
        _c_stamp(db.access, key, db.clock)  # noqa: F821 (a read where the clock is unchanged)
    else:
        db.access[key] = db.clock
    if db.watched:
        db.modified(key)
    notifier = _NOTIFY_NS["notifier"]
    if notifier is not None:
        notifier(db.id, "$", b"incrby", key)
    c.server.dirty += 1
    return result


command("incr")(incr)

if _COMPILED:
    # The dispatcher's C entries for the typed handlers (strings.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"get"], get, _e_get)  # noqa: F821
    _c_set_entry(TABLE.commands[b"set"], set_, _e_set)  # noqa: F821
    _c_set_entry(TABLE.commands[b"mset"], mset, _e_mset)  # noqa: F821
    _c_set_entry(TABLE.commands[b"incr"], incr, _e_incr)  # noqa: F821


@command("decr")
def decr(c: Client, argv: list[bytes]):
    return _incr(c, argv[1], -1)


@command("incrby")
def incrby(c: Client, argv: list[bytes]):
    n = string2ll(argv[2])
    if n is None:
        raise NOT_INT
    return _incr(c, argv[1], n)


@command("decrby")
def decrby(c: Client, argv: list[bytes]):
    n = string2ll(argv[2])
    if n is None:
        raise NOT_INT
    if n == INT64_MIN:
        raise ReplyError("ERR decrement would overflow")
    return _incr(c, argv[1], -n)


# -- INCRBYFLOAT: x87 80-bit long double arithmetic, emulated exactly --------------------
# Redis computes INCRBYFLOAT in C's long double (on x86: 64-bit significand,
# 15-bit exponent), parses with strtold and prints with "%.17Lf" before
# trimming zeros. Doubles would answer 0.1+0.2 = 0.30000000000000004 where
# Redis says 0.3, so values are exact Fractions rounded to that format.
_LD_MANT = 64
_LD_MIN_EXP = -16445  # exponent of the smallest denormal's unit (2**-16445)
_LD_MAX_EXP = 16384 - _LD_MANT  # largest exponent of a 64-bit significand
_MAX_LONG_DOUBLE_CHARS = 5 * 1024
_INF = float("inf")

_STRTOLD = re.compile(
    rb"([+-]?)(?:"
    rb"([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?"  # decimal (validated below)
    rb"|0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?[0-9]+))?"  # hex
    rb"|([iI][nN][fF](?:[iI][nN][iI][tT][yY])?))"
)


def _big_int(digits: bytes, base: int = 10) -> int:
    """int() of a long digit string (Python refuses > 4300 decimal digits at once)."""
    if len(digits) <= 4000:
        return int(digits, base) if digits else 0
    half = len(digits) // 2
    return _big_int(digits[:half], base) * base ** (len(digits) - half) + _big_int(digits[half:], base)


def round_long_double(x: Fraction) -> Fraction | float:
    """Round an exact value to the nearest long double (ties to even); inf on overflow."""
    if x == 0:
        return Fraction(0)
    neg = x < 0
    num, den = abs(x.numerator), x.denominator
    k = num.bit_length() - den.bit_length()
    if (num << max(-k, 0)) < (den << max(k, 0)):
        k -= 1  # now 2**k <= |x| < 2**(k+1)
    e = max(k - (_LD_MANT - 1), _LD_MIN_EXP)
    if e >= 0:
        q, r = divmod(num, den << e)
        half = den << e
    else:
        q, r = divmod(num << -e, den)
        half = den
    twice = 2 * r
    if twice > half or (twice == half and q & 1):
        q += 1
    if q == 1 << _LD_MANT:
        q >>= 1
        e += 1
    if e > _LD_MAX_EXP:
        return -_INF if neg else _INF
    v = Fraction(q << e) if e >= 0 else Fraction(q, 1 << -e)
    return -v if neg else v


def parse_long_double(s: bytes) -> Fraction | float | None:
    """Redis's string2ld: strtold over the whole string; None when Redis refuses it.

    Refused: empty or >= 5 KiB, leading space, trailing garbage, NaN, and
    values that overflow or underflow to zero (ERANGE).
    """
    if not s or len(s) >= _MAX_LONG_DOUBLE_CHARS:
        return None
    m = _STRTOLD.fullmatch(s)
    if m is None:
        return None
    sign, ip, fp, dexp, hip, hfp, bexp, inf = m.groups()
    neg = sign == b"-"
    if inf is not None:
        return -_INF if neg else _INF
    if hip is not None:
        if not hip and not hfp:
            return None
        frac = hfp or b""
        mant = _big_int(hip + frac, 16)
        exp2 = (int(bexp) if bexp else 0) - 4 * len(frac)
        if mant == 0:
            return Fraction(0)
        top = mant.bit_length() + exp2
        if top > 16400:
            return None
        if top < -16500:
            return None
        value = Fraction(mant << exp2) if exp2 >= 0 else Fraction(mant, 1 << -exp2)
    else:
        if not ip and not fp:
            return None
        frac = fp or b""
        digits = (ip + frac).lstrip(b"0")
        if not digits:
            return Fraction(0)
        exp10 = (int(dexp) if dexp else 0) - len(frac)
        magnitude = len(digits) + exp10  # 10**(magnitude-1) <= |x| < 10**magnitude
        if magnitude > 4940:
            return None  # overflow: ERANGE with HUGE_VAL
        if magnitude < -4960:
            return None  # underflow to zero: ERANGE
        mant = _big_int(digits)
        value = Fraction(mant * 10**exp10) if exp10 >= 0 else Fraction(mant, 10**-exp10)
    rounded = round_long_double(-value if neg else value)
    if rounded == 0 or type(rounded) is float:
        return None  # underflowed to zero, or overflowed
    return rounded


def _digits(n: int) -> bytes:
    if n < 10**4000:
        return b"%d" % n
    hi, lo = divmod(n, 10**2000)
    return _digits(hi) + (b"%d" % lo).rjust(2000, b"0")


def format_long_double_human(x: Fraction) -> bytes:
    """ld2string's human-friendly mode: "%.17Lf", then trailing zeros (and '.') trimmed."""
    neg = x < 0
    scaled = abs(x) * 10**17
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    digits = _digits(q).rjust(18, b"0")
    text = digits[:-17] + b"." + digits[-17:]
    text = text.rstrip(b"0").rstrip(b".")
    if neg and text != b"0":
        text = b"-" + text
    return text


@command("incrbyfloat")
def incrbyfloat(c: Client, argv: list[bytes]):
    db = c.db
    key = argv[1]
    value = db.lookup(key)
    if value is None:
        current: Fraction | float | None = Fraction(0)
    else:
        t = type(value)
        if t is not bytes and t is not bytearray:
            raise WRONGTYPE
        current = parse_long_double(bytes(value))
        if current is None:
            raise NOT_FLOAT
    incr = parse_long_double(argv[2])
    if incr is None:
        raise NOT_FLOAT
    if type(current) is float or type(incr) is float:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    result = round_long_double(current + incr)  # type: ignore[operator]
    if type(result) is float:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    new = format_long_double_human(result)  # type: ignore[arg-type]
    if value is None:
        db.set(key, new)
    else:
        db.data[key] = new
    # Redis keeps the formatted number a string object: an integral result is an embstr
    # (refcount 1), not the int its digits would make. Its replicas get a SET, so an int.
    if string_encoding(new) == b"int":
        db.unshared[key] = b"embstr"
    elif db.unshared:
        db.unshared.pop(key, None)
    db.modified(key)
    _notify(db, "$", b"incrbyfloat", key)
    server = c.server
    server.dirty += 1
    server.rewrite_propagation([b"SET", key, new, b"KEEPTTL"])
    return new


# -- LCS --------------------------------------------------------------------------------
def _lcs_rows(a: bytes, b: bytes, keep: bool) -> list[int]:
    """The LCS table of a and b, one big int per row (bit-parallel, Allison-Dix/Hyyrö).

    Bit j-1 of row i is 0 exactly when LCS(a[:i], b[:j]) > LCS(a[:i], b[:j-1]), so
    LCS(i, j) is the number of zero bits below j. Each row costs a few big-int
    operations instead of len(b) Python steps.
    """
    m = len(b)
    full = (1 << m) - 1
    masks: dict[int, int] = {}
    rev = b[::-1]
    for ch in set(b):
        # '1' where b has ch, '0' elsewhere, most significant first: the mask of ch
        table = bytes(49 if x == ch else 48 for x in range(256))
        masks[ch] = int(rev.translate(table), 2)
    v = full
    rows = [v]
    for ch in a:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
        if keep:
            rows.append(v)
    if not keep:
        rows.append(v)
    return rows


@command("lcs")
def lcs(c: Client, argv: list[bytes]):
    db = c.db
    a = db.lookup_read(argv[1])
    b = db.lookup_read(argv[2])
    for v in (a, b):
        if v is not None and type(v) is not bytes and type(v) is not bytearray:
            raise ReplyError("ERR The specified keys must contain string values")
    a = bytes(a) if a is not None else b""
    b = bytes(b) if b is not None else b""
    getlen = getidx = withmatchlen = False
    minmatchlen = 0
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        if opt == b"idx":
            getidx = True
        elif opt == b"len":
            getlen = True
        elif opt == b"withmatchlen":
            withmatchlen = True
        elif opt == b"minmatchlen" and j + 1 < n:
            minmatchlen = string2ll(argv[j + 1])
            if minmatchlen is None:
                raise NOT_INT
            if minmatchlen < 0:
                minmatchlen = 0
            j += 1
        else:
            raise SYNTAX_ERR
        j += 1
    if getlen and getidx:
        raise ReplyError("ERR If you want both the length and indexes, please just use IDX.")
    alen, blen = len(a), len(b)
    if (alen + 1) * (blen + 1) * 4 > c.server.proto_max_bulk_len:
        raise ReplyError("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    rows = _lcs_rows(a, b, keep=getidx or not getlen)
    total = blen - rows[-1].bit_count()
    if getlen and not getidx:
        return total

    def table(i: int, j: int) -> int:  # LCS length of a[:i] and b[:j]
        return j - (rows[i] & ((1 << j) - 1)).bit_count()

    # Walk back from the end, collecting the string and the matching ranges.
    result = bytearray(total)
    idx = total
    matches = []
    i, jj = alen, blen
    a_start = alen  # alen means "no range open"
    a_end = b_start = b_end = 0
    while i > 0 and jj > 0:
        emit = False
        if a[i - 1] == b[jj - 1]:
            result[idx - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = jj - 1
            elif a_start == i and b_start == jj:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            i -= 1
            jj -= 1
        else:
            if table(i - 1, jj) > table(i, jj - 1):
                i -= 1
            else:
                jj -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if minmatchlen == 0 or match_len >= minmatchlen:
                item = [[a_start, a_end], [b_start, b_end]]
                if withmatchlen:
                    item.append(match_len)
                matches.append(item)
            a_start = alen
    if getidx:
        return Map([(b"matches", matches), (b"len", total)])
    return bytes(result)
