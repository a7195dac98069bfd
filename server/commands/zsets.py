"""Sorted-set commands (Redis's t_zset.c), blocking pops included.

Replies and errors are Redis 7.0.15's in RESP2 and RESP3: scores are doubles
(``%.17g``, a ``,`` double in RESP3); WITHSCORES replies are flat in RESP2 and
[member, score] pairs in RESP3. Sorted sets live in the keyspace as
``storage.zset.SortedSet``; an emptied set is deleted at once.

Propagation follows Redis: ZMPOP -> ZPOPMIN/ZPOPMAX key count, BZPOPMIN ->
ZPOPMIN key, BZMPOP -> ZPOPMIN/ZPOPMAX key count (served or immediate).
"""

from __future__ import annotations

import math
import random
from operator import itemgetter

from rill.protocol.reply import (
    C_ARRAYS,
    EMPTY_ARRAY,
    NULL_ARRAY,
    Double,
    Raw,
    ReplyError,
    ranged_array,
)
from rill.storage import zset as _zset
from rill.storage.glob import compile_glob
from rill.storage.ranges import index_span
from rill.storage.zset import SortedSet, d2string, format_score

from .. import notify as events
from ..blocking import parse_timeout
from ..client import Client, reply_cap
from ..outcomes import Block
from .args import NOT_FLOAT, NOT_INT, SYNTAX_ERR, WRONGTYPE, get_positive, parse_mpop, string2ll
from .hashes import parse_scan_options
from .keys import parse_cursor
from .table import TABLE, command

NOT_FLOAT_RANGE = ReplyError("ERR min or max is not a float")
NOT_LEX_RANGE = ReplyError("ERR min or max not valid string range item")
NAN_ERR = ReplyError("ERR resulting score is not a number (NaN)")
XX_NX = ReplyError("ERR XX and NX options at the same time are not compatible")
GT_LT_NX = ReplyError("ERR GT, LT, and/or NX options at the same time are not compatible")
INCR_PAIRS = ReplyError("ERR INCR option supports a single increment-element pair")
LIMIT_RANK = ReplyError(
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
)
WITHSCORES_LEX = ReplyError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
WEIGHT_ERR = ReplyError("ERR weight value is not a float")
LIMIT_NEG = ReplyError("ERR LIMIT can't be negative")
OUT_OF_RANGE = ReplyError("ERR value is out of range")

LONG_MAX = 2**63 - 1
_EMPTY_SCAN = Raw(b"*2\r\n$1\r\n0\r\n*0\r\n")


# -- helpers -------------------------------------------------------------------
def _notify(c: Client, event: bytes, key: bytes, cls: str = "z") -> None:
    notifier = events.notifier
    if notifier is not None:
        notifier(c.db.id, cls, event, key)


def _zread(c: Client, key: bytes) -> SortedSet | None:
    v = c.db.lookup_read(key)
    if v is None or type(v) is SortedSet:
        return v
    raise WRONGTYPE


def _zwrite(c: Client, key: bytes) -> SortedSet | None:
    v = c.db.lookup(key)
    if v is None or type(v) is SortedSet:
        return v
    raise WRONGTYPE


_C_SPACE = b" \t\n\v\f\r"
_HEX_NONZERO = frozenset(b"123456789abcdef")


def _strtod(s: bytes) -> float | None:
    """C strtod over the whole (non-empty) string: None when something is left over."""
    body = s.lstrip(_C_SPACE)
    if not body or body[-1] in _C_SPACE or b"_" in body or b"\0" in body:
        return None
    try:
        return float(body)
    except ValueError:
        pass
    low = body.lower()
    if low.lstrip(b"+-")[:2] != b"0x" or len(low) - len(low.lstrip(b"+-")) > 1:
        return None
    try:
        return float.fromhex(body.decode())
    except (ValueError, UnicodeDecodeError):
        return None


def _out_of_range(s: bytes, v: float) -> bool:
    """Whether strtod would have set ERANGE with an infinite or zero result."""
    low = s.lower()
    if math.isinf(v):
        return b"inf" not in low
    if v == 0:
        if b"x" in low:
            mant = low.split(b"x", 1)[1].split(b"p", 1)[0]
            return any(ch in _HEX_NONZERO for ch in mant if ch != 46)
        mant = low.split(b"e", 1)[0]
        return any(49 <= ch <= 57 for ch in mant)
    return False


def get_double(arg: bytes, err: ReplyError = NOT_FLOAT) -> float:
    """getDoubleFromObject (string2d): whole string, no leading space, no NaN, no overflow."""
    if arg.isdigit() and len(arg) < 16:
        return float(int(arg))  # the common case: a plain integer score, exact
    if not arg or arg[0] in _C_SPACE:
        raise err
    v = _strtod(arg)
    if v is None or math.isnan(v) or ((math.isinf(v) or v == 0) and _out_of_range(arg, v)):
        raise err
    return v


