"""Generic keyspace commands: DEL, EXISTS, TYPE, RENAME, MOVE, COPY, KEYS, SCAN,
RANDOMKEY, TOUCH and the expiry family (EXPIRE..., TTL..., PERSIST).

Semantics follow Redis 7.0's db.c and expire.c: which lookups count keyspace
hits/misses (reads) and which only expire (writes), when ``server.dirty`` moves
(it drives propagation), and how expiry commands are propagated (always as an
absolute ``PEXPIREAT``, or as ``DEL``/``UNLINK`` when the time is already past).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rill.protocol.reply import OK, ReplyError, Status
from rill.storage.glob import compile_glob
from rill.storage.keyspace import Database, now_ms

from .. import notify as events
from ..client import Client
from .args import DB_RANGE, INT64_MAX, INT64_MIN, NO_SUCH_KEY, SYNTAX_ERR, WRONGTYPE, string2ll
from .table import command
from .values import LAZYFREE_THRESHOLD, free_effort, unshared_copy

SAME_OBJECT = ReplyError("ERR source and destination objects are the same")
INVALID_CURSOR = ReplyError("ERR invalid cursor")
NOT_INT = ReplyError("ERR value is not an integer or out of range")

def type_name(value: Any) -> bytes:
    """TYPE's answer for a stored value."""
    t = type(value)
    if t is bytes or t is bytearray:
        return b"string"
    return value.type_name


def copy_value(value: Any) -> Any:
    """A deep copy for COPY: bytes are immutable and shared, everything else duplicated."""
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:
        return bytearray(value)
    return value.copy()


INT_RANGE = ReplyError("ERR value is out of range, value must between -2147483648 and 2147483647")


def _get_int32(arg: bytes) -> int:
    """getIntFromObjectOrReply: an int64 that must also fit a C int."""
    v = string2ll(arg)
    if v is None:
        raise NOT_INT
    if v < -(2**31) or v > 2**31 - 1:
        raise INT_RANGE
    return v


def _other_db(c: Client, arg: bytes) -> Database:
    dbid = _get_int32(arg)
    keyspace = c.server.keyspace
    if dbid < 0 or dbid >= len(keyspace):
        raise DB_RANGE
    return keyspace[dbid]


# -- DEL / UNLINK / EXISTS / TYPE / TOUCH ----------------------------------------
def _delete_keys(c: Client, argv: list[bytes], lazy: bool) -> int:
    db = c.db
    deleted = 0
    for key in argv[1:]:
        value = db.lookup(key)  # an expired key is expired (and propagated) first, not counted
        if lazy and value is not None and free_effort(value, c.server) > LAZYFREE_THRESHOLD:
            db.keyspace.lazyfreed_objects += 1
        if db.delete(key):
            db.modified(key)
            if events.notifier is not None:
                events.notifier(db.id, "g", b"del", key)
            deleted += 1
    c.server.dirty += deleted
    return deleted


@command("del")
def del_(c: Client, argv: list[bytes]):
    return _delete_keys(c, argv, c.server.config.bool("lazyfree-lazy-user-del"))


@command("unlink")
def unlink(c: Client, argv: list[bytes]):
    return _delete_keys(c, argv, True)


def _count_existing(lookup: Callable[[bytes], Any], keys: list[bytes]) -> int:
    n = 0
    for key in keys:
        if lookup(key) is not None:
            n += 1
    return n


@command("exists")
def exists(c: Client, argv: list[bytes]):
    return _count_existing(c.db.peek_read, argv[1:])  # not an access: idle time unchanged


@command("touch")
def touch(c: Client, argv: list[bytes]):
    return _count_existing(c.db.lookup_read, argv[1:])


@command("type")
def type_(c: Client, argv: list[bytes]):
    value = c.db.peek_read(argv[1])
    return Status(b"none" if value is None else type_name(value))


# -- RENAME / RENAMENX / MOVE / COPY ----------------------------------------------
def _rename(c: Client, argv: list[bytes], nx: bool):
    db = c.db
    src, dst = argv[1], argv[2]
    value = db.lookup(src)
    if value is None:
        raise NO_SUCH_KEY
    if src == dst:
        return 0 if nx else OK
    expire = db.expires.get(src)
    if db.lookup(dst) is not None:
        if nx:
            return 0
        db.delete(dst)
    stamp = db.access.get(src)  # the same object moves: its LRU/LFU stamp goes along
    own = db.unshared.get(src) if db.unshared else None  # and what it is
    db.delete(src)
    db.set(dst, value)
    if stamp is not None:
        db.access[dst] = stamp
    if own is not None:
        db.unshared[dst] = own
    if expire is not None:
        db.set_expire(dst, expire)
    db.modified(src)
    db.modified(dst)
    if events.notifier is not None:
        events.notifier(db.id, "g", b"rename_from", src)
        events.notifier(db.id, "g", b"rename_to", dst)
    c.server.dirty += 1
    return 1 if nx else OK


