"""Stream nodes: listpacks in Redis's node layout (t_stream.c), read and checked.

Node layout (listpack elements)::

    master entry:  count | deleted | num-fields | field_1 .. field_N | 0
    each entry:    flags | ms-diff | seq-diff | num-fields | f1 | v1 .. fN | vN | lp-count
    SAMEFIELDS:    flags | ms-diff | seq-diff | v1 .. vN | lp-count

Functions here work on one node (``bytes`` or ``bytearray``) and its master ID: parsing the
master entry, walking entries both ways, seeking an ID, decoding entries into
``(id, [f1, v1, ...])`` (the reference decoder), compaction of tombstones, and the integrity
check an RDB load runs.  Appending and the node index belong to :mod:`.stream`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from ..listpack import (
    _HDR,
    _INTSTR,
    _SMALL_INT_ELEM,
    LP_HDR_NUMELE_UNKNOWN,
    LP_HDR_SIZE,
    ListpackError,
    element,
    get,
    int_element,
    replace_int,
    skip,
    string_to_int64,
    validate,
    validate_next,
    value_bytes,
)
from .ids import _SIGN64, _TWO64, ID_MAX, MASK64

FLAG_NONE = 0
FLAG_DELETED = 1
FLAG_SAMEFIELDS = 2

STREAM_LISTPACK_MAX_SIZE = 1 << 30

_SMALL_MIN = -4096
_SMALL_MAX = 4095

# Pre-encoded pieces of the node layout.
_E_FLAGS_NONE = _SMALL_INT_ELEM[FLAG_NONE - _SMALL_MIN]
_E_FLAGS_SAME = _SMALL_INT_ELEM[FLAG_SAMEFIELDS - _SMALL_MIN]
_E_ZERO = _SMALL_INT_ELEM[0 - _SMALL_MIN]
_E_ONE = _SMALL_INT_ELEM[1 - _SMALL_MIN]


def _to_int64(v: int) -> int:
    """A uint64 difference as the int64 Redis stores (lpAppendInteger of a uint64 cast)."""
    v &= MASK64
    return v - _TWO64 if v >= _SIGN64 else v


# --------------------------------------------------------------------------------------------
# Node-level helpers (work on bytes or bytearray)
# --------------------------------------------------------------------------------------------


def _get_int(lp: bytes | bytearray, p: int) -> tuple[int, int]:
    """Integer element at ``p`` (strings holding integers are converted, as
    lpGetIntegerIfValid does); raises ListpackError if it is not an integer."""
    v, q = get(lp, p)
    if isinstance(v, int):
        return v, q
    iv = string_to_int64(bytes(v))
    if iv is None:
        raise ListpackError("stream node element is not an integer")
    return iv, q


def _get_bytes(lp: bytes | bytearray, p: int) -> tuple[bytes, int]:
    v, q = get(lp, p)
    return value_bytes(v), q


def _master(lp: bytes | bytearray) -> tuple[int, int, int, list[bytes], int]:
    """Parse a node's master entry: ``(count, deleted, num_fields, fields, first_entry_p)``."""
    count, p = _get_int(lp, LP_HDR_SIZE)
    deleted, p = _get_int(lp, p)
    nf, p = _get_int(lp, p)
    fields = []
    for _ in range(nf):
        f, p = _get_bytes(lp, p)
        fields.append(f)
    p = skip(lp, p)  # master terminator (0)
    return count, deleted, nf, fields, p


def node_counts(lp: bytes | bytearray) -> tuple[int, int]:
    """``(live, deleted)`` entry counters of a node's master entry."""
    c = lp[6]
    if c < 128:
        d = lp[8]
        if d < 128:
            return c, d
    count, p = _get_int(lp, LP_HDR_SIZE)
    deleted, _ = _get_int(lp, p)
    return count, deleted