def _range_bound(arg: bytes) -> tuple[float, bool]:
    """One end of a score range (zslParseRange): "(1.5" is exclusive; strtod rules."""
    exclusive = arg[:1] == b"("
    s = arg[1:] if exclusive else arg
    if not s:
        return 0.0, exclusive  # strtod of "" converts nothing and stops at the end
    v = _strtod(s)
    if v is None or math.isnan(v):
        raise NOT_FLOAT_RANGE
    return v, exclusive


def _parse_score_range(min_arg: bytes, max_arg: bytes) -> tuple[float, bool, float, bool]:
    mn, mnex = _range_bound(min_arg)
    mx, mxex = _range_bound(max_arg)
    return mn, mnex, mx, mxex


def _score_ranks(zs: SortedSet, spec: tuple[float, bool, float, bool]) -> tuple[int, int]:
    mn, mnex, mx, mxex = spec
    if mn > mx or (mn == mx and (mnex or mxex)):
        return 0, 0
    start = zs.score_rank(mn, mnex, False)
    stop = zs.score_rank(mx, mxex, True)
    return start, max(start, stop)


def _lex_bound(arg: bytes) -> tuple[bytes | None, bool, int]:
    """(member, exclusive, infinite) of a lex range item: "-", "+", "(x", "[x"."""
    if arg == b"+":
        return None, True, 1
    if arg == b"-":
        return None, True, -1
    first = arg[:1]
    if first == b"(":
        return arg[1:], True, 0
    if first == b"[":
        return arg[1:], False, 0
    raise NOT_LEX_RANGE


def _parse_lex_range(min_arg: bytes, max_arg: bytes) -> tuple:
    return _lex_bound(min_arg), _lex_bound(max_arg)


def _lex_ranks(zs: SortedSet, spec: tuple, reverse: bool = False) -> tuple[int, int]:
    """Ranks [start, stop) of a lex range.

    Redis assumes one score for the whole set: then the order is lexicographic
    and both ends are found by bisection. With mixed scores it walks from the
    head (from the tail for a reverse range) to the first member inside the
    range and takes members while they stay inside; that walk is reproduced.
    """
    (mn, mnex, mninf), (mx, mxex, mxinf) = spec
    if mninf > 0 or mxinf < 0:
        return 0, 0
    if not mninf and not mxinf:
        if mn > mx or (mn == mx and (mnex or mxex)):
            return 0, 0
    n = len(zs)
    if not n:
        return 0, 0
    first = zs.range(0, 1)[0]
    last = zs.range(n - 1, n)[0]
    if first[0] == last[0]:
        start = zs.lex_rank(mn, mnex, False, mninf)
        stop = zs.lex_rank(mx, mxex, True, mxinf)
        return start, max(start, stop)

    def gte(m: bytes) -> bool:
        return mninf < 0 or (mninf == 0 and (m > mn if mnex else m >= mn))

    def lte(m: bytes) -> bool:
        return mxinf > 0 or (mxinf == 0 and (m < mx if mxex else m <= mx))

    if not gte(last[1]) or not lte(first[1]):
        return 0, 0
    members = [m for _s, m in zs.range(0, n)]
    if not reverse:
        lo = next((i for i, m in enumerate(members) if gte(m)), n)
        hi = lo
        while hi < n and lte(members[hi]):
            hi += 1
    else:
        hi = next((i + 1 for i in range(n - 1, -1, -1) if lte(members[i])), 0)
        lo = hi
        while lo > 0 and gte(members[lo - 1]):
            lo -= 1
    return lo, hi


def _bulk(items: list[bytes]) -> Raw:
    if not items:
        return EMPTY_ARRAY
    return Raw(b"*%d\r\n" % len(items) + b"".join([b"$%d\r\n%b\r\n" % (len(m), m) for m in items]))


_BULK_HEADERS = [b"$%d" % n for n in range(4096)]
_bulk_header = _BULK_HEADERS.__getitem__
_score_of = itemgetter(0)
_member_of = itemgetter(1)
# Formatted scores, shared by every reply (scores repeat: ranks, counters, timestamps).
_FORMATTED: dict[float, bytes] = {}
_formatted = _FORMATTED.get


def _format(score: float) -> bytes:
    if score == 0:
        return format_score(score)  # 0.0 and -0.0 are one dict key but print differently
    # An integral score within +-2**53 has at most 16 digits, so %.17g prints exactly its
    # integer digits: %d gives that text without the float formatter or the cache (the
    # common integer scores, each popped or listed once, never hit it).
    if -9007199254740992.0 <= score <= 9007199254740992.0:
        i = int(score)
        if i == score:
            return b"%d" % i
    f = _FORMATTED.get(score)
    if f is None:
        if len(_FORMATTED) >= 1 << 16:
            _FORMATTED.clear()
        f = _FORMATTED[score] = format_score(score)
    return f


