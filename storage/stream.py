"""The Redis Streams data type, stored the way Redis 7 stores it (t_stream.c, stream.h).

Entries live in *nodes*: real listpacks in Redis's node layout, indexed by their master ID
in a :class:`~.rax.Rax`.  Because the bytes are Redis's bytes, an RDB writer can emit nodes
verbatim and a loader can insert them without touching entries (:meth:`Stream.nodes`,
:meth:`Stream.load_node`).

Node layout (listpack elements)::

    master entry:  count | deleted | num-fields | field_1 .. field_N | 0
    each entry:    flags | ms-diff | seq-diff | num-fields | f1 | v1 .. fN | vN | lp-count
    SAMEFIELDS:    flags | ms-diff | seq-diff | v1 .. vN | lp-count

IDs are single Python ints ``ms << 64 | seq``: they compare and hash faster than tuples,
sort exactly like Redis's 16-byte big-endian rax keys, and ``id + 1`` / ``id - 1`` are
streamIncrID / streamDecrID.  :func:`make_id`, :func:`split_id`, :func:`format_id`,
:func:`format_sid` convert.  Command-level ID parsing (``-``, ``+``, ``*``, ``ms-*``, ``(``)
belongs to the command layer.

Speed notes: XADD appends to the tail node, whose header fields (counts, master fields,
element count) are cached on the Stream so an append never re-parses the node; the cache
is dropped whenever anything else touches the tail node.  Closed nodes are stored as
immutable ``bytes`` of exact size (Redis's lpShrinkToFit), so decoding slices them into
``bytes`` directly; only the tail (and nodes touched by XDEL/XTRIM) are ``bytearray``.
Reads seek the first node through the rax and, inside a node, walk from whichever end is
closer; recently read nodes are kept decoded in a small global LRU (see "Decoded-node
cache"), so repeated reads and consumers at the tail cost a bisect and a slice.

Returned ``[f1, v1, ...]`` lists may be shared with that cache: treat them as read-only.
"""

from __future__ import annotations

import heapq
import struct
import sys
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .listpack import (
    _HDR,
    _INTSTR,
    _NUMSTART,
    _SMALL_INT_ELEM,
    _STR6_BL,
    _STR6_HDR,
    LP_HDR_NUMELE_UNKNOWN,
    LP_HDR_SIZE,
    ListpackError,
    element,
    get,
    int_element,
    length,
    replace_int,
    skip,
    string_to_int64,
    validate,
    validate_next,
    value_bytes,
)
from .rax import Rax

__all__ = [
    "MASK64",
    "ID_MAX",
    "FLAG_NONE",
    "FLAG_DELETED",
    "FLAG_SAMEFIELDS",
    "STREAM_LISTPACK_MAX_SIZE",
    "SCG_INVALID_ENTRIES_READ",
    "StreamIDError",
    "StreamSizeError",
    "make_id",
    "split_id",
    "format_id",
    "format_sid",
    "encode_key",
    "decode_key",
    "incr_id",
    "decr_id",
    "default_trim_limit",
    "validate_node",
    "clear_node_cache",
    "node_counts",
    "REF_KEEP",
    "REF_DEL",
    "REF_ACKED",
    "GCStats",
    "IdmpState",
    "NACK",
    "Consumer",
    "ConsumerGroup",
    "ClaimResult",
    "AutoClaimResult",
    "Stream",
]

MASK64 = (1 << 64) - 1
ID_MAX = (1 << 128) - 1  # UINT64_MAX-UINT64_MAX
_SIGN64 = 1 << 63
_TWO64 = 1 << 64

FLAG_NONE = 0
FLAG_DELETED = 1
FLAG_SAMEFIELDS = 2

STREAM_LISTPACK_MAX_SIZE = 1 << 30
SCG_INVALID_ENTRIES_READ = -1

# Consumer-group reference policies of deletions and trims (Redis 8.2).
REF_KEEP = 0  # KEEPREF: PELs keep the IDs (Redis 7's only behaviour)
REF_DEL = 1  # DELREF: PEL references go with the entry
REF_ACKED = 2  # ACKED: only entries no group references are removed

# IDMP defaults and bounds (Redis 8.6 docs: XCFGSET).
IDMP_DURATION_DEFAULT = 100
IDMP_MAXSIZE_DEFAULT = 100
IDMP_DURATION_MAX = 86400
IDMP_MAXSIZE_MAX = 10000

_SMALL_MIN = -4096
_SMALL_MAX = 4095

# Pre-encoded pieces of the node layout.
_E_FLAGS_NONE = _SMALL_INT_ELEM[FLAG_NONE - _SMALL_MIN]
_E_FLAGS_SAME = _SMALL_INT_ELEM[FLAG_SAMEFIELDS - _SMALL_MIN]
_E_ZERO = _SMALL_INT_ELEM[0 - _SMALL_MIN]
_E_ONE = _SMALL_INT_ELEM[1 - _SMALL_MIN]


class StreamIDError(ValueError):
    """The ID is not greater than the stream's last ID (Redis's EDOM case of XADD)."""


class StreamSizeError(ValueError):
    """The entry cannot be stored (Redis's ERANGE case: "Elements are too large")."""


# --------------------------------------------------------------------------------------------
# IDs
# --------------------------------------------------------------------------------------------


def make_id(ms: int, seq: int) -> int:
    """The int form of stream ID ``ms-seq``."""
    return (ms << 64) | seq


def split_id(sid: int) -> tuple[int, int]:
    """``(ms, seq)`` of an int ID."""
    return sid >> 64, sid & MASK64


def format_id(ms: int, seq: int) -> bytes:
    """``b"ms-seq"``, the reply/propagation form of an ID."""
    return b"%d-%d" % (ms, seq)


def format_sid(sid: int) -> bytes:
    """``b"ms-seq"`` of an int ID."""
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def encode_key(sid: int) -> bytes:
    """16-byte big-endian ``ms || seq``: the rax/RDB key of a node or PEL entry."""
    return sid.to_bytes(16, "big")


def decode_key(key: bytes) -> int:
    """Inverse of :func:`encode_key`."""
    return int.from_bytes(key, "big")


def incr_id(sid: int) -> int | None:
    """Successor ID, None when ``sid`` is the maximum (streamIncrID's C_ERR)."""
    return None if sid >= ID_MAX else sid + 1


def decr_id(sid: int) -> int | None:
    """Predecessor ID, None when ``sid`` is 0-0 (streamDecrID's C_ERR)."""
    return None if sid <= 0 else sid - 1


def default_trim_limit(node_max_entries: int) -> int:
    """LIMIT used by ``~`` trims when none is given: 100 nodes' worth, clamped as Redis does."""
    limit = 100 * node_max_entries
    if limit <= 0:
        limit = 10000
    if limit > 1000000:
        limit = 1000000
    return limit


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


# Where forward reads stopped. Consumers read a node in consecutive slices (XREADGROUP
# COUNT n, XREAD from the last ID seen), and finding where a slice begins by walking the
# node costs about a microsecond per entry skipped. A forward read that stops after entry X
# records where the next entry begins, keyed by the node object (held, so its id cannot be
# reused); a read starting at exactly X + 1 jumps there. The offset is kept relative to the
# first entry: appends and in-place flag changes never move entries relative to it, while
# the master entry before it can grow with its counters. An immutable (bytes) node also
# keeps its parsed layout -- fields, first and last entry -- which a slice would otherwise
# re-parse for every few entries it reads. Holding a node keeps it alive after it leaves
# its stream, so the notes are bounded as the decoded-node cache is: as many nodes, none
# larger than it admits.
_RESUME: dict[int, tuple[object, int, int, tuple | None, int]] = {}


def _note_resume(
    node: bytes | bytearray, key: int, start: int, rel: int, layout: tuple | None
) -> None:
    """A forward read of ``node`` (master ID ``key``) may resume at entry offset ``rel``
    for IDs >= ``start``."""
    if len(node) > _NC_MAX_NODE_BYTES:
        return
    i = id(node)
    if i not in _RESUME and len(_RESUME) >= _NC_MAX_NODES:
        del _RESUME[next(iter(_RESUME))]
    _RESUME[i] = (node, start, rel, layout, key)


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


# --------------------------------------------------------------------------------------------
# Reply-ready reads: listpack node -> RESP in one pass
# --------------------------------------------------------------------------------------------
#
# XRANGE/XREAD replies are arrays of ``[id, [f1, v1, ...]]``. Decoding a node into tuples and
# then encoding those costs two Python passes per entry; reading the node straight into RESP
# pieces costs one, and most per-value work becomes a table lookup: 7-bit and 13-bit integer
# elements map to their ready ``$len\r\ndigits`` bulk string, a 6-bit string element becomes
# a precomputed ``$len\r\n`` header plus a slice of the node, and the master fields of a
# SAMEFIELDS entry are encoded once per node. Arrays of bulk strings are the same bytes in
# RESP2 and RESP3. The general decoder (_fwd_node/_rev_node) stays the reference; tests
# compare the two on random nodes.

_RESP_U7 = tuple(b"$%d\r\n%d" % (len(b"%d" % i), i) for i in range(128))
# Indexed by the 13 payload bits of a 13-bit integer element (two's complement).
_RESP_I13 = tuple(
    b"$%d\r\n%d" % (len(b"%d" % v), v) for v in (u - 8192 if u >= 4096 else u for u in range(8192))
)
_RESP_SHDR = tuple(b"$%d\r\n" % n for n in range(64))
# "\r\n*2\r\n$<len>\r\n": what precedes an entry's ID (IDs are at most 41 bytes).
_RESP_ENTRY = tuple(b"\r\n*2\r\n$%d\r\n" % n for n in range(48))


def _resp_fields(fields: list[bytes]) -> list[bytes]:
    """What precedes each value of a SAMEFIELDS entry: ``\r\n$len\r\nfield\r\n``, the first
    one also carrying the entry's ``\r\n*2n`` array header."""
    pre = [b"\r\n$%d\r\n%b\r\n" % (len(f), f) for f in fields]
    hdr = b"\r\n*%d" % (2 * len(fields))
    if pre:
        pre[0] = hdr + pre[0]
    else:
        pre.append(hdr)
    return pre