def _set_counts(lp: bytearray, count: int, deleted: int) -> None:
    """Rewrite the master entry's count and deleted counters in place."""
    replace_int(lp, LP_HDR_SIZE, count)
    replace_int(lp, skip(lp, LP_HDR_SIZE), deleted)


def _prev(lp: bytes | bytearray, p: int) -> int:
    """Offset of the element before ``p`` (1-byte backlen fast path)."""
    b = lp[p - 1]
    if b < 128:
        return p - 1 - b
    val = b & 127
    shift = 7
    q = p - 2
    while True:
        b = lp[q]
        val |= (b & 127) << shift
        if not b & 128:
            break
        shift += 7
        q -= 1
    return q - val


class _Entry(NamedTuple):
    p_flags: int  # offset of the flags element
    flags: int
    sid: int
    p_data: int  # offset of the first field (no SAMEFIELDS) or first value
    nfields: int
    samefields: bool


def _walk(key: int, lp: bytes | bytearray) -> Iterator[_Entry]:
    """Every entry of a node, tombstones included, in listpack order.

    Flag changes made by the caller between steps are fine (they never move bytes).
    """
    mms = key >> 64
    mseq = key & MASK64
    _count, _deleted, nf, _fields, p = _master(lp)
    end = len(lp) - 1
    while p < end:
        p_flags = p
        b = lp[p]
        if b < 128:
            flags = b
            p += 2
        else:
            flags, p = _get_int(lp, p)
        b = lp[p]
        if b < 128:
            msd = b
            p += 2
        else:
            msd, p = _get_int(lp, p)
        b = lp[p]
        if b < 128:
            seqd = b
            p += 2
        else:
            seqd, p = _get_int(lp, p)
        sid = (((mms + msd) & MASK64) << 64) | ((mseq + seqd) & MASK64)
        if flags & FLAG_SAMEFIELDS:
            nfe = nf
            same = True
            todo = nf
        else:
            nfe, p = _get_int(lp, p)
            same = False
            todo = nfe << 1
        yield _Entry(p_flags, flags, sid, p, nfe, same)
        for _ in range(todo):
            b = lp[p]
            if b < 128:
                p += 2
            elif b < 192:
                p += (b & 63) + 2
            else:
                p = skip(lp, p)
        p = skip(lp, p)  # lp-count


def _node_edge_id(key: int, lp: bytes | bytearray, first: bool) -> int | None:
    """ID of the first or last entry of a node, tombstones included (lpGetEdgeStreamID)."""
    if first:
        for e in _walk(key, lp):
            return e.sid
        return None
    p = _prev(lp, len(lp) - 1)  # last lp-count (0 = master terminator: no entries)
    lc, _ = _get_int(lp, p)
    if lc == 0:
        return None
    for _ in range(lc):
        p = _prev(lp, p)
    p = skip(lp, p)  # flags
    msd, p = _get_int(lp, p)
    seqd, _ = _get_int(lp, p)
    return ((((key >> 64) + msd) & MASK64) << 64) | (((key & MASK64) + seqd) & MASK64)


def _master_fast(lp: bytes) -> tuple[int, list[bytes], int]:
    """``(num_fields, fields, first_entry_p)`` of a node, skipping the counters."""
    b = lp[6]
    p = 8 if b < 128 else skip(lp, 6)  # count
    b = lp[p]
    p = p + 2 if b < 128 else skip(lp, p)  # deleted
    b = lp[p]
    if b < 128:
        nf = b
        p += 2
    else:
        nf, p = _get_int(lp, p)
    fields = []
    for _ in range(nf):
        b = lp[p]
        if b & 0xC0 == 0x80:
            q = p + 1 + (b & 63)
            fields.append(lp[p + 1 : q])
            p = q + 1
        else:
            f, p = _get_bytes(lp, p)
            fields.append(f)
    b = lp[p]
    p = p + 2 if b < 128 else skip(lp, p)  # master terminator
    return nf, fields, p


