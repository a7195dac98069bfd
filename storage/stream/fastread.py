"""Reply-ready reads: a node's live entries encoded in one pass, without decoding them
into tuples first (XRANGE/XREAD's hot path).

XRANGE/XREAD replies are arrays of ``[id, [f1, v1, ...]]``.  Decoding a node into tuples and
then encoding those costs two Python passes per entry; reading the node straight into reply
pieces costs one, and most per-value work becomes a table lookup: 7-bit and 13-bit integer
elements map to their ready encoding, a 6-bit string element becomes a precomputed header
plus a slice of the node, and the master fields of a SAMEFIELDS entry are encoded once per
node.

Storage does not spell the wire format: the pieces come from an :class:`EntryEncoder` the
caller passes in (the RESP one is ``rill.protocol.stream_entries.RESP_ENTRIES``).  The
general decoder (``node._fwd_node`` / ``node._rev_node``) stays the reference; tests compare
the two on random nodes.
"""

from __future__ import annotations

from typing import Protocol

from ..listpack import skip
from .cache import _RESUME, _note_resume
from .ids import ID_MAX, MASK64
from .node import (
    FLAG_DELETED,
    FLAG_SAMEFIELDS,
    _entry_head,
    _get_bytes,
    _get_int,
    _last_entry,
    _master_fast,
    _prev_entry,
    _seek_end,
    _seek_start,
    _skip_entry_data,
    node_counts,
)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): the forward walk then keeps IDs as two C halves (fastread.pxd's ``_c_sid`` and
# ``_id_bytes`` exist only there), where the interpreter keeps Python ints.
_COMPILED = type(_probe).__name__ != "function"

# The flags and the uint64 mask the walk tests on every entry, as C constants when compiled
# (fastread.pxd): node's names are Python globals, one lookup and an int object per test.
_F_DELETED = FLAG_DELETED
_F_SAME = FLAG_SAMEFIELDS
_M64 = MASK64
_HALF = 64


class EntryEncoder(Protocol):
    """Where the one-pass readers get an entry's pieces; the pieces of one read join into
    its entries' encodings, each entry's starting with ``id_heads``.

    An entry is ``id_heads[len(id_text)]`` and the ID text (``ms-seq``), then either, for
    an entry with the node's master fields, per field ``field_heads(fields)[i]`` followed by
    the value's piece (with no fields, ``field_heads([])[0]`` alone), or, for an entry with
    fields of its own, one ``fields_values([f1, v1, ...])`` piece.  A value's piece is
    ``ints[v & 0x1FFF]`` for an integer ``-4096 <= v < 4096``, else a head followed by the
    string's bytes: ``str_heads[len(s)]`` for a string shorter than 64 bytes, else
    ``value_head(len(s))``.
    """

    id_heads: tuple[bytes, ...]  # by ID text length, up to 47
    ints: tuple[bytes, ...]  # 8192 pieces
    str_heads: tuple[bytes, ...]  # by string length, up to 63

    def field_heads(self, fields: list[bytes]) -> list[bytes]: ...

    def value_head(self, n: int) -> bytes: ...

    def fields_values(self, fv: list[bytes]) -> bytes: ...


def _entry_at(
    lp: bytes, p: int, flags: int, ms: int, seq: int, nf: int, pre: list[bytes], app,
    enc: EntryEncoder,
) -> int:
    """Append the pieces of the live entry whose data starts at ``p`` (just after its IDs);
    returns the offset of the next entry. Handles every element encoding."""
    idb = b"%d-%d" % (ms & MASK64, seq & MASK64)
    app(enc.id_heads[len(idb)])
    app(idb)
    if flags & FLAG_SAMEFIELDS:
        if not nf:
            app(pre[0])
        heads = enc.str_heads
        value_head = enc.value_head
        for f in pre[:nf]:
            app(f)
            v, p = _get_bytes(lp, p)
            k = len(v)
            app(heads[k] if k < 64 else value_head(k))
            app(v)
    else:
        n, p = _get_int(lp, p)
        fv = []
        for _ in range(n << 1):
            v, p = _get_bytes(lp, p)
            fv.append(v)
        app(enc.fields_values(fv))
    b = lp[p]
    return p + 2 if b < 128 else skip(lp, p)  # lp-count


def _fwd_node_enc(
    key: int, node: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes],
    enc: EntryEncoder, marks: list[int] | None = None, sids: list[int] | None = None,
) -> tuple[int, bool, int]:
    """What ``_fwd_node`` (without tombstones) finds, encoded: appends to ``out`` the
    pieces ``enc`` gives for the entries. Returns ``(entries, done,
    served)``: ``done`` means an entry past ``end`` or the ``limit`` (0 = none) was reached;
    no entry of the node after ``start`` and up to ``served`` is left unread. ``marks``
    gets the index in ``out`` where each entry's pieces begin, ``sids`` each entry's ID.

    Compiled, fastread.pxd types the walk: offsets and element bytes are C ints, and the
    node is read as ``bytes`` (a copy for an open tail node, as here)."""
    hint = _RESUME.get(id(node))
    if hint is not None and (hint[0] is not node or hint[4] != key):
        hint = None
    layout = hint[3] if hint is not None else None
    # A layout holds while the node keeps its length: appends to an open tail node grow it
    # (and may grow its master entry, moving the first entry), and every other in-place
    # change drops the node's notes (cache._nc_drop); a closed node is immutable bytes.
    if layout is not None and (layout[4] is not enc or layout[5] != len(node)):
        layout = None
    lp = node if type(node) is bytes else bytes(node)
    mms = key >> 64
    mseq = key & MASK64
    if layout is None:
        nf, fields, p0 = _master_fast(lp)
        pl = _last_entry(lp)
        last = _entry_head(lp, pl, mms, mseq)[1] if pl is not None else 0
        pre = enc.field_heads(fields)
        layout = (nf, p0, last, pre, enc, len(lp))
    else:
        nf, p0, last, pre, _enc, _size = layout
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
    rshdr = enc.str_heads
    rint = enc.ints
    rent = enc.id_heads
    value_head = enc.value_head
    compiled = _COMPILED
    n = 0
    # Compiled, ms and seq are C uint64s: their sums wrap as the masks below say, so
    # every mask is free; the interpreter's Python ints are masked where they are read.
    # (The interpreter's forms shift by _HALF or mask with MASK64, Python ints, so that
    # the compiled build never shifts a C integer by 64 in the branches it does not take.)
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
            ms = (mms + (u - 8192 if u >= 4096 else u)) & _M64
            p += 3
        else:
            d, p = _get_int(lp, p)
            ms = (mms + d) & _M64
        b = lp[p]
        if b < 128:
            seq = mseq + b
            p += 2
        elif 0xC0 <= b < 0xE0:  # 13-bit: sequence deltas of busy milliseconds
            u = ((b & 31) << 8) | lp[p + 1]
            seq = (mseq + (u - 8192 if u >= 4096 else u)) & _M64
            p += 3
        else:
            d, p = _get_int(lp, p)
            seq = (mseq + d) & _M64
        if flags & _F_DELETED:
            p = _skip_entry_data(lp, p, flags, nf)
            continue
        if check_start or check_end or wrap:
            sid = _c_sid(ms, seq) if compiled else ((ms & MASK64) << 64) | (seq & MASK64)  # noqa: F821 (see _COMPILED)
            if sid < start:
                p = _skip_entry_data(lp, p, flags, nf)
                continue
            check_start = False
            if sid > end:
                return n, True, end
        if marks is not None:
            marks.append(len(out))
        if sids is not None:
            if compiled:
                sids.append(_c_sid(ms, seq))  # noqa: F821 (see _COMPILED)
            else:  # without wrap, 7-bit deltas cannot leave the range (the others are masked)
                sids.append(((ms & MASK64) << 64) | (seq & MASK64) if wrap else (ms << _HALF) | seq)
        if flags != _F_SAME or not fast:
            p = _entry_at(lp, p, flags, ms, seq, nf, pre, out.append, enc)
        else:
            idb = _id_bytes(ms, seq) if compiled else b"%d-%d" % (ms, seq)  # noqa: F821 (see _COMPILED)
            out.append(rent[len(idb)])
            out.append(idb)
            for f in pre:
                out.append(f)
                b = lp[p]
                if b < 128:
                    out.append(rint[b])
                    p += 2
                elif b < 192:
                    q = p + 1 + (b & 63)
                    out.append(rshdr[b & 63])
                    # Compiled: fastread.pxd's _c_take, the bytes without a slice object;
                    # past the node's end (a corrupt length) the slice's own bounds apply.
                    out.append(_c_take(lp, p + 1, q) if compiled and q <= endp else lp[p + 1 : q])  # noqa: F821 (see _COMPILED)
                    p = q + 1
                elif b < 224:
                    out.append(rint[((b & 31) << 8) | lp[p + 1]])
                    p += 3
                else:
                    v, p = _get_bytes(lp, p)
                    k = len(v)
                    out.append(rshdr[k] if k < 64 else value_head(k))
                    out.append(v)
            p += 2  # lp-count
        n += 1
        if n == limit:
            served = _c_sid(ms, seq) if compiled else ((ms & MASK64) << 64) | (seq & MASK64)  # noqa: F821 (see _COMPILED)
            _note_resume(node, key, served + 1, p - p0, layout)
            return n, True, served
    if end >= last:
        _note_resume(node, key, last + 1, p - p0, layout)
    return n, False, min(end, last)