def _resp_entry_at(
    lp: bytes, p: int, flags: int, ms: int, seq: int, nf: int, pre: list[bytes], app
) -> int:
    """Append the RESP pieces of the live entry whose data starts at ``p`` (just after its
    IDs); returns the offset of the next entry. Handles every element encoding."""
    idb = b"%d-%d" % (ms & MASK64, seq & MASK64)
    app(_RESP_ENTRY[len(idb)])
    app(idb)
    if flags & FLAG_SAMEFIELDS:
        if not nf:
            app(pre[0])
        for f in pre[:nf]:
            app(f)
            v, p = _get_bytes(lp, p)
            app(b"$%d\r\n" % len(v))
            app(v)
    else:
        n, p = _get_int(lp, p)
        app(b"\r\n*%d" % (n << 1))
        for _ in range(n << 1):
            v, p = _get_bytes(lp, p)
            app(b"\r\n$%d\r\n" % len(v))
            app(v)
    b = lp[p]
    return p + 2 if b < 128 else skip(lp, p)  # lp-count


def _fwd_node_resp(
    key: int, lp: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes],
    marks: list[int] | None = None, sids: list[int] | None = None,
) -> tuple[int, bool, int]:
    """What ``_fwd_node`` (without tombstones) finds, as RESP: appends to ``out`` pieces
    that join into the entries' replies, each preceded by CRLF. Returns ``(entries, done,
    served)``: ``done`` means an entry past ``end`` or the ``limit`` (0 = none) was reached;
    no entry of the node after ``start`` and up to ``served`` is left unread. ``marks``
    gets the index in ``out`` where each entry's pieces begin, ``sids`` each entry's ID."""
    node = lp
    hint = _RESUME.get(id(node))
    if hint is not None and (hint[0] is not node or hint[4] != key):
        hint = None
    layout = hint[3] if hint is not None else None
    if type(lp) is not bytes:
        lp = bytes(lp)
    mms = key >> 64
    mseq = key & MASK64
    if layout is None:
        nf, fields, p0 = _master_fast(lp)
        pl = _last_entry(lp)
        last = _entry_head(lp, pl, mms, mseq)[1] if pl is not None else 0
        pre = _resp_fields(fields)
        if lp is node:  # immutable bytes: the layout holds for every later read
            layout = (nf, p0, last, pre)
    else:
        nf, p0, last, pre = layout
    p = p0
    if start > key:
        if hint is not None and hint[1] == start:
            p = p0 + hint[2]
        else:
            p = _seek_start(lp, key, start, p)
    endp = len(lp) - 1
    if p >= endp:
        return 0, False, end
    # Live IDs ascend inside a node and none exceeds the last entry's, so the start bound is
    # checked only until the first emitted entry and the end bound only if it cuts the node.
    check_start = start > key
    check_end = end < last
    # ID deltas are int64 casts of uint64 differences, so the sum can leave the uint64
    # range: 7-bit deltas only near its top (then every entry takes the masked, general
    # path); wider deltas are masked where they are read.
    wrap = mms > MASK64 - 128 or mseq > MASK64 - 128
    # The table-driven path: SAMEFIELDS entries whose lp-count (nf + 3) is one byte.
    fast = 0 < nf < 125 and not wrap
    app = out.append
    rshdr = _RESP_SHDR
    ru7 = _RESP_U7
    ri13 = _RESP_I13
    rent = _RESP_ENTRY
    sapp = sids.append if sids is not None else None
    n = 0
    while p < endp:
        flags = lp[p]
        if flags < 128:
            p += 2
        else:
            flags, p = _get_int(lp, p)
        b = lp[p]
        if b < 128:
            ms = mms + b
            p += 2
        elif 0xC0 <= b < 0xE0:
            u = ((b & 31) << 8) | lp[p + 1]
            ms = (mms + (u - 8192 if u >= 4096 else u)) & MASK64
            p += 3
        else:
            d, p = _get_int(lp, p)
            ms = (mms + d) & MASK64
        b = lp[p]
        if b < 128:
            seq = mseq + b
            p += 2
        elif 0xC0 <= b < 0xE0:  # 13-bit: sequence deltas of busy milliseconds
            u = ((b & 31) << 8) | lp[p + 1]
            seq = (mseq + (u - 8192 if u >= 4096 else u)) & MASK64
            p += 3
        else:
            d, p = _get_int(lp, p)
            seq = (mseq + d) & MASK64
        if flags & FLAG_DELETED:
            p = _skip_entry_data(lp, p, flags, nf)
            continue
        if check_start or check_end or wrap:
            sid = ((ms & MASK64) << 64) | (seq & MASK64)
            if sid < start:
                p = _skip_entry_data(lp, p, flags, nf)
                continue
            check_start = False
            if sid > end:
                return n, True, end
        if marks is not None:
            marks.append(len(out))
        if sapp is not None:
            # Without wrap, 7-bit deltas cannot leave the range (the others are masked).
            sapp(((ms & MASK64) << 64) | (seq & MASK64) if wrap else (ms << 64) | seq)
        if flags != FLAG_SAMEFIELDS or not fast:
            p = _resp_entry_at(lp, p, flags, ms, seq, nf, pre, app)
        else:
            idb = b"%d-%d" % (ms, seq)
            app(rent[len(idb)])
            app(idb)
            for f in pre:
                app(f)
                b = lp[p]
                if b < 128:
                    app(ru7[b])
                    p += 2
                elif b < 192:
                    q = p + 1 + (b & 63)
                    app(rshdr[b & 63])
                    app(lp[p + 1 : q])
                    p = q + 1
                elif b < 224:
                    app(ri13[((b & 31) << 8) | lp[p + 1]])
                    p += 3
                else:
                    v, p = _get_bytes(lp, p)
                    app(b"$%d\r\n" % len(v))
                    app(v)
            p += 2  # lp-count
        n += 1
        if n == limit:
            served = ((ms & MASK64) << 64) | (seq & MASK64)
            _note_resume(node, key, served + 1, p - p0, layout)
            return n, True, served
    if end >= last:
        _note_resume(node, key, last + 1, p - p0, layout)
    return n, False, min(end, last)