@command("rename")
def rename(c: Client, argv: list[bytes]):
    return _rename(c, argv, False)


@command("renamenx")
def renamenx(c: Client, argv: list[bytes]):
    return _rename(c, argv, True)


@command("move")
def move(c: Client, argv: list[bytes]):
    src = c.db
    dst = _other_db(c, argv[2])
    if src is dst:
        raise SAME_OBJECT
    key = argv[1]
    value = src.lookup(key)
    if value is None:
        return 0
    expire = src.expires.get(key)
    if dst.lookup(key) is not None:
        return 0
    dst.set(key, value)
    stamp = src.access.get(key)
    if stamp is not None:
        dst.access[key] = stamp
    if src.unshared and (own := src.unshared.get(key)) is not None:
        dst.unshared[key] = own
    if expire is not None:
        dst.set_expire(key, expire)
    src.delete(key)
    src.modified(key)
    dst.modified(key)
    c.server.blocking.signal(dst.id, key)  # the dispatcher only signals the client's db
    if events.notifier is not None:
        events.notifier(src.id, "g", b"move_from", key)
        events.notifier(dst.id, "g", b"move_to", key)
    c.server.dirty += 1
    return 1


@command("copy")
def copy(c: Client, argv: list[bytes]):
    src = dst = c.db
    replace = False
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < n:
            dst = _other_db(c, argv[j + 1])
            j += 1
        else:
            raise SYNTAX_ERR
        j += 1
    key, newkey = argv[1], argv[2]
    if src is dst and key == newkey:
        raise SAME_OBJECT
    value = src.lookup_read(key)
    if value is None:
        return 0
    expire = src.expires.get(key)
    if dst.lookup(newkey) is not None:
        if not replace:
            return 0
        dst.delete(newkey)
    dst.set(newkey, copy_value(value))
    if (own := unshared_copy(src, key, value)) is not None:
        dst.unshared[newkey] = own
    if expire is not None:
        dst.set_expire(newkey, expire)
    dst.modified(newkey)
    if dst is not src:
        c.server.blocking.signal(dst.id, newkey)
    if events.notifier is not None:
        events.notifier(dst.id, "g", b"copy_to", newkey)
    c.server.dirty += 1
    return 1


# -- RANDOMKEY / KEYS / SCAN ------------------------------------------------------
@command("randomkey")
def randomkey(c: Client, argv: list[bytes]):
    return c.db.random_key()


@command("keys")
def keys(c: Client, argv: list[bytes]):
    return c.db.keys(argv[1])


_C_SPACE = b" \t\n\v\f\r"
ULONG_MAX = 2**64 - 1


def parse_cursor(arg: bytes) -> int:
    """A SCAN cursor as Redis reads it: strtoul in base 10, whole string, no leading space."""
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]  # strtoul stops at the C string's end
    if not arg:
        return 0
    if arg[0] in _C_SPACE:
        raise INVALID_CURSOR
    neg = arg[0] == 45
    digits = arg[1:] if arg[0] in (43, 45) else arg
    if not digits.isdigit():
        raise INVALID_CURSOR
    v = int(digits)
    if v > ULONG_MAX:
        raise INVALID_CURSOR
    return (-v) & ULONG_MAX if neg else v


@command("scan")
def scan(c: Client, argv: list[bytes]):
    cursor = parse_cursor(argv[1])
    count = 10
    pattern = None
    typename = None
    i = 2
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        more = i + 1 < n
        if opt == b"count" and more:
            count = string2ll(argv[i + 1])
            if count is None:
                raise NOT_INT
            if count < 1:
                raise SYNTAX_ERR
        elif opt == b"match" and more:
            pattern = argv[i + 1]
            if pattern == b"*":
                pattern = None  # matches everything, the empty key included
        elif opt == b"type" and more:
            typename = argv[i + 1].lower()
        else:
            raise SYNTAX_ERR
        i += 2
    db = c.db
    cursor, found = db.scan(cursor, count)
    match = compile_glob(pattern) if pattern is not None else None
    out = []
    for key in found:
        if match is not None and not match(key):
            continue
        if typename is not None:
            value = db.lookup_read(key)
            if (b"none" if value is None else type_name(value)) != typename:
                continue
        if db.expires and db.is_expired(key):
            db.lookup(key)  # expire it (and propagate the DEL)
            continue
        out.append(key)
    return [b"%d" % cursor, out]


