"""List commands, blocking pops included (Redis's t_list.c).

Every reply and error is Redis 7.0's, RESP2 and RESP3. Lists live in the
keyspace as ``storage.list.ListValue``; an emptied list is deleted at once.

Blocking pops return a ``Block`` when nothing can be popped; the registry
retries them (``blocking.serving`` names the key that became ready, and a
retry pops from that key only, as Redis serves a waiter). A pop that happens
-- at once or when served -- is propagated as its non-blocking form: BLPOP ->
LPOP key, BLMPOP -> LPOP/RPOP key count, BLMOVE -> LMOVE, BRPOPLPUSH ->
RPOPLPUSH, through ``server.rewrite_propagation``.
"""

from __future__ import annotations

from itertools import islice

from rill.protocol.reply import C_ARRAYS, EMPTY_ARRAY, NULL_ARRAY, OK, Raw, ReplyError, bulk_array
from rill.storage.list import ListValue

from .. import notify as events
from ..blocking import parse_timeout
from ..client import Client
from ..outcomes import Block
from .args import NO_SUCH_KEY, NOT_INT, SYNTAX_ERR, WRONGTYPE, get_positive, parse_mpop, string2ll
from .table import TABLE, command

OUT_OF_RANGE = ReplyError("ERR index out of range")
RANK_ZERO = ReplyError(
    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
    "or use negative to start from the end of the list"
)
COUNT_NEGATIVE = ReplyError("ERR COUNT can't be negative")
MAXLEN_NEGATIVE = ReplyError("ERR MAXLEN can't be negative")

_LEFT = b"left"
_RIGHT = b"right"


# -- helpers -------------------------------------------------------------------
def _long(arg: bytes, err: ReplyError = NOT_INT) -> int:
    v = string2ll(arg)
    if v is None:
        raise err
    return v


def _list_write(c: Client, key: bytes) -> ListValue | None:
    v = c.db.lookup(key)
    if v is None or type(v) is ListValue:
        return v
    raise WRONGTYPE


def _list_read(c: Client, key: bytes) -> ListValue | None:
    v = c.db.lookup_read(key)
    if v is None or type(v) is ListValue:
        return v
    raise WRONGTYPE


def _where(arg: bytes) -> bool:
    """LEFT -> True, RIGHT -> False (getListPositionFromObjectOrReply)."""
    low = arg.lower()
    if low == _LEFT:
        return True
    if low == _RIGHT:
        return False
    raise SYNTAX_ERR


def _deny_blocking(c: Client) -> bool:
    """Inside EXEC (and for internal clients such as scripts) nothing may block."""
    return c.in_exec or c.id < 0


_BULK_HEADERS = [b"$%d" % n for n in range(4096)]
_bulk_header = _BULK_HEADERS.__getitem__


def _bulk_array(items: list[bytes]) -> Raw:
    """An array of bulk strings, encoded in one go (identical in RESP2 and RESP3).

    LRANGE's replies are the hot path: element headers come from a table and
    the pieces are joined in C rather than formatted one element at a time.
    """
    n = len(items)
    if not n:
        return EMPTY_ARRAY
    if C_ARRAYS:  # compiled: written into one buffer in C (reply.bulk_array)
        reply = bulk_array(items)
        if reply is not None:
            return reply
    try:
        heads = list(map(_bulk_header, map(len, items)))
    except IndexError:  # an element of 4 kB or more
        return Raw(b"*%d\r\n" % n + b"".join([b"$%d\r\n%b\r\n" % (len(e), e) for e in items]))
    first = heads[0]
    if heads.count(first) == n:
        return Raw(b"*%d\r\n%b\r\n" % (n, first) + (b"\r\n%b\r\n" % first).join(items) + b"\r\n")
    parts: list = [None] * (2 * n)
    parts[0::2] = heads
    parts[1::2] = items
    return Raw(b"*%d\r\n" % n + b"\r\n".join(parts) + b"\r\n")


def _notify(c: Client, event: bytes, key: bytes, cls: str = "l") -> None:
    """A keyspace event (class 'l' for list events, 'g' for the generic "del")."""
    notifier = events.notifier
    if notifier is not None:
        notifier(c.db.id, cls, event, key)


def _removed(c: Client, key: bytes, lst: ListValue, count: int, left: bool) -> None:
    """After popping ``count`` elements: events, delete an emptied list, tell WATCH, count dirt."""
    _notify(c, b"lpop" if left else b"rpop", key)
    if not lst:
        c.db.delete(key)
        _notify(c, b"del", key, "g")
    c.db.modified(key)
    c.server.dirty += count