def _formatted_scores(items: list[tuple[float, bytes]]) -> list[bytes]:
    out = list(map(_formatted, map(_score_of, items)))
    if None in out:
        for i, f in enumerate(out):
            if f is None:
                out[i] = _format(items[i][0])
    return out


def _join_bulks(count_header: bytes, values: list[bytes]) -> Raw:
    """``count_header`` then every value as a bulk string, joined in C."""
    try:
        heads = list(map(_bulk_header, map(len, values)))
    except IndexError:  # a value of 4 kB or more
        heads = [b"$%d" % len(v) for v in values]
    parts: list = [None] * (2 * len(values))
    parts[0::2] = heads
    parts[1::2] = values
    return Raw(count_header + b"\r\n".join(parts) + b"\r\n")


def _scored(items: list[tuple[float, bytes]], withscores: bool, resp3: bool) -> Raw:
    """A range reply from (score, member) items, already in reply order."""
    n = len(items)
    if not n:
        return EMPTY_ARRAY
    if C_ARRAYS and not (withscores and resp3):  # compiled: written into one buffer in C
        reply = ranged_array(items, withscores, _format)
        if reply is not None:
            return reply
    members = list(map(_member_of, items))
    if not withscores:
        return _join_bulks(b"*%d\r\n" % n, members)
    scores = _formatted_scores(items)
    if resp3:
        return Raw(
            b"*%d\r\n" % n
            + b"".join([b"*2\r\n$%d\r\n%b\r\n,%b\r\n" % (len(m), m, f) for m, f in zip(members, scores, strict=True)])
        )
    flat: list = [None] * (2 * n)
    flat[0::2] = members
    flat[1::2] = scores
    return _join_bulks(b"*%d\r\n" % (2 * n), flat)


def _pairs_reply(pairs: list[tuple[bytes, float]], nested: bool) -> list:
    """Popped (member, score) pairs: flat, or [member, score] pairs when ``nested``."""
    if nested:
        return [[m, Double(s)] for m, s in pairs]
    out: list = []
    for m, s in pairs:
        out.append(m)
        out.append(Double(s))
    return out


def _store(c: Client, dst: bytes, zs: SortedSet | None, event: bytes) -> int:
    """setKey for ZRANGESTORE/Z*STORE: store a non-empty result, or delete the key."""
    db = c.db
    if zs:
        db.set(dst, zs)
        db.modified(dst)
        _notify(c, event, dst)
        c.server.dirty += 1
        return len(zs)
    if db.delete(dst):
        db.modified(dst)
        _notify(c, b"del", dst, "g")
        c.server.dirty += 1
    return 0


# -- ZADD / ZINCRBY ----------------------------------------------------------------
def _zadd(c: Client, argv: list[bytes], incr: bool):
    key = argv[1]
    nx = xx = gt = lt = ch = False
    idx = 2
    n = len(argv)
    while idx < n:
        opt = argv[idx].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt == b"ch":
            ch = True
        elif opt == b"incr":
            incr = True
        elif opt == b"gt":
            gt = True
        elif opt == b"lt":
            lt = True
        else:
            break
        idx += 1
    elements = n - idx
    if elements % 2 or not elements:
        raise SYNTAX_ERR
    elements //= 2
    if nx and xx:
        raise XX_NX
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise GT_LT_NX
    if incr and elements > 1:
        raise INCR_PAIRS
    scores = [get_double(argv[idx + 2 * j]) for j in range(elements)]
    db = c.db
    zs = db.lookup(key)
    if zs is None:
        if xx:
            return None if incr else 0
        zs = _zset.new_for(len(argv[idx + 1]))
        db.set(key, zs)
    elif type(zs) is not SortedSet:
        raise WRONGTYPE
    added = updated = processed = 0
    score = 0.0
    d = zs.dict
    err = None
    for j in range(elements):
        score = scores[j]
        member = argv[idx + 1 + 2 * j]
        cur = d.get(member)
        if cur is not None:
            if nx:
                continue
            if incr:
                score += cur
                if math.isnan(score):
                    err = NAN_ERR
                    break
            if (lt and score >= cur) or (gt and score <= cur):
                continue
            processed += 1
            if score != cur:
                zs.add(member, score)
                updated += 1
        elif not xx:
            zs.add(member, score)
            added += 1
            processed += 1
    c.server.dirty += added + updated
    if added or updated:
        db.modified(key)
        _notify(c, b"zincr" if incr else b"zadd", key)
    if err is not None:
        raise err
    if incr:
        return Double(score) if processed else None
    return added + updated if ch else added