def _entry_head(lp: bytes | bytearray, p: int, mms: int, mseq: int) -> tuple[int, int, int]:
    """``(flags, id, offset_after_the_ids)`` of the entry whose flags are at ``p``."""
    b = lp[p]
    if b < 128:
        flags = b
        p += 2
    else:
        flags, p = _get_int(lp, p)
    b = lp[p]
    if b < 128:
        ms = mms + b
        p += 2
    else:
        d, p = _get_int(lp, p)
        ms = mms + d
    b = lp[p]
    if b < 128:
        seq = mseq + b
        p += 2
    else:
        d, p = _get_int(lp, p)
        seq = mseq + d
    return flags, ((ms & MASK64) << 64) | (seq & MASK64), p


def _prev_entry(lp: bytes | bytearray, pf: int) -> int | None:
    """Flags offset of the entry before the one whose flags are at ``pf`` (None at the
    first entry): read the previous lp-count and jump back that many elements."""
    pl = _prev(lp, pf)
    b = lp[pl]
    lc = b if b < 128 else _get_int(lp, pl)[0]
    if lc == 0:
        return None  # master terminator
    q = pl
    for _ in range(lc):
        b = lp[q - 1]
        q = q - 1 - b if b < 128 else _prev(lp, q)
    return q


def _last_entry(lp: bytes | bytearray) -> int | None:
    """Flags offset of the last entry of a node, None if it has none."""
    return _prev_entry(lp, len(lp) - 1)


def _seek_start(lp: bytes, key: int, start: int, p0: int) -> int:
    """Where a forward scan for live entries >= ``start`` can begin.

    Walks backwards from the node's end when ``start`` looks closer to the end (by ID
    interpolation), else returns the first entry.  Live entries are always in ID order
    inside a node (XSETID can only move last_id down past tombstones), so stopping at the
    first live entry < start loses nothing a forward scan would emit.
    """
    pf = _last_entry(lp)
    if pf is None:
        return p0
    mms = key >> 64
    mseq = key & MASK64
    flags, sid, _ = _entry_head(lp, pf, mms, mseq)
    if (start - key) << 1 <= sid - key:
        return p0
    nxt = len(lp) - 1
    while True:
        if not flags & FLAG_DELETED and sid < start:
            return nxt
        nxt = pf
        q = _prev_entry(lp, pf)
        if q is None:
            return pf
        pf = q
        flags, sid, _ = _entry_head(lp, pf, mms, mseq)


def _seek_end(lp: bytes, key: int, end: int, p0: int, nf: int) -> int | None:
    """Flags offset where a backward scan for live entries <= ``end`` can begin (None:
    nothing in this node qualifies).  Scans forward when ``end`` looks closer to the
    node's start, stopping before the first live entry > end."""
    pf = _last_entry(lp)
    if pf is None:
        return None
    mms = key >> 64
    mseq = key & MASK64
    _flags, last_sid, _ = _entry_head(lp, pf, mms, mseq)
    if end >= last_sid or (end - key) << 1 >= last_sid - key:
        return pf
    endp = len(lp) - 1
    p = p0
    prev = None
    while p < endp:
        flags, sid, q = _entry_head(lp, p, mms, mseq)
        if not flags & FLAG_DELETED and sid > end:
            return prev
        prev = p
        p = _skip_entry_data(lp, q, flags, nf)
    return prev


def _skip_entry_data(lp: bytes | bytearray, p: int, flags: int, nf: int) -> int:
    """Offset of the next entry, given ``p`` just after an entry's IDs and the node's
    master field count ``nf``."""
    if flags & FLAG_SAMEFIELDS:
        todo = nf
    else:
        b = lp[p]
        if b < 128:
            todo = b << 1
            p += 2
        else:
            n, p = _get_int(lp, p)
            todo = n << 1
    for _ in range(todo):
        b = lp[p]
        if b < 128:
            p += 2
        elif b < 192:
            p += (b & 63) + 2
        else:
            p = skip(lp, p)
    b = lp[p]
    return p + 2 if b < 128 else skip(lp, p)  # lp-count