def _push_into(c: Client, key: bytes, dst: ListValue | None, value: bytes, left: bool) -> None:
    """The push half of LMOVE: create the destination if needed."""
    if dst is None:
        dst = ListValue()
        c.db.set(key, dst)
    c.db.modified(key)
    if left:
        dst.appendleft(value)
    else:
        dst.append(value)
    _notify(c, b"lpush" if left else b"rpush", key)


# -- pushes --------------------------------------------------------------------
def _push(c: Client, argv: list[bytes], left: bool, xx: bool) -> int:
    key = argv[1]
    db = c.db
    lst = db.lookup(key)
    if lst is None:
        if xx:
            return 0
        lst = ListValue()
        db.set(key, lst)
    elif type(lst) is not ListValue:
        raise WRONGTYPE
    if len(argv) == 3:
        if left:
            lst.appendleft(argv[2])
        else:
            lst.append(argv[2])
    elif left:
        lst.extendleft(islice(argv, 2, None))
    else:
        lst.extend(islice(argv, 2, None))
    c.server.dirty += len(argv) - 2
    if db.watched and key in db.watched:
        db.modified(key)
    if events.notifier is not None:
        _notify(c, b"lpush" if left else b"rpush", key)
    return len(lst)


def lpush(c: Client, argv: list[bytes]):
    return _push(c, argv, True, False)


def rpush(c: Client, argv: list[bytes]):
    return _push(c, argv, False, False)


# Registered after their definition: lists.pxd types them (a .pxd cannot type a decorated def).
command("lpush")(lpush)
command("rpush")(rpush)


@command("lpushx")
def lpushx(c: Client, argv: list[bytes]):
    return _push(c, argv, True, True)


@command("rpushx")
def rpushx(c: Client, argv: list[bytes]):
    return _push(c, argv, False, True)


@command("linsert")
def linsert(c: Client, argv: list[bytes]):
    where = argv[2].lower()
    if where == b"after":
        after = True
    elif where == b"before":
        after = False
    else:
        raise SYNTAX_ERR
    lst = _list_write(c, argv[1])
    if lst is None:
        return 0
    if not lst.insert_at_pivot(argv[3], argv[4], after):
        return -1
    c.db.modified(argv[1])
    _notify(c, b"linsert", argv[1])
    c.server.dirty += 1
    return len(lst)


# -- reads ---------------------------------------------------------------------
@command("llen")
def llen(c: Client, argv: list[bytes]):
    lst = _list_read(c, argv[1])
    return 0 if lst is None else len(lst)


@command("lindex")
def lindex(c: Client, argv: list[bytes]):
    lst = _list_read(c, argv[1])
    if lst is None:
        return None
    return lst.get(_long(argv[2]))


def lrange(c: Client, argv: list[bytes]):
    if _COMPILED:
        # lists.pxd's _c_lrange: both indices read in C, the key looked up through the typed
        # database and the reply written from the list into one buffer; None, before any
        # lookup, when an index is not in string2ll's plain form (the path below says why).
        reply = _c_lrange(c, argv, ListValue, Raw, EMPTY_ARRAY, WRONGTYPE, _bulk_array)  # noqa: F821
        if reply is not None:
            return reply
    start = _long(argv[2])
    end = _long(argv[3])
    lst = _list_read(c, argv[1])
    if lst is None:
        return EMPTY_ARRAY
    return _bulk_array(lst.range(start, end))


command("lrange")(lrange)


@command("lpos")
def lpos(c: Client, argv: list[bytes]):
    rank, count, maxlen = 1, -1, 0
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = j < n - 1
        if opt == b"rank" and more:
            j += 1
            rank = _long(argv[j])
            if rank == 0:
                raise RANK_ZERO
        elif opt == b"count" and more:
            j += 1
            count = get_positive(argv[j], COUNT_NEGATIVE)
        elif opt == b"maxlen" and more:
            j += 1
            maxlen = get_positive(argv[j], MAXLEN_NEGATIVE)
        else:
            raise SYNTAX_ERR
        j += 1
    if rank == -(2**63):
        rank = -1  # Redis negates LONG_MIN into itself: it behaves as the first match from the tail
    lst = c.db.lookup_read(argv[1])
    if lst is None:
        return EMPTY_ARRAY if count != -1 else None
    if type(lst) is not ListValue:
        raise WRONGTYPE
    found = lst.positions(argv[2], rank, 1 if count == -1 else count, maxlen)
    if count != -1:
        return found
    return found[0] if found else None