# -- expiry -------------------------------------------------------------------------
def _invalid_expire(c: Client) -> ReplyError:
    return ReplyError(f"ERR invalid expire time in '{c.cur_cmd.fullname}' command")


NX, XX, GT, LT = 1, 2, 4, 8
_EXPIRE_OPTS = {b"nx": NX, b"xx": XX, b"gt": GT, b"lt": LT}


def already_expired(c: Client, when: int) -> bool:
    """checkAlreadyExpired: a time in the past deletes, except while loading or on a replica."""
    server = c.server
    return when <= now_ms() and not server.loading and server.keyspace.expire_allowed


def delete_expired_now(c: Client, key: bytes) -> None:
    """An expiry set in the past: delete the key and propagate DEL (or UNLINK)."""
    db = c.db
    db.delete(key)
    server = c.server
    server.dirty += 1
    lazy = server.config.bool("lazyfree-lazy-expire")
    server.rewrite_propagation([b"UNLINK" if lazy else b"DEL", key])
    db.modified(key)
    if events.notifier is not None:
        events.notifier(db.id, "g", b"del", key)


def _expire_generic(c: Client, argv: list[bytes], basetime: int, seconds: bool):
    flags = 0
    for opt in argv[3:]:
        f = _EXPIRE_OPTS.get(opt.lower())
        if f is None:
            raise ReplyError(b"ERR Unsupported option " + opt)
        flags |= f
    if flags & NX and flags & (XX | GT | LT):
        raise ReplyError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if flags & GT and flags & LT:
        raise ReplyError("ERR GT and LT options at the same time are not compatible")
    when = string2ll(argv[2])
    if when is None:
        raise NOT_INT
    if seconds:
        # C's LLONG_MIN / 1000 truncates toward zero
        if when > INT64_MAX // 1000 or when < -(-INT64_MIN // 1000):
            raise _invalid_expire(c)
        when *= 1000
    if when > INT64_MAX - basetime:
        raise _invalid_expire(c)
    when += basetime
    db = c.db
    key = argv[1]
    if db.lookup(key) is None:
        return 0
    if flags:
        current = db.expires.get(key)
        if flags & NX and current is not None:
            return 0
        if flags & XX and current is None:
            return 0
        if flags & GT and (current is None or when <= current):
            return 0
        if flags & LT and current is not None and when >= current:
            return 0
    if already_expired(c, when):
        delete_expired_now(c, key)
        return 1
    db.set_expire(key, when)
    if argv[0].lower() != b"pexpireat":
        c.server.rewrite_propagation([b"PEXPIREAT", key, b"%d" % when, *argv[3:]])
    db.modified(key)
    if events.notifier is not None:
        events.notifier(db.id, "g", b"expire", key)
    c.server.dirty += 1
    return 1


@command("expire")
def expire(c: Client, argv: list[bytes]):
    return _expire_generic(c, argv, now_ms(), True)


@command("pexpire")
def pexpire(c: Client, argv: list[bytes]):
    return _expire_generic(c, argv, now_ms(), False)


@command("expireat")
def expireat(c: Client, argv: list[bytes]):
    return _expire_generic(c, argv, 0, True)


@command("pexpireat")
def pexpireat(c: Client, argv: list[bytes]):
    return _expire_generic(c, argv, 0, False)


def _ttl(c: Client, key: bytes, ms: bool, absolute: bool) -> int:
    db = c.db
    if db.peek_read(key) is None:
        return -2
    when = db.expires.get(key)
    if when is None:
        return -1
    ttl = when if absolute else when - now_ms()
    if ttl < 0:
        ttl = 0
    return ttl if ms else (ttl + 500) // 1000


@command("ttl")
def ttl(c: Client, argv: list[bytes]):
    return _ttl(c, argv[1], False, False)


@command("pttl")
def pttl(c: Client, argv: list[bytes]):
    return _ttl(c, argv[1], True, False)


@command("expiretime")
def expiretime(c: Client, argv: list[bytes]):
    return _ttl(c, argv[1], False, True)


@command("pexpiretime")
def pexpiretime(c: Client, argv: list[bytes]):
    return _ttl(c, argv[1], True, True)


@command("persist")
def persist(c: Client, argv: list[bytes]):
    db = c.db
    key = argv[1]
    if db.lookup(key) is None or not db.persist(key):
        return 0
    db.modified(key)
    if events.notifier is not None:
        events.notifier(db.id, "g", b"persist", key)
    c.server.dirty += 1
    return 1


__all__ = ["WRONGTYPE", "copy_value", "type_name", "parse_cursor"]
