"""SORT and SORT_RO over lists, sets and sorted sets (Redis's sort.c semantics).

Elements are compared as numbers unless ALPHA is given; numbers are parsed the
way C's strtod parses them (leading blanks allowed, nothing after the number,
an empty string is 0, an overflowing or underflowing value is an error), and
equal numbers fall back to a binary comparison of the elements so the result is
deterministic. BY and GET patterns substitute the element for the first ``*``
and may end in ``->field`` to read a hash field. ``BY`` with no ``*`` means
"don't sort": lists and sorted sets keep their own order (DESC reverses it),
while a set is sorted ALPHA when the result is stored, so that what STORE
writes -- and what the AOF replays -- does not depend on hash-table order.
"""

from __future__ import annotations

import math
import re
from functools import cmp_to_key
from typing import Any

from rill.protocol.reply import ReplyError
from rill.storage.list import ListValue

from .. import notify as events
from ..client import Client
from .args import NOT_INT, SYNTAX_ERR, WRONGTYPE, eq, string2ll
from .pqsort import pqsort
from .table import command

SCORE_ERR = ReplyError("ERR One or more scores can't be converted into double")

# What strtod consumes as a whole (after leading white space): decimal or hex
# floating point, infinities and NaN. Anything after it makes the score invalid.
_STRTOD = re.compile(
    rb"[+-]?(?:"
    rb"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?"
    rb")",
    re.IGNORECASE,
)
_C_SPACE = b" \t\n\v\f\r"
_DBL_MIN = 2.2250738585072014e-308


def strtod_score(s: bytes) -> float | None:
    """The score SORT gives ``s``, or None when Redis reports a conversion error."""
    # strtod reads a C string: whatever follows a NUL is not seen (and a NUL where the
    # number ended counts as the end).
    text = s.split(b"\0", 1)[0].lstrip(_C_SPACE)
    if not text:
        return 0.0  # strtod consumed nothing and stopped at the terminator
    if _STRTOD.fullmatch(text) is None:
        return None
    body = text.lstrip(b"+-").lower()
    is_hex = body.startswith(b"0x")
    try:
        if is_hex:
            literal = text.decode()
            v = float.fromhex(literal if "p" in literal.lower() else literal + "p0")
            mantissa = body[2:].split(b"p")[0]
        else:
            v = float(text)
            mantissa = body.split(b"e")[0]
    except (ValueError, OverflowError):
        return None  # a hex literal beyond DBL_MAX: ERANGE
    if math.isnan(v):
        return None
    if math.isinf(v):
        return v if body.startswith(b"inf") else None  # overflow is ERANGE
    if v == 0.0:
        # A non-zero literal that underflowed to zero is ERANGE too.
        return v if not mantissa.strip(b"0.") else None
    return v if abs(v) >= _DBL_MIN else None  # subnormal: glibc reports ERANGE


def _binary_cmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


def _lookup_by_pattern(c: Client, pattern: bytes, subst: bytes) -> bytes | None:
    """The string (or hash field) a BY/GET pattern names for one element."""
    if pattern == b"#":
        return subst
    star = pattern.find(b"*")
    if star < 0:
        return None
    arrow = pattern.find(b"->", star + 1)
    field = None
    if arrow >= 0 and arrow + 2 < len(pattern):
        field = pattern[arrow + 2:]
        key = pattern[:star] + subst + pattern[star + 1:arrow]
    else:
        key = pattern[:star] + subst + pattern[star + 1:]
    value = c.db.lookup_read(key)
    if value is None:
        return None
    if field is None:
        if type(value) is bytes or type(value) is bytearray:
            return bytes(value)
        return None
    if getattr(value, "type_name", None) != b"hash":
        return None
    return value.get(field)


def _elements(value: Any) -> list[bytes]:
    """Every element of the value, in its native order (score order for a zset)."""
    if value is None:
        return []
    kind = value.type_name
    if kind == b"list":
        return list(value)
    if kind == b"set":
        return list(value.rdb_items())  # an intset's numeric order, as Redis iterates it
    return [m for m, _ in value.items()]  # a sorted set: score order


def _may_read_any_key(c: Client, argv: list[bytes]) -> bool:
    """BY and GET read keys named by the data: the user must be allowed to read every key."""
    return c.authenticated or c.server.acl.full_key_access(c, c.cur_cmd, argv)