# -- single-key writes -----------------------------------------------------------
@command("lset")
def lset(c: Client, argv: list[bytes]):
    lst = c.db.lookup(argv[1])
    if lst is None:
        raise NO_SUCH_KEY
    if type(lst) is not ListValue:
        raise WRONGTYPE
    if not lst.set_at(_long(argv[2]), argv[3]):
        raise OUT_OF_RANGE
    c.db.modified(argv[1])
    _notify(c, b"lset", argv[1])
    c.server.dirty += 1
    return OK


@command("lrem")
def lrem(c: Client, argv: list[bytes]):
    count = _long(argv[2])
    lst = _list_write(c, argv[1])
    if lst is None:
        return 0
    removed = lst.remove_matches(argv[3], count)
    if removed:
        c.server.dirty += removed
        c.db.modified(argv[1])
        _notify(c, b"lrem", argv[1])
    if not lst:
        c.db.delete(argv[1])
        _notify(c, b"del", argv[1], "g")
    return removed


@command("ltrim")
def ltrim(c: Client, argv: list[bytes]):
    start = _long(argv[2])
    end = _long(argv[3])
    lst = _list_write(c, argv[1])
    if lst is None:
        return OK
    removed = lst.trim(start, end)
    _notify(c, b"ltrim", argv[1])
    if not lst:
        c.db.delete(argv[1])
        _notify(c, b"del", argv[1], "g")
    c.db.modified(argv[1])
    c.server.dirty += removed
    return OK


# -- pops ----------------------------------------------------------------------
def _pop(c: Client, argv: list[bytes], left: bool):
    if len(argv) > 3:
        raise ReplyError(f"ERR wrong number of arguments for '{'lpop' if left else 'rpop'}' command")
    has_count = len(argv) == 3
    count = get_positive(argv[2]) if has_count else 0
    key = argv[1]
    lst = _list_write(c, key)
    if lst is None:
        return NULL_ARRAY if has_count else None
    if has_count and not count:
        return EMPTY_ARRAY
    if not has_count:
        value = lst.popleft() if left else lst.pop()
        _removed(c, key, lst, 1, left)
        return value
    items = lst.pop_many(count, left)
    _removed(c, key, lst, len(items), left)
    return _bulk_array(items)


def _pop_one(c: Client, key: bytes, left: bool) -> bytes | None:
    """LPOP/RPOP without a count, the hot path of every consumer."""
    db = c.db
    lst = db.lookup(key)
    if lst is None:
        return None
    if type(lst) is not ListValue:
        raise WRONGTYPE
    value = lst.popleft() if left else lst.pop()
    if events.notifier is not None:
        _notify(c, b"lpop" if left else b"rpop", key)
    if not lst:
        db.delete(key)
        _notify(c, b"del", key, "g")
    if db.watched and key in db.watched:
        db.modified(key)
    c.server.dirty += 1
    return value


def lpop(c: Client, argv: list[bytes]):
    if len(argv) == 2:
        return _pop_one(c, argv[1], True)
    return _pop(c, argv, True)


def rpop(c: Client, argv: list[bytes]):
    if len(argv) == 2:
        return _pop_one(c, argv[1], False)
    return _pop(c, argv, False)


command("lpop")(lpop)
command("rpop")(rpop)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
_COMPILED = type(_probe).__name__ != "function"

if _COMPILED:
    # The dispatcher's C entries for the typed handlers (lists.pxd): a C call, not a Python one.
    _c_set_entry(TABLE.commands[b"lpush"], lpush, _e_lpush)  # noqa: F821
    _c_set_entry(TABLE.commands[b"rpush"], rpush, _e_rpush)  # noqa: F821
    _c_set_entry(TABLE.commands[b"lpop"], lpop, _e_lpop)  # noqa: F821
    _c_set_entry(TABLE.commands[b"rpop"], rpop, _e_rpop)  # noqa: F821
    _c_set_entry(TABLE.commands[b"lrange"], lrange, _e_lrange)  # noqa: F821


def _pop_range_with_key(c: Client, key: bytes, lst: ListValue, left: bool, count: int) -> list:
    """[LR]MPOP's reply for one key; propagated as [LR]POP key n."""
    items = lst.pop_many(count, left)
    _removed(c, key, lst, len(items), left)
    c.server.rewrite_propagation([b"LPOP" if left else b"RPOP", key, b"%d" % len(items)])
    return [key, _bulk_array(items)]


@command("lmpop")
def lmpop(c: Client, argv: list[bytes]):
    keys, left, count = parse_mpop(argv, 1, (b"left", b"right"))
    for key in keys:
        lst = _list_write(c, key)
        if lst:
            return _pop_range_with_key(c, key, lst, left, count)
    return NULL_ARRAY


