"""Set commands (Redis 7.0's t_set.c), replies byte-for-byte in RESP2 and RESP3.

Sets live in the keyspace as ``storage.set.SetValue``; an emptied set is
deleted at once. Results of SUNION/SDIFF/SINTERSTORE... are built as Redis
builds them (an intset first, converted when a member or the size demands),
so an all-integer result comes back in ascending order, as Redis's does.

SPOP is propagated as Redis 7.0.15 does it: ``SREM key member`` without a
count; with a count, one ``SREM`` per popped member (wrapped in MULTI/EXEC),
or ``DEL key`` when the count takes the whole set.
"""

from __future__ import annotations

import random

from rill.protocol.reply import EMPTY_ARRAY, ReplyError, Set
from rill.storage import set as _set
from rill.storage.glob import compile_glob
from rill.storage.set import SetValue, from_members

from .. import notify as events
from ..client import Client, reply_cap
from . import keys as _keys
from .args import NOT_INT, NUMKEYS_ERR, SYNTAX_ERR, WRONGTYPE, get_positive, string2ll
from .hashes import COUNT_RANGE, EMPTY_SCAN, LONG_MAX, parse_scan_options
from .table import TABLE, command

TOO_MANY_KEYS = ReplyError("ERR Number of keys can't be greater than number of args")
LIMIT_NEGATIVE = ReplyError("ERR LIMIT can't be negative")

SPOP_MOVE_STRATEGY_MUL = 5


# -- helpers -------------------------------------------------------------------
def _notify(c: Client, event: bytes, key: bytes, cls: str = "s") -> None:
    notifier = events.notifier
    if notifier is not None:
        notifier(c.db.id, cls, event, key)


def _read(c: Client, key: bytes) -> SetValue | None:
    s = c.db.lookup_read(key)
    if s is None or type(s) is SetValue:
        return s
    raise WRONGTYPE


def _write(c: Client, key: bytes) -> SetValue | None:
    s = c.db.lookup(key)
    if s is None or type(s) is SetValue:
        return s
    raise WRONGTYPE


def _new_set_for(member: bytes) -> SetValue:
    """setTypeCreate: an intset if the first member is an integer, else a hash table."""
    s = SetValue()
    if not _set.is_int(member):
        s.intset = False
    return s


def _delete_emptied(c: Client, key: bytes, s: SetValue) -> None:
    if not s:
        c.db.delete(key)
        _notify(c, b"del", key, "g")


# -- SADD / SREM / SMOVE -----------------------------------------------------------
def sadd(c: Client, argv: list[bytes]):
    key = argv[1]
    db = c.db
    s = db.lookup(key)
    if s is None:
        s = _new_set_for(argv[2])
        db.set(key, s)
    elif type(s) is not SetValue:
        raise WRONGTYPE
    if len(argv) == 3:
        added = s.add_member(argv[2])
    else:
        added = 0
        add = s.add_member
        for m in argv[2:]:
            added += add(m)
    if added:
        if db.watched and key in db.watched:
            db.modified(key)
        if events.notifier is not None:
            _notify(c, b"sadd", key)
        c.server.dirty += added
    return added


# Registered after its definition: sets.pxd types it (a .pxd cannot type a decorated def).
command("sadd")(sadd)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
_COMPILED = type(_probe).__name__ != "function"

if _COMPILED:
    # The dispatcher's C entries for the typed handlers (sets.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"sadd"], sadd, _e_sadd)  # noqa: F821


@command("srem")
def srem(c: Client, argv: list[bytes]):
    key = argv[1]
    s = _write(c, key)
    if s is None:
        return 0
    deleted = 0
    removed_key = False
    for m in argv[2:]:
        if m in s:
            s.discard_member(m)
            deleted += 1
            if not s:
                c.db.delete(key)
                removed_key = True
                break
    if deleted:
        c.db.modified(key)
        _notify(c, b"srem", key)
        if removed_key:
            _notify(c, b"del", key, "g")
        c.server.dirty += deleted
    return deleted


@command("smove")
def smove(c: Client, argv: list[bytes]):
    src_key, dst_key, member = argv[1], argv[2], argv[3]
    db = c.db
    src = db.lookup(src_key)
    dst = db.lookup(dst_key)
    if src is None:
        return 0
    if type(src) is not SetValue or (dst is not None and type(dst) is not SetValue):
        raise WRONGTYPE
    if src is dst:
        return int(member in src)
    if member not in src:
        return 0
    src.discard_member(member)
    _notify(c, b"srem", src_key)
    _delete_emptied(c, src_key, src)
    if dst is None:
        dst = _new_set_for(member)
        db.set(dst_key, dst)
    db.modified(src_key)
    c.server.dirty += 1
    if dst.add_member(member):
        c.server.dirty += 1
        db.modified(dst_key)
        _notify(c, b"sadd", dst_key)
    return 1