def _zadd_one(c: Client, key: bytes, score: float, member: bytes) -> int:
    """ZADD key score member without options: the producers' hot path."""
    db = c.db
    zs = db.lookup(key)
    if zs is None:
        zs = _zset.new_for(len(member))
        db.set(key, zs)
    elif type(zs) is not SortedSet:
        raise WRONGTYPE
    cur = zs.dict.get(member)
    if cur is not None and cur == score:
        return 0
    zs.add(member, score)
    c.server.dirty += 1
    if db.watched and key in db.watched:
        db.modified(key)
    if events.notifier is not None:
        _notify(c, b"zadd", key)
    return 1 if cur is None else 0


@command("zadd")
def zadd(c: Client, argv: list[bytes]):
    if len(argv) == 4:
        arg = argv[2]
        if arg.isdigit() and len(arg) < 16:
            return _zadd_one(c, argv[1], float(int(arg)), argv[3])
    return _zadd(c, argv, False)


@command("zincrby")
def zincrby(c: Client, argv: list[bytes]):
    # ZINCRBY key increment member: the same body as ZADD INCR
    return _zadd(c, argv, True)


# -- reads ---------------------------------------------------------------------
@command("zcard")
def zcard(c: Client, argv: list[bytes]):
    zs = _zread(c, argv[1])
    return 0 if zs is None else len(zs)


@command("zscore")
def zscore(c: Client, argv: list[bytes]):
    zs = _zread(c, argv[1])
    if zs is None:
        return None
    s = zs.dict.get(argv[2])
    return None if s is None else Double(s)


@command("zmscore")
def zmscore(c: Client, argv: list[bytes]):
    zs = _zread(c, argv[1])
    d = zs.dict if zs is not None else {}
    out = []
    for m in argv[2:]:
        s = d.get(m)
        out.append(None if s is None else Double(s))
    return out


def _zrank(c: Client, argv: list[bytes], reverse: bool):
    # WITHSCORE is Redis 7.2's: [rank, score], or a null array when missing.
    withscore = False
    if len(argv) > 4:
        name = "zrevrank" if reverse else "zrank"
        raise ReplyError(f"ERR wrong number of arguments for '{name}' command")
    if len(argv) == 4:
        if argv[3].lower() != b"withscore":
            raise SYNTAX_ERR
        withscore = True
    zs = _zread(c, argv[1])
    if zs is None:
        return NULL_ARRAY if withscore else None
    r = zs.rank(argv[2], reverse)
    if r is None:
        return NULL_ARRAY if withscore else None
    if withscore:
        return [r, Double(zs.dict[argv[2]])]
    return r


# Arity -3, not 7.0's 3: WITHSCORE is Redis 7.2's.
@command("zrank", arity=-3)
def zrank(c: Client, argv: list[bytes]):
    return _zrank(c, argv, False)


@command("zrevrank", arity=-3)
def zrevrank(c: Client, argv: list[bytes]):
    return _zrank(c, argv, True)


@command("zcount")
def zcount(c: Client, argv: list[bytes]):
    spec = _parse_score_range(argv[2], argv[3])
    zs = _zread(c, argv[1])
    if zs is None:
        return 0
    start, stop = _score_ranks(zs, spec)
    return stop - start


@command("zlexcount")
def zlexcount(c: Client, argv: list[bytes]):
    spec = _parse_lex_range(argv[2], argv[3])
    zs = _zread(c, argv[1])
    if zs is None:
        return 0
    start, stop = _lex_ranks(zs, spec)
    return stop - start


# -- ZRANGE and friends ----------------------------------------------------------
_RANK, _SCORE, _LEX = 1, 2, 3


def _long(arg: bytes) -> int:
    v = string2ll(arg)
    if v is None:
        raise NOT_INT
    return v


def _select(zs: SortedSet, rangetype: int, reverse: bool, a: bytes, b: bytes, spec, offset: int, limit: int):
    """The (score, member) items a ZRANGE form selects, in reply order."""
    n = len(zs)
    if rangetype == _RANK:
        span = index_span(spec[0], spec[1], n)
        if span is None:
            return []
        start, end = span
        if reverse:
            items = zs.range(n - 1 - end, n - start)
            items.reverse()
            return items
        return zs.range(start, end + 1)
    lo, hi = _score_ranks(zs, spec) if rangetype == _SCORE else _lex_ranks(zs, spec, reverse)
    if offset < 0 or hi <= lo:
        return []
    count = hi - lo
    if offset >= count:
        return []
    take = count - offset if limit < 0 else min(limit, count - offset)
    if reverse:
        items = zs.range(hi - offset - take, hi - offset)
        items.reverse()
        return items
    return zs.range(lo + offset, lo + offset + take)