def _rev_node_resp(
    key: int, lp: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes]
) -> tuple[int, bool]:
    """:func:`_fwd_node_resp` from the node's end backwards (as ``_rev_node``)."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    if not limit or limit >= node_counts(lp)[0]:
        # The limit cannot cut the node: encode it forwards (cheaper than walking the
        # backlens entry by entry) and emit the entries last first. No node before this
        # one holds an ID >= its master ID, so the iteration is over if start is past it.
        pieces: list[bytes] = []
        marks: list[int] = []
        n = _fwd_node_resp(key, lp, start, end, 0, pieces, marks)[0]
        marks.append(len(pieces))
        ext = out.extend
        for j in range(n - 1, -1, -1):
            ext(pieces[marks[j] : marks[j + 1]])
        return n, start > key or n == limit > 0
    mms = key >> 64
    mseq = key & MASK64
    nf, fields, p0 = _master_fast(lp)
    pf = _last_entry(lp) if end >= ID_MAX else _seek_end(lp, key, end, p0, nf)
    pre = _resp_fields(fields)
    app = out.append
    n = 0
    while pf is not None:
        flags, sid, p = _entry_head(lp, pf, mms, mseq)
        if not flags & FLAG_DELETED and sid <= end:
            if sid < start:
                return n, True
            # At most ``limit`` entries of one node come this way: the general encoder.
            _resp_entry_at(lp, p, flags, sid >> 64, sid & MASK64, nf, pre, app)
            n += 1
            if n == limit:
                return n, True
        pf = _prev_entry(lp, pf)
    return n, False


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


# --------------------------------------------------------------------------------------------
# Decoded-node cache
# --------------------------------------------------------------------------------------------
#
# Decoding a 100-entry node costs ~100x more in Python than in C, and reads cluster: consumers
# re-read the tail node, benchmarks repeat the same XRANGE, pagination walks one node in
# several calls.  So range() keeps the live entries of recently read nodes, decoded, in a small
# global LRU keyed by the identity of the node object.  The cache holds a reference to the
# node, so an id cannot be reused while cached.  Closed nodes are immutable bytes (a mutation
# replaces the object); the few in-place mutations of bytearray nodes (tail appends, XDEL,
# exact trims) update or drop the entry explicitly.  A node is cached on its second touch,
# so one-off point reads over cold data keep their cheap partial decode.

_NC: OrderedDict[int, tuple[bytes | bytearray, list[int], list[tuple[int, list[bytes]]]]] = (
    OrderedDict()
)
_NC_MAX_NODES = 256
_NC_MAX_ENTRIES = 1000  # nodes holding more entries are never cached
_NC_MAX_NODE_BYTES = 1 << 16  # nor nodes larger than this (their decoded copy would be big)
# Nodes touched once lately (ids, oldest first). Only a second touch within this window
# admits a node, so re-reading a stream far bigger than the cache (a Spark batch read, a
# second full scan) keeps the cheap one-pass reads instead of decoding every node into a
# cache entry that is evicted before it is used again.
# A forward read that resumes exactly where the previous touch of the node stopped (paging
# with COUNT) is not a re-read and does not admit it either: each value is the ID up to
# which the node's last forward reply-ready read went (-1: unknown).
_NC_SEEN: OrderedDict[int, int] = OrderedDict()
_NC_SEEN_MAX = 2 * _NC_MAX_NODES


def _nc_get(key: int, lp: bytes | bytearray, admit: bool, start: int = -1):
    """Cached ``(lp, sids, entries)`` for a node, decoding it on its second touch (unless
    that touch is a forward read from ``start`` past what the previous one served)."""
    i = id(lp)
    c = _NC.get(i)
    if c is not None:
        _NC.move_to_end(i)
        return c
    if not admit:
        return None
    served = _NC_SEEN.get(i)
    if served is None:
        if len(_NC_SEEN) >= _NC_SEEN_MAX:
            _NC_SEEN.popitem(last=False)
        _NC_SEEN[i] = -1
        return None
    if 0 <= served < start:
        _NC_SEEN[i] = -1
        return None
    del _NC_SEEN[i]
    if len(lp) > _NC_MAX_NODE_BYTES or node_counts(lp)[0] > _NC_MAX_ENTRIES:
        return None
    ents: list[tuple[int, list[bytes]]] = []
    _fwd_node(key, lp, 0, ID_MAX, 0, False, ents)
    c = (lp, [e[0] for e in ents], ents)
    _NC[i] = c
    if len(_NC) > _NC_MAX_NODES:
        _NC.popitem(last=False)
    return c


def _nc_served(lp: object, served: int) -> None:
    """Record how far a forward read of a not-yet-cached node went (see _NC_SEEN)."""
    i = id(lp)
    if i in _NC_SEEN:
        _NC_SEEN[i] = served


def _nc_drop(lp: object) -> None:
    """Forget a node that is about to change in place or go away."""
    _NC.pop(id(lp), None)
    _RESUME.pop(id(lp), None)


def _nc_move(old: object, new: bytes | bytearray) -> None:
    """Re-key a cached node whose object is replaced by an identical copy."""
    c = _NC.pop(id(old), None)
    if c is not None:
        _NC[id(new)] = (new, c[1], c[2])


def _nc_extend(lp: bytearray, sid: int, fields_values: list[bytes]) -> None:
    """Keep a cached tail node in step with an append (the decoded entry is the input)."""
    c = _NC.get(id(lp))
    if c is not None:
        if len(c[1]) >= _NC_MAX_ENTRIES or len(lp) > _NC_MAX_NODE_BYTES:
            del _NC[id(lp)]
            return
        c[1].append(sid)
        c[2].append((sid, [x if type(x) is bytes else bytes(x) for x in fields_values]))


def clear_node_cache() -> None:
    """Drop all decoded nodes (tests, memory pressure)."""
    _NC.clear()
    _NC_SEEN.clear()
    _RESUME.clear()


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


# --------------------------------------------------------------------------------------------
# Consumer groups
# --------------------------------------------------------------------------------------------


class NACK:
    """A pending entry: last delivery time, delivery count, owner (streamNACK).

    The same object sits in the group PEL and in its consumer's PEL.
    """

    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(
        self, delivery_time: int, delivery_count: int = 1, consumer: Consumer | None = None
    ) -> None:
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.consumer = consumer

    def __repr__(self) -> str:
        name = self.consumer.name if self.consumer is not None else None
        return f"NACK(time={self.delivery_time}, count={self.delivery_count}, consumer={name!r})"


class Consumer:
    """A consumer: name, seen/active times (ms) and its own PEL (int ID -> NACK).

    ``seen_time`` is the last time the consumer attempted an interaction; ``active_time``
    the last time it successfully read or claimed (Redis 7.2; -1 = never).  Redis 7.0 only
    has seen_time; its RDB loader sets active_time = seen_time.
    """

    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, seen_time: int, active_time: int = -1) -> None:
        self.name = name
        self.seen_time = seen_time
        self.active_time = active_time
        self.pel: Rax = Rax()

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, pending={len(self.pel)})"


class ConsumerGroup:
    """A consumer group (streamCG): last delivered ID, entries_read, PEL and consumers.

    ``entries_read`` is -1 (SCG_INVALID_ENTRIES_READ) when unknown.  The PEL is a Rax so
    XPENDING ranges and XAUTOCLAIM cursors are ordered seeks.
    """

    __slots__ = ("name", "last_id", "entries_read", "pel", "consumers", "nacked")

    def __init__(
        self, name: bytes, last_id: int = 0, entries_read: int = SCG_INVALID_ENTRIES_READ
    ) -> None:
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: Rax = Rax()
        self.consumers: dict[bytes, Consumer] = {}
        # XNACKed IDs in release order (the PEL's "NACKed portion"); None while empty.
        self.nacked: dict[int, None] | None = None

    def release(self, sid: int, count: int) -> bool:
        """XNACK one pending ID: no owner, delivery time 0, delivery count ``count``, and
        to the back of the released FIFO. False if ``sid`` is not pending."""
        nack = self.pel.get(sid)
        if nack is None:
            return False
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
            nack.consumer = None
        nack.delivery_time = 0
        nack.delivery_count = count
        nacked = self.nacked
        if nacked is None:
            nacked = self.nacked = {}
        else:
            nacked.pop(sid, None)
        nacked[sid] = None
        return True

    def unrelease(self, sid: int) -> None:
        """``sid`` was delivered, claimed or acknowledged: it leaves the released FIFO."""
        nacked = self.nacked
        if nacked and nacked.pop(sid, 1) is None and not nacked:
            self.nacked = None

    def is_released(self, sid: int) -> bool:
        nacked = self.nacked
        return nacked is not None and sid in nacked

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.name!r}, last_id={format_sid(self.last_id).decode()}, "
            f"entries_read={self.entries_read}, pending={len(self.pel)})"
        )

    # ------------------------------------------------------------------ consumers

    def lookup_consumer(self, name: bytes) -> Consumer | None:
        """The named consumer or None (no seen_time refresh: callers decide)."""
        return self.consumers.get(name)

    def create_consumer(self, name: bytes, now_ms: int) -> Consumer | None:
        """Create a consumer; None if it already exists (streamCreateConsumer)."""
        if name in self.consumers:
            return None
        c = Consumer(name, now_ms, -1)
        self.consumers[name] = c
        return c

    def get_or_create_consumer(self, name: bytes, now_ms: int) -> tuple[Consumer, bool]:
        """``(consumer, created)``; an existing consumer's seen_time is refreshed to now,
        as streamLookupConsumer(SLC_DEFAULT) does."""
        c = self.consumers.get(name)
        if c is not None:
            c.seen_time = now_ms
            return c, False
        c = Consumer(name, now_ms, -1)
        self.consumers[name] = c
        return c, True

    def delete_consumer(self, name: bytes) -> int | None:
        """Delete a consumer and its pending entries from the group PEL; return how many
        were pending, or None if there is no such consumer (streamDelConsumer)."""
        c = self.consumers.pop(name, None)
        if c is None:
            return None
        pel = self.pel
        for sid in c.pel.keys():
            pel.discard(sid)
        n = len(c.pel)
        c.pel.clear()
        return n

    def consumers_sorted(self) -> list[Consumer]:
        """Consumers in byte-wise name order (rax order, as XINFO/RDB list them)."""
        return [self.consumers[k] for k in sorted(self.consumers)]

    # ------------------------------------------------------------------ PEL

    def deliver(self, sid: int, consumer: Consumer, now_ms: int) -> NACK:
        """Record that ``sid`` was delivered to ``consumer`` (XREADGROUP without NOACK).

        A new NACK gets count 1; an existing one (e.g. after XGROUP SETID) moves to this
        consumer with its time reset to now and its count reset to 1, as Redis does.
        """
        nack = self.pel.get(sid)
        if nack is None:
            nack = NACK(now_ms, 1, consumer)
            self.pel.insert(sid, nack)
        else:
            old = nack.consumer
            if old is not None:
                old.pel.discard(sid)
            nack.consumer = consumer
            nack.delivery_time = now_ms
            nack.delivery_count = 1
            if self.nacked:
                self.unrelease(sid)
        consumer.pel.insert(sid, nack)
        consumer.active_time = now_ms
        return nack

    def deliver_new(self, sids: list[int], consumer: Consumer, now_ms: int) -> None:
        """:meth:`deliver` for ascending ``sids`` (an XREADGROUP ``>`` batch).

        IDs beyond every pending one -- the usual case, as ``>`` reads past the group's
        last_id -- get their NACKs appended to both PELs in bulk.
        """
        if not sids:
            return
        last = self.pel.last_key()
        if last is not None and sids[0] <= last:
            for sid in sids:
                self.deliver(sid, consumer, now_ms)
            return
        nacks = [NACK(now_ms, 1, consumer) for _ in sids]
        self.pel.extend(sids, nacks)
        # The consumer's PEL is a subset of the group's: these IDs are beyond it too.
        consumer.pel.extend(sids, nacks)
        consumer.active_time = now_ms

    def ack_many(self, sids: list[int]) -> int:
        """:meth:`ack` for each of ``sids`` (XACK); how many were pending."""
        nacks = self.pel.pop_many(sids)
        owner = None
        mine: list[int] = []
        acked = 0
        for sid, nack in zip(sids, nacks, strict=True):
            if nack is None:
                continue
            acked += 1
            c = nack.consumer
            if c is None:
                continue
            # Usually one consumer acknowledges its own deliveries: their removal from
            # its PEL goes in one batch; any other owner's one by one.
            if owner is None:
                owner = c
            if c is owner:
                mine.append(sid)
            else:
                c.pel.discard(sid)
        if owner is not None:
            owner.pel.pop_many(mine)
        if acked and self.nacked:
            for sid in sids:
                self.unrelease(sid)
        return acked

    def ack(self, sid: int) -> bool:
        """Remove ``sid`` from the group and owner PELs; True if it was pending (XACK)."""
        nack = self.pel.pop(sid, None)
        if nack is None:
            return False
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
        if self.nacked:
            self.unrelease(sid)
        return True

    def add_nack(
        self, sid: int, consumer: Consumer, delivery_time: int, delivery_count: int
    ) -> NACK:
        """Insert a NACK owned by ``consumer`` (AOF-style loading, tests)."""
        nack = NACK(delivery_time, delivery_count, consumer)
        self.pel.insert(sid, nack)
        consumer.pel.insert(sid, nack)
        return nack

    # RDB loading comes in Redis's order: the group PEL first (owners unknown), then each
    # consumer with the IDs it owns.

    def load_nack(self, sid: int, delivery_time: int, delivery_count: int) -> bool:
        """Add an owner-less NACK from an RDB group PEL; False if ``sid`` is a duplicate."""
        if sid in self.pel:
            return False
        self.pel.insert(sid, NACK(delivery_time, delivery_count, None))
        return True

    def load_consumer(self, name: bytes, seen_time: int, active_time: int) -> Consumer | None:
        """Add a consumer from an RDB (type 19 has no active_time: pass seen_time, as Redis
        does); None if the name is a duplicate."""
        if name in self.consumers:
            return None
        c = Consumer(name, seen_time, active_time)
        self.consumers[name] = c
        return c

    def load_owner(self, consumer: Consumer, sid: int) -> bool:
        """Give the group PEL's NACK ``sid`` to ``consumer`` (an RDB consumer PEL entry);
        False if the group PEL lacks it or the consumer already has it."""
        nack = self.pel.get(sid)
        if nack is None or sid in consumer.pel:
            return False
        nack.consumer = consumer
        consumer.pel.insert(sid, nack)
        return True

    def unowned_nacks(self) -> list[int]:
        """IDs of NACKs without a consumer (deep RDB sanitization rejects any)."""
        return [sid for sid, nack in self.pel.items() if nack.consumer is None]

    def pending_summary(self) -> tuple[int, int | None, int | None, list[tuple[bytes, int]]]:
        """``(count, smallest_id, largest_id, [(consumer, pending), ...])`` for XPENDING
        without a range; consumers with no pending entries are left out."""
        pel = self.pel
        per = [(c.name, len(c.pel)) for c in self.consumers_sorted() if len(c.pel)]
        return len(pel), pel.first_key(), pel.last_key(), per

    def pending_range(
        self,
        start: int,
        end: int,
        count: int,
        consumer: Consumer | None = None,
        min_idle: int = 0,
        now_ms: int = 0,
    ) -> list[tuple[int, NACK]]:
        """Up to ``count`` pending ``(id, NACK)`` with start <= id <= end, optionally only
        one consumer's and only those idle for at least ``min_idle`` ms (XPENDING)."""
        out: list[tuple[int, NACK]] = []
        if count <= 0 or start > end:
            return out
        pel = consumer.pel if consumer is not None else self.pel
        for sid, nack in pel.iterate(">=", start):
            if sid > end:
                break
            if min_idle and now_ms - nack.delivery_time < min_idle:
                continue
            out.append((sid, nack))
            if len(out) >= count:
                break
        return out

    def copy(self) -> ConsumerGroup:
        """Deep copy with NACKs re-linked to the copied consumers."""
        g = ConsumerGroup(self.name, self.last_id, self.entries_read)
        cmap: dict[int, Consumer] = {}
        for name, c in self.consumers.items():
            nc = Consumer(name, c.seen_time, c.active_time)
            g.consumers[name] = nc
            cmap[id(c)] = nc
        for sid, nack in self.pel.items():
            owner = cmap.get(id(nack.consumer)) if nack.consumer is not None else None
            nn = NACK(nack.delivery_time, nack.delivery_count, owner)
            g.pel.insert(sid, nn)
            if owner is not None:
                owner.pel.insert(sid, nn)
        if self.nacked:
            g.nacked = dict(self.nacked)
        return g