# -- reads ---------------------------------------------------------------------
@command("sismember")
def sismember(c: Client, argv: list[bytes]):
    s = _read(c, argv[1])
    return 0 if s is None else int(argv[2] in s)


@command("smismember")
def smismember(c: Client, argv: list[bytes]):
    s = _read(c, argv[1])
    if s is None:
        return [0] * (len(argv) - 2)
    return [int(m in s) for m in argv[2:]]


@command("scard")
def scard(c: Client, argv: list[bytes]):
    s = _read(c, argv[1])
    return 0 if s is None else len(s)


@command("smembers")
def smembers(c: Client, argv: list[bytes]):
    s = _read(c, argv[1])
    return Set() if s is None else Set(s.ordered())


# -- SPOP / SRANDMEMBER --------------------------------------------------------------
@command("spop")
def spop(c: Client, argv: list[bytes]):
    if len(argv) == 3:
        return _spop_count(c, argv)
    if len(argv) > 3:
        raise SYNTAX_ERR
    key = argv[1]
    s = _write(c, key)
    if s is None:
        return None
    member = s.random_member()
    s.discard_member(member)
    _notify(c, b"spop", key)
    c.server.rewrite_propagation([b"SREM", key, member])
    _delete_emptied(c, key, s)
    c.db.modified(key)
    c.server.dirty += 1
    return member


def _spop_count(c: Client, argv: list[bytes]):
    count = get_positive(argv[2])
    key = argv[1]
    s = _write(c, key)
    if s is None or count == 0:
        return Set()
    size = len(s)
    server = c.server
    _notify(c, b"spop", key)
    server.dirty += min(count, size)
    if count >= size:
        # The whole set, in the order of its union with nothing (an intset if it fits).
        reply = Set(from_members(s).ordered())
        c.db.delete(key)
        _notify(c, b"del", key, "g")
        server.rewrite_propagation([b"DEL", key])
        c.db.modified(key)
        return reply
    remaining = size - count
    if remaining * SPOP_MOVE_STRATEGY_MUL > count:
        popped = random.sample(tuple(s), count)
        s.discard_members(popped)
    else:
        # Redis draws the members that stay, rebuilds the set from them and
        # replies with the rest in the old set's order.
        kept = random.sample(tuple(s), remaining)
        s.difference_update(kept)
        popped = s.ordered()
        c.db.set(key, from_members(kept), keep_ttl=True)
    db_id = c.db.id
    for m in popped:
        server.also_propagate(db_id, [b"SREM", key, m])
    server.prevent_propagation()
    c.db.modified(key)
    return Set(popped)


@command("srandmember")
def srandmember(c: Client, argv: list[bytes]):
    n = len(argv)
    if n == 3:
        return _srandmember_count(c, argv)
    if n > 3:
        raise SYNTAX_ERR
    s = _read(c, argv[1])
    if s is None:
        return None
    return s.random_member()


def _srandmember_count(c: Client, argv: list[bytes]):
    count = string2ll(argv[2])
    if count is None:
        raise NOT_INT
    if count < -LONG_MAX:
        raise COUNT_RANGE
    s = _read(c, argv[1])
    if s is None or count == 0:
        return EMPTY_ARRAY
    if count < 0 or count == 1:
        # each member at least a 6-byte bulk string
        return random.choices(tuple(s), k=reply_cap(c, -count, 6) if count < 0 else 1)
    if count >= len(s):
        return s.ordered()
    return random.sample(tuple(s), count)


# -- SINTER / SUNION / SDIFF ----------------------------------------------------------
def _lookup_sets(c: Client, keys: list[bytes]) -> list[SetValue | None]:
    out: list[SetValue | None] = []
    lookup = c.db.lookup_read
    for key in keys:
        s = lookup(key)
        if s is not None and type(s) is not SetValue:
            raise WRONGTYPE
        out.append(s)
    return out