def _rev_node_enc(
    key: int, lp: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes],
    enc: EntryEncoder,
) -> tuple[int, bool]:
    """:func:`_fwd_node_enc` from the node's end backwards (as ``_rev_node``)."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    if not limit or limit >= node_counts(lp)[0]:
        # The limit cannot cut the node: encode it forwards (cheaper than walking the
        # backlens entry by entry) and emit the entries last first. No node before this
        # one holds an ID >= its master ID, so the iteration is over if start is past it.
        pieces: list[bytes] = []
        marks: list[int] = []
        n = _fwd_node_enc(key, lp, start, end, 0, pieces, enc, marks)[0]
        marks.append(len(pieces))
        ext = out.extend
        for j in range(n - 1, -1, -1):
            ext(pieces[marks[j] : marks[j + 1]])
        return n, start > key or n == limit > 0
    mms = key >> 64
    mseq = key & MASK64
    nf, fields, p0 = _master_fast(lp)
    pf = _last_entry(lp) if end >= ID_MAX else _seek_end(lp, key, end, p0, nf)
    pre = enc.field_heads(fields)
    app = out.append
    n = 0
    while pf is not None:
        flags, sid, p = _entry_head(lp, pf, mms, mseq)
        if not flags & FLAG_DELETED and sid <= end:
            if sid < start:
                return n, True
            # At most ``limit`` entries of one node come this way: the general encoder.
            _entry_at(lp, p, flags, sid >> 64, sid & MASK64, nf, pre, app, enc)
            n += 1
            if n == limit:
                return n, True
        pf = _prev_entry(lp, pf)
    return n, False