def _zrange_generic(c: Client, argv: list[bytes], first: int, store: bytes | None, rangetype: int, reverse: bool | None):
    """zrangeGenericCommand: argv[first] is the source key, then min, max and options."""
    key = argv[first]
    minidx, maxidx = first + 1, first + 2
    withscores = False
    offset, limit = 0, -1
    n = len(argv)
    j = first + 3
    direction = reverse
    rtype = rangetype
    while j < n:
        left = n - j - 1
        opt = argv[j].lower()
        if store is None and opt == b"withscores":
            withscores = True
        elif opt == b"limit" and left >= 2:
            offset = _long(argv[j + 1])
            limit = _long(argv[j + 2])
            j += 2
        elif direction is None and opt == b"rev":
            direction = True
        elif rtype == 0 and opt == b"bylex":
            rtype = _LEX
        elif rtype == 0 and opt == b"byscore":
            rtype = _SCORE
        else:
            raise SYNTAX_ERR
        j += 1
    if direction is None:
        direction = False
    if rtype == 0:
        rtype = _RANK
    if limit != -1 and rtype == _RANK:
        raise LIMIT_RANK
    if withscores and rtype == _LEX:
        raise WITHSCORES_LEX
    if direction and rtype != _RANK:
        minidx, maxidx = maxidx, minidx
    if rtype == _RANK:
        spec: object = (_long(argv[minidx]), _long(argv[maxidx]))
    elif rtype == _SCORE:
        spec = _parse_score_range(argv[minidx], argv[maxidx])
    else:
        spec = _parse_lex_range(argv[minidx], argv[maxidx])
    zs = _zread(c, key)
    if zs is None:
        if store is not None:
            return _store(c, store, None, b"zrangestore")
        return EMPTY_ARRAY
    items = _select(zs, rtype, direction, argv[minidx], argv[maxidx], spec, offset, limit)
    if store is not None:
        dst = SortedSet(len(items) <= _zset.max_listpack_entries)
        for s, m in items:
            dst.add(m, s)
        return _store(c, store, dst, b"zrangestore")
    return _scored(items, withscores, c.resp3)


@command("zrange")
def zrange(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, 0, None)


@command("zrangestore")
def zrangestore(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 2, argv[1], 0, None)


@command("zrevrange")
def zrevrange(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, _RANK, True)


@command("zrangebyscore")
def zrangebyscore(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, _SCORE, False)


@command("zrevrangebyscore")
def zrevrangebyscore(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, _SCORE, True)


@command("zrangebylex")
def zrangebylex(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, _LEX, False)


@command("zrevrangebylex")
def zrevrangebylex(c: Client, argv: list[bytes]):
    return _zrange_generic(c, argv, 1, None, _LEX, True)


# -- removals ---------------------------------------------------------------------
def _after_removal(c: Client, key: bytes, zs: SortedSet, removed: int, event: bytes) -> None:
    if removed:
        c.db.modified(key)
        _notify(c, event, key)
        if not zs:
            c.db.delete(key)
            _notify(c, b"del", key, "g")
        c.server.dirty += removed


@command("zrem")
def zrem(c: Client, argv: list[bytes]):
    key = argv[1]
    zs = _zwrite(c, key)
    if zs is None:
        return 0
    deleted = 0
    for m in argv[2:]:
        if zs.remove(m):
            deleted += 1
        if not zs:
            break
    if deleted:
        _notify(c, b"zrem", key)
        if not zs:
            c.db.delete(key)
            _notify(c, b"del", key, "g")
        c.db.modified(key)
        c.server.dirty += deleted
    return deleted


def _zremrange(c: Client, argv: list[bytes], rangetype: int):
    key = argv[1]
    if rangetype == _RANK:
        start, end = _long(argv[2]), _long(argv[3])
        event = b"zremrangebyrank"
    elif rangetype == _SCORE:
        spec = _parse_score_range(argv[2], argv[3])
        event = b"zremrangebyscore"
    else:
        spec = _parse_lex_range(argv[2], argv[3])
        event = b"zremrangebylex"
    zs = _zwrite(c, key)
    if zs is None:
        return 0
    if rangetype == _RANK:
        span = index_span(start, end, len(zs))
        if span is None:
            return 0
        lo, hi = span[0], span[1] + 1
    elif rangetype == _SCORE:
        lo, hi = _score_ranks(zs, spec)
    else:
        lo, hi = _lex_ranks(zs, spec)
    removed = zs.remove_rank_range(lo, hi) if hi > lo else 0
    _after_removal(c, key, zs, removed, event)
    return removed


@command("zremrangebyrank")
def zremrangebyrank(c: Client, argv: list[bytes]):
    return _zremrange(c, argv, _RANK)


@command("zremrangebyscore")
def zremrangebyscore(c: Client, argv: list[bytes]):
    return _zremrange(c, argv, _SCORE)