def _store(c: Client, dst_key: bytes, result: SetValue, event: bytes) -> int:
    """Store a computed set at ``dst_key`` (or delete it when the result is empty)."""
    db = c.db
    if result:
        db.lookup(dst_key)
        db.set(dst_key, result)
        db.modified(dst_key)
        _notify(c, event, dst_key)
        c.server.dirty += 1
        return len(result)
    if db.delete(dst_key):
        c.server.dirty += 1
        db.modified(dst_key)
        _notify(c, b"del", dst_key, "g")
    return 0


def _inter(c: Client, keys: list[bytes], dst_key: bytes | None, card_only: bool, limit: int):
    sets = _lookup_sets(c, keys)
    if any(s is None for s in sets):
        if dst_key is not None:
            db = c.db
            if db.delete(dst_key):
                db.modified(dst_key)
                _notify(c, b"del", dst_key, "g")
                c.server.dirty += 1
            return 0
        return 0 if card_only else Set()
    ordered = sorted(sets, key=len)  # type: ignore[arg-type]
    first = ordered[0]
    others = [s for s in ordered[1:] if s is not first]
    if card_only:
        n = 0
        for m in first:
            for o in others:
                if m not in o:
                    break
            else:
                n += 1
                if limit and n >= limit:
                    break
        return n
    members = [m for m in first.ordered() if all(m in o for o in others)]  # type: ignore[union-attr]
    if dst_key is None:
        return Set(members)
    return _store(c, dst_key, from_members(members), b"sinterstore")


def _union_diff(c: Client, keys: list[bytes], dst_key: bytes | None, diff: bool):
    sets = _lookup_sets(c, keys)
    hashtable = False
    if not diff:
        result: set[bytes] = set()
        for s in sets:
            if s is not None:
                result.update(s)
    else:
        first = sets[0]
        if first is None or any(s is first for s in sets[1:]):
            result = set()
        else:
            rest = [s for s in sets[1:] if s is not None]
            algo_one = len(first) * (len(rest) + 1) // 2
            algo_two = len(first) + sum(len(s) for s in rest)
            result = set(first)
            for s in rest:
                result.difference_update(s)
            if algo_one > algo_two:
                # Algorithm 2 first copies the whole first set into the result,
                # which converts it for good if the copy alone is too big for an intset.
                hashtable = not first.intset or len(first) > _set.max_intset_entries
    out = from_members(result)
    if hashtable:
        out.intset = False
    if dst_key is None:
        return Set(out.ordered())
    return _store(c, dst_key, out, b"sdiffstore" if diff else b"sunionstore")


@command("sinter")
def sinter(c: Client, argv: list[bytes]):
    return _inter(c, argv[1:], None, False, 0)


@command("sinterstore")
def sinterstore(c: Client, argv: list[bytes]):
    return _inter(c, argv[2:], argv[1], False, 0)


@command("sintercard")
def sintercard(c: Client, argv: list[bytes]):
    numkeys = string2ll(argv[1])
    if numkeys is None or numkeys < 1:
        raise NUMKEYS_ERR
    if numkeys > len(argv) - 2:
        raise TOO_MANY_KEYS
    limit = 0
    j = 2 + numkeys
    n = len(argv)
    while j < n:
        if argv[j].lower() == b"limit" and j < n - 1:
            j += 1
            limit = get_positive(argv[j], LIMIT_NEGATIVE)
        else:
            raise SYNTAX_ERR
        j += 1
    return _inter(c, argv[2 : 2 + numkeys], None, True, limit)


@command("sunion")
def sunion(c: Client, argv: list[bytes]):
    return _union_diff(c, argv[1:], None, False)


@command("sunionstore")
def sunionstore(c: Client, argv: list[bytes]):
    return _union_diff(c, argv[2:], argv[1], False)


@command("sdiff")
def sdiff(c: Client, argv: list[bytes]):
    return _union_diff(c, argv[1:], None, True)


@command("sdiffstore")
def sdiffstore(c: Client, argv: list[bytes]):
    return _union_diff(c, argv[2:], argv[1], True)


# -- SSCAN -----------------------------------------------------------------------
@command("sscan")
def sscan(c: Client, argv: list[bytes]):
    cursor = _keys.parse_cursor(argv[2])
    s = _read(c, argv[1])
    if s is None:
        return EMPTY_SCAN
    count, pattern = parse_scan_options(argv, 3)
    if s.intset:
        members = s.ordered()
        cursor = 0
    else:
        cursor, members = s.scan_page(cursor, count)
    if pattern is not None:
        match = compile_glob(pattern)
        members = [m for m in members if match(m)]
    return [b"%d" % cursor, members]