def _sort(c: Client, argv: list[bytes], readonly: bool) -> Any:
    desc = alpha = dontsort = False
    limit_start, limit_count = 0, -1
    sortby: bytes | None = None
    storekey: bytes | None = None
    gets: list[bytes] = []
    j, argc = 2, len(argv)
    while j < argc:
        arg = argv[j]
        left = argc - j - 1
        if eq(arg, b"asc"):
            desc = False
        elif eq(arg, b"desc"):
            desc = True
        elif eq(arg, b"alpha"):
            alpha = True
        elif eq(arg, b"limit") and left >= 2:
            limit_start = string2ll(argv[j + 1])
            limit_count = string2ll(argv[j + 2]) if limit_start is not None else None
            if limit_start is None or limit_count is None:
                raise NOT_INT
            j += 2
        elif not readonly and eq(arg, b"store") and left >= 1:
            storekey = argv[j + 1]
            j += 1
        elif eq(arg, b"by") and left >= 1:
            sortby = argv[j + 1]
            dontsort = b"*" not in sortby
            if not dontsort and not _may_read_any_key(c, argv):
                raise ReplyError("ERR BY option of SORT denied due to insufficient ACL permissions.")
            j += 1
        elif eq(arg, b"get") and left >= 1:
            if not _may_read_any_key(c, argv):
                raise ReplyError("ERR GET option of SORT denied due to insufficient ACL permissions.")
            gets.append(argv[j + 1])
            j += 1
        else:
            raise SYNTAX_ERR
        j += 1

    value = c.db.lookup_read(argv[1])
    if value is not None and getattr(value, "type_name", None) not in (b"list", b"set", b"zset"):
        raise WRONGTYPE
    kind = value.type_name if value is not None else b"list"

    # A set's order is arbitrary: stored, or handed to a script, it is sorted so the
    # result is the same on replicas and in the AOF.
    if dontsort and kind == b"set" and (storekey is not None or c.kind == "lua"):
        dontsort, alpha, sortby = False, True, None

    # Redis converts a listpack sorted set to a skiplist before it sorts, for good (SORT_RO
    # too): OBJECT ENCODING shows it afterwards.
    if kind == b"zset":
        value.listpack = False

    vector = _elements(value)
    n = len(vector)
    start = min(max(limit_start, 0), n)
    count = min(max(limit_count, -1), n)
    end = n - 1 if count < 0 else start + count - 1
    if start >= n:
        start, end = n - 1, n - 2
    if end >= n:
        end = n - 1

    if dontsort:
        if kind != b"set" and desc:
            vector.reverse()
    else:
        if sortby is not None:
            keys: list[Any] = [_lookup_by_pattern(c, sortby, e) for e in vector]
        else:
            keys = vector
        if alpha:
            if sortby is None:
                # Compare the elements themselves (strcoll under the C locale: bytes).
                vector.sort(reverse=desc)
            else:
                def by_cmp(a: tuple[bytes, bytes | None], b: tuple[bytes, bytes | None]) -> int:
                    x, y = a[1], b[1]
                    if x is None or y is None:
                        r = 0 if x is y else (-1 if x is None else 1)
                    else:
                        r = _binary_cmp(x, y)
                    return -r if desc else r

                pairs = list(zip(vector, keys, strict=True))
                if start != 0 or end != n - 1:
                    # Redis sorts only the LIMIT window with its partial quicksort, which
                    # leaves elements whose BY values tie in an order of its own.
                    pqsort(pairs, by_cmp, start, end)
                else:
                    pairs.sort(key=cmp_to_key(by_cmp))  # glibc's qsort: a stable merge sort
                vector = [e for e, _ in pairs]
        else:
            scores: list[float] = []
            bad = False
            for k in keys:
                if k is None:
                    scores.append(0.0)  # a missing BY key weighs 0
                    continue
                s = strtod_score(k)
                if s is None:
                    bad = True
                    s = 0.0
                scores.append(s)
            if bad:
                raise SCORE_ERR  # Redis sorts first, then reports; nothing is stored
            # Equal scores fall back to comparing the elements; DESC reverses both.
            decorated = sorted(zip(scores, vector, strict=True), reverse=desc)
            vector = [e for _, e in decorated]

    selected = vector[start:end + 1] if end >= start else []
    if storekey is None:
        if not gets:
            return selected
        out: list[bytes | None] = []
        for e in selected:
            for pattern in gets:
                out.append(_lookup_by_pattern(c, pattern, e))
        return out

    stored = ListValue()
    if not gets:
        stored.extend(selected)
    else:
        for e in selected:
            for pattern in gets:
                v = _lookup_by_pattern(c, pattern, e)
                stored.append(b"" if v is None else v)
    outputlen = len(stored)
    db = c.db
    if outputlen:
        db.set(storekey, stored)
        db.modified(storekey)
        events.notify(db.id, "l", b"sortstore", storekey)
        c.server.dirty += outputlen
    elif db.delete(storekey):
        db.modified(storekey)
        events.notify(db.id, "g", b"del", storekey)
        c.server.dirty += 1
    return outputlen


def _sort_keys(argv: list[bytes]) -> list[tuple[int, int]]:
    """sortGetKeys: the sorted key (spec 0), and the key of the last STORE (spec 2),
    options' arguments skipped."""
    found = [(1, 0)]
    store = None
    i = 2
    while i < len(argv):
        word = argv[i].lower()
        if word == b"limit":
            i += 2
        elif word in (b"get", b"by"):
            i += 1
        elif word == b"store" and i + 1 < len(argv):
            store = i + 1
        i += 1
    if store is not None:
        found.append((store, 2))
    return found


def _sort_ro_keys(argv: list[bytes]) -> list[tuple[int, int]]:
    """sortROGetKeys: the BY/GET patterns make the key specs unusable, the sorted key is all."""
    return [(1, 0)]


@command("sort", getkeys=_sort_keys)
def sort(c: Client, argv: list[bytes]) -> Any:
    return _sort(c, argv, readonly=False)


@command("sort_ro", getkeys=_sort_ro_keys)
def sort_ro(c: Client, argv: list[bytes]) -> Any:
    return _sort(c, argv, readonly=True)