def _fwd_node(
    key: int,
    lp: bytes | bytearray,
    start: int,
    end: int,
    limit: int,
    tombstones: bool,
    out: list[tuple[int, list[bytes]]],
) -> bool:
    """Append the node's entries with start <= id <= end to ``out`` in listpack order,
    until ``len(out)`` reaches ``limit`` (0 = no limit).  Returns True when the whole
    iteration is over (an entry past ``end`` or the limit was reached), False when the
    next node should be visited.  Same filtering as streamIteratorGetID."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    mms = key >> 64
    mseq = key & MASK64
    nf, fields, p = _master_fast(lp)
    if start > key and not tombstones:
        p = _seek_start(lp, key, start, p)
    endp = len(lp) - 1
    append = out.append
    while p < endp:
        b = lp[p]
        if b < 128:
            flags = b
            p += 2
        else:
            flags, p = _get_int(lp, p)
        b = lp[p]
        if b < 128:
            ms = mms + b
            p += 2
        elif 0xC0 <= b < 0xE0:
            u = ((b & 31) << 8) | lp[p + 1]
            ms = mms + (u - 8192 if u >= 4096 else u)
            p += 3
        else:
            d, p = _get_int(lp, p)
            ms = mms + d
        b = lp[p]
        if b < 128:
            seq = mseq + b
            p += 2
        elif 0xC0 <= b < 0xE0:
            u = ((b & 31) << 8) | lp[p + 1]
            seq = mseq + (u - 8192 if u >= 4096 else u)
            p += 3
        else:
            d, p = _get_int(lp, p)
            seq = mseq + d
        sid = ((ms & MASK64) << 64) | (seq & MASK64)
        if flags & FLAG_SAMEFIELDS:
            same = True
            todo = nf
        else:
            same = False
            b = lp[p]
            if b < 128:
                todo = b << 1
                p += 2
            else:
                todo, p = _get_int(lp, p)
                todo <<= 1
        if sid >= start and (tombstones or not flags & FLAG_DELETED):
            if sid > end:
                return True
            fv: list[bytes] = []
            fapp = fv.append
            if same:
                for f in fields:
                    fapp(f)
                    b = lp[p]
                    if b & 0xC0 == 0x80:
                        q = p + 1 + (b & 63)
                        fapp(lp[p + 1 : q])
                        p = q + 1
                    elif b < 128:
                        fapp(_INTSTR[b])
                        p += 2
                    elif b & 0xE0 == 0xC0:  # 13-bit integer
                        u = ((b & 31) << 8) | lp[p + 1]
                        fapp(_INTSTR[u] if u < 4096 else b"%d" % (u - 8192))
                        p += 3
                    else:
                        v, p = _get_bytes(lp, p)
                        fapp(v)
            else:
                for _ in range(todo):
                    b = lp[p]
                    if b & 0xC0 == 0x80:
                        q = p + 1 + (b & 63)
                        fapp(lp[p + 1 : q])
                        p = q + 1
                    elif b < 128:
                        fapp(_INTSTR[b])
                        p += 2
                    elif b & 0xE0 == 0xC0:  # 13-bit integer
                        u = ((b & 31) << 8) | lp[p + 1]
                        fapp(_INTSTR[u] if u < 4096 else b"%d" % (u - 8192))
                        p += 3
                    else:
                        v, p = _get_bytes(lp, p)
                        fapp(v)
            b = lp[p]
            p = p + 2 if b < 128 else skip(lp, p)  # lp-count
            append((sid, fv))
            if limit and len(out) >= limit:
                return True
            continue
        for _ in range(todo):
            b = lp[p]
            if b < 128:
                p += 2
            elif b < 192:
                p += (b & 63) + 2
            else:
                p = skip(lp, p)
        b = lp[p]
        p = p + 2 if b < 128 else skip(lp, p)  # lp-count
    return False


def _rev_node(
    key: int,
    lp: bytes | bytearray,
    start: int,
    end: int,
    limit: int,
    tombstones: bool,
    out: list[tuple[int, list[bytes]]],
) -> bool:
    """Like :func:`_fwd_node` but from the node's end backwards (reverse iteration walks
    lp-counts and backlens as Redis does)."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    mms = key >> 64
    mseq = key & MASK64
    nf, fields, p0 = _master_fast(lp)
    if tombstones or end >= ID_MAX:
        pf = _last_entry(lp)
    else:
        pf = _seek_end(lp, key, end, p0, nf)
    append = out.append
    while pf is not None:
        flags, sid, p = _entry_head(lp, pf, mms, mseq)
        if sid <= end and (tombstones or not flags & FLAG_DELETED):
            if sid < start:
                return True
            fv: list[bytes] = []
            fapp = fv.append
            if flags & FLAG_SAMEFIELDS:
                for f in fields:
                    fapp(f)
                    b = lp[p]
                    if b & 0xC0 == 0x80:
                        q = p + 1 + (b & 63)
                        fapp(lp[p + 1 : q])
                        p = q + 1
                    elif b < 128:
                        fapp(_INTSTR[b])
                        p += 2
                    else:
                        v, p = _get_bytes(lp, p)
                        fapp(v)
            else:
                n, p = _get_int(lp, p)
                for _ in range(n << 1):
                    v, p = _get_bytes(lp, p)
                    fapp(v)
            append((sid, fv))
            if limit and len(out) >= limit:
                return True
        pf = _prev_entry(lp, pf)
    return False