class ClaimResult(NamedTuple):
    """What XCLAIM did, in argument order, so the command layer can reply and propagate.

    ``events`` holds ``(id, nack, claimed)``: claimed=False means the entry no longer
    exists and its NACK was dropped (Redis still propagates an XCLAIM for it).
    """

    claimed: list[int]
    events: list[tuple[int, NACK, bool]]
    consumer: Consumer | None
    consumer_created: bool
    propagate_last_id: bool


class AutoClaimResult(NamedTuple):
    """What XAUTOCLAIM did: claimed IDs, the next cursor (0 = scan complete), IDs whose
    entries were gone (their NACKs dropped), and the per-ID events as in ClaimResult."""

    claimed: list[int]
    next_id: int
    deleted: list[int]
    events: list[tuple[int, NACK, bool]]
    consumer: Consumer | None
    consumer_created: bool


class IdmpState:
    """Idempotent-producer bookkeeping of one stream (Redis 8.6's IDMP map).

    Per producer ID, its recent idempotent IDs in insertion order with the entry ID each
    produced and when (ms). An iid is forgotten after ``duration`` seconds or when the
    producer holds more than ``maxsize`` of them (oldest first).  ``configured`` records
    that XCFGSET was used (XINFO shows the IDMP fields once there is any IDMP state).
    """

    __slots__ = ("duration", "maxsize", "configured", "producers", "iids_added", "iids_duplicates")

    def __init__(
        self, duration: int = IDMP_DURATION_DEFAULT, maxsize: int = IDMP_MAXSIZE_DEFAULT
    ) -> None:
        self.duration = duration
        self.maxsize = maxsize
        self.configured = False
        self.producers: dict[bytes, OrderedDict[bytes, tuple[int, int]]] = {}
        self.iids_added = 0
        self.iids_duplicates = 0

    def _expire(self, pid: bytes, now_ms: int) -> OrderedDict[bytes, tuple[int, int]] | None:
        iids = self.producers.get(pid)
        if iids is None:
            return None
        horizon = now_ms - self.duration * 1000
        while iids:
            _iid, (_sid, at) = next(iter(iids.items()))
            if at > horizon:
                break
            iids.popitem(last=False)
        if not iids:
            del self.producers[pid]
            return None
        return iids

    def expire_all(self, now_ms: int) -> None:
        for pid in list(self.producers):
            self._expire(pid, now_ms)

    def lookup(self, pid: bytes, iid: bytes, now_ms: int) -> int | None:
        """The entry ID recorded for (pid, iid), or None (expired iids are dropped first)."""
        iids = self._expire(pid, now_ms)
        if iids is None:
            return None
        hit = iids.get(iid)
        return None if hit is None else hit[0]

    def record(self, pid: bytes, iid: bytes, sid: int, now_ms: int) -> None:
        """Remember that (pid, iid) produced entry ``sid``; evict past ``maxsize``."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = OrderedDict()
        iids.pop(iid, None)
        iids[iid] = (sid, now_ms)
        while len(iids) > self.maxsize:
            iids.popitem(last=False)
        self.iids_added += 1

    def restore(self, pid: bytes, iid: bytes, sid: int, at_ms: int) -> None:
        """Re-insert a tracked iid as persisted (no counters, no eviction)."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = OrderedDict()
        iids[iid] = (sid, at_ms)

    def pids_tracked(self) -> int:
        return len(self.producers)

    def iids_tracked(self) -> int:
        return sum(len(v) for v in self.producers.values())

    def copy(self) -> IdmpState:
        n = IdmpState(self.duration, self.maxsize)
        n.configured = self.configured
        n.iids_added = self.iids_added
        n.iids_duplicates = self.iids_duplicates
        n.producers = {k: OrderedDict(v) for k, v in self.producers.items()}
        return n


# --------------------------------------------------------------------------------------------
# Stream
# --------------------------------------------------------------------------------------------

_SIZEOF_INT128 = sys.getsizeof(ID_MAX)
_SIZEOF_NACK = sys.getsizeof(NACK(0))
_SIZEOF_LIST_EMPTY = sys.getsizeof([])
_SIZEOF_GHOST = sys.getsizeof(1 << 40)  # a packed ghost value (its key is the rax's)
_MASK32 = (1 << 32) - 1