# -- moves ---------------------------------------------------------------------
def _move(c: Client, argv: list[bytes], left_from: bool, left_to: bool, blocking_form: bytes | None):
    """LMOVE's body; ``blocking_form`` names the served command (b"blmove"/b"brpoplpush")."""
    src_key, dst_key = argv[1], argv[2]
    src = _list_write(c, src_key)
    if src is None:
        return None
    dst = _list_write(c, dst_key)
    value = src.popleft() if left_from else src.pop()
    _push_into(c, dst_key, dst, value, left_to)
    _notify(c, b"lpop" if left_from else b"rpop", src_key)
    if not src:
        c.db.delete(src_key)
        _notify(c, b"del", src_key, "g")
    c.db.modified(src_key)
    server = c.server
    server.dirty += 1
    if blocking_form == b"blmove":
        if server.blocking.serving is not None:
            where = (_LEFT if left_from else _RIGHT, _LEFT if left_to else _RIGHT)
        else:
            where = (argv[3], argv[4])
        server.rewrite_propagation([b"LMOVE", src_key, dst_key, *where])
    elif blocking_form == b"brpoplpush":
        server.rewrite_propagation([b"RPOPLPUSH", src_key, dst_key])
    return value


@command("lmove")
def lmove(c: Client, argv: list[bytes]):
    left_from = _where(argv[3])
    left_to = _where(argv[4])
    return _move(c, argv, left_from, left_to, None)


@command("rpoplpush")
def rpoplpush(c: Client, argv: list[bytes]):
    return _move(c, argv, False, True, None)


# -- blocking pops ---------------------------------------------------------------
def _blocking_pop(c: Client, argv: list[bytes], keys: list[bytes], left: bool, count: int, timeout: float):
    """BLPOP/BRPOP (count -1) and BLMPOP (count >= 1): pop now, or block on ``keys``."""
    serving = c.server.blocking.serving
    if serving is not None:
        # Served from the key that became ready, and from that key only.
        lst = c.db.lookup(serving)
        if type(lst) is not ListValue or not lst:
            return Block(keys, timeout, None, NULL_ARRAY, wake=b"list")
        keys = [serving]
    for key in keys:
        lst = _list_write(c, key)
        if not lst:
            continue
        if count != -1:
            return _pop_range_with_key(c, key, lst, left, count)
        value = lst.popleft() if left else lst.pop()
        _removed(c, key, lst, 1, left)
        c.server.rewrite_propagation([b"LPOP" if left else b"RPOP", key])
        return Raw(b"*2\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(key), key, len(value), value))
    if _deny_blocking(c):
        return NULL_ARRAY
    return Block(keys, timeout, None, NULL_ARRAY, wake=b"list")


def _timeout(c: Client, arg: bytes) -> float:
    # A retry never blocks anew: its deadline was fixed when it first blocked.
    return parse_timeout(arg) if c.server.blocking.serving is None else 0.0


@command("blpop")
def blpop(c: Client, argv: list[bytes]):
    timeout = _timeout(c, argv[-1])
    return _blocking_pop(c, argv, argv[1:-1], True, -1, timeout)


@command("brpop")
def brpop(c: Client, argv: list[bytes]):
    timeout = _timeout(c, argv[-1])
    return _blocking_pop(c, argv, argv[1:-1], False, -1, timeout)


@command("blmpop")
def blmpop(c: Client, argv: list[bytes]):
    keys, left, count = parse_mpop(argv, 2, (b"left", b"right"))
    timeout = _timeout(c, argv[1])
    return _blocking_pop(c, argv, keys, left, count, timeout)


def _blocking_move(c: Client, argv: list[bytes], left_from: bool, left_to: bool, timeout: float, form: bytes):
    src = _list_write(c, argv[1])
    if src is None:
        if _deny_blocking(c):
            return None
        return Block([argv[1]], timeout, None, NULL_ARRAY, wake=b"list")
    return _move(c, argv, left_from, left_to, form)


@command("blmove")
def blmove(c: Client, argv: list[bytes]):
    left_from = _where(argv[3])
    left_to = _where(argv[4])
    timeout = _timeout(c, argv[5])
    return _blocking_move(c, argv, left_from, left_to, timeout, b"blmove")


@command("brpoplpush")
def brpoplpush(c: Client, argv: list[bytes]):
    timeout = _timeout(c, argv[3])
    return _blocking_move(c, argv, False, True, timeout, b"brpoplpush")