def _find_live(key: int, lp: bytes | bytearray, sid: int) -> tuple[int, int] | None:
    """``(flags_offset, flags)`` of live entry ``sid`` in this node, or None."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    mms = key >> 64
    mseq = key & MASK64
    nf, _fields, p = _master_fast(lp)
    if sid > key:
        p = _seek_start(lp, key, sid, p)
    endp = len(lp) - 1
    while p < endp:
        flags, esid, q = _entry_head(lp, p, mms, mseq)
        if not flags & FLAG_DELETED and esid >= sid:
            return (p, flags) if esid == sid else None
        p = _skip_entry_data(lp, q, flags, nf)
    return None


# --------------------------------------------------------------------------------------------
# Node compaction (garbage collection of tombstones)
# --------------------------------------------------------------------------------------------
#
# Redis never reclaims the bytes of deleted entries: XDEL and exact trims only set a flag, and
# a node goes away only when its last live entry does. rill rewrites a node without its
# tombstones once enough of it is deleted, but only in ways no reply can tell apart from
# Redis's layout, because that layout decides what Redis does next:
#
# - Node boundaries never move (no merging): XINFO's radix-tree counters and ``~`` trims,
#   which remove whole nodes only, depend on them.
# - The open tail node is never rewritten: XADD appends to it or opens a new node depending
#   on its byte size and on its live + deleted entry count (streamAppendItem).  A node is
#   rewritten when it is closed or later.
# - The first and the last entry of a node stay, tombstones or not: Redis reads them
#   (lpGetEdgeStreamID) for MINID's whole-node test and for the ID an approximate MINID trim
#   propagates.
# - What a rewrite dropped (entry count and bytes) is remembered per node (Stream._ghost):
#   a closed node becomes the tail again when every node after it goes, and XADD then has to
#   see the counters and size Redis's copy of the node has.
#
# The rewritten node keeps its rax key and master entry, and the kept entries' bytes are
# copied verbatim, so it is an ordinary Redis stream node (counters match its entries) that
# redis-server loads and iterates like any other.


def _int_len(v: int) -> int:
    """Encoded size of integer element ``v`` (what a master counter occupies)."""
    return 2 if 0 <= v < 128 else len(int_element(v))


def _compact_entries(
    key: int, lp: bytes | bytearray, nf: int
) -> tuple[list[tuple[bytes, int]], int, int, int]:
    """The entries of a node that a compaction keeps -- every live one plus the first and the
    last entry -- as ``(raw_bytes, element_count)``; then how many kept entries are tombstones,
    and how many entries and bytes were dropped."""
    out: list[tuple[bytes, int]] = []
    mms = key >> 64
    mseq = key & MASK64
    _c, _d, _nf, _f, p = _master(lp)
    end = len(lp) - 1
    kept_dead = dropped = dropped_bytes = 0
    first = True
    while p < end:
        flags, _sid, q = _entry_head(lp, p, mms, mseq)
        nxt = _skip_entry_data(lp, q, flags, nf)
        if not flags & FLAG_DELETED or first or nxt >= end:
            lc, _ = _get_int(lp, _prev(lp, nxt))
            out.append((bytes(lp[p:nxt]), lc + 1))
            if flags & FLAG_DELETED:
                kept_dead += 1
        else:
            dropped += 1
            dropped_bytes += nxt - p
        first = False
        p = nxt
    return out, kept_dead, dropped, dropped_bytes


def _build_node(
    fields: list[bytes], entries: list[tuple[bytes, int]], count: int, deleted: int
) -> bytes:
    """A node listpack: master entry (``count`` live, ``deleted`` tombstones, ``fields``)
    followed by the given raw entries."""
    parts = [b"\x00" * LP_HDR_SIZE, int_element(count), int_element(deleted),
             int_element(len(fields))]
    parts += [element(f) for f in fields]
    parts.append(_E_ZERO)
    nele = 4 + len(fields)
    for raw, n in entries:
        parts.append(raw)
        nele += n
    parts.append(b"\xff")
    lp = bytearray(b"".join(parts))
    _HDR.pack_into(lp, 0, len(lp), nele if nele < LP_HDR_NUMELE_UNKNOWN else LP_HDR_NUMELE_UNKNOWN)
    return bytes(lp)


class GCStats:
    """Process-wide garbage-collection counters (INFO memory)."""

    runs = 0  # nodes rewritten without their tombstones
    reclaimed_bytes = 0  # listpack bytes given back


def validate_node(lp: bytes | bytearray, deep: bool = False) -> bool:
    """Stream-node integrity check as Redis runs it on load (streamValidateListpackIntegrity).

    Shallow: only the listpack header.  Deep: every element, the master entry with its zero
    terminator, exactly count+deleted entries, each lp-count matching its entry's shape, and
    nothing after the last entry.  (Like Redis, it does not check IDs or counters' meaning.)
    """
    if not validate(lp, False):
        return False
    if not deep:
        return True
    size = len(lp)
    state = {"p": LP_HDR_SIZE}

    def nxt() -> int | None:
        """Validate the element at the cursor and return its offset (None = invalid/EOF)."""
        p = state["p"]
        q = validate_next(lp, p, size)
        if q is None or q == -1:
            return None
        state["p"] = q
        return p

    def next_int() -> int | None:
        p = nxt()
        if p is None:
            return None
        try:
            return _get_int(lp, p)[0]
        except (ListpackError, ValueError):
            return None

    try:
        count = next_int()
        deleted = next_int()
        master_fields = next_int()
        if count is None or deleted is None or master_fields is None:
            return False
        for _ in range(master_fields):
            if nxt() is None:
                return False
        if next_int() != 0 or count + deleted < 0:
            return False
        for _ in range(count + deleted):
            flags = next_int()
            if flags is None or next_int() is None or next_int() is None:
                return False
            fields = master_fields
            extra = 3
            if not flags & FLAG_SAMEFIELDS:
                fields = next_int()
                if fields is None:
                    return False
                for _ in range(fields):
                    if nxt() is None:
                        return False
                extra += fields + 1
            for _ in range(fields):
                if nxt() is None:
                    return False
            lp_count = next_int()
            if lp_count is None or lp_count != fields + extra:
                return False
        return lp[state["p"]] == 0xFF
    except (IndexError, struct.error, ListpackError):
        return False