class Stream:
    """A Redis stream: listpack nodes in a Rax plus metadata and consumer groups.

    Public metadata attributes (plain ints, IDs in ``ms << 64 | seq`` form): ``length``,
    ``last_id``, ``first_id`` (first live entry, 0 when empty), ``max_deleted_entry_id``,
    ``entries_added``.  Node limits are the server-wide CONFIG values
    ``stream-node-max-bytes`` / ``stream-node-max-entries``; they are class attributes so
    one CONFIG SET (``Stream.node_max_bytes = n``) reaches every stream, like Redis's
    ``server.*`` globals.  Subclasses may override them.
    """

    node_max_bytes: int = 4096
    node_max_entries: int = 100
    # Tombstone share of a closed node at which it is compacted (0 = never, the storage
    # default); the server sets it from CONFIG stream-node-gc-percent. Compaction is
    # invisible in replies: see "Node compaction".
    gc_ratio: float = 0.0

    # TYPE and OBJECT ENCODING both say "stream" (Redis has one stream encoding).
    type_name = b"stream"

    def encoding(self) -> bytes:
        """OBJECT ENCODING."""
        return b"stream"

    def digest_parts(self) -> Iterator[bytes]:
        """What DEBUG DIGEST-VALUE mixes, as Redis's debug.c does: per live entry its
        ID as ``ms.seq``, then each field and value (groups and metadata are left out)."""
        for sid, fv in self.iter_range():
            yield b"%d.%d" % (sid >> 64, sid & MASK64)
            yield from fv

    __slots__ = (
        "length",
        "last_id",
        "first_id",
        "max_deleted_entry_id",
        "entries_added",
        "_rax",
        "_cgroups",
        "idmp",
        # tail-node cache (valid iff _t_lp is not None)
        "_t_lp",
        "_t_key",
        "_t_ms",
        "_t_seq",
        "_t_fields",
        "_t_nf",
        "_t_count",
        "_t_deleted",
        "_t_xbytes",
        "_t_nele",
        # node key -> bytes << 32 | entries that compactions dropped from it (see "Node
        # compaction"); one int per node, as a compacted node is small
        "_ghost",
        # last_valid_id() and the (last_id, length, max_deleted_entry_id) it was found for
        "_lv_key",
        "_lv",
    )

    def __init__(self) -> None:
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_entry_id = 0
        self.entries_added = 0
        self._rax = Rax()
        self._cgroups: dict[bytes, ConsumerGroup] | None = None
        self.idmp: IdmpState | None = None
        self._t_lp: bytearray | None = None
        self._t_key = 0
        self._t_ms = 0
        self._t_seq = 0
        self._t_fields: list[bytes] = []
        self._t_nf = 0
        self._t_count = 0
        self._t_deleted = 0
        self._t_xbytes = 0
        self._t_nele = 0
        self._ghost: dict[int, int] | None = None
        self._lv_key: tuple[int, int, int] | None = None
        self._lv = 0

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return (
            f"Stream(length={self.length}, nodes={len(self._rax)}, "
            f"last_id={format_sid(self.last_id).decode()})"
        )

    # ---------------------------------------------------------------------------- IDs

    def next_id(self, ms_now: int) -> int:
        """The ID ``XADD *`` uses (streamNextID): ``ms_now-0`` if the clock moved past the
        last ID's ms, else last_id + 1, so IDs never go backwards with the clock.

        At the very last ID it wraps to 0-0 as Redis does; :meth:`add` then rejects it
        (callers check ``last_id == ID_MAX`` first for the "exhausted" error).
        """
        last = self.last_id
        if ms_now > last >> 64:
            return ms_now << 64
        return last + 1 if last < ID_MAX else 0

    def auto_seq_id(self, ms: int) -> int | None:
        """The ID ``XADD <ms>-*`` uses: ``ms-0``, or last_id + 1 when ``ms`` equals the last
        ID's ms; None when that sequence would overflow (Redis replies "Elements are too
        large to be stored" in that case).  The result may still be <= last_id, which
        :meth:`add` rejects."""
        last = self.last_id
        if ms == last >> 64:
            if last & MASK64 == MASK64:
                return None
            return last + 1
        return ms << 64

    # ---------------------------------------------------------------------------- append

    def _load_tail(self) -> bytearray | None:
        """Parse the tail node's header into the cache; return the tail listpack."""
        last = self._rax.last()
        if last is None:
            self._t_lp = None
            return None
        key, lp = last
        if type(lp) is not bytearray:
            old = lp
            lp = bytearray(lp)
            self._rax.insert(key, lp)
            _nc_move(old, lp)
        count, deleted, nf, fields, _ = _master(lp)
        self._t_lp = lp
        self._t_key = key
        self._t_ms = key >> 64
        self._t_seq = key & MASK64
        self._t_fields = fields
        self._t_nf = nf
        self._t_count = count
        self._t_deleted, self._t_xbytes = self._redis_accounting(key, deleted)
        self._t_nele = length(lp)
        return lp

    def _redis_accounting(self, key: int, deleted: int) -> tuple[int, int]:
        """For node ``key`` holding ``deleted`` tombstones: the deleted count Redis's copy of
        the node has, and how many bytes bigger that copy is (0, 0 unless compacted)."""
        g = self._ghost.get(key) if self._ghost else None
        if g is None:
            return deleted, 0
        total = deleted + (g & _MASK32)
        return total, (g >> 32) + _int_len(total) - _int_len(deleted)

    def _touch(self, key: int) -> None:
        """Drop the tail cache if node ``key`` is the cached tail (it is being changed)."""
        if self._t_lp is not None and key == self._t_key:
            self._t_lp = None

    def add(self, fields_values: list[bytes], sid: int | None = None, now_ms: int = 0) -> int:
        """Append an entry and return its ID (streamAppendItem).

        ``fields_values`` is ``[f1, v1, f2, v2, ...]`` (bytes).  ``sid`` is the entry ID; None
        means ``XADD *`` with the caller's clock ``now_ms`` (see :meth:`next_id`; for
        ``ms-*`` use :meth:`auto_seq_id`).  Raises StreamIDError if the ID is not greater
        than ``last_id`` and StreamSizeError if the entry exceeds 1 GiB.  Node limits:
        a new node starts when ``lpBytes(tail) + payload >= node_max_bytes`` or
        ``count + deleted >= node_max_entries``, both as Redis's copy of the tail has them
        (tombstones a compaction dropped still count).
        """
        if type(fields_values) is not list:
            fields_values = list(fields_values)
        if sid is None:
            sid = self.next_id(now_ms)
        if sid <= self.last_id:
            raise StreamIDError(
                "The ID specified in XADD is equal or smaller than the target stream top item"
            )
        tot = sum(map(len, fields_values))
        if tot > STREAM_LISTPACK_MAX_SIZE:
            raise StreamSizeError("Elements are too large to be stored")
        nfv = len(fields_values)
        if nfv & 1:
            raise ValueError("fields_values must hold field/value pairs")
        nf = nfv >> 1

        lp = self._t_lp
        if lp is None and self._rax:
            lp = self._load_tail()
        if lp is not None:
            mb = self.node_max_bytes
            if mb <= 0 or mb > STREAM_LISTPACK_MAX_SIZE:
                mb = STREAM_LISTPACK_MAX_SIZE
            me = self.node_max_entries
            if len(lp) + self._t_xbytes + tot >= mb or (
                me > 0 and self._t_count + self._t_deleted >= me
            ):
                # Close the node: store it as exact-size immutable bytes (lpShrinkToFit).
                closed = bytes(lp)
                self._rax.insert(self._t_key, closed)
                if _NC:
                    _nc_move(lp, closed)
                lp = None
                if self.gc_ratio > 0 and node_counts(closed)[1]:
                    self._gc_node(self._t_key, True)

        values = fields_values[1::2]
        if lp is None:
            fields = fields_values[0::2]
            lp = bytearray(b"\x00\x00\x00\x00\x00\x00\x01\x01\x00\x01")  # hdr, count 1, deleted 0
            lp += int_element(nf)
            for f in fields:
                lp += element(f)
            lp += b"\x00\x01\x02\x01\x00\x01\x00\x01"  # terminator, flags SAMEFIELDS, 0, 0
            sid_ms = sid >> 64
            sid_seq = sid & MASK64
            same = True
            self._t_key = sid
            self._t_ms = sid_ms
            self._t_seq = sid_seq
            self._t_fields = [bytes(f) for f in fields]
            self._t_nf = nf
            self._t_count = 1
            self._t_deleted = 0
            self._t_xbytes = 0
            nele = nf + 4
            self._rax.insert(sid, lp)
            self._t_lp = lp
        else:
            count = self._t_count + 1
            self._t_count = count
            if count <= 127:
                lp[LP_HDR_SIZE] = count
            else:
                replace_int(lp, LP_HDR_SIZE, count)
            del lp[-1]  # EOF
            same = nf == self._t_nf and fields_values[0::2] == self._t_fields
            lp += _E_FLAGS_SAME if same else _E_FLAGS_NONE
            d = (sid >> 64) - self._t_ms
            if _SMALL_MIN <= d <= _SMALL_MAX:
                lp += _SMALL_INT_ELEM[d - _SMALL_MIN]
            else:
                lp += int_element(_to_int64(d))
            d = (sid & MASK64) - self._t_seq
            if _SMALL_MIN <= d <= _SMALL_MAX:
                lp += _SMALL_INT_ELEM[d - _SMALL_MIN]
            else:
                lp += int_element(_to_int64(d))
            nele = self._t_nele
            if not same:
                lp += int_element(nf)
                for i in range(nf):
                    lp += element(fields_values[2 * i])
                    v = fields_values[2 * i + 1]
                    n = len(v)
                    if 0 < n < 64 and not _NUMSTART[v[0]]:
                        lp += _STR6_HDR[n]
                        lp += v
                        lp += _STR6_BL[n]
                    else:
                        lp += element(v)
                lp += int_element(nf + nf + 4)
                self._t_nele = nele = nele + nf + nf + 5
                lp.append(0xFF)
                _HDR.pack_into(lp, 0, len(lp), nele if nele < LP_HDR_NUMELE_UNKNOWN else 0xFFFF)
                if _NC:
                    _nc_extend(lp, sid, fields_values)
                self.length += 1
                self.entries_added += 1
                self.last_id = sid
                if self.length == 1:
                    self.first_id = sid
                return sid

        # SAMEFIELDS entry: values only.
        for v in values:
            n = len(v)
            if 0 < n < 64 and not _NUMSTART[v[0]]:
                lp += _STR6_HDR[n]
                lp += v
                lp += _STR6_BL[n]
            else:
                lp += element(v)
        lp += _SMALL_INT_ELEM[nf + 3 - _SMALL_MIN] if nf < 4000 else int_element(nf + 3)
        lp.append(0xFF)
        nele += nf + 4
        self._t_nele = nele
        _HDR.pack_into(lp, 0, len(lp), nele if nele < LP_HDR_NUMELE_UNKNOWN else 0xFFFF)
        if _NC:
            _nc_extend(lp, sid, fields_values)
        self.length += 1
        self.entries_added += 1
        self.last_id = sid
        if self.length == 1:
            self.first_id = sid
        return sid

    # ---------------------------------------------------------------------------- reading

    def _start_nodes(self, start: int) -> Iterator[tuple[int, bytes | bytearray]]:
        """Nodes from the one that may hold ``start`` onwards (streamIteratorStart, fwd)."""
        return self._rax.iterate_floor(start)

    def _end_nodes(self, end: int) -> Iterator[tuple[int, bytes | bytearray]]:
        """Nodes from the one that may hold ``end`` backwards (streamIteratorStart, rev)."""
        rax = self._rax
        if end and rax.seek_le(end) is not None:
            return rax.iterate("<=", end, reverse=True)
        return rax.iterate("$", reverse=True)

    def _node_for(self, sid: int) -> tuple[int, bytes | bytearray] | None:
        """The node a lookup of ``sid`` scans: the last with master <= sid, else the first."""
        rax = self._rax
        hit = rax.seek_le(sid)
        return hit if hit is not None else rax.first()

    def iter_range(
        self, start: int = 0, end: int = ID_MAX, rev: bool = False, tombstones: bool = False
    ) -> Iterator[tuple[int, list[bytes]]]:
        """Yield ``(id, [f1, v1, ...])`` for entries with start <= id <= end, ascending
        (or descending with ``rev``), skipping deleted entries unless ``tombstones``.

        Decodes one node at a time, so it is fine for streaming a whole stream out (AOF
        rewrite); use :meth:`range` when a count is known.
        """
        if start > end:
            return
        if rev:
            nodes = self._end_nodes(end)
            step = _rev_node
        else:
            nodes = self._start_nodes(start)
            step = _fwd_node
        for key, lp in nodes:
            buf: list[tuple[int, list[bytes]]] = []
            done = step(key, lp, start, end, 0, tombstones, buf)
            yield from buf
            if done:
                return

    def range(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        admit: bool = True,
    ) -> list[tuple[int, list[bytes]]]:
        """Entries with start <= id <= end as ``[(id, [f1, v1, ...]), ...]``, at most
        ``count`` (0 = all), ascending, or descending with ``rev`` (XRANGE / XREVRANGE).

        O(log nodes) to find the first node, then the entries returned plus at most about
        half a node walked to find the boundary. ``admit=False`` reads without putting
        nodes into the decoded-node cache (bookkeeping reads such as the first entry after
        a trim, which would otherwise decode the whole head node after every XADD MAXLEN).
        """
        out: list[tuple[int, list[bytes]]] = []
        if start > end:
            return out
        if rev:
            for key, lp in self._end_nodes(end):
                c = _nc_get(key, lp, admit)
                if c is None:
                    if _rev_node(key, lp, start, end, count, False, out):
                        break
                    continue
                sids = c[1]
                ents = c[2]
                j = bisect_right(sids, end) - 1
                while j >= 0:
                    if sids[j] < start:
                        return out
                    out.append(ents[j])
                    if count and len(out) >= count:
                        return out
                    j -= 1
        else:
            for key, lp in self._start_nodes(start):
                c = _nc_get(key, lp, admit)
                if c is None:
                    if _fwd_node(key, lp, start, end, count, False, out):
                        break
                    continue
                sids = c[1]
                ents = c[2]
                i = bisect_left(sids, start)
                n = len(sids)
                if count:
                    room = count - len(out)
                    if n - i > room:
                        n = i + room
                if sids and n and sids[n - 1] > end:
                    n = bisect_right(sids, end, i, n)
                    out.extend(ents[i:n])
                    return out
                out.extend(ents[i:n])
                if count and len(out) >= count:
                    return out
        return out

    def range_segments(
        self, start: int = 0, end: int = ID_MAX, count: int = 0, rev: bool = False,
        resp: bool = False, sids: list[int] | None = None,
    ) -> list[tuple[list, int, int, bool]]:
        """What :meth:`range` returns, as ``(entries, lo, hi, cached)`` segments in reply
        order. A ``cached`` segment is ``entries[lo:hi]`` of a decoded-node cache list,
        ascending (read it backwards when ``rev``); that list stays the same object, only
        ever appended to, while its node is cached, so a caller may keep per-node derived
        data (encoded replies) keyed by its identity. Other segments are fresh lists
        already in reply order: of ``(id, fields_values)`` tuples, or with ``resp`` of
        RESP pieces joining into ``hi`` entry replies, each preceded by CRLF (``lo`` is 0),
        read straight from the node without decoding it into tuples. A forward read also
        appends the IDs it returns, in order, to ``sids`` when given."""
        if rev and sids is not None:
            raise ValueError("sids are collected by forward reads only")
        segs: list[tuple[list, int, int, bool]] = []
        if start > end:
            return segs
        got = 0
        if rev:
            for key, lp in self._end_nodes(end):
                c = _nc_get(key, lp, True)
                if c is None:
                    if resp:
                        pieces: list[bytes] = []
                        k, done = _rev_node_resp(
                            key, lp, start, end, count - got if count else 0, pieces
                        )
                        if k:
                            segs.append((pieces, 0, k, False))
                            got += k
                        if done:
                            break
                        continue
                    out: list[tuple[int, list[bytes]]] = []
                    done = _rev_node(key, lp, start, end, count - got if count else 0, False, out)
                    if out:
                        segs.append((out, 0, len(out), False))
                        got += len(out)
                    if done:
                        break
                    continue
                ids = c[1]
                hi = bisect_right(ids, end)
                lo = bisect_left(ids, start, 0, hi)
                if count and hi - lo > count - got:
                    lo = hi - (count - got)
                if hi > lo:
                    segs.append((c[2], lo, hi, True))
                    got += hi - lo
                if lo > 0 or (count and got >= count):
                    break
        else:
            for key, lp in self._start_nodes(start):
                c = _nc_get(key, lp, True, start if resp else -1)
                if c is None:
                    if resp:
                        pieces = []
                        k, done, served = _fwd_node_resp(
                            key, lp, start, end, count - got if count else 0, pieces, None, sids
                        )
                        _nc_served(lp, served)
                        if k:
                            segs.append((pieces, 0, k, False))
                            got += k
                        if done:
                            break
                        continue
                    out = []
                    done = _fwd_node(key, lp, start, end, count - got if count else 0, False, out)
                    if out:
                        segs.append((out, 0, len(out), False))
                        got += len(out)
                        if sids is not None:
                            sids += [e[0] for e in out]
                    if done:
                        break
                    continue
                ids = c[1]
                n = len(ids)
                lo = bisect_left(ids, start)
                hi = bisect_right(ids, end, lo, n)
                if count and hi - lo > count - got:
                    hi = lo + (count - got)
                if hi > lo:
                    segs.append((c[2], lo, hi, True))
                    got += hi - lo
                    if sids is not None:
                        sids += ids[lo:hi]
                if hi < n or (count and got >= count):
                    break
        return segs

    def first_entry(self) -> tuple[int, list[bytes]] | None:
        """The first live entry or None."""
        r = self.range(0, ID_MAX, 1, admit=False)
        return r[0] if r else None

    def last_entry(self) -> tuple[int, list[bytes]] | None:
        """The last live entry or None."""
        r = self.range(0, ID_MAX, 1, rev=True, admit=False)
        return r[0] if r else None

    def lookup(self, sid: int) -> list[bytes] | None:
        """Fields and values of live entry ``sid``, or None."""
        hit = self._node_for(sid)
        if hit is None:
            return None
        c = _nc_get(hit[0], hit[1], False)
        if c is not None:
            sids = c[1]
            i = bisect_left(sids, sid)
            return c[2][i][1] if i < len(sids) and sids[i] == sid else None
        out: list[tuple[int, list[bytes]]] = []
        _fwd_node(hit[0], hit[1], sid, sid, 1, False, out)
        return out[0][1] if out else None

    def exists(self, sid: int) -> bool:
        """Whether ``sid`` is a live entry (streamEntryExists)."""
        hit = self._node_for(sid)
        return hit is not None and _find_live(hit[0], hit[1], sid) is not None

    def edge_id(self, first: bool = True, skip_tombstones: bool = True) -> int:
        """First or last entry ID, optionally counting tombstones (streamGetEdgeID).

        When there is none: ID_MAX for ``first``, 0 for last, as Redis returns.
        """
        if skip_tombstones:
            item = self.first_entry() if first else self.last_entry()
            if item is not None:
                return item[0]
            return ID_MAX if first else 0
        nodes = self._rax.items(reverse=not first)
        for key, lp in nodes:
            sid = _node_edge_id(key, lp, first)
            if sid is not None:
                return sid
        return ID_MAX if first else 0

    def last_valid_id(self) -> int:
        """ID of the last live entry, 0 if none (streamLastValidID, used by XSETID and by
        every XREADGROUP ``>``).

        Remembered between calls: the last live entry can only change with an entry
        added (last_id moves), removed (length drops) or XSETID, so those three values
        key the answer and a consumer loop does not walk the tail node on every read.
        """
        key = (self.last_id, self.length, self.max_deleted_entry_id)
        if key != self._lv_key:
            self._lv = self.edge_id(False, True)
            self._lv_key = key
        return self._lv

    # ---------------------------------------------------------------------------- deletion

    def delete(self, sid: int, track_max: bool = True) -> bool:
        """XDEL one ID: flag the entry deleted in place; True if a live entry was deleted.

        Updates the node's master counters (freeing the node when its last live entry
        goes), ``length``, ``max_deleted_entry_id`` (unless ``track_max`` is False: trims
        leave it alone) and ``first_id``; never ``last_id``.  The node may then be
        garbage-collected (see :meth:`_gc_node`).
        """
        rax = self._rax
        hit = self._node_for(sid)
        if hit is None:
            return False
        key, lp = hit
        found = _find_live(key, lp, sid)
        if found is None:
            return False
        self._touch(key)
        _nc_drop(lp)
        count, deleted = node_counts(lp)
        if count == 1:
            rax.remove(key)
            if self._ghost:
                self._ghost.pop(key, None)
        else:
            if type(lp) is not bytearray:
                lp = bytearray(lp)
                rax.insert(key, lp)
            replace_int(lp, found[0], found[1] | FLAG_DELETED)
            _set_counts(lp, count - 1, deleted + 1)
            if self.gc_ratio > 0:
                self._gc_node(key)
        self.length -= 1
        if track_max and sid > self.max_deleted_entry_id:
            self.max_deleted_entry_id = sid
        if self.length == 0:
            self.first_id = 0
        elif sid == self.first_id:
            self.first_id = self.edge_id(True, True)
        return True

    # ---------------------------------------------------------------------------- GC

    def _gc_node(self, key: int, closing: bool = False) -> None:
        """Compact node ``key`` (see "Node compaction") once its tombstones reach
        ``gc_ratio`` of its entries, unless it is the open tail (``closing``: it is the
        last node but XADD is closing it)."""
        ratio = self.gc_ratio
        rax = self._rax
        lp = rax.get(key)
        if ratio <= 0 or lp is None:
            return
        count, deleted = node_counts(lp)
        # At most two tombstones (the edges) are kept, so fewer than three frees nothing.
        if deleted < 3 or deleted < ratio * (count + deleted):
            return
        if not closing and rax.last_key() == key:
            return
        _c, _d, nf, fields, _p = _master(lp)
        entries, kept_dead, dropped, dropped_bytes = _compact_entries(key, lp, nf)
        if not dropped:
            return
        self._touch(key)
        _nc_drop(lp)
        new = _build_node(fields, entries, count, kept_dead)
        rax.insert(key, new)
        ghost = self._ghost
        if ghost is None:
            ghost = self._ghost = {}
        # Adding packed (bytes, entries) pairs adds both (a node holds < 2**32 entries).
        ghost[key] = ghost.get(key, 0) + (dropped_bytes << 32 | dropped)
        GCStats.runs += 1
        GCStats.reclaimed_bytes += len(lp) - len(new)

    def gc(self) -> None:
        """Compact every node past the ratio (tests and tools; deletions do it as they go)."""
        for key in list(self._rax.keys()):
            if key in self._rax:
                self._gc_node(key)

    # ------------------------------------------------------------- consumer-group references

    def entry_referenced(self, sid: int) -> bool:
        """Whether some group still needs entry ``sid``: it is pending there, or the group
        has not delivered that far yet (what ACKED deletion and trimming respect)."""
        groups = self._cgroups
        if not groups:
            return False
        for g in groups.values():
            if g.last_id < sid or sid in g.pel:
                return True
        return False

    def drop_refs(self, sid: int) -> None:
        """Remove ``sid`` from every group's PEL (DELREF)."""
        groups = self._cgroups
        if groups:
            for g in groups.values():
                g.ack(sid)

    def delete_ex(self, sid: int, policy: int) -> int:
        """XDELEX for one ID: -1 no such entry, 1 deleted, 2 kept because a group still
        references it (ACKED).  DELREF also drops dangling references of a missing entry."""
        if policy == REF_ACKED:
            if not self.exists(sid):
                return -1
            if self.entry_referenced(sid):
                return 2
            self.delete(sid)
            return 1
        deleted = self.delete(sid)
        if policy == REF_DEL:
            self.drop_refs(sid)
        return 1 if deleted else -1

    def delete_many(self, ids: Iterable[int]) -> int:
        """XDEL several IDs; return how many live entries were deleted."""
        n = 0
        for sid in ids:
            if self.delete(sid):
                n += 1
        return n

    def trim_maxlen(
        self, maxlen: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        """XTRIM MAXLEN [~] maxlen [LIMIT limit]; returns entries removed (streamTrim).
        ``policy`` is REF_KEEP (Redis 7), REF_DEL or REF_ACKED (Redis 8.2)."""
        if policy == REF_ACKED:
            return self._trim_acked(True, maxlen, 0, limit)[0]
        return self._trim(True, maxlen, 0, approx, limit, policy == REF_DEL)

    def trim_minid(
        self, minid: int, approx: bool = False, limit: int = 0, policy: int = 0
    ) -> int:
        """XTRIM MINID [~] minid [LIMIT limit]; returns entries removed (streamTrim)."""
        if policy == REF_ACKED:
            return self._trim_acked(False, 0, minid, limit)[0]
        return self._trim(False, 0, minid, approx, limit, policy == REF_DEL)

    def _trim_acked(self, by_len: bool, maxlen: int, minid: int, limit: int) -> tuple[int, int]:
        """ACKED trimming: oldest first, remove the entries no group still references,
        stepping over those that one does, until the strategy is met or ``limit`` entries
        (0 = none) went. Entry by entry, so ``~`` changes nothing but the default limit.
        Returns ``(removed, last_removed_id)``."""
        removed = 0
        last = 0
        groups = self._cgroups
        # Entries after the least-advanced group's last_id are all referenced.
        horizon = min((g.last_id for g in groups.values()), default=ID_MAX) if groups else ID_MAX
        for sid, _fv in list(self.iter_range(0, horizon)):
            if by_len:
                if self.length <= maxlen:
                    break
            elif sid >= minid:
                break
            if limit and removed >= limit:
                break
            if self.entry_referenced(sid):
                continue
            self.delete(sid, track_max=False)
            removed += 1
            last = sid
        return removed, last

    def trim_acked_last(self, by_len: bool, maxlen: int, minid: int, limit: int) -> tuple[int, int]:
        """ACKED trim returning ``(removed, last_removed_id)`` (for exact propagation)."""
        return self._trim_acked(by_len, maxlen, minid, limit)

    def _trim(
        self, by_len: bool, maxlen: int, minid: int, approx: bool, limit: int,
        delref: bool = False,
    ) -> int:
        """Whole nodes go from the head while they can; then an exact trim flags entries
        deleted inside that one node, while ``~`` stops.  ``limit`` (0 = none) caps the
        entries removed, checked per whole node before it is touched.  ``delref`` also
        drops the removed entries from every group's PEL."""
        rax = self._rax
        removed = 0
        if delref and not any(len(g.pel) for g in (self._cgroups or {}).values()):
            delref = False
        while rax:
            if by_len and self.length <= maxlen:
                break
            key, lp = rax.first()  # type: ignore[misc]
            entries, marked = node_counts(lp)
            if limit and removed + entries > limit:
                break
            if by_len:
                remove_node = self.length - entries >= maxlen
            else:
                last = _node_edge_id(key, lp, False)
                remove_node = last is not None and last < minid
            if remove_node:
                self._touch(key)
                _nc_drop(lp)
                if self._ghost:
                    self._ghost.pop(key, None)
                if delref:
                    for e in _walk(key, lp):
                        if not e.flags & FLAG_DELETED:
                            self.drop_refs(e.sid)
                rax.pop_first()
                self.length -= entries
                removed += entries
                continue
            if approx:
                break
            self._touch(key)
            _nc_drop(lp)
            if type(lp) is not bytearray:
                lp = bytearray(lp)
                rax.insert(key, lp)
            from_lp = 0
            for e in _walk(key, lp):
                if by_len:
                    if self.length <= maxlen:
                        break
                elif e.sid >= minid:
                    break
                if not e.flags & FLAG_DELETED:
                    replace_int(lp, e.p_flags, e.flags | FLAG_DELETED)
                    from_lp += 1
                    self.length -= 1
                    if delref:
                        self.drop_refs(e.sid)
            removed += from_lp
            _set_counts(lp, entries - from_lp, marked + from_lp)
            if from_lp and self.gc_ratio > 0:
                self._gc_node(key)
            break
        if self.length == 0:
            self.first_id = 0
        elif removed:
            self.first_id = self.edge_id(True, True)
        return removed

    # ---------------------------------------------------------------------------- nodes / RDB

    def nodes(self) -> Iterator[tuple[int, bytes]]:
        """``(master_id, listpack_bytes)`` per node in order, for verbatim RDB writing
        (use :func:`encode_key` for the 16-byte key)."""
        for key, lp in self._rax.items():
            yield key, lp if type(lp) is bytes else bytes(lp)

    def raw_nodes(self) -> Iterator[tuple[int, bytes | bytearray]]:
        """``(master_id, listpack)`` per node in order, the open tail node being the live
        bytearray: for writers that copy out what they read before anything else runs."""
        return self._rax.items()

    def node_count(self) -> int:
        """Number of nodes (XINFO's radix-tree-keys)."""
        return len(self._rax)

    def load_node(self, master_id: int, lp: bytes | bytearray) -> None:
        """Insert a node verbatim (RDB loading).  The caller sets ``length``, ``last_id``,
        ``first_id``, ``max_deleted_entry_id`` and ``entries_added`` from the file and
        should check the payload with :func:`validate_node` first."""
        self._touch(master_id)
        _nc_drop(self._rax.get(master_id))
        if self._ghost:
            self._ghost.pop(master_id, None)
        self._rax.insert(master_id, bytes(lp))
        self._t_lp = None

    def rax_node_count(self) -> int:
        """The node count Redis's radix tree would have for these keys (XINFO STREAM's
        radix-tree-nodes): root, branch points, their children and the key leaves of the
        compressed radix tree over 16-byte big-endian keys.  O(nodes)."""
        keys = self._rax.key_list()
        prefixes = {(0, 0)}
        add = prefixes.add
        for a, b in zip(keys, keys[1:], strict=False):
            x = a ^ b
            lcp = (128 - x.bit_length()) >> 3
            add((lcp, a >> ((16 - lcp) << 3)))
            if lcp < 15:
                sh = (15 - lcp) << 3
                add((lcp + 1, a >> sh))
                add((lcp + 1, b >> sh))
        return len(prefixes) + len(keys)

    # ---------------------------------------------------------------------------- groups

    def create_group(
        self, name: bytes, last_id: int, entries_read: int = SCG_INVALID_ENTRIES_READ
    ) -> ConsumerGroup | None:
        """New consumer group, or None if the name is taken (streamCreateCG)."""
        groups = self._cgroups
        if groups is None:
            groups = self._cgroups = {}
        if name in groups:
            return None
        g = ConsumerGroup(name, last_id, entries_read)
        groups[name] = g
        return g

    def get_group(self, name: bytes) -> ConsumerGroup | None:
        """The named group or None."""
        groups = self._cgroups
        return groups.get(name) if groups else None

    def destroy_group(self, name: bytes) -> bool:
        """Delete a group; True if it existed."""
        groups = self._cgroups
        if not groups or name not in groups:
            return False
        del groups[name]
        return True

    def groups(self) -> list[ConsumerGroup]:
        """Groups in byte-wise name order (rax order: XINFO GROUPS, RDB)."""
        groups = self._cgroups
        if not groups:
            return []
        return [groups[k] for k in sorted(groups)]

    def group_count(self) -> int:
        """Number of consumer groups."""
        return len(self._cgroups) if self._cgroups else 0

    # ------------------------------------------------------------------ lag (Redis 7)

    def range_has_tombstones(self, start: int = 0, end: int = ID_MAX) -> bool:
        """Whether a deleted entry may lie in [start, end] (streamRangeHasTombstones).

        Only max_deleted_entry_id is known, so this is "the latest tombstone is in range
        and not before the first entry"."""
        mdel = self.max_deleted_entry_id
        if not self.length or not mdel:
            return False
        if self.first_id > mdel:
            return False
        return start <= mdel <= end

    def estimate_distance(self, sid: int) -> int:
        """Logical read counter of ``sid``: entries from the first ever entry up to it, or
        -1 when unknowable (streamEstimateDistanceFromFirstEverEntry)."""
        added = self.entries_added
        if not added:
            return 0
        last = self.last_id
        if not self.length and sid <= last:
            return added
        if sid == last:
            return added
        if sid > last:
            return SCG_INVALID_ENTRIES_READ
        mdel = self.max_deleted_entry_id
        first = self.first_id
        if not mdel or mdel < first:
            if sid < first:
                return added - self.length
            if sid == first:
                return added - self.length + 1
        return SCG_INVALID_ENTRIES_READ

    def group_lag(self, group: ConsumerGroup) -> int | None:
        """Entries not yet delivered to the group, or None when unknown (streamReplyWithCGLag)."""
        if not self.entries_added:
            return 0
        if group.entries_read != SCG_INVALID_ENTRIES_READ and not self.range_has_tombstones(
            group.last_id
        ):
            return self.entries_added - group.entries_read
        er = self.estimate_distance(group.last_id)
        if er != SCG_INVALID_ENTRIES_READ:
            return self.entries_added - er
        return None

    def _advance_group(self, group: ConsumerGroup, sid: int) -> None:
        """Move the group's last_id to a delivered ``sid`` and keep entries_read right."""
        if group.entries_read != SCG_INVALID_ENTRIES_READ and not self.range_has_tombstones(sid):
            group.entries_read += 1
        elif self.entries_added:
            group.entries_read = self.estimate_distance(sid)
        group.last_id = sid

    # ------------------------------------------------------------------ reading via groups

    def read_group(
        self,
        group: ConsumerGroup,
        consumer: Consumer | None,
        count: int = 0,
        now_ms: int = 0,
        noack: bool = False,
        accept=None,
    ) -> list[tuple[int, list[bytes]]]:
        """XREADGROUP ``>``: entries after the group's last_id (at most ``count``, 0 = all).

        Each one advances last_id/entries_read; without ``noack`` each goes into the group
        and consumer PELs (streamReplyWithRange with a group).
        """
        out: list[tuple[int, list[bytes]]] = []
        if group.last_id >= ID_MAX:
            return out
        out = self.range(group.last_id + 1, ID_MAX, count)
        if accept is not None:
            for k, (sid, fv) in enumerate(out):
                if not accept(sid, fv):
                    del out[k:]
                    break
        if out:
            self.record_group_read(group, consumer, [sid for sid, _fv in out], now_ms, noack)
        return out

    def record_group_read(
        self, group: ConsumerGroup, consumer: Consumer | None, sids: list[int], now_ms: int,
        noack: bool = False,
    ) -> None:
        """What :meth:`read_group` does once it has read ``sids`` (ascending, non-empty,
        after the group's last_id): advance last_id/entries_read and, without ``noack``,
        deliver them into the PELs. For callers that read the entries in another form."""
        first = sids[0]
        if (
            first > group.last_id
            and group.entries_read != SCG_INVALID_ENTRIES_READ
            and not self.range_has_tombstones(first)
        ):
            # No tombstone at or after the first entry read, so none after any of them:
            # each would just count one more entry read.
            group.entries_read += len(sids)
            group.last_id = sids[-1]
        else:
            for sid in sids:
                if sid > group.last_id:
                    self._advance_group(group, sid)
        if not noack and consumer is not None:
            group.deliver_new(sids, consumer, now_ms)

    def claim_idle(
        self,
        group: ConsumerGroup,
        consumer: Consumer,
        min_idle: int,
        count: int,
        now_ms: int,
        accept=None,
    ) -> tuple[list[tuple[int, list[bytes], int, int]], list[int]]:
        """XREADGROUP ... CLAIM (Redis 8.4): take over pending entries idle for at least
        ``min_idle`` ms -- XNACKed ones first in release order, then longest idle first --
        at most ``count`` (0 = all). Returns ``([(id, fields, idle_ms, previous_deliveries)],
        dropped_ids)``: NACKs whose entries are gone are dropped (as XAUTOCLAIM does)."""
        pel = group.pel
        order: list[int] = []
        nacked = group.nacked
        if nacked:
            order.extend(sid for sid in nacked if sid in pel)
        rest = [
            (nack.delivery_time, sid)
            for sid, nack in pel.items()
            if now_ms - nack.delivery_time >= min_idle and not (nacked and sid in nacked)
        ]
        if count:
            rest = heapq.nsmallest(count + len(order), rest)
        else:
            rest.sort()
        order.extend(sid for _t, sid in rest)
        out: list[tuple[int, list[bytes], int, int]] = []
        dropped: list[int] = []
        for sid in order:
            if count and len(out) >= count:
                break
            nack = pel.get(sid)
            fv = self.lookup(sid)
            if fv is None:
                group.ack(sid)
                dropped.append(sid)
                continue
            if accept is not None and not accept(sid, fv):
                break
            idle = now_ms - nack.delivery_time
            prev = nack.delivery_count
            old = nack.consumer
            if old is not consumer:
                if old is not None:
                    old.pel.discard(sid)
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            group.unrelease(sid)
            nack.delivery_time = now_ms
            nack.delivery_count = prev + 1
            consumer.active_time = now_ms
            out.append((sid, fv, idle if idle > 0 else 0, prev))
        return out, dropped

    def read_group_history(
        self,
        consumer: Consumer,
        start: int = 0,
        count: int = 0,
        now_ms: int = 0,
        end: int | None = None,
        accept=None,
    ) -> list[tuple[int, list[bytes] | None]]:
        """XREADGROUP with an explicit ID: the consumer's own pending entries from
        ``start`` (streamReplyWithRangeFromConsumerPEL).  Entries that no longer exist come
        back as ``(id, None)``; the others get delivery time = now and count + 1."""
        out: list[tuple[int, list[bytes] | None]] = []
        for sid, nack in consumer.pel.iterate(">=", start):
            if count and len(out) >= count:
                break
            if end is not None and sid > end:
                break
            fv = self.lookup(sid)
            if accept is not None and not accept(sid, fv):
                break
            if fv is not None:
                nack.delivery_time = now_ms
                nack.delivery_count += 1
            out.append((sid, fv))
        return out

    def claim(
        self,
        group: ConsumerGroup,
        consumer_name: bytes,
        ids: Iterable[int],
        now_ms: int,
        min_idle: int = 0,
        delivery_time: int | None = None,
        retrycount: int | None = None,
        force: bool = False,
        justid: bool = False,
        lastid: int = 0,
        create_consumer_upfront: bool = False,
    ) -> ClaimResult:
        """The data side of XCLAIM (options already parsed), in Redis 7.0's order.

        ``delivery_time`` is the absolute ms from IDLE/TIME (None = now; out-of-range
        values become now).  The consumer is created lazily at the first claimable entry,
        as 7.0 does (``create_consumer_upfront`` gives 7.2+ behaviour).  IDs whose entries
        are gone lose their NACK.
        """
        propagate_last_id = False
        if lastid > group.last_id:
            group.last_id = lastid
            propagate_last_id = True
        if delivery_time is None or delivery_time < 0 or delivery_time > now_ms:
            delivery_time = now_ms
        consumer: Consumer | None = None
        created = False
        if create_consumer_upfront:
            consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
        claimed: list[int] = []
        events: list[tuple[int, NACK, bool]] = []
        pel = group.pel
        for sid in ids:
            nack = pel.get(sid)
            if not self.exists(sid):
                if nack is not None:
                    events.append((sid, nack, False))
                    propagate_last_id = False
                    pel.remove(sid)
                    group.unrelease(sid)
                    if nack.consumer is not None:
                        nack.consumer.pel.discard(sid)
                continue
            if force and nack is None:
                nack = NACK(now_ms, 1, None)
                pel.insert(sid, nack)
            if nack is None:
                continue
            if nack.consumer is not None and min_idle:
                if now_ms - nack.delivery_time < min_idle:
                    continue
            if consumer is None:
                consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
            old = nack.consumer
            if old is not consumer and old is not None:
                old.pel.discard(sid)
            if group.nacked:
                group.unrelease(sid)
            nack.delivery_time = delivery_time
            if retrycount is not None and retrycount >= 0:
                nack.delivery_count = retrycount
            elif not justid:
                nack.delivery_count += 1
            if old is not consumer:
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            consumer.active_time = now_ms
            claimed.append(sid)
            events.append((sid, nack, True))
            propagate_last_id = False
        return ClaimResult(claimed, events, consumer, created, propagate_last_id)

    def autoclaim(
        self,
        group: ConsumerGroup,
        consumer_name: bytes,
        min_idle: int,
        start: int,
        count: int,
        now_ms: int,
        justid: bool = False,
        create_consumer_upfront: bool = False,
    ) -> AutoClaimResult:
        """The data side of XAUTOCLAIM: scan the group PEL from ``start``, at most
        ``count * 10`` attempts, claiming idle-enough entries and dropping NACKs of deleted
        entries (both count against ``count``); returns the next cursor (0 when done)."""
        attempts = count * 10
        consumer: Consumer | None = None
        created = False
        if create_consumer_upfront:
            consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
        claimed: list[int] = []
        deleted: list[int] = []
        events: list[tuple[int, NACK, bool]] = []
        pel = group.pel
        op = ">="
        pos = start
        exhausted = False
        while attempts:
            attempts -= 1
            if not count:
                break
            hit = pel.seek(op, pos)
            if hit is None:
                exhausted = True
                break
            sid, nack = hit
            op = ">"
            pos = sid
            if not self.exists(sid):
                events.append((sid, nack, False))
                pel.remove(sid)
                group.unrelease(sid)
                if nack.consumer is not None:
                    nack.consumer.pel.discard(sid)
                deleted.append(sid)
                count -= 1
                continue
            if min_idle and now_ms - nack.delivery_time < min_idle:
                continue
            if consumer is None:
                consumer, created = group.get_or_create_consumer(consumer_name, now_ms)
            old = nack.consumer
            if old is not consumer and old is not None:
                old.pel.discard(sid)
            if group.nacked:
                group.unrelease(sid)
            nack.delivery_time = now_ms
            if not justid:
                nack.delivery_count += 1
            if old is not consumer:
                consumer.pel.insert(sid, nack)
                nack.consumer = consumer
            consumer.active_time = now_ms
            claimed.append(sid)
            events.append((sid, nack, True))
            count -= 1
        next_id = 0
        if not exhausted:
            hit = pel.seek(op, pos)
            if hit is not None:
                next_id = hit[0]
        return AutoClaimResult(claimed, next_id, deleted, events, consumer, created)

    # ---------------------------------------------------------------------------- misc

    def copy(self) -> Stream:
        """Deep copy (COPY command, streamDup)."""
        s = type(self)()
        s.length = self.length
        s.last_id = self.last_id
        s.first_id = self.first_id
        s.max_deleted_entry_id = self.max_deleted_entry_id
        s.entries_added = self.entries_added
        for key, lp in self._rax.items():
            s._rax.insert(key, bytes(lp))
        if self._ghost:
            s._ghost = dict(self._ghost)
        if self._cgroups:
            s._cgroups = {name: g.copy() for name, g in self._cgroups.items()}
        if self.idmp is not None:
            s.idmp = self.idmp.copy()
        return s

    def memory_usage(self, samples: int = 5) -> int:
        """Estimated bytes used, shaped like Redis's MEMORY USAGE for streams: the first
        ``samples`` nodes (0 = all) are measured and their average extrapolated to all
        nodes but the last, which is measured; plus the index and the groups' PELs."""
        rax = self._rax
        n = len(rax)
        size = sys.getsizeof(self) + sys.getsizeof(rax)
        size += n * (_SIZEOF_INT128 + 16) + rax.block_count() * 2 * _SIZEOF_LIST_EMPTY
        if n:
            taken = 0
            lpsize = 0
            for _key, lp in rax.items():
                if samples and taken >= samples:
                    break
                lpsize += sys.getsizeof(lp)
                taken += 1
            if n <= taken:
                size += lpsize
            else:
                size += (lpsize // taken) * (n - 1)
                size += sys.getsizeof(rax.last()[1])  # type: ignore[index]
        if self._ghost:
            size += sys.getsizeof(self._ghost) + len(self._ghost) * _SIZEOF_GHOST
        if self._cgroups:
            size += sys.getsizeof(self._cgroups)
            per_pel_entry = _SIZEOF_INT128 + 16
            for g in self._cgroups.values():
                size += sys.getsizeof(g) + sys.getsizeof(g.pel) + sys.getsizeof(g.consumers)
                size += len(g.pel) * (per_pel_entry + _SIZEOF_NACK)
                for c in g.consumers.values():
                    size += sys.getsizeof(c) + sys.getsizeof(c.pel) + sys.getsizeof(c.name)
                    size += len(c.pel) * 16  # keys and NACKs are shared with the group PEL
        return size