@command("zremrangebylex")
def zremrangebylex(c: Client, argv: list[bytes]):
    return _zremrange(c, argv, _LEX)


# -- pops -------------------------------------------------------------------------
def _pop_from(c: Client, key: bytes, zs: SortedSet, count: int, from_max: bool) -> list[tuple[bytes, float]]:
    """Pop up to ``count`` pairs from ``key``: events, WATCH, deletion of an emptied set."""
    pairs = zs.pop(count, from_max)
    c.server.dirty += len(pairs)
    _notify(c, b"zpopmax" if from_max else b"zpopmin", key)
    c.db.modified(key)
    if not zs:
        c.db.delete(key)
        _notify(c, b"del", key, "g")
    return pairs


def _zpop(c: Client, argv: list[bytes], from_max: bool):
    if len(argv) > 3:
        raise SYNTAX_ERR
    count = -1
    if len(argv) == 3:
        count = get_positive(argv[2])
    zs = _zwrite(c, argv[1])
    if zs is None or count == 0:
        return EMPTY_ARRAY
    pairs = _pop_from(c, argv[1], zs, 1 if count == -1 else count, from_max)
    return _pairs_reply(pairs, c.resp3 and count != -1)


def _zpop_one(c: Client, key: bytes, from_max: bool):
    """ZPOPMIN/ZPOPMAX key: the consumers' hot path, reply encoded at once."""
    db = c.db
    zs = db.lookup(key)
    if zs is None:
        return EMPTY_ARRAY
    if type(zs) is not SortedSet:
        raise WRONGTYPE
    score, member = zs.pop_end(from_max)
    c.server.dirty += 1
    if events.notifier is not None:
        _notify(c, b"zpopmax" if from_max else b"zpopmin", key)
    if db.watched and key in db.watched:
        db.modified(key)
    if not zs.dict:
        db.delete(key)
        _notify(c, b"del", key, "g")
    if _COMPILED and not c.resp3:
        # zsets.pxd writes the usual reply (an integral score) in C.
        r = _c_pair_reply(Raw, member, score)  # noqa: F821 (see _COMPILED)
        if r is not None:
            return r
    f = _format(score)
    if c.resp3:
        return Raw(b"*2\r\n$%d\r\n%b\r\n,%b\r\n" % (len(member), member, f))
    return Raw(b"*2\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(member), member, len(f), f))


def zpopmin(c: Client, argv: list[bytes]):
    if len(argv) == 2:
        return _zpop_one(c, argv[1], False)
    return _zpop(c, argv, False)


# Registered after its definition: zsets.pxd types it (a .pxd cannot type a decorated def).
command("zpopmin")(zpopmin)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
_COMPILED = type(_probe).__name__ != "function"

if _COMPILED:
    # The dispatcher's C entry for ZPOPMIN (zsets.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"zpopmin"], zpopmin, _e_zpopmin)  # noqa: F821


@command("zpopmax")
def zpopmax(c: Client, argv: list[bytes]):
    if len(argv) == 2:
        return _zpop_one(c, argv[1], True)
    return _zpop(c, argv, True)


def _mpop_reply(c: Client, key: bytes, zs: SortedSet, count: int, from_max: bool) -> list:
    pairs = _pop_from(c, key, zs, count, from_max)
    c.server.rewrite_propagation([b"ZPOPMAX" if from_max else b"ZPOPMIN", key, b"%d" % len(pairs)])
    return [key, _pairs_reply(pairs, True)]


@command("zmpop")
def zmpop(c: Client, argv: list[bytes]):
    keys, from_max, count = parse_mpop(argv, 1, (b"max", b"min"))
    for key in keys:
        zs = _zwrite(c, key)
        if zs is None:
            continue
        return _mpop_reply(c, key, zs, count, from_max)
    return NULL_ARRAY


def _deny_blocking(c: Client) -> bool:
    return c.in_exec or c.id < 0


def _blocking_pop(c: Client, keys: list[bytes], from_max: bool, count: int, timeout: float):
    """BZPOPMIN/BZPOPMAX (count -1) and BZMPOP: pop now, or block on ``keys``."""
    serving = c.server.blocking.serving
    if serving is not None:
        zs = c.db.lookup(serving)
        if type(zs) is not SortedSet or not zs:
            return Block(keys, timeout, None, NULL_ARRAY, wake=b"zset")
        keys = [serving]
    for key in keys:
        zs = _zwrite(c, key)
        if not zs:
            continue
        if count != -1:
            return _mpop_reply(c, key, zs, count, from_max)
        pairs = _pop_from(c, key, zs, 1, from_max)
        c.server.rewrite_propagation([b"ZPOPMAX" if from_max else b"ZPOPMIN", key])
        m, s = pairs[0]
        return [key, m, Double(s)]
    if _deny_blocking(c):
        return NULL_ARRAY
    return Block(keys, timeout, None, NULL_ARRAY, wake=b"zset")


def _timeout(c: Client, arg: bytes) -> float:
    return parse_timeout(arg) if c.server.blocking.serving is None else 0.0


@command("bzpopmin")
def bzpopmin(c: Client, argv: list[bytes]):
    timeout = _timeout(c, argv[-1])
    return _blocking_pop(c, argv[1:-1], False, -1, timeout)


@command("bzpopmax")
def bzpopmax(c: Client, argv: list[bytes]):
    timeout = _timeout(c, argv[-1])
    return _blocking_pop(c, argv[1:-1], True, -1, timeout)


@command("bzmpop")
def bzmpop(c: Client, argv: list[bytes]):
    keys, from_max, count = parse_mpop(argv, 2, (b"max", b"min"))
    timeout = _timeout(c, argv[1])
    return _blocking_pop(c, keys, from_max, count, timeout)


# -- ZUNION / ZINTER / ZDIFF --------------------------------------------------------
_UNION, _INTER, _DIFF = 1, 2, 3
_SUM, _MIN, _MAX = 0, 1, 2


class _Source:
    """One input of a set operation: a sorted set, a plain set (scores 1) or nothing."""

    __slots__ = ("value", "weight", "scores")

    def __init__(self, value) -> None:
        self.value = value
        self.weight = 1.0
        if value is None:
            self.scores: dict = {}
        elif type(value) is SortedSet:
            self.scores = value.dict
        else:
            self.scores = dict.fromkeys(value.rdb_items(), 1.0)


def _aggregate(acc: float, v: float, how: int) -> float:
    if how == _SUM:
        acc = acc + v
        return 0.0 if acc != acc else acc
    if how == _MIN:
        return v if v < acc else acc
    return v if v > acc else acc


def _setop(c: Client, argv: list[bytes], dst: bytes | None, numkeys_idx: int, op: int, card_only: bool = False):
    numkeys = _long(argv[numkeys_idx])
    if numkeys < 1:
        name = argv[0].lower().decode(errors="replace")
        raise ReplyError(f"ERR at least 1 input key is needed for '{name}' command")
    if numkeys > len(argv) - (numkeys_idx + 1):
        raise SYNTAX_ERR
    db = c.db
    srcs = []
    j = numkeys_idx + 1
    for _ in range(numkeys):
        v = db.lookup_read(argv[j])
        if v is not None and getattr(v, "type_name", None) not in (b"zset", b"set"):
            raise WRONGTYPE
        srcs.append(v)
        j += 1
    weights = [1.0] * numkeys
    how = _SUM
    withscores = False
    limit = 0
    n = len(argv)
    while j < n:
        remaining = n - j
        opt = argv[j].lower()
        if op != _DIFF and not card_only and remaining >= numkeys + 1 and opt == b"weights":
            j += 1
            for i in range(numkeys):
                weights[i] = get_double(argv[j], WEIGHT_ERR)
                j += 1
        elif op != _DIFF and not card_only and remaining >= 2 and opt == b"aggregate":
            word = argv[j + 1].lower()
            if word == b"sum":
                how = _SUM
            elif word == b"min":
                how = _MIN
            elif word == b"max":
                how = _MAX
            else:
                raise SYNTAX_ERR
            j += 2
        elif remaining >= 1 and dst is None and not card_only and opt == b"withscores":
            withscores = True
            j += 1
        elif card_only and remaining >= 2 and opt == b"limit":
            limit = get_positive(argv[j + 1], LIMIT_NEG)
            j += 2
        else:
            raise SYNTAX_ERR
    sources = []
    for v, w in zip(srcs, weights, strict=True):
        s = _Source(v)
        s.weight = w
        sources.append(s)
    result: dict[bytes, float] = {}
    if op != _DIFF:
        # smallest first, as Redis orders its inputs (this fixes the order of the sums too)
        sources.sort(key=lambda s: len(s.scores))
    if op == _INTER:
        first = sources[0]
        rest = sources[1:]
        count = 0
        if first.scores:
            for m, sc in first.scores.items():
                score = first.weight * sc
                if score != score:
                    score = 0.0
                for s in rest:
                    other = s.scores.get(m)
                    if other is None:
                        break
                    score = _aggregate(score, other * s.weight, how)
                else:
                    if card_only:
                        count += 1
                        if limit and count >= limit:
                            break
                    else:
                        result[m] = score
        if card_only:
            return count
    elif op == _UNION:
        for s in sources:
            w = s.weight
            for m, sc in s.scores.items():
                score = w * sc
                if score != score:
                    score = 0.0
                cur = result.get(m)
                result[m] = score if cur is None else _aggregate(cur, score, how)
    else:
        first = sources[0]
        others = [s.scores for s in sources[1:]]
        if any(s.value is first.value and first.value is not None for s in sources[1:]):
            others = None
        if others is not None:
            for m, sc in first.scores.items():
                if not any(m in o for o in others):
                    result[m] = sc
    if dst is not None:
        zs = _zset.from_pairs(result.items())
        event = b"zunionstore" if op == _UNION else b"zinterstore" if op == _INTER else b"zdiffstore"
        return _store(c, dst, zs, event)
    # Redis replies from the skiplist it computed in, never a listpack: a -0 score (a zero
    # times a negative weight) stays -0 in the reply; only a stored result turns it into 0.
    return _scored(sorted([(sc, m) for m, sc in result.items()]), withscores, c.resp3)


@command("zunionstore")
def zunionstore(c: Client, argv: list[bytes]):
    return _setop(c, argv, argv[1], 2, _UNION)


@command("zinterstore")
def zinterstore(c: Client, argv: list[bytes]):
    return _setop(c, argv, argv[1], 2, _INTER)


@command("zdiffstore")
def zdiffstore(c: Client, argv: list[bytes]):
    return _setop(c, argv, argv[1], 2, _DIFF)


@command("zunion")
def zunion(c: Client, argv: list[bytes]):
    return _setop(c, argv, None, 1, _UNION)


@command("zinter")
def zinter(c: Client, argv: list[bytes]):
    return _setop(c, argv, None, 1, _INTER)


@command("zdiff")
def zdiff(c: Client, argv: list[bytes]):
    return _setop(c, argv, None, 1, _DIFF)


@command("zintercard")
def zintercard(c: Client, argv: list[bytes]):
    return _setop(c, argv, None, 1, _INTER, card_only=True)


# -- ZRANDMEMBER / ZSCAN -------------------------------------------------------------
@command("zrandmember")
def zrandmember(c: Client, argv: list[bytes]):
    if len(argv) >= 3:
        v = string2ll(argv[2])
        if v is None:
            raise NOT_INT
        if v < -LONG_MAX:
            raise ReplyError(f"ERR value is out of range, value must between {-LONG_MAX} and {LONG_MAX}")
        withscores = False
        if len(argv) > 4 or (len(argv) == 4 and argv[3].lower() != b"withscores"):
            raise SYNTAX_ERR
        if len(argv) == 4:
            withscores = True
            if v < -(LONG_MAX // 2) or v > LONG_MAX // 2:
                raise OUT_OF_RANGE
        return _randmember_count(c, argv[1], v, withscores)
    zs = _zread(c, argv[1])
    if zs is None:
        return None
    return random.choice(list(zs.dict)) if len(zs) < 64 else _random_member(zs)


def _random_member(zs: SortedSet) -> bytes:
    r = random.randrange(len(zs))
    return zs.range(r, r + 1)[0][1]


def _randmember_count(c: Client, key: bytes, count: int, withscores: bool):
    zs = _zread(c, key)
    if zs is None or count == 0:
        return EMPTY_ARRAY
    resp3 = c.resp3
    size = len(zs)
    if count < 0 or count == 1:
        # a member (and score): at least one (two) 6-byte bulk strings each
        n = reply_cap(c, -count, 12 if withscores else 6) if count < 0 else 1
        picks = [random.randrange(size) for _ in range(n)]
        items = [zs.range(i, i + 1)[0] for i in picks] if size > 64 else None
        if items is None:
            allitems = zs.range(0, size)
            items = [allitems[i] for i in picks]
        return _scored(items, withscores, resp3)
    if count >= size:
        # the whole set, walked from the tail as Redis's zset iterator does
        items = zs.range(0, size)
        items.reverse()
        return _scored(items, withscores, resp3)
    chosen = sorted(random.sample(range(size), count))
    random.shuffle(chosen)
    items = [zs.range(i, i + 1)[0] for i in chosen]
    return _scored(items, withscores, resp3)


@command("zscan")
def zscan(c: Client, argv: list[bytes]):
    # As Redis: the cursor, then the key (a missing one answers before any option is
    # read, a wrong type errs), then the options.
    cursor = parse_cursor(argv[2])
    zs = _zread(c, argv[1])
    if zs is None:
        return _EMPTY_SCAN
    count, pattern = parse_scan_options(argv, 3)
    match = compile_glob(pattern) if pattern is not None else None
    d = zs.dict
    out: list[bytes] = []
    if zs.listpack:
        for m, s in zs.items():
            if match is None or match(m):
                out.append(m)
                out.append(d2string(s))
        return [b"0", out]
    cursor, members = zs.scan(cursor, count)
    for m in members:
        if match is None or match(m):
            out.append(m)
            out.append(format_score(d[m]))
    return [b"%d" % cursor, out]
